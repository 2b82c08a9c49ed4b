// The Lua scripts of the Redis lifecycle (redis/redis_lifecycle.cc): submit,
// finish, the final-status reads (plain, ahead and armed), claim, take-and-start,
// take-and-claim (prefetch) and a runner's status change. Each is built once from
// the components' shared fragments (each key layout and each write lives in its
// component) and the lifecycle helpers; the ARGV layout of each is documented
// beside its source in redis_lifecycle_scripts.cc. Thread-safe (function-local
// statics).
#pragma once

#include <cstdint>

#include "redis/redis_client.h"

namespace pynenc_cpp::native::redis_lifecycle {

const redis::Script& SubmitScript();
const redis::Script& GuardedSubmitScript();
const redis::Script& FinishScript();
const redis::Script& ReadFinalScript();
const redis::Script& ReadFinalAheadScript();
const redis::Script& ReadFinalArmedScript();
const redis::Script& ClaimScript();
const redis::Script& TakeStartScript();
const redis::Script& TakeClaimScript();
const redis::Script& ChangeScript();

// ReadFinalArmed's registration: kept this long, relied on by the thread's next
// wait for this long after the read (the wait's first block ends by then).
inline constexpr std::int64_t kArmTtlMs = 10'000;
inline constexpr std::int64_t kArmUseMs = 5'000;

}  // namespace pynenc_cpp::native::redis_lifecycle
