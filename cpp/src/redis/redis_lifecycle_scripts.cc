// Lua scripts of the Redis lifecycle (redis_lifecycle_scripts.h). Every script
// gets KEYS[1] = the orchestrator's P.."seq" (a real key of the app, so a cluster
// routes the call to the app's slot; every other key shares that slot through
// the {app} hash tag) and ARGV[1] = the orchestrator prefix P.
#include "redis/redis_lifecycle_scripts.h"

#include <string>

#include "redis/redis_broker.h"
#include "redis/redis_orchestrator_impl.h"
#include "redis/redis_state_backend.h"
#include "redis/redis_trigger_store.h"

namespace pynenc_cpp::native::redis_lifecycle {

using redis::Script;

namespace {

// Shared by the scripts, after the orchestrator's, the state backend's and the
// broker's fragments (P = ARGV[1]).
// ARGV[2] = state prefix Ps, ARGV[3] = trigger prefix Pt, ARGV[4] = id.
constexpr const char* kLifecycleHelpers = R"lua(
local Ps, Pt, id = ARGV[2], ARGV[3], ARGV[4]
-- id's orchestrator record: its key k and f = HMGET(k, 'seq', 'st', 'own', 'task',
-- 'ts') (f[1] nil: unknown id), what every step reads first.
local function record()
  local k = P .. ${inv} .. id
  return k, redis.call('HMGET', k, 'seq', 'st', 'own', 'task', 'ts')
end
-- f as record() reads it: the orchestrator's status change.
local function set_status(k, f, new, ts, owner)
  return orch_set_status(k, id, f[1], f[2], new, ts, owner)
end
-- This step's history rows of id: (tsenc, dk, val) triples, new by construction.
local function add_history(...)
  local a, rows = {...}, {}
  for i = 1, #a, 3 do rows[#rows + 1] = {id, a[i], a[i + 1], a[i + 2]} end
  state_add_new_histories(Ps, rows)
end
-- Whether a trigger condition of context type ctx (and of ctx2) watches task; 1
-- without a trigger store (the caller reports): the trigger store's check.
local function watched(enabled, task, ctx, ctx2)
  if enabled ~= '1' then return 1, 1 end
  return trigger_watched(Pt, task, ctx, ctx2)
end
)lua";

// A lifecycle script: the components' shared Lua fragments (each key layout and
// each write lives in its component: orch_register, orch_set_status,
// notify_final, state_upsert, state_add_new_histories, broker_route,
// trigger_watched), the helpers above, then `body`.
std::string LifecycleSource(const char* body) {
  return std::string(redis_orchestrator::LuaCommon()) + redis::StateLuaFragments() +
         redis::BrokerLuaRoute() + redis::TriggerLuaWatched() + kLifecycleHelpers + body;
}

}  // namespace

// pynenc's submit (register_new_invocations + route) in one round trip:
// upsert every record, register every invocation, one history row each, the
// watched check over the distinct tasks, then the routes, in the port path's
// order. ARGV: P, Ps, Pt, '' (no single id), Pb, status, ts, has owner, owner,
// history pos prefix, history key, watch, status context, wake bound, n, then n
// groups of (id, task, call, rec, parent, event, wfid, wftype, history value),
// then t and t distinct tasks, then g and g route groups of (queue, score, k,
// k ids). Returns {status_watched (0/1), invocations registered (known ids: not)}.
namespace {

// The body of SubmitScript and GuardedSubmitScript: GUARD and INDEX stand for
// the guard's Lua (nothing in SubmitScript).
constexpr const char* kSubmitBody = R"lua(
local Pb, st, ts = ARGV[5], ARGV[6], ARGV[7]
local owner = nil
if ARGV[8] == '1' then owner = ARGV[9] end
local tsenc, dk, watch, ctx = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local bound, n = tonumber(ARGV[14]), tonumber(ARGV[15])
local first = 16
--GUARD--
for i = 0, n - 1 do
  local a = first + 9 * i
  state_upsert(Ps, ARGV[a], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7])
end
local added = 0
for i = 0, n - 1 do
  local a = first + 9 * i
  added = added + orch_register(ARGV[a], ARGV[a + 1], ARGV[a + 2], st, ts, owner)
