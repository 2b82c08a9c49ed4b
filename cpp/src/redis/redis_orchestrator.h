// Factory of the Redis orchestrator (the concrete class is internal:
// redis_orchestrator_impl.h, shared only by the redis_orchestrator*.cc files).
// Key layout and scripts: redis_orchestrator_impl.h.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/orchestrator.h"
#include "redis/redis_client.h"

namespace pynenc_cpp {

// The orchestrator of `config.app_id` on `client`'s server. Thread-safe and
// multi-process safe: every write is one Lua script (atomic on the server);
// status transitions are compare-and-set scripts retried on contention.
// Never fails today (the client already answered PING); Result for symmetry
// with the other backends.
Result<std::unique_ptr<Orchestrator>> NewRedisOrchestrator(std::shared_ptr<redis::Client> client,
                                                           const BackendConfig& config);

}  // namespace pynenc_cpp
