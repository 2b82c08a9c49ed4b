// Redis state backend: its Lua scripts (KEYS[1] is always the app's state
// prefix), one function each, and the state writes other modules' scripts share
// (StateLuaFragments). The backend class that runs them: redis_state_backend.cc;
// key layout: redis_state_backend.h.
#include <string>

#include "redis/redis_state_backend.h"
#include "redis/redis_state_backend_impl.h"

namespace pynenc_cpp::redis {
namespace state_impl {
namespace {

// --- Lua scripts (KEYS[1] is always the app's state prefix) -----------------
const char* kLuaHelpers = R"LUA(
local p = KEYS[1]
-- A history entry as stored in P hkey:<id>: its position (32 hex digits), then
-- its value; an entry of layout 1 is the position alone, its value in P hist.
local function hist_value(e)
  if #e == 32 then return redis.call('HGET', p .. ${hist}, e) end
  return string.sub(e, 33)
end
local function hmget_all(key, fields)
  local out = {}
  for i = 1, #fields, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #fields) do chunk[#chunk + 1] = fields[j] end
    local vals = redis.call('HMGET', key, unpack(chunk))
    for j = 1, #vals do out[#out + 1] = vals[j] end
  end
  return out
end
)LUA";

// The writes other modules' scripts share (redis/redis_lifecycle_scripts.cc), each in
// this one place. `sp` is the app's state prefix.
//   state_upsert(sp, id, rec, parent, event, wfid, wftype): stores the packed
//     record and its index fields ("" unset, "=" .. value set), re-indexing a
//     record stored before;
//   state_add_history(sp, id, tsenc, dk, val): the history entry of `id` under
//     the replace key `dk` ("<ts>:<status>"), a new position on first write;
//   state_add_new_histories(sp, rows): rows {id, tsenc, dk, val}, in order, each
//     known to be new (a lifecycle step's own rows, under a timestamp taken for
//     that step): state_add_history without its lookup, each key written once
//     for all the rows (3 commands for one invocation's rows instead of 4 a row).
const char* kStateFragments = R"LUA(
local state_ix = {parent = ${ix_parent}, event = ${ix_event}, wfid = ${ix_wf}, wftype = ${ix_wftype}}
local state_ix_names = {'parent', 'event', 'wfid', 'wftype'}
local function state_upsert(sp, id, rec, parent, event, wfid, wftype)
  local raw = {parent, event, wfid, wftype}
  local key = sp .. ${inv} .. id
  local old = redis.call('HMGET', key, 'seq', 'parent', 'event', 'wfid', 'wftype')
  local seq = old[1]
  if seq then
    for n = 1, 4 do
      if old[n + 1] then redis.call('ZREM', sp .. state_ix[state_ix_names[n]] .. old[n + 1], id) end
    end
    if old[4] then redis.call('ZREM', sp .. ${ix_wfany}, id) end
    redis.call('DEL', key)
  else
    seq = redis.call('INCR', sp .. ${seq})
  end
  local hset = {'seq', seq, 'rec', rec}
  for n = 1, 4 do
    if raw[n] ~= '' then
      local v = string.sub(raw[n], 2)
      hset[#hset + 1] = state_ix_names[n]
      hset[#hset + 1] = v
      redis.call('ZADD', sp .. state_ix[state_ix_names[n]] .. v, seq, id)
    end
  end
  if wfid ~= '' then redis.call('ZADD', sp .. ${ix_wfany}, seq, id) end
  redis.call('HSET', key, unpack(hset))
end
local function state_add_history(sp, id, tsenc, dk, val)
  local dkey = sp .. ${hkey} .. id
  local pos = redis.call('HGET', dkey, dk)
  if pos then
    -- An entry of layout 1 is its position alone, its value in P hist: moved here.
    if #pos == 32 then redis.call('HDEL', sp .. ${hist}, pos) end
    pos = string.sub(pos, 1, 32)
  else
    local hseq = redis.call('INCR', sp .. ${hseq})
    pos = tsenc .. string.format('%016x', hseq)
    redis.call('ZADD', sp .. ${htime}, 0, pos .. id)
  end
  redis.call('HSET', dkey, dk, pos .. val)
end
local function state_call_chunked(cmd, key, args)
  for i = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
  end
end
local function state_add_new_histories(sp, rows)
  local n = #rows
  if n == 0 then return end
  local first = redis.call('INCRBY', sp .. ${hseq}, n) - n
  local htime, per_id, ids = {}, {}, {}
  for i, r in ipairs(rows) do
    local id = r[1]
    local t = per_id[id]
    if not t then
      t = {fields = {}, at = {}}
      per_id[id] = t
      ids[#ids + 1] = id
    end
    local at = t.at[r[3]]
    if at then
      -- The same key twice in one call (an id submitted twice in one batch):
      -- one entry, the later value, as state_add_history's replace.
      t.fields[at] = string.sub(t.fields[at], 1, 32) .. r[4]
    else
      local pos = r[2] .. string.format('%016x', first + i)
      htime[#htime + 1] = 0
      htime[#htime + 1] = pos .. id
      t.fields[#t.fields + 1] = r[3]
      t.fields[#t.fields + 1] = pos .. r[4]
      t.at[r[3]] = #t.fields
    end
  end
  for _, id in ipairs(ids) do
    redis.call('HSET', sp .. ${hkey} .. id, unpack(per_id[id].fields))
  end
  state_call_chunked('ZADD', sp .. ${htime}, htime)
end
)LUA";

std::string WithHelpers(const char* body) {
  return std::string(kLuaHelpers) + kStateFragments + body;
}

}  // namespace

// ARGV: groups of (id, packed record, parent, event, wfid, wftype); index fields
// are "" when unset and "=" + value when set (UpsertFields).
const Script& UpsertScript() {
  static const Script script(WithHelpers(R"LUA(
for i = 1, #ARGV, 6 do
  state_upsert(p, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
end
return 1
)LUA"));
  return script;
}

// ARGV: wfid-or-"", wftype-or-"". Ids in first-upsert order.
const Script& ByWorkflowScript() {
  static const Script script(WithHelpers(R"LUA(
local wfid, wftype = ARGV[1], ARGV[2]
if wfid == '' then
  if wftype == '' then return redis.call('ZRANGE', p .. ${ix_wfany}, 0, -1) end
  return redis.call('ZRANGE', p .. ${ix_wftype} .. wftype, 0, -1)
end
local ids = redis.call('ZRANGE', p .. 'ix:wf:' .. wfid, 0, -1)
if wftype == '' then return ids end
local out = {}
for _, id in ipairs(ids) do
  if redis.call('HGET', p .. ${inv} .. id, 'wftype') == wftype then out[#out + 1] = id end
end
return out
)LUA"));
  return script;
}

// ARGV: encoded ts, replace key "<ts>:<status>", value, then the ids.
const Script& AddHistoriesScript() {
  static const Script script(WithHelpers(R"LUA(
for i = 4, #ARGV do state_add_history(p, ARGV[i], ARGV[1], ARGV[2], ARGV[3]) end
return 1
)LUA"));
  return script;
}

// ARGV: id. Returns {positions, values}, in position order (each stored entry
// starts with its position, 32 lowercase hex digits; Lua compares strings with
// strcoll, which orders such fixed-length hex strings as their bytes).
const Script& GetHistoryScript() {
  static const Script script(WithHelpers(R"LUA(
local es = redis.call('HVALS', p .. ${hkey} .. ARGV[1])
table.sort(es)
local ps, vs = {}, {}
for i, e in ipairs(es) do ps[i], vs[i] = string.sub(e, 1, 32), hist_value(e) end
return {ps, vs}
)LUA"));
  return script;
}

// ARGV: min, max (ZRANGEBYLEX bounds), count. Returns {members, values}: the
// first `count` entries in range. A time-page member whose entry is no longer
// stored (its key was written again at another position by a step that took
// every row as new: the same id submitted twice within one microsecond) is
// skipped, and the range read on past it.
const Script& HistoryRangeScript() {
  static const Script script(WithHelpers(R"LUA(
local want = tonumber(ARGV[3])
local by_id, ms, vs = {}, {}, {}
local offset = 0
while #ms < want do
  local batch = redis.call('ZRANGEBYLEX', p .. ${htime}, ARGV[1], ARGV[2], 'LIMIT', offset, want - #ms)
  if #batch == 0 then break end
  offset = offset + #batch
  for _, m in ipairs(batch) do
    local pos, id = string.sub(m, 1, 32), string.sub(m, 33)
    local es = by_id[id]
    if not es then
      es = {}
      for _, e in ipairs(redis.call('HVALS', p .. ${hkey} .. id)) do es[string.sub(e, 1, 32)] = e end
      by_id[id] = es
    end
    local v = es[pos] and hist_value(es[pos])
    if v then
      ms[#ms + 1] = m
      vs[#vs + 1] = v
    end
  end
end
return {ms, vs}
)LUA"));
  return script;
}

// ARGV: min, max. Distinct ids with an entry in range (unordered).
const Script& IdsInRangeScript() {
  static const Script script(WithHelpers(R"LUA(
local ms = redis.call('ZRANGEBYLEX', p .. ${htime}, ARGV[1], ARGV[2])
local seen, out = {}, {}
for i = 1, #ms do
  local id = string.sub(ms[i], 33)
  if not seen[id] then seen[id] = true; out[#out + 1] = id end
end
return out
)LUA"));
  return script;
}

// ARGV: id, type, packed run.
const Script& StoreRunScript() {
  static const Script script(WithHelpers(R"LUA(
local id, t = ARGV[1], ARGV[2]
local old = redis.call('HGET', p .. ${wftype_of}, id)
if old and old ~= t then
  redis.call('SREM', p .. ${wfruns_t} .. old, id)
  if redis.call('SCARD', p .. ${wfruns_t} .. old) == 0 then redis.call('SREM', p .. ${wftypes}, old) end
end
redis.call('HSET', p .. ${wftype_of}, id, t)
redis.call('HSET', p .. ${wfruns}, id, ARGV[3])
redis.call('SADD', p .. ${wfruns_t} .. t, id)
redis.call('SADD', p .. ${wftypes}, t)
return 1
)LUA"));
  return script;
}

// ARGV: type. Packed runs of that type.
const Script& RunsOfTypeScript() {
  static const Script script(WithHelpers(R"LUA(
local ids = redis.call('SMEMBERS', p .. ${wfruns_t} .. ARGV[1])
if #ids == 0 then return {} end
return hmget_all(p .. ${wfruns}, ids)
)LUA"));
  return script;
}

// ARGV: workflow, sub-invocation.
const Script& StoreSubScript() {
  static const Script script(WithHelpers(R"LUA(
local key = p .. ${wfsub} .. ARGV[1]
if redis.call('ZSCORE', key, ARGV[2]) then return 0 end
redis.call('ZADD', key, redis.call('INCR', p .. ${seq}), ARGV[2])
return 1
)LUA"));
  return script;
}

}  // namespace state_impl

using state_impl::kStateFragments;

const char* StateLuaFragments() { return kStateFragments; }

}  // namespace pynenc_cpp::redis