end
--INDEX--
local rows = {}
for i = 0, n - 1 do
  local a = first + 9 * i
  rows[i + 1] = {ARGV[a], tsenc, dk, ARGV[a + 8]}
end
state_add_new_histories(Ps, rows)
local at = first + 9 * n
local nt = tonumber(ARGV[at])
local w = 0
for i = 1, nt do
  if w == 0 and watched(watch, ARGV[at + i], ctx) == 1 then w = 1 end
end
at = at + nt + 1
local ng = tonumber(ARGV[at])
at = at + 1
for g = 1, ng do
  local k = tonumber(ARGV[at + 2])
  broker_route(Pb, ARGV[at], ARGV[at + 1], bound, ARGV, at + 3, at + 2 + k)
  at = at + 3 + k
end
return {w, added}
)lua";

// GuardedSubmitScript's guard: ARGV's last element is where its section starts:
// task, nk, nk key (k, v) pairs, ni, ni index (k, v) pairs. A REGISTERED
// invocation of the task whose indexed arguments match every key pair ends the
// script before any write ({0, 0, its id}); otherwise the one new invocation's
// index pairs are written after its registration.
constexpr const char* kSubmitGuard = R"lua(
local gs = tonumber(ARGV[#ARGV])
local gtask, nk = ARGV[gs], tonumber(ARGV[gs + 1])
local kfirst = gs + 2
local ni = tonumber(ARGV[kfirst + 2 * nk])
local ifirst = kfirst + 2 * nk + 1
local function registered_match(other)
  local g = redis.call('HMGET', P .. ${inv} .. other, 'task', 'st')
  if g[1] ~= gtask or g[2] ~= 'registered' then return false end
  for i = kfirst, kfirst + 2 * nk - 1, 2 do
    if redis.call('HGET', P .. ${args} .. other, ARGV[i]) ~= ARGV[i + 1] then return false end
  end
  return true
end
local src = P .. ${task} .. gtask
local best = redis.call('ZCARD', src)
for i = kfirst, kfirst + 2 * nk - 1, 2 do
  local key = argkey(ARGV[i], ARGV[i + 1])
  local c = redis.call('ZCARD', key)
  if c < best then best, src = c, key end
end
local regs = P .. ${stimes} .. 'registered'
if redis.call('ZCARD', regs) < best then
  for _, m in ipairs(redis.call('ZRANGE', regs, 0, -1)) do
    if registered_match(string.sub(m, 21)) then return {0, 0, string.sub(m, 21)} end
  end
elseif best > 0 then
  for _, other in ipairs(redis.call('ZRANGE', src, 0, -1)) do
    if registered_match(other) then return {0, 0, other} end
  end
end
)lua";

constexpr const char* kSubmitIndex = R"lua(
local nid = ARGV[first]
local nseq = redis.call('HGET', P .. ${inv} .. nid, 'seq')
local ak = P .. ${args} .. nid
for i = ifirst, ifirst + 2 * ni - 1, 2 do
  local old = redis.call('HGET', ak, ARGV[i])
  if old then redis.call('ZREM', argkey(ARGV[i], old), nid) end
  redis.call('HSET', ak, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', argkey(ARGV[i], ARGV[i + 1]), nseq, nid)
end
)lua";

std::string Replace(std::string text, const std::string& mark, const std::string& with) {
  const std::size_t at = text.find(mark);
  if (at != std::string::npos) text.replace(at, mark.size(), with);
  return text;
}

const std::string& SubmitSource(bool guarded) {
  static const std::string plain =
      Replace(Replace(kSubmitBody, "--GUARD--", ""), "--INDEX--", "");
  static const std::string guard =
      Replace(Replace(kSubmitBody, "--GUARD--", kSubmitGuard), "--INDEX--", kSubmitIndex);
  return guarded ? guard : plain;
}

}  // namespace

const Script& SubmitScript() {
  static const Script s(LifecycleSource(SubmitSource(false).c_str()));
  return s;
}

// SubmitScript of one invocation, guarded by pynenc's registration concurrency
// control: the guard section (kSubmitGuard) follows the route groups, and the
// last element of ARGV is where it starts. Returns {status_watched, registered}
// or, when a REGISTERED invocation of the key exists, {0, 0, its id}.
const Script& GuardedSubmitScript() {
  static const Script s(LifecycleSource(SubmitSource(true).c_str()));
  return s;
}

