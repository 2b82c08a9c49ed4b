// Factory of the Redis trigger store (the class: redis_trigger_store_impl.h).
//
// Key layout (P = KeyPrefix(app_id, "trigger")): see the comment at the top of
// redis_trigger_store_impl.h. Thread-safe: the object holds no mutable state of its
// own; every write is one Lua script (guarded compare-and-set, retried on
// conflict), so concurrent callers in any thread or process see one winner.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/trigger_store.h"
#include "redis/redis_client.h"

namespace pynenc_cpp {
// Time from ClockOrReal(config). Never fails today; Result for symmetry.
Result<std::unique_ptr<TriggerStore>> NewRedisTriggerStore(std::shared_ptr<redis::Client> client,
                                                           const BackendConfig& config);
}  // namespace pynenc_cpp

namespace pynenc_cpp::redis {
// The Lua function trigger_watched(Pt, task, ctx, ctx2) over this store's keys
// (Pt = KeyPrefix(app_id, "trigger")): returns w, w2 where w is 1 if a condition
// of context type ctx sourced from task is registered (ConditionsSourcedFromTask
// non-empty), else 0, and w2 the same for ctx2 (0 when ctx2 is nil). Shared with
// redis/redis_lifecycle_scripts.cc's scripts.
const char* TriggerLuaWatched();
}  // namespace pynenc_cpp::redis
