// The Redis broker's Lua: the route, the pop (plain and pop-then), the purge and
// the requeue of lost pops, run by the broker in redis_broker.cc; and the
// fragments other modules' scripts share (BrokerLuaRoute, BrokerLuaPop). Key
// layout and protocol: redis_broker.h.
#include "redis/redis_broker_scripts.h"

#include <string>

#include "redis/redis_broker.h"

namespace pynenc_cpp::redis {
namespace broker_scripts {

// broker_route(bp, queue, score, bound, ids, from, to): the route, shared with
// redis/redis_lifecycle_scripts.cc's submit script (BrokerLuaRoute). Takes one
// sequence block for ids[from..to] and adds every id to the queue's sorted set,
// then pushes wake tokens (the list trimmed to `bound`) and records the queue.
const char* kRouteFragment = R"lua(
local function broker_route(bp, queue, score, bound, ids, from, to)
  local n = to - from + 1
  if n <= 0 then return 0 end
  local first = redis.call('INCRBY', bp .. ${seq}, n) - n
  local zset = bp .. ${q} .. queue
  local args = {}
  for i = 1, n do
    args[#args + 1] = score
    args[#args + 1] = string.format('%020d', first + i) .. ':' .. ids[from + i - 1]
    if #args >= 1000 or i == n then
      redis.call('ZADD', zset, unpack(args))
      args = {}
    end
  end
  local tokens = {}
  for i = 1, math.min(n, bound) do tokens[i] = '1' end
  local wake = bp .. ${w} .. queue
  if redis.call('RPUSH', wake, unpack(tokens)) > bound then
    redis.call('LTRIM', wake, -bound, -1)
  end
  redis.call('SADD', bp .. ${queues}, queue)
  return n
end
)lua";

// KEYS: seq (routes the call to the app's slot). ARGV: prefix, score, queue,
// wake bound, ids... One round trip for the batch.
const Script kRouteScript(std::string(kRouteFragment) + R"lua(
return broker_route(ARGV[1], ARGV[3], ARGV[2], tonumber(ARGV[4]), ARGV, 5, #ARGV)
)lua");

// broker_pop(K, A, record): K = {zset, wake, consumers, lease, proc, recovery
// guard}; A = {consumer id, lease ms ('0': not refreshed by this call), consume
// a wake token (1/0), queue, recovery ms ('0': no recovery attempt by this
// call), key prefix, entries to acknowledge...}. Acknowledges, refreshes the
// lease, recovers dead consumers (at most once per interval), then pops the next
// item, and unless record is false moves it into this consumer's processing
// list. Returns nil or {id, processing entry}. The client decides how often a
// call refreshes the lease and tries the recovery (redis_broker.cc, MakePop).
// Shared with the scripts that pop and go on in the same round trip
// (BrokerLuaPop, RetrieveThen).
const char* kPopFragment = R"lua(
local function broker_pop(K, A, record)
  for i = 7, #A do redis.call('LREM', K[5], 1, A[i]) end
  -- A consumer is listed while its lease lives (recovery unlists it only after
  -- the lease lapsed, a clean close drops both): listed again on a new lease.
  -- (A consumers set lost while leases live, e.g. evicted under a maxmemory
  -- policy other than noeviction, is not rebuilt: docs/backends/redis.md.)
  if A[2] ~= '0' and not redis.call('SET', K[4], '1', 'PX', A[2], 'GET') then
    redis.call('SADD', K[3], A[1])
  end
  if A[5] ~= '0' and redis.call('SET', K[6], '1', 'NX', 'PX', A[5]) then
    local prefix = A[6]
    for _, cid in ipairs(redis.call('SMEMBERS', K[3])) do
      if cid ~= A[1] and redis.call('EXISTS', prefix .. ${lease} .. cid) == 0 then
        local proc = prefix .. ${proc} .. cid
        for _, e in ipairs(redis.call('LRANGE', proc, 0, -1)) do
          local d = cmsgpack.unpack(e)
          redis.call('ZADD', prefix .. ${q} .. d[1], d[2], d[3])
          redis.call('RPUSH', prefix .. ${w} .. d[1], '1')
          redis.call('SADD', prefix .. ${queues}, d[1])
        end
        redis.call('DEL', proc)
        redis.call('SREM', K[3], cid)
      end
    end
  end
  local got = redis.call('ZPOPMIN', K[1])
  if #got == 0 then return nil end
  local entry = cmsgpack.pack({A[4], got[2], got[1]})
  if record ~= false then redis.call('RPUSH', K[5], entry) end
  if A[3] == '1' then redis.call('LPOP', K[2]) end
  return {string.sub(got[1], 22), entry}
end
)lua";

// KEYS and ARGV: broker_pop's K and A. Returns nil or {id, processing entry}.
const Script kPopScript(std::string(kPopFragment) + R"lua(
local got = broker_pop(KEYS, ARGV, true)
if not got then return false end
return got
)lua");

// broker_pop_then(go): the body of a PopThen script (see redis_broker.h). Pops
// with the arguments RetrieveThen put after the script's own, then calls
// go(id, own ARGV), which returns its reply, a one-character mark and whether
// the id is now owned by the caller in the orchestrator (claimed: pynenc's
// recovery of a dead runner's invocations covers it, so the pop keeps no
// processing entry and needs no acknowledgement; the entry is then ''; an
// error of go keeps the entry and is raised again), and records the attempt
// under KEYS[7] (for 10 minutes) so a lost reply can be
// resolved. Returns false (nothing popped) or {id, processing entry, reply,
// how many ids the queue still holds}.
const char* kPopThenFragment = R"lua(
local function broker_pop_then(go)
  local n = #ARGV
  local np = tonumber(ARGV[n])
  local A, own = {}, {}
  for i = n - 1 - np, n - 2 do A[#A + 1] = ARGV[i] end
  for i = 1, n - 2 - np do own[i] = ARGV[i] end
  local got = broker_pop(KEYS, A, false)
  if not got then return false end
  -- go's error (a failed redis.call) ends the script after the pop: the id is
  -- kept in the processing list first, so it is redelivered, never lost.
  local ok, reply, mark, owned = pcall(go, got[1], own)
  local entry = ''
  if not ok or not owned then
    entry = got[2]
    redis.call('RPUSH', KEYS[5], entry)
  end
  if not ok then error(reply) end
  redis.call('SET', KEYS[7], ARGV[n - 1] .. mark .. string.format('%08d', #got[1]) .. got[1] ..
             entry, 'PX', 600000)
  return {got[1], entry, reply, redis.call('ZCARD', KEYS[1])}
end
)lua";

// KEYS: queues, consumers. ARGV: key prefix. Drops every queued and
// unacknowledged id of the app; consumers and the sequence stay.
const Script kPurgeScript(R"lua(
local prefix = ARGV[1]
for _, q in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('DEL', prefix .. ${q} .. q, prefix .. ${w} .. q)
end
for _, c in ipairs(redis.call('SMEMBERS', KEYS[2])) do redis.call('DEL', prefix .. ${proc} .. c) end
redis.call('DEL', KEYS[1])
return 1
)lua");

// KEYS: proc. ARGV: key prefix, entries handed to callers...
// Moves every other processing entry (popped by a script whose reply was lost
// with the connection, so never handed out) back to its queue position.
const Script kRequeueScript(R"lua(
local known = {}
for i = 2, #ARGV do known[ARGV[i]] = true end
local moved = 0
for _, e in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if not known[e] then
    local d = cmsgpack.unpack(e)
    redis.call('ZADD', ARGV[1] .. ${q} .. d[1], d[2], d[3])
    redis.call('RPUSH', ARGV[1] .. ${w} .. d[1], '1')
    redis.call('SADD', ARGV[1] .. ${queues}, d[1])
    redis.call('LREM', KEYS[1], 1, e)
    moved = moved + 1
  end
end
return moved
)lua");

}  // namespace broker_scripts

using broker_scripts::kPopFragment;
using broker_scripts::kPopThenFragment;
using broker_scripts::kRouteFragment;

const char* BrokerLuaRoute() { return kRouteFragment; }

std::string BrokerLuaPop() { return std::string(kPopFragment) + kPopThenFragment; }

}  // namespace pynenc_cpp::redis
