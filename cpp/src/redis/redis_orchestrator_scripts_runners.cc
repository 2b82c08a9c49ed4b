// Lua scripts of the Redis orchestrator, part 2: runner heartbeats, the recovery
// queries and atomic-service execution rows (redis_orchestrator_runners.cc runs
// them). The shared helpers and the other scripts: redis_orchestrator_scripts.cc.
// Key layout: redis_orchestrator_impl.h.
// Every script gets ARGV[1] = the component key prefix P and KEYS[1] = P.."seq"
// (a real key of the app, so a cluster routes the call to the app's slot; every
// other key the script touches shares that slot through the {app} hash tag).
#include <string>

#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp::redis_orchestrator {
using redis::Script;
namespace {

// The shared helpers (LuaCommon(): redis_orchestrator_scripts.cc) plus `body`.
Script Make(const char* body) { return Script(LuaCommon() + std::string(body)); }

}  // namespace

// ARGV: P, now, can_run_atomic ('0'/'1'), has_queues, queues (encoded), runner ids...
const Script& HeartbeatScript() {
  static const Script s = Make(R"lua(
for i = 6, #ARGV do
  local k = P .. ${runner} .. ARGV[i]
  if redis.call('HSETNX', k, 'c', ARGV[2]) == 1 then
    redis.call('ZADD', P .. ${runners}, ARGV[2], ARGV[i])
    redis.call('HSET', k, 'q', '')
  end
  redis.call('HSET', k, 'hb', ARGV[2], 'a', ARGV[3])
  if ARGV[4] == '1' then redis.call('HSET', k, 'q', ARGV[5]) end
end
return 1
)lua");
  return s;
}

// ARGV: P, runner ids. Forgets each runner's row.
const Script& DeregisterScript() {
  static const Script s = Make(R"lua(
for i = 2, #ARGV do
  redis.call('DEL', P .. ${runner} .. ARGV[i])
  redis.call('ZREM', P .. ${runners}, ARGV[i])
end
return 1
)lua");
  return s;
}

// ARGV: P. Every runner, creation then id order, flattened (id, c, hb, a, q).
const Script& RunnersScript() {
  static const Script s = Make(R"lua(
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. ${runners}, 0, -1)) do
  local f = redis.call('HMGET', P .. ${runner} .. id, 'c', 'hb', 'a', 'q')
  if f[1] then
    out[#out + 1] = id
    for j = 1, 4 do out[#out + 1] = f[j] or '' end
  end
end
return out
)lua");
  return s;
}

// ARGV: P, cutoff. PENDING invocations with status time <= cutoff, registration
// order: a range of the pending time index, sorted by its seq-prefixed members.
const Script& PendingRecoveryScript() {
  static const Script s = Make(R"lua(
local ms = redis.call('ZRANGEBYSCORE', P .. ${stimes} .. 'pending', '-inf', ARGV[2])
table.sort(ms)
local out = {}
for i, m in ipairs(ms) do out[i] = string.sub(m, 21) end
return out
)lua");
  return s;
}

