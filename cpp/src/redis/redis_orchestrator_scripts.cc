// Lua scripts of the Redis orchestrator: the shared helpers (LuaCommon) and the
// scripts of invocations, indexes, auto purge and the wait graph; those of
// runners, recovery and atomic-service rows are in
// redis_orchestrator_scripts_runners.cc. Key layout: redis_orchestrator_impl.h.
// Every script gets ARGV[1] = the component key prefix P and KEYS[1] = P.."seq"
// (a real key of the app, so a cluster routes the call to the app's slot; every
// other key the script touches shares that slot through the {app} hash tag).
#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp::redis_orchestrator {
using redis::Script;
namespace {

// Helpers shared by the scripts (prepended to each).
constexpr const char* kCommon = R"lua(
local P = ARGV[1]
local function pad(seq) return string.format('%020d', tonumber(seq)) end
local function argkey(k, v) return P .. ${arg} .. #k .. ':' .. k .. '=' .. v end
local function release(id)
  local wb = P .. ${wb} .. id
  local wf = P .. ${wf} .. id
  -- The common case: no one waits, nor does id (and id is in P waited only
  -- while P wb:<id> exists: WaitingScript adds both, this removes both).
  if redis.call('EXISTS', wb, wf) == 0 then return end
  for _, w in ipairs(redis.call('SMEMBERS', wb)) do
    redis.call('SREM', P .. ${wf} .. w, id)
  end
  redis.call('DEL', wb)
  redis.call('SREM', P .. ${waited}, id)
  for _, w in ipairs(redis.call('SMEMBERS', wf)) do
    local k = P .. ${wb} .. w
    redis.call('SREM', k, id)
    if redis.call('EXISTS', k) == 0 then redis.call('SREM', P .. ${waited}, w) end
  end
  redis.call('DEL', wf)
end
local function forget(id)
  local k = P .. ${inv} .. id
  local f = redis.call('HMGET', k, 'seq', 'task', 'st')
  if not f[1] then return end
  redis.call('ZREM', P .. ${task} .. f[2], id)
  local m = pad(f[1]) .. id
  redis.call('ZREM', P .. ${stimes} .. f[3], m)
  redis.call('ZREM', P .. ${purge}, m)
  local args = redis.call('HGETALL', P .. ${args} .. id)
  for i = 1, #args, 2 do redis.call('ZREM', argkey(args[i], args[i + 1]), id) end
  redis.call('DEL', P .. ${args} .. id, k)
  release(id)
end
-- Moves id (record key k, sequence seq, current status old) to status new at
-- ts, owned by owner (nil: nobody): the record and its status's time page
-- (stimes:<s>, also the status index). Every status change of a script goes
-- through here (TransitionScript and redis/redis_lifecycle_scripts.cc's).
-- Returns id's time-page member.
local function orch_set_status(k, id, seq, old, new, ts, owner)
  if owner then
    redis.call('HSET', k, 'st', new, 'ts', ts, 'own', owner)
  else
    redis.call('HSET', k, 'st', new, 'ts', ts)
    redis.call('HDEL', k, 'own')
  end
  local m = pad(seq) .. id
  redis.call('ZREM', P .. ${stimes} .. old, m)
  redis.call('ZADD', P .. ${stimes} .. new, ts, m)
  return m
end
-- Registers one invocation unless known (status st at ts, owner or nil): the
-- record, the task index and the status's time page. Shared with the
-- submit script of redis/redis_lifecycle_scripts.cc. Returns 1 if registered, 0 if known.
local function orch_register(id, task, call, st, ts, owner)
  local k = P .. ${inv} .. id
  if redis.call('EXISTS', k) == 1 then return 0 end
  local seq = redis.call('INCR', P .. ${seq})
  if owner then
    redis.call('HSET', k, 'seq', seq, 'task', task, 'call', call, 'st', st, 'ts', ts, 'retries', 0,
               'own', owner)
  else
    redis.call('HSET', k, 'seq', seq, 'task', task, 'call', call, 'st', st, 'ts', ts, 'retries', 0)
  end
  redis.call('ZADD', P .. ${task} .. task, seq, id)
  redis.call('ZADD', P .. ${stimes} .. st, ts, pad(seq) .. id)
  return 1
end
-- Final-status notification (WaitAnyFinal): each waiter token registered in
-- P fw:<id> gets the note "<#id>:<id>" .. extra() pushed on its list
-- P note:<token> (kept 60 s for a waiter that has not read it yet); the
-- registrations are consumed. `extra` (optional) is called only when someone
-- waits: what the note carries after the id (ParseFinalNote, redis_orchestrator_impl.h).
local function notify_final(id, extra)
  local fk = P .. ${fw} .. id
  local ws = redis.call('SMEMBERS', fk)
  if #ws == 0 then return end
  local note = #id .. ':' .. id
  if extra then note = note .. extra() end
  for _, w in ipairs(ws) do
    local nk = P .. ${note} .. w
    redis.call('RPUSH', nk, note)
    redis.call('PEXPIRE', nk, 60000)
  end
  redis.call('DEL', fk)
end
)lua";

// kCommon plus FINAL, the set of final status names (from core/status.h).
const std::string& CommonSource() {
  static const std::string s = [] {
    std::string out = kCommon;
    out += "local FINAL = {";
    for (InvocationStatus st : AllStatuses()) {
      if (IsFinal(st)) out += "['" + std::string(StatusName(st)) + "'] = true, ";
    }
    out += "}\n";
    return out;
  }();
  return s;
}

Script Make(const char* body) { return Script(CommonSource() + body); }

}  // namespace

