// Factory of the Redis journal (concrete class in .cc). Key layout, under
// P = redis::KeyPrefix(app_id, "journal") = "pynenc:{app}:journal:":
//   P log:<entity>    LIST, entry seq s at index s - 1: "<term>:<seq>:<payload>"
//                     (the writer's generation in decimal, then the raw bytes)
//   P fence:<entity>  HASH term, seq: the fence, its packed generation split in
//                     two (Lua numbers are doubles, exact only below 2^53)
//   P snap:<entity>   HASH at (entry seq), term, seq (generation), state
// Append, Fence and SaveSnapshot are one Lua script each (compare the fence and
// the position, then write, atomically); reads are one command (LRANGE, HMGET,
// LLEN). Nothing expires.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/journal.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

// Thread- and process-safe.
Result<std::unique_ptr<Journal>> NewRedisJournal(std::shared_ptr<Client> client,
                                                 const BackendConfig& config);

}  // namespace pynenc_cpp::redis