// ARGV: P, cutoff, status, missing ('1': an owner with no heartbeat counts as
// dead). Invocations in `status` whose owner's heartbeat is < cutoff (or
// missing), registration order (the status's time page, sorted by its
// seq-prefixed members): RUNNING for recovery, PENDING of dead runners.
const Script& OwnerDeadScript() {
  static const Script s = Make(R"lua(
local cutoff, missing_dead = tonumber(ARGV[2]), ARGV[4] == '1'
local ms = redis.call('ZRANGE', P .. ${stimes} .. ARGV[3], 0, -1)
table.sort(ms)
local out = {}
for _, m in ipairs(ms) do
  local id = string.sub(m, 21)
  local own = redis.call('HGET', P .. ${inv} .. id, 'own')
  if own and own ~= '' then
    local hb = redis.call('HGET', P .. ${runner} .. own, 'hb')
    if (not hb and missing_dead) or (hb and tonumber(hb) < cutoff) then out[#out + 1] = id end
  end
end
return out
)lua");
  return s;
}

// The single-runner gate, decided inside the script.
// ARGV: P, runner, run, start, status, reason. Returns {accepted 0/1, start}.
const Script& ExecutionStartScript() {
  static const Script s = Make(R"lua(
local runner, run, start, st, reason = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if st == 'running' then
  local best = nil
  for _, r in ipairs(redis.call('SMEMBERS', P .. ${exec_running})) do
    local f = redis.call('HMGET', P .. ${exec} .. r, 'start', 'seq', 'runner')
    local s, q = tonumber(f[1]), tonumber(f[2])
    if best == nil or s > best.s or (s == best.s and q > best.q) then
      best = {s = s, q = q, run = r, runner = f[3], start = f[1]}
    end
  end
  if best then
    if best.run == run then return {1, best.start} end
    st = 'blocked'
    if reason == '' then reason = 'prior_running:' .. best.run .. ' runner:' .. best.runner end
  end
end
local k = P .. ${exec} .. run
redis.call('DEL', k)
local seq = redis.call('INCR', P .. ${exec_seq})
redis.call('HSET', k, 'runner', runner, 'start', start, 'st', st, 'reason', reason, 'seq', seq)
if st == 'blocked' then redis.call('HSET', k, 'end', start) end
redis.call('SADD', P .. ${execs}, run)
if st == 'running' then
  redis.call('SADD', P .. ${exec_running}, run)
else
  redis.call('SREM', P .. ${exec_running}, run)
end
if st == 'blocked' then return {0, start} end
return {1, start}
)lua");
  return s;
}

// ARGV: P, runner, run, end, status, reason.
const Script& ExecutionFinalizeScript() {
  static const Script s = Make(R"lua(
local runner, run, e, st, reason = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local k = P .. ${exec} .. run
local cur = redis.call('HGET', k, 'st')
if not cur then
  local seq = redis.call('INCR', P .. ${exec_seq})
  redis.call('HSET', k, 'runner', runner, 'start', e, 'end', e, 'st', st, 'reason', reason,
             'seq', seq)
  redis.call('SADD', P .. ${execs}, run)
  return 1
end
if cur ~= 'running' then return 0 end
redis.call('HSET', k, 'end', e, 'st', st)
if reason ~= '' then redis.call('HSET', k, 'reason', reason) end
redis.call('SREM', P .. ${exec_running}, run)
return 1
)lua");
  return s;
}

// ARGV: P, running_only ('0'/'1'). Rows flattened (runner, run, start, end or '',
// has_end, status, reason, seq), unordered.
const Script& ExecutionsScript() {
  static const Script s = Make(R"lua(
local set = ARGV[2] == '1' and ${exec_running} or ${execs}
local out = {}
for _, r in ipairs(redis.call('SMEMBERS', P .. set)) do
  local f = redis.call('HMGET', P .. ${exec} .. r, 'runner', 'start', 'end', 'st', 'reason', 'seq')
  if f[2] then
    out[#out + 1] = f[1]
    out[#out + 1] = r
    out[#out + 1] = f[2]
    out[#out + 1] = f[3] or ''
    out[#out + 1] = f[3] and '1' or '0'
    out[#out + 1] = f[4]
    out[#out + 1] = f[5] or ''
    out[#out + 1] = f[6]
  end
end
return out
)lua");
  return s;
}

// ARGV: P, then (run, seq) pairs. Drops each row still stored with that seq and
// not running; returns the number dropped.
const Script& ExecutionDropScript() {
  static const Script s = Make(R"lua(
local n = 0
for i = 2, #ARGV, 2 do
  local k = P .. ${exec} .. ARGV[i]
  local f = redis.call('HMGET', k, 'seq', 'st')
  if f[1] == ARGV[i + 1] and f[2] ~= 'running' then
    redis.call('DEL', k)
    redis.call('SREM', P .. ${execs}, ARGV[i])
    n = n + 1
  end
end
return n
)lua");
  return s;
}

}  // namespace pynenc_cpp::redis_orchestrator