const char* LuaCommon() { return CommonSource().c_str(); }

// ARGV: P, status, ts, has_owner, owner, then (id, task, call) triples.
// Returns how many were registered (ids already known are left alone).
const Script& RegisterScript() {
  static const Script s = Make(R"lua(
local owner = nil
if ARGV[4] == '1' then owner = ARGV[5] end
local added = 0
for i = 6, #ARGV, 3 do
  added = added + orch_register(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[2], ARGV[3], owner)
end
return added
)lua");
  return s;
}

// The compare-and-set of a status record.
// ARGV: P, id, expected (status, ts, has_owner, owner), new (status, ts, has_owner, owner).
// Returns -1 (unknown id), 0 (the record changed since it was read), 1 (written).
const Script& TransitionScript() {
  static const Script s = Make(R"lua(
local id = ARGV[2]
local k = P .. ${inv} .. id
local f = redis.call('HMGET', k, 'seq', 'st', 'ts', 'own')
if not f[1] then return -1 end
local has_owner = f[4] and '1' or '0'
if f[2] ~= ARGV[3] or f[3] ~= ARGV[4] or has_owner ~= ARGV[5] or (f[4] and f[4] ~= ARGV[6]) then
  return 0
end
local owner = nil
if ARGV[9] == '1' then owner = ARGV[10] end
orch_set_status(k, id, f[1], f[2], ARGV[7], ARGV[8], owner)
if FINAL[ARGV[7]] then notify_final(id) end
return 1
)lua");
  return s;
}