// ARGV: P, Ps, Pt, id, runner, new status, ts, payload hash ('results' |
// 'exceptions'), payload, history pos prefix, history key, history value,
// status context, payload context, release waiters ('1'/'0'), watch ('1'/'0'),
// the longest result a final-status note carries. A waiter's note carries the
// record: "<st>:<ts>:" then "r" and the result (a SUCCESS result at most that
// long) or "n" (ParseNoteRecord). Returns {0} (not the common case: nothing
// written) or {1, status_watched, payload_watched, the replaced st, its ts}.
const Script& FinishScript() {
  static const Script s(LifecycleSource(R"lua(
local runner, new, ts = ARGV[5], ARGV[6], ARGV[7]
local k, f = record()
if not f[1] or f[2] ~= 'running' or f[3] ~= runner then return {0} end
redis.call('HSET', Ps .. ARGV[8], id, ARGV[9])
local m = set_status(k, f, new, ts, nil)
if FINAL[new] then
  notify_final(id, function()
    if ARGV[8] == ${results} and #ARGV[9] <= tonumber(ARGV[17]) then
      return new .. ':' .. ts .. ':r' .. ARGV[9]
    end
    return new .. ':' .. ts .. ':n'
  end)
end
if ARGV[15] == '1' then release(id) end
redis.call('ZADD', P .. ${purge}, ts, m)
add_history(ARGV[10], ARGV[11], ARGV[12])
local w, wp = watched(ARGV[16], f[4], ARGV[13], ARGV[14])
return {1, w, wp, f[2], f[5]}
)lua"));
  return s;
}

// ReadFinal. KEYS: the orchestrator's seq (the app's slot). ARGV: P, Ps, id, the
// SUCCESS status name, the longest result to return. Returns false (unknown id)
// or {st, ts, own|false} with, for a SUCCESS whose stored result is at most that
// long, the result as a fourth element.
const Script& ReadFinalScript() {
  static const Script s(R"lua(
local f = redis.call('HMGET', ARGV[1] .. ${inv} .. ARGV[3], 'st', 'ts', 'own')
if not f[1] then return false end
if f[1] == ARGV[4] and tonumber(ARGV[5]) > 0 then
  local results = ARGV[2] .. ${results}
  local n = redis.call('HSTRLEN', results, ARGV[3])
  if n > 0 and n <= tonumber(ARGV[5]) then f[4] = redis.call('HGET', results, ARGV[3]) end
end
return f
)lua");
  return s;
}

namespace {

// ReadFinalAhead's script, and with `armed` ReadFinalArmed's. KEYS: the
// orchestrator's seq. ARGV: P, Ps, the SUCCESS status name, the longest result to
// return, (armed: a waiter token, its registration's time to live in ms, the
// thread's previous arm's id and token or two ''), id, then the ids to read
// ahead. Returns false (unknown id) or {record of id, then (ahead id, its record)
// for each ahead id whose status is final, only when id's is}, a record being
// {st, ts, own|false[, result]} as ReadFinalScript's. Armed: the previous arm,
// which no one will wait on now, is withdrawn (its registration and any note it
// got), and an id not final gets the token registered as a waiter, as
// WaitAnyFinal's registration does (P fw:<id>, kept at least the time to live).
std::string ReadFinalAheadSource(bool armed) {
  std::string s = std::string(redis_orchestrator::LuaCommon()) + R"lua(
local Ps, success, most = ARGV[2], ARGV[3], tonumber(ARGV[4])
local function read(id)
  local f = redis.call('HMGET', P .. ${inv} .. id, 'st', 'ts', 'own')
  if not f[1] then return nil end
  if f[1] == success and most > 0 then
    local results = Ps .. ${results}
    local n = redis.call('HSTRLEN', results, id)
    if n > 0 and n <= most then f[4] = redis.call('HGET', results, id) end
  end
  return f
end
)lua";
  s += armed ? R"lua(
local first_id = 9
if ARGV[8] ~= '' then
  redis.call('SREM', P .. ${fw} .. ARGV[7], ARGV[8])
  redis.call('DEL', P .. ${note} .. ARGV[8])
end
)lua"
             : "local first_id = 5\n";
  s += R"lua(
local first = read(ARGV[first_id])
if not first then return false end
local out = {first}
if FINAL[first[1]] then
  for i = first_id + 1, #ARGV do
    local f = read(ARGV[i])
    if f and FINAL[f[1]] then
      out[#out + 1] = ARGV[i]
      out[#out + 1] = f
    end
  end
)lua";
  if (armed) {
    s += R"lua(
else
  local fk, ttl = P .. ${fw} .. ARGV[first_id], tonumber(ARGV[6])
  redis.call('SADD', fk, ARGV[5])
  if redis.call('PTTL', fk) < ttl then redis.call('PEXPIRE', fk, ttl) end
)lua";
  }
  return s + "end\nreturn out\n";
}

}  // namespace

