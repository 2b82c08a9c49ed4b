// Factory of the Redis fenced store (concrete class in .cc). Key layout, under
// P = redis::KeyPrefix(app_id, "fenced") = "pynenc:{app}:fenced:":
//   P v:<key>   HASH value -> bytes, term -> decimal, seq -> decimal (the packed
//               generation split in two: Lua numbers are doubles, exact only
//               below 2^53). A hash with term and seq but no `value` field is a
//               tombstone left by Delete: Read treats the key as absent, the
//               generation still fences later writes and deletes. Never expires.
// Write and Delete are one Lua script each: compare the stored generation, then
// write the value or the tombstone (HDEL value + HSET term/seq), atomically.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/fenced_store.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

// Thread- and process-safe.
Result<std::unique_ptr<FencedStore>> NewRedisFencedStore(std::shared_ptr<Client> client,
                                                         const BackendConfig& config);

}  // namespace pynenc_cpp::redis
