// The Redis broker's Lua scripts (redis_broker_scripts.cc), run by the broker in
// redis_broker.cc. Key layout and protocol: redis_broker.h; the fragments other
// modules' scripts share: BrokerLuaRoute and BrokerLuaPop (redis_broker.h).
#pragma once

#include "redis/redis_client.h"

namespace pynenc_cpp::redis::broker_scripts {

// KEYS: seq. ARGV: prefix, score, queue, wake bound, ids... (Route).
extern const Script kRouteScript;
// KEYS and ARGV: broker_pop's K and A. Returns nil or {id, processing entry}.
extern const Script kPopScript;
// KEYS: queues, consumers. ARGV: key prefix (Purge).
extern const Script kPurgeScript;
// KEYS: proc. ARGV: key prefix, entries handed to callers... (requeue of lost pops).
extern const Script kRequeueScript;

}  // namespace pynenc_cpp::redis::broker_scripts
