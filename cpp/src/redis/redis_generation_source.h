// Factory of the Redis generation source (concrete class in .cc). Key layout,
// under P = redis::KeyPrefix(app_id, "generation") = "pynenc:{app}:generation:":
//   P owners   HASH label -> "<term>:<seq>:<owner>" (decimal term and seq)
//   P specs    HASH label -> spec bytes
// ClaimTerm, ClaimSeq and List are one Lua script each (atomic, one round trip);
// RemoveSpec deletes from `specs` only, so the label's generation stays.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/generation_source.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

// Thread- and process-safe; Shared() is true.
Result<std::unique_ptr<GenerationSource>> NewRedisGenerationSource(std::shared_ptr<Client> client,
                                                                   const BackendConfig& config);

}  // namespace pynenc_cpp::redis