const Script& ReadFinalAheadScript() {
  static const Script s(ReadFinalAheadSource(false));
  return s;
}

const Script& ReadFinalArmedScript() {
  static const Script s(ReadFinalAheadSource(true));
  return s;
}

// Claim, and ClaimAndStart when ARGV[12] is '1' (then the move on to RUNNING
// follows the move to PENDING, with its own timestamp and history row).
// ARGV: P, Ps, Pt, id, runner, ts, history pos prefix, history key, history
// value, status context, watch, start ('1'/'0'), RUNNING ts, its history pos
// prefix, key and value ('' unless start), n, n available-for-run status names,
// m, m status names that may move to PENDING with no ownership check, free
// tasks... Returns {-1} (not the common case), {0, st, own|false, ts} (not
// available), {1, st, own|false, ts, rec} (needs check) or {2, rec,
// status_watched, the replaced st, its ts}.
// The PENDING timestamp must not be before the current status's (it is taken before
// a TakeAndStart pop, which may take an id registered since): else {-1}.
constexpr const char* kClaimBody = R"lua(
local runner, ts = ARGV[5], ARGV[6]
local k, f = record()
if not f[1] then return {-1} end
local n = tonumber(ARGV[17])
local available = false
for i = 18, 17 + n do if ARGV[i] == f[2] then available = true end end
if not available then return {0, f[2], f[3], f[5]} end
local rec = redis.call('HGET', Ps .. ${inv} .. id, 'rec')
if not rec then return {-1} end
local at = 18 + n
local m = tonumber(ARGV[at])
local claimable = false
for i = at + 1, at + m do if ARGV[i] == f[2] then claimable = true end end
local free = false
for i = at + m + 1, #ARGV do if ARGV[i] == f[4] then free = true end end
if not free then return {1, f[2], f[3], f[5], rec} end
if not claimable or tonumber(ts) < tonumber(f[5]) then return {-1} end
if ARGV[12] == '1' then
  -- Straight on to RUNNING: no one sees the record between the two changes, so
  -- the status and its indexes are written once; both history rows are kept.
  set_status(k, f, 'running', ARGV[13], runner)
  add_history(ARGV[7], ARGV[8], ARGV[9], ARGV[14], ARGV[15], ARGV[16])
else
  set_status(k, f, 'pending', ts, runner)
  add_history(ARGV[7], ARGV[8], ARGV[9])
end
return {2, rec, watched(ARGV[11], f[4], ARGV[10]), f[2], f[5]}
)lua";

const Script& ClaimScript() {
  static const Script s(LifecycleSource(kClaimBody));
  return s;
}

// TakeAndStart: the broker's pop (redis::RetrieveThen), then ClaimScript's body
// with start for the id it took. The arguments are ClaimScript's, built before
// the pop with an empty id (ARGV[4]) and history values naming an empty id, in
// which the id taken is put. Marked '2' when it claimed; the claimed id is
// RUNNING and owned by the runner, so the pop keeps no delivery record
// (broker_pop_then). An id whose history text would need JSON escapes is not
// claimed here ({-1}: the caller claims).
const Script& TakeStartScript() {
  static const Script s(LifecycleSource((redis::BrokerLuaPop() + R"lua(
local function claim(ARGV)
)lua" + kClaimBody + R"lua(
end
local function with_id(v)
  local at = string.find(v, '"invocation_id": ""', 1, true)
  if not at then return nil end
  return string.sub(v, 1, at + 17) .. id .. string.sub(v, at + 18)
end
return broker_pop_then(function(taken, argv)
  id = taken
  if string.find(taken, '[%c"\\\128-\255]') then return {-1}, '-' end
  argv[4] = taken
  argv[9], argv[16] = with_id(argv[9]), with_id(argv[16])
  if not argv[9] or not argv[16] then return {-1}, '-' end
  local r = claim(argv)
  if r[1] == 2 then return r, '2', true end
  return r, '-'
end)
)lua")
                                            .c_str()));
  return s;
}

