// Factories of the Redis broker (concrete class in redis_broker.cc). Key layout, under redis::KeyPrefix(app_id, "broker"):
//   seq            INCR counter; one INCRBY per routed batch
//   q:<queue>      ZSET, score -priority, member "<20-digit seq>:<id>" (ZPOPMIN
//                  gives highest priority first, FIFO within a priority)
//   w:<queue>      LIST of wake-up tokens, one per routed id (bounded): blocked
//                  retrievers BLPOP it in slices of at most 100 ms
//   queues         SET of queue names ever routed (Purge walks it)
//   consumers      SET of consumer ids (one per broker object: host-pid-random)
//   lease:<cid>    lease of a live consumer (SET PX), refreshed by its Retrieves
//                  (at most every quarter lease)
//   proc:<cid>     LIST of deliveries not yet acknowledged (msgpack [queue, score,
//                  member]); a Retrieve acknowledges the calling thread's previous
//                  deliveries. A RetrieveThen whose script claimed the id (it is
//                  then owned in the orchestrator, whose recovery of a dead
//                  runner's invocations covers it) keeps none.
//   recovery       SET NX PX guard: at most one recovery pass per interval
//   took:<cid>:<thread>  what the thread's last RetrieveThen attempt did (10 min TTL)
// Recovery: a Retrieve that wins the guard moves every processing item of a
// consumer whose lease expired back into its queue at its original position
// (same priority, ahead of later routes) and forgets that consumer. A process
// killed after a pop therefore loses nothing; the item is redelivered.
//
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/ports/broker.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

// The route's Lua, broker_route(bp, queue, score, bound, ids, from, to), shared
// with redis/redis_lifecycle_scripts.cc's submit script so it lives in one place; and
// the stored score of a priority (the sorted set pops the lowest score first).
const char* BrokerLuaRoute();
std::string BrokerScore(double priority);

// A script that pops as Retrieve does and goes on in the same round trip. Its
// source holds BrokerLuaPop() and ends with `return broker_pop_then(go)`, where
// go(id, argv) does the rest with the script's own arguments (argv) and returns
// its reply and a one-character mark. KEYS are RetrieveThen's: the script names
// no key of its own.
struct PopThen {
  const Script* script = nullptr;
  // Called right before each attempt (a blocked retrieve may try several
  // times): the script's own ARGV, built then (e.g. with fresh timestamps).
  std::function<std::vector<std::string>()> args;
};

// What RetrieveThen took: the id and the script's reply, or, when the reply of
// the attempt that took it was lost with the connection, no reply and the mark
// the script recorded (the next RetrieveThen on the same thread reads it back).
struct PoppedThen {
  InvocationId id;
  std::optional<Value> reply;
  char mark = 0;
  bool more = false;  // the queue still held ids after the pop (known with a reply)
};

// The pop's Lua: broker_pop(K, A) and broker_pop_then(go).
std::string BrokerLuaPop();

// broker.Retrieve(queue, timeout_ms) where every pop attempt is `then`'s
// script. The delivery is tracked (leases, acknowledgements, recovery) as
// Retrieve's. kInvalidArgument if `broker` was not made by NewRedisBroker.
Result<std::optional<PoppedThen>> RetrieveThen(Broker& broker, const std::string& queue,
                                               std::int64_t timeout_ms, const PopThen& then);

// What RetrieveThenAfter did: `before`'s outcome, and what its attempt took.
struct AfterAndPopped {
  Result<Value> before;
  Result<std::optional<PoppedThen>> taken;
};

// `before` (a script on the broker's server, e.g. a finish) and then ONE
// non-blocking RetrieveThen attempt, in one pipeline: one round trip for both.
// When an earlier attempt of this thread awaits resolution (its reply was lost)
// or a lost pop awaits its requeue, `before` runs alone (taken: nullopt) and the
// thread's next RetrieveThen resolves it. The error: the round trip failed, so
// `before` may or may not have run (the attempt, if it ran, is resolved as a
// lost one). kInvalidArgument if `broker` was not made by NewRedisBroker.
Result<AfterAndPopped> RetrieveThenAfter(Broker& broker, const std::string& queue,
                                         const Client::EvalCall& before, const PopThen& then);

struct RedisBrokerOptions {
  std::int64_t lease_ms = 10'000;             // a consumer silent this long is presumed dead
  std::int64_t recovery_interval_ms = 1'000;  // at most one recovery pass per interval
  // Longest single BLPOP of a waiting Retrieve (then it pops once, refreshing its
  // lease: keep it well under lease_ms). Interrupt() ends a wait at once (a token
  // on this object's interrupt list), or within one slice if that push fails.
  std::int64_t wake_slice_ms = 3'000;
  std::int64_t wake_token_bound = 1'000;      // wake-up list trimmed to this length
};

// Thread- and process-safe. Every Retrieve by this object refreshes its lease.
// Destroying it acknowledges its outstanding deliveries and unregisters it.
Result<std::unique_ptr<Broker>> NewRedisBroker(std::shared_ptr<Client> client,
                                               const BackendConfig& config);
// As above with explicit lease/recovery timings (tests use short ones).
Result<std::unique_ptr<Broker>> NewRedisBroker(std::shared_ptr<Client> client,
                                               const BackendConfig& config,
                                               const RedisBrokerOptions& options);

}  // namespace pynenc_cpp::redis