// GatedTransition: the compare-and-set of TransitionScript, guarded by pynenc's
// running concurrency control. ARGV: P, id, expected (status, ts, has_owner,
// owner), new (status, ts, has_owner, owner), task, n blocking statuses, the
// statuses, n index pairs, the index (key, value) pairs, then the key (key, value)
// pairs to match. Returns -1 (unknown id), 0 (the record changed since it was
// read: nothing written), 1 (index written, status changed), or the id of an
// invocation of the task in a blocking status whose indexed arguments match
// every key pair (index written, status unchanged). It walks the blocking
// statuses' time pages (claimed and running invocations: few) or the smallest
// of the task and argument indexes, whichever holds fewer ids.
const Script& GateScript() {
  static const Script s = Make(R"lua(
local id = ARGV[2]
local k = P .. ${inv} .. id
local f = redis.call('HMGET', k, 'seq', 'st', 'ts', 'own')
if not f[1] then return -1 end
local has_owner = f[4] and '1' or '0'
if f[2] ~= ARGV[3] or f[3] ~= ARGV[4] or has_owner ~= ARGV[5] or (f[4] and f[4] ~= ARGV[6]) then
  return 0
end
local task = ARGV[11]
local nb = tonumber(ARGV[12])
local want = {}
for i = 13, 12 + nb do want[ARGV[i]] = true end
local ni = tonumber(ARGV[13 + nb])
local first_index = 14 + nb
local first_key = first_index + 2 * ni
local ak = P .. ${args} .. id
for i = first_index, first_key - 1, 2 do
  local old = redis.call('HGET', ak, ARGV[i])
  if old then redis.call('ZREM', argkey(ARGV[i], old), id) end
  redis.call('HSET', ak, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', argkey(ARGV[i], ARGV[i + 1]), f[1], id)
end
local function matches(other)
  if other == id then return false end
  local g = redis.call('HMGET', P .. ${inv} .. other, 'task', 'st')
  if g[1] ~= task or not want[g[2]] then return false end
  for i = first_key, #ARGV, 2 do
    if redis.call('HGET', P .. ${args} .. other, ARGV[i]) ~= ARGV[i + 1] then return false end
  end
  return true
end
local active = 0
for st in pairs(want) do active = active + redis.call('ZCARD', P .. ${stimes} .. st) end
local src = P .. ${task} .. task
local best = redis.call('ZCARD', src)
for i = first_key, #ARGV, 2 do
  local key = argkey(ARGV[i], ARGV[i + 1])
  local n = redis.call('ZCARD', key)
  if n < best then best, src = n, key end
end
local blocker = nil
if active <= best then
  local first = nil
  for st in pairs(want) do
    for _, m in ipairs(redis.call('ZRANGE', P .. ${stimes} .. st, 0, -1)) do
      if (first == nil or m < first) and matches(string.sub(m, 21)) then first = m end
    end
  end
  if first then blocker = string.sub(first, 21) end
elseif best > 0 then
  for _, other in ipairs(redis.call('ZRANGE', src, 0, -1)) do
    if matches(other) then
      blocker = other
      break
    end
  end
end
if blocker then return blocker end
local owner = nil
if ARGV[9] == '1' then owner = ARGV[10] end
orch_set_status(k, id, f[1], f[2], ARGV[7], ARGV[8], owner)
if FINAL[ARGV[7]] then notify_final(id) end
return 1
)lua");
  return s;
}

// WaitAnyFinal's registration. ARGV: P, token, ttl ms, ids.
// Returns the first id (in input order) whose status is final, or registers
// the token in P fw:<id> for every id (kept at least ttl ms) and returns false.
const Script& WaitFinalScript() {
  static const Script s = Make(R"lua(
for i = 4, #ARGV do
  local st = redis.call('HGET', P .. ${inv} .. ARGV[i], 'st')
  if st and FINAL[st] then return ARGV[i] end
end
local ttl = tonumber(ARGV[3])
for i = 4, #ARGV do
  local fk = P .. ${fw} .. ARGV[i]
  redis.call('SADD', fk, ARGV[2])
  if redis.call('PTTL', fk) < ttl then redis.call('PEXPIRE', fk, ttl) end
end
return false
)lua");
  return s;
}

// ARGV: P, id, then (key, value) pairs. Returns 0 for an unknown id.
const Script& IndexArgumentsScript() {
  static const Script s = Make(R"lua(
local id = ARGV[2]
local seq = redis.call('HGET', P .. ${inv} .. id, 'seq')
if not seq then return 0 end
local ak = P .. ${args} .. id
for i = 3, #ARGV, 2 do
  local old = redis.call('HGET', ak, ARGV[i])
  if old then redis.call('ZREM', argkey(ARGV[i], old), id) end
  redis.call('HSET', ak, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', argkey(ARGV[i], ARGV[i + 1]), seq, id)
end
return 1
)lua");
  return s;
}

// ARGV: P, task, n, n statuses, then (key, value) pairs. Walks the smallest of
// the task index and the argument indexes, registration order.
const Script& ExistingScript() {
  static const Script s = Make(R"lua(
local task = ARGV[2]
local ns = tonumber(ARGV[3])
local want = nil
if ns > 0 then
  want = {}
  for i = 4, 3 + ns do want[ARGV[i]] = true end
end
local first_pair = 4 + ns
local src = P .. ${task} .. task
local best = redis.call('ZCARD', src)
for i = first_pair, #ARGV, 2 do
  local ak = argkey(ARGV[i], ARGV[i + 1])
  local n = redis.call('ZCARD', ak)
  if n < best then best, src = n, ak end
end
local out = {}
if best == 0 then return out end
for _, id in ipairs(redis.call('ZRANGE', src, 0, -1)) do
  local f = redis.call('HMGET', P .. ${inv} .. id, 'task', 'st')
  local ok = f[1] == task and (want == nil or want[f[2]])
  local i = first_pair
  while ok and i <= #ARGV do
    ok = redis.call('HGET', P .. ${args} .. id, ARGV[i]) == ARGV[i + 1]
    i = i + 2
  end
  if ok then out[#out + 1] = id end
end
return out
)lua");
  return s;
}

// ARGV: P, limit, offset, has_task, task, then the statuses to list (every
// status when the caller filters none). Newest status time first, ties newest
// registration first (members are "<seq, 20 digits><id>"). It merges the
// statuses' time pages newest first, so a page reads only offset + limit
// matching entries (plus, with a task filter, other tasks' entries); with a
// task filter it walks the task's index instead when that reads fewer entries
// (n^2 <= (offset + limit) * entries of the statuses: the merge reads about
// (offset + limit) * entries / n of them).
const Script& ListScript() {
  static const Script s = Make(R"lua(
local limit, offset = tonumber(ARGV[2]), tonumber(ARGV[3])
local has_task, task = ARGV[4] == '1', ARGV[5]
local out = {}
if limit == 0 then return out end
local want = limit + offset
if has_task then
  local total = 0
  for i = 6, #ARGV do total = total + redis.call('ZCARD', P .. ${stimes} .. ARGV[i]) end
  local tk = P .. ${task} .. task
  local n = redis.call('ZCARD', tk)
  if n * n <= want * total then
    local wanted = {}
    for i = 6, #ARGV do wanted[ARGV[i]] = true end
    local rows = {}
    for _, id in ipairs(redis.call('ZRANGE', tk, 0, -1)) do
      local f = redis.call('HMGET', P .. ${inv} .. id, 'seq', 'st', 'ts')
      if f[1] and wanted[f[2]] then rows[#rows + 1] = {tonumber(f[3]), tonumber(f[1]), id} end
    end
    table.sort(rows, function(x, y)
      if x[1] ~= y[1] then return x[1] > y[1] end
      return x[2] > y[2]
    end)
    for i = offset + 1, math.min(#rows, want) do out[#out + 1] = rows[i][3] end
    return out
  end
end
local batch = math.min(256, want)
local streams = {}
for i = 6, #ARGV do
  streams[#streams + 1] = {key = P .. ${stimes} .. ARGV[i], pos = 0, buf = {}, i = 1}
end
local function head(st)
  if st.done then return nil end
  if st.i > #st.buf then
    st.buf = redis.call('ZREVRANGE', st.key, st.pos, st.pos + batch - 1, 'WITHSCORES')
    st.pos, st.i = st.pos + batch, 1
    if #st.buf == 0 then st.done = true return nil end
  end
  return st.buf[st.i], tonumber(st.buf[st.i + 1])
end
local skipped = 0
while true do
  local best, bm, bs = nil, nil, nil
  for _, st in ipairs(streams) do
    local m, sc = head(st)
    if m and (best == nil or sc > bs or (sc == bs and m > bm)) then best, bm, bs = st, m, sc end
  end
  if best == nil then return out end
  best.i = best.i + 2
  local id = string.sub(bm, 21)
  if not has_task or redis.call('HGET', P .. ${inv} .. id, 'task') == task then
    if skipped < offset then
      skipped = skipped + 1
    else
      out[#out + 1] = id
      if #out >= limit then return out end
    end
  end
end
)lua");
  return s;
}

// ARGV: P, has_task, task, all ('1': no status filter), then the statuses to
// count (every status when all). Every invocation is in exactly one status's
// time page, so a count without a task is a sum of cardinalities; with a task
// and statuses it walks the smaller of the task's index and those pages.
const Script& CountScript() {
  static const Script s = Make(R"lua(
local has_task, task, all = ARGV[2] == '1', ARGV[3], ARGV[4] == '1'
local tk = P .. ${task} .. task
if has_task and all then return redis.call('ZCARD', tk) end
local n = 0
for i = 5, #ARGV do n = n + redis.call('ZCARD', P .. ${stimes} .. ARGV[i]) end
if not has_task then return n end
local count = 0
if redis.call('ZCARD', tk) <= n then
  local wanted = {}
  for i = 5, #ARGV do wanted[ARGV[i]] = true end
  for _, id in ipairs(redis.call('ZRANGE', tk, 0, -1)) do
    local st = redis.call('HGET', P .. ${inv} .. id, 'st')
    if st and wanted[st] then count = count + 1 end
  end
  return count
end
for i = 5, #ARGV do
  for _, m in ipairs(redis.call('ZRANGE', P .. ${stimes} .. ARGV[i], 0, -1)) do
    if redis.call('HGET', P .. ${inv} .. string.sub(m, 21), 'task') == task then
      count = count + 1
    end
  end
end
return count
)lua");
  return s;
}

// ARGV: P, task, call. The ids of the task's invocations of that call,
// registration order (pynenc's call key is "<task key>:<args id>", so the
// task's index holds them all).
const Script& CallInvocationsScript() {
  static const Script s = Make(R"lua(
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. ${task} .. ARGV[2], 0, -1)) do
  if redis.call('HGET', P .. ${inv} .. id, 'call') == ARGV[3] then out[#out + 1] = id end
end
return out
)lua");
  return s;
}

// ARGV: P, id. Returns 0 for an unknown id.
const Script& IncrementRetriesScript() {
  static const Script s = Make(R"lua(
local k = P .. ${inv} .. ARGV[2]
if redis.call('EXISTS', k) == 0 then return 0 end
redis.call('HINCRBY', k, 'retries', 1)
return 1
)lua");
  return s;
}

// ARGV: P, id, now. Returns 0 for an unknown id.
const Script& ScheduleAutoPurgeScript() {
  static const Script s = Make(R"lua(
local seq = redis.call('HGET', P .. ${inv} .. ARGV[2], 'seq')
if not seq then return 0 end
redis.call('ZADD', P .. ${purge}, ARGV[3], pad(seq) .. ARGV[2])
return 1
)lua");
  return s;
}

// ARGV: P, cutoff. Forgets every invocation marked at or before cutoff; returns
// their ids, oldest mark first (ties: registration order).
const Script& AutoPurgeScript() {
  static const Script s = Make(R"lua(
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. ${purge}, '-inf', ARGV[2])) do
  local id = string.sub(m, 21)
  out[#out + 1] = id
  forget(id)
end
return out
)lua");
  return s;
}

// ARGV: P, waiter, waited...
const Script& WaitingScript() {
  static const Script s = Make(R"lua(
local waiter = ARGV[2]
for i = 3, #ARGV do
  redis.call('SADD', P .. ${wf} .. waiter, ARGV[i])
  redis.call('SADD', P .. ${wb} .. ARGV[i], waiter)
  redis.call('SADD', P .. ${waited}, ARGV[i])
end
return 1
)lua");
  return s;
}

// ARGV: P, id.
const Script& ReleaseScript() {
  static const Script s = Make(R"lua(
release(ARGV[2])
return 1
)lua");
  return s;
}

// ARGV: P, max_count, available-for-run status names...
const Script& BlockingScript() {
  static const Script s = Make(R"lua(
local avail = {}
for i = 3, #ARGV do avail[ARGV[i]] = true end
local found = {}
for _, id in ipairs(redis.call('SMEMBERS', P .. ${waited})) do
  if redis.call('EXISTS', P .. ${wf} .. id) == 0 then
    local f = redis.call('HMGET', P .. ${inv} .. id, 'seq', 'st')
    if f[1] and avail[f[2]] then found[#found + 1] = {tonumber(f[1]), id} end
  end
end
table.sort(found, function(a, b) return a[1] < b[1] end)
local out = {}
for i = 1, math.min(#found, tonumber(ARGV[2])) do out[i] = found[i][2] end
return out
)lua");
  return s;
}

// The indexes an earlier key layout kept and this one does not: P all and P
// status:<s> (ids by registration order; the time pages answer what they did),
// and P times (every invocation's time page; the per-status pages answer it).
// ARGV: P, every status name. Unlinks P all and P status:<s>; returns whether
// P times exists (then the caller unlinks P ttimes:<t> and P call:<c>, the per
// task and per call indexes of that layout, and P times last, so an interrupted
// drop is done again at the next open).
const Script& DropRetiredIndexesScript() {
  static const Script s = Make(R"lua(
local keys = {P .. ${all}}
for i = 2, #ARGV do keys[#keys + 1] = P .. ${status} .. ARGV[i] end
redis.call('UNLINK', unpack(keys))
return redis.call('EXISTS', P .. ${times})
)lua");
  return s;
}

}  // namespace pynenc_cpp::redis_orchestrator