// TakeAndClaim: up to `max` ids of a queue, each claimed (ClaimScript's body,
// no start) before it is taken, in queue order. The arguments are ClaimScript's
// built with an empty id (its PENDING history value names an empty id, in which
// each id is put), then the broker prefix, the queue and max. The first id that
// is not claimed at once (ClaimScript's {0}, {1}, {-1}), or whose history text
// would need JSON escapes, stays in the queue and ends the list. Its claims skip
// the broker's delivery records: a claimed id is PENDING, which pynenc's pending
// recovery reroutes if the caller never runs it. One wake token is consumed per
// id taken, as a pop does. Returns {{id, rec, status_watched, the replaced st,
// its ts}, ...}.
const Script& TakeClaimScript() {
  static const Script s(LifecycleSource((std::string(R"lua(
local function claim(ARGV)
)lua") + kClaimBody + R"lua(
end
local nargs = #ARGV
local Pb, queue, max = ARGV[nargs - 2], ARGV[nargs - 1], tonumber(ARGV[nargs])
local own = {}
for i = 1, nargs - 3 do own[i] = ARGV[i] end
local value = own[9]
local at = string.find(value, '"invocation_id": ""', 1, true)
local q, w = Pb .. ${q} .. queue, Pb .. ${w} .. queue
local out = {}
while at and #out < max do
  local top = redis.call('ZRANGE', q, 0, 0)
  if #top == 0 then break end
  local taken = string.sub(top[1], 22)
  if string.find(taken, '[%c"\\\128-\255]') then break end
  id = taken
  own[4] = taken
  own[9] = string.sub(value, 1, at + 17) .. taken .. string.sub(value, at + 18)
  local r = claim(own)
  if r[1] ~= 2 then break end
  redis.call('ZREM', q, top[1])
  redis.call('LPOP', w)
  out[#out + 1] = {taken, r[2], r[3], r[4], r[5]}
end
return out
)lua")
                                            .c_str()));
  return s;
}

// A non-final status change (RUNNING, PAUSED, ...) by a runner, in one round
// trip: the transition table for the target status is passed in by the caller
// (from-status name, '1' if the current owner must be the caller), so the
// script applies exactly core/status.h's rules; anything else falls back.
// ARGV: P, Ps, Pt, id, runner, new status, ts, history pos prefix, history key,
// history value, status context, watch ('1'/'0'), task ('' unknown), new owner
// ('' none), then (from status, must own) pairs.
// Returns {0} (not the common case: nothing written) or {1, status_watched,
// the replaced st, its ts}.
const Script& ChangeScript() {
  static const Script s(LifecycleSource(R"lua(
local runner, new, ts = ARGV[5], ARGV[6], ARGV[7]
local k, f = record()
if not f[1] then return {0} end
local allowed = false
for i = 15, #ARGV, 2 do
  if ARGV[i] == f[2] then
    if ARGV[i + 1] == '1' and f[3] ~= runner then return {0} end
    allowed = true
  end
end
if not allowed then return {0} end
local owner = nil
if ARGV[14] ~= '' then owner = ARGV[14] end
set_status(k, f, new, ts, owner)
add_history(ARGV[8], ARGV[9], ARGV[10])
local task = ARGV[13]
if task == '' then
  if redis.call('HEXISTS', Ps .. ${inv} .. id, 'rec') == 0 then return {1, 1, f[2], f[5]} end
  task = f[4]
end
return {1, watched(ARGV[12], task, ARGV[11]), f[2], f[5]}
)lua"));
  return s;
}

}  // namespace pynenc_cpp::native::redis_lifecycle
