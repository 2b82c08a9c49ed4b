// Redis state backend: see redis_state_backend.h for the key layout.
//
// Writes are unconditional upserts, so the "compare" of a compare-and-set is done
// by the server itself: each write script reads the stored index fields and moves
// the index entries in the same atomic script. Racing writers of one key are
// therefore serialized by Redis; the last script wins and leaves every index
// consistent with the record it wrote.
#include "redis/redis_state_backend.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace pynenc_cpp::redis {
namespace {

// Whole-string integer parse; nullopt on anything malformed (never throws).
template <typename T>
std::optional<T> ParseInt(const std::string& s, int base = 10) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// --- packing of records into one binary-safe string -------------------------
// Each field is "N" (absent) or "S<len>:<bytes>".
using Fields = std::vector<std::optional<std::string>>;

std::string Pack(const Fields& fields) {
  std::string out;
  for (const auto& f : fields) {
    if (!f) {
      out += 'N';
      continue;
    }
    out += 'S';
    out += std::to_string(f->size());
    out += ':';
    out += *f;
  }
  return out;
}

std::optional<Fields> Unpack(const std::string& packed, std::size_t count) {
  Fields out;
  std::size_t i = 0;
  while (out.size() < count) {
    if (i >= packed.size()) return std::nullopt;
    if (packed[i] == 'N') {
      out.emplace_back(std::nullopt);
      ++i;
      continue;
    }
    if (packed[i] != 'S') return std::nullopt;
    const std::size_t colon = packed.find(':', i);
    if (colon == std::string::npos) return std::nullopt;
    if (colon == i + 1 || colon - i - 1 > 12) return std::nullopt;
    std::size_t len = 0;
    for (std::size_t d = i + 1; d < colon; ++d) {
      if (packed[d] < '0' || packed[d] > '9') return std::nullopt;
      len = len * 10 + static_cast<std::size_t>(packed[d] - '0');
    }
    if (len > packed.size() - colon - 1) return std::nullopt;
    out.emplace_back(packed.substr(colon + 1, len));
    i = colon + 1 + len;
  }
  return out;
}

template <typename T>
std::optional<std::string> OptStr(const std::optional<T>& id) {
  if (!id) return std::nullopt;
  return id->str();
}

std::string PackInvocation(const InvocationRecord& r) {
  return Pack(
      {r.invocation_id.str(), r.call_id.str(), r.task_id.str(), r.arguments_id,
       r.serialized_arguments, OptStr(r.parent_invocation_id), r.parent_event_id,
       r.workflow ? std::optional<std::string>(r.workflow->workflow_id.str()) : std::nullopt,
       r.workflow ? std::optional<std::string>(r.workflow->workflow_type.str()) : std::nullopt,
       r.workflow ? OptStr(r.workflow->parent_workflow_id) : std::nullopt});
}

std::optional<InvocationRecord> UnpackInvocation(const std::string& packed) {
  std::optional<Fields> f = Unpack(packed, 10);
  if (!f || !(*f)[0] || !(*f)[1] || !(*f)[2] || !(*f)[3] || !(*f)[4]) return std::nullopt;
  InvocationRecord r;
  r.invocation_id = InvocationId(*(*f)[0]);
  r.call_id = CallId(*(*f)[1]);
  r.task_id = TaskId(*(*f)[2]);
  r.arguments_id = *(*f)[3];
  r.serialized_arguments = *(*f)[4];
  if ((*f)[5]) r.parent_invocation_id = InvocationId(*(*f)[5]);
  r.parent_event_id = (*f)[6];
  if ((*f)[7] && (*f)[8]) {
    WorkflowRecord w{WorkflowId(*(*f)[7]), TaskId(*(*f)[8]), std::nullopt};
    if ((*f)[9]) w.parent_workflow_id = WorkflowId(*(*f)[9]);
    r.workflow = std::move(w);
  }
  return r;
}

std::string PackRunner(const RunnerContextRecord& r) {
  return Pack({r.runner_id.str(), r.runner_cls, OptStr(r.parent_runner_id), std::to_string(r.pid),
               r.hostname, std::to_string(r.thread_id)});
}

std::optional<RunnerContextRecord> UnpackRunner(const std::string& packed) {
  std::optional<Fields> f = Unpack(packed, 6);
  if (!f || !(*f)[0] || !(*f)[1] || !(*f)[3] || !(*f)[4] || !(*f)[5]) return std::nullopt;
  const std::optional<std::int64_t> pid = ParseInt<std::int64_t>(*(*f)[3]);
  const std::optional<std::int64_t> thread_id = ParseInt<std::int64_t>(*(*f)[5]);
  if (!pid || !thread_id) return std::nullopt;
  RunnerContextRecord r;
  r.runner_id = RunnerId(*(*f)[0]);
  r.runner_cls = *(*f)[1];
  if ((*f)[2]) r.parent_runner_id = RunnerId(*(*f)[2]);
  r.pid = *pid;
  r.hostname = *(*f)[4];
  r.thread_id = *thread_id;
  return r;
}

std::string PackWorkflow(const WorkflowRecord& w) {
  return Pack({w.workflow_id.str(), w.workflow_type.str(), OptStr(w.parent_workflow_id)});
}

std::optional<WorkflowRecord> UnpackWorkflow(const std::string& packed) {
  std::optional<Fields> f = Unpack(packed, 3);
  if (!f || !(*f)[0] || !(*f)[1]) return std::nullopt;
  WorkflowRecord w{WorkflowId(*(*f)[0]), TaskId(*(*f)[1]), std::nullopt};
  if ((*f)[2]) w.parent_workflow_id = WorkflowId(*(*f)[2]);
  return w;
}

// --- history positions ------------------------------------------------------
// 16 lowercase hex digits; timestamps have their sign bit flipped so that
// negative ones sort first.
std::string Hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf, 16);
}
std::string EncodeTs(TimestampUs ts) {
  return Hex16(static_cast<std::uint64_t>(ts) ^ (std::uint64_t{1} << 63));
}
constexpr std::size_t kPosLen = 32;
// The key layout the state backend writes (P layout; DropRetiredKeys).
constexpr const char* kLayout = "2";

std::optional<HistoryPosition> DecodePos(const std::string& member) {
  if (member.size() < kPosLen) return std::nullopt;
  const std::optional<std::uint64_t> ts = ParseInt<std::uint64_t>(member.substr(0, 16), 16);
  const std::optional<std::uint64_t> seq = ParseInt<std::uint64_t>(member.substr(16, 16), 16);
  if (!ts || !seq) return std::nullopt;
  return HistoryPosition{static_cast<TimestampUs>(*ts ^ (std::uint64_t{1} << 63)), *seq};
}

// "<status>|<json>"
std::string PackHistoryValue(const HistoryRecord& r) {
  return std::to_string(static_cast<int>(r.status)) + "|" + r.history_json;
}

std::optional<HistoryRecord> UnpackHistory(const std::string& pos, const std::string& id,
                                           const std::string& value) {
  const std::optional<HistoryPosition> p = DecodePos(pos);
  const std::size_t bar = value.find('|');
  if (!p || bar == std::string::npos) return std::nullopt;
  const std::optional<int> status = ParseInt<int>(value.substr(0, bar));
  if (!status) return std::nullopt;
  HistoryRecord r;
  r.invocation_id = InvocationId(id);
  r.timestamp_us = p->timestamp_us;
  r.status = static_cast<InvocationStatus>(*status);
  r.history_json = value.substr(bar + 1);
  return r;
}

// --- Lua scripts (KEYS[1] is always the app's state prefix) -----------------
const char* kLuaHelpers = R"LUA(
local p = KEYS[1]
-- A history entry as stored in P hkey:<id>: its position (32 hex digits), then
-- its value; an entry of layout 1 is the position alone, its value in P hist.
local function hist_value(e)
  if #e == 32 then return redis.call('HGET', p .. 'hist', e) end
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

// The writes other modules' scripts share (native/redis_lifecycle_scripts.cc), each in
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
local state_ix = {parent = 'ix:parent:', event = 'ix:event:', wfid = 'ix:wf:', wftype = 'ix:wftype:'}
local state_ix_names = {'parent', 'event', 'wfid', 'wftype'}
local function state_upsert(sp, id, rec, parent, event, wfid, wftype)
  local raw = {parent, event, wfid, wftype}
  local key = sp .. 'inv:' .. id
  local old = redis.call('HMGET', key, 'seq', 'parent', 'event', 'wfid', 'wftype')
  local seq = old[1]
  if seq then
    for n = 1, 4 do
      if old[n + 1] then redis.call('ZREM', sp .. state_ix[state_ix_names[n]] .. old[n + 1], id) end
    end
    if old[4] then redis.call('ZREM', sp .. 'ix:wfany', id) end
    redis.call('DEL', key)
  else
    seq = redis.call('INCR', sp .. 'seq')
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
  if wfid ~= '' then redis.call('ZADD', sp .. 'ix:wfany', seq, id) end
  redis.call('HSET', key, unpack(hset))
end
local function state_add_history(sp, id, tsenc, dk, val)
  local dkey = sp .. 'hkey:' .. id
  local pos = redis.call('HGET', dkey, dk)
  if pos then
    -- An entry of layout 1 is its position alone, its value in P hist: moved here.
    if #pos == 32 then redis.call('HDEL', sp .. 'hist', pos) end
    pos = string.sub(pos, 1, 32)
  else
    local hseq = redis.call('INCR', sp .. 'hseq')
    pos = tsenc .. string.format('%016x', hseq)
    redis.call('ZADD', sp .. 'htime', 0, pos .. id)
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
  local first = redis.call('INCRBY', sp .. 'hseq', n) - n
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
    redis.call('HSET', sp .. 'hkey:' .. id, unpack(per_id[id].fields))
  end
  state_call_chunked('ZADD', sp .. 'htime', htime)
end
)LUA";

std::string WithHelpers(const char* body) {
  return std::string(kLuaHelpers) + kStateFragments + body;
}

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
  if wftype == '' then return redis.call('ZRANGE', p .. 'ix:wfany', 0, -1) end
  return redis.call('ZRANGE', p .. 'ix:wftype:' .. wftype, 0, -1)
end
local ids = redis.call('ZRANGE', p .. 'ix:wf:' .. wfid, 0, -1)
if wftype == '' then return ids end
local out = {}
for _, id in ipairs(ids) do
  if redis.call('HGET', p .. 'inv:' .. id, 'wftype') == wftype then out[#out + 1] = id end
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
local es = redis.call('HVALS', p .. 'hkey:' .. ARGV[1])
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
  local batch = redis.call('ZRANGEBYLEX', p .. 'htime', ARGV[1], ARGV[2], 'LIMIT', offset, want - #ms)
  if #batch == 0 then break end
  offset = offset + #batch
  for _, m in ipairs(batch) do
    local pos, id = string.sub(m, 1, 32), string.sub(m, 33)
    local es = by_id[id]
    if not es then
      es = {}
      for _, e in ipairs(redis.call('HVALS', p .. 'hkey:' .. id)) do es[string.sub(e, 1, 32)] = e end
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
local ms = redis.call('ZRANGEBYLEX', p .. 'htime', ARGV[1], ARGV[2])
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
local old = redis.call('HGET', p .. 'wftype_of', id)
if old and old ~= t then
  redis.call('SREM', p .. 'wfruns_t:' .. old, id)
  if redis.call('SCARD', p .. 'wfruns_t:' .. old) == 0 then redis.call('SREM', p .. 'wftypes', old) end
end
redis.call('HSET', p .. 'wftype_of', id, t)
redis.call('HSET', p .. 'wfruns', id, ARGV[3])
redis.call('SADD', p .. 'wfruns_t:' .. t, id)
redis.call('SADD', p .. 'wftypes', t)
return 1
)LUA"));
  return script;
}

// ARGV: type. Packed runs of that type.
const Script& RunsOfTypeScript() {
  static const Script script(WithHelpers(R"LUA(
local ids = redis.call('SMEMBERS', p .. 'wfruns_t:' .. ARGV[1])
if #ids == 0 then return {} end
return hmget_all(p .. 'wfruns', ids)
)LUA"));
  return script;
}

// ARGV: workflow, sub-invocation.
const Script& StoreSubScript() {
  static const Script script(WithHelpers(R"LUA(
local key = p .. 'wfsub:' .. ARGV[1]
if redis.call('ZSCORE', key, ARGV[2]) then return 0 end
redis.call('ZADD', key, redis.call('INCR', p .. 'seq'), ARGV[2])
return 1
)LUA"));
  return script;
}

// Escapes glob metacharacters for SCAN MATCH.
std::string GlobEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::vector<InvocationId> ToIds(const Value& v) {
  std::vector<InvocationId> out;
  out.reserve(v.elements.size());
  for (const Value& e : v.elements) out.emplace_back(e.str);
  return out;
}

class RedisStateBackend final : public StateBackend {
 public:
  RedisStateBackend(std::shared_ptr<Client> client, const BackendConfig& config)
      : client_(std::move(client)), app_id_(config.app_id), p_(KeyPrefix(config.app_id, "state")) {}

  // --- invocations ---
  Status UpsertInvocations(const std::vector<InvocationRecord>& records) override {
    if (records.empty()) return Status::Ok();
    std::vector<std::string> args;
    args.reserve(records.size() * 6);
    for (const InvocationRecord& r : records) {
      args.push_back(r.invocation_id.str());
      for (std::string& f : UpsertFields(r)) args.push_back(std::move(f));
    }
    return Checked(client_->Eval(UpsertScript(), {p_}, args)).status();
  }

  Result<InvocationRecord> GetInvocation(const InvocationId& id) override {
    Result<Value> v = Checked(client_->Command({"HGET", p_ + "inv:" + id.str(), "rec"}));
    if (!v.ok()) return v.status();
    if (v.value().is_nil()) return Status::NotFound("invocation not found: " + id.str());
    std::optional<InvocationRecord> r = UnpackInvocation(v.value().str);
    if (!r) return Corrupt("invocation " + id.str());
    return *std::move(r);
  }

  Result<std::vector<InvocationId>> ChildInvocations(const InvocationId& parent) override {
    return IdList({"ZRANGE", p_ + "ix:parent:" + parent.str(), "0", "-1"});
  }

  Result<std::vector<InvocationId>> InvocationsByParentEvent(const std::string& event_id) override {
    return IdList({"ZRANGE", p_ + "ix:event:" + event_id, "0", "-1"});
  }

  Result<std::vector<InvocationId>> InvocationIdsByWorkflow(
      const std::optional<std::string>& workflow_id,
      const std::optional<std::string>& workflow_type) override {
    Result<Value> v = Checked(client_->Eval(
        ByWorkflowScript(), {p_}, {workflow_id.value_or(""), workflow_type.value_or("")}));
    if (!v.ok()) return v.status();
    return ToIds(v.value());
  }

  // --- history ---
  Status AddHistories(const std::vector<InvocationId>& ids, const HistoryRecord& record) override {
    if (ids.empty()) return Status::Ok();
    std::vector<std::string> args = {
        EncodeTs(record.timestamp_us),
        std::to_string(record.timestamp_us) + ":" + std::to_string(static_cast<int>(record.status)),
        PackHistoryValue(record)};
    for (const InvocationId& id : ids) args.push_back(id.str());
    return Checked(client_->Eval(AddHistoriesScript(), {p_}, args)).status();
  }

  Result<std::vector<HistoryRecord>> GetHistory(const InvocationId& id) override {
    Result<Value> v = Checked(client_->Eval(GetHistoryScript(), {p_}, {id.str()}));
    if (!v.ok()) return v.status();
    return Histories(v.value(), &id);
  }

  Result<HistoryPage> HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                     std::optional<HistoryPosition> after,
                                     std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    HistoryPage page;
    if (start_us > end_us) return page;
    // Lower bound: the later of (start, 0) and the position right after `after`.
    std::string min = "[" + EncodeTs(start_us);
    if (after && *after >= HistoryPosition{start_us, 0}) {
      if (after->timestamp_us > end_us) return page;
      min = "[" + EncodeTs(after->timestamp_us) + Hex16(after->sequence + 1);
    }
    const std::string max = "(" + EncodeTs(end_us) + "g";  // 'g' sorts after every hex digit
    Result<Value> v =
        Checked(client_->Eval(HistoryRangeScript(), {p_}, {min, max, std::to_string(limit + 1)}));
    if (!v.ok()) return v.status();
    Result<std::vector<HistoryRecord>> records = Histories(v.value(), nullptr);
    if (!records.ok()) return records.status();
    page.records = std::move(records).value();
    if (page.records.size() > limit) {
      page.records.resize(limit);
      page.next = DecodePos(v.value().elements[0].elements[limit - 1].str);
    }
    return page;
  }

  Result<std::vector<InvocationId>> InvocationsInRange(TimestampUs start_us, TimestampUs end_us,
                                                       const std::optional<InvocationId>& after,
                                                       std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    if (start_us > end_us) return std::vector<InvocationId>();
    Result<Value> v = Checked(client_->Eval(
        IdsInRangeScript(), {p_}, {"[" + EncodeTs(start_us), "(" + EncodeTs(end_us) + "g"}));
    if (!v.ok()) return v.status();
    std::vector<std::string> ids;
    for (const Value& e : v.value().elements) {
      if (!after || e.str > after->str()) ids.push_back(e.str);
    }
    std::sort(ids.begin(), ids.end());
    if (ids.size() > limit) ids.resize(limit);
    std::vector<InvocationId> out;
    out.reserve(ids.size());
    for (std::string& id : ids) out.emplace_back(std::move(id));
    return out;
  }

  // --- results and exceptions ---
  Status SetResult(const InvocationId& id, const std::string& serialized) override {
    return Checked(client_->Command({"HSET", p_ + "results", id.str(), serialized})).status();
  }
  Result<std::string> GetResult(const InvocationId& id) override {
    return HashGet(p_ + "results", id.str(), "no result for invocation " + id.str());
  }
  Status SetException(const InvocationId& id, const std::string& serialized) override {
    return Checked(client_->Command({"HSET", p_ + "exceptions", id.str(), serialized})).status();
  }
  Result<std::string> GetException(const InvocationId& id) override {
    return HashGet(p_ + "exceptions", id.str(), "no exception for invocation " + id.str());
  }

  // --- runner contexts ---
  Status StoreRunnerContext(const RunnerContextRecord& record) override {
    return Checked(client_->Command(
                       {"HSET", p_ + "runners", record.runner_id.str(), PackRunner(record)}))
        .status();
  }

  Result<RunnerContextRecord> GetRunnerContext(const RunnerId& runner_id) override {
    Result<std::string> packed =
        HashGet(p_ + "runners", runner_id.str(), "runner context not found: " + runner_id.str());
    if (!packed.ok()) return packed.status();
    std::optional<RunnerContextRecord> r = UnpackRunner(packed.value());
    if (!r) return Corrupt("runner context " + runner_id.str());
    return *std::move(r);
  }

  Result<std::vector<RunnerContextRecord>> GetRunnerContexts(
      const std::vector<RunnerId>& runner_ids) override {
    std::vector<RunnerContextRecord> out;
    std::vector<std::string> argv = {"HMGET", p_ + "runners"};
    std::set<std::string> seen;
    for (const RunnerId& id : runner_ids) {
      if (seen.insert(id.str()).second) argv.push_back(id.str());
    }
    if (argv.size() == 2) return out;
    Result<Value> v = Checked(client_->Command(argv));
    if (!v.ok()) return v.status();
    for (const Value& e : v.value().elements) {
      if (e.is_nil()) continue;
      std::optional<RunnerContextRecord> r = UnpackRunner(e.str);
      if (!r) return Corrupt("runner context");
      out.push_back(*std::move(r));
    }
    return out;
  }

  Result<std::vector<RunnerContextRecord>> MatchRunnerContexts(
      const std::string& partial_id) override {
    // Runner contexts are few (one per runner process/thread): read them all.
    Result<Value> v = Checked(client_->Command({"HGETALL", p_ + "runners"}));
    if (!v.ok()) return v.status();
    std::map<std::string, RunnerContextRecord> matched;
    const auto& e = v.value().elements;
    for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
      if (e[i].str.find(partial_id) == std::string::npos) continue;
      std::optional<RunnerContextRecord> r = UnpackRunner(e[i + 1].str);
      if (!r) return Corrupt("runner context " + e[i].str);
      matched.emplace(e[i].str, *std::move(r));
    }
    std::vector<RunnerContextRecord> out;
    out.reserve(matched.size());
    for (auto& [id, r] : matched) out.push_back(std::move(r));
    return out;
  }

  // --- app info ---
  Status StoreAppInfo(const std::string& app_id, const std::string& app_info_json) override {
    if (app_id.empty()) return Status::InvalidArgument("app info needs a non-empty app_id");
    return Checked(client_->Command({"HSET", kAppInfosKey, app_id, app_info_json})).status();
  }

  Result<std::string> GetAppInfo() override {
    return HashGet(kAppInfosKey, app_id_, "no app info for app_id " + app_id_);
  }

  // --- workflows ---
  Status StoreWorkflowRun(const WorkflowRecord& run) override {
    return Checked(
               client_->Eval(StoreRunScript(), {p_},
                             {run.workflow_id.str(), run.workflow_type.str(), PackWorkflow(run)}))
        .status();
  }

  Result<std::vector<TaskId>> WorkflowTypes() override {
    Result<Value> v = Checked(client_->Command({"SMEMBERS", p_ + "wftypes"}));
    if (!v.ok()) return v.status();
    std::vector<std::string> types;
    for (const Value& e : v.value().elements) types.push_back(e.str);
    std::sort(types.begin(), types.end());
    std::vector<TaskId> out;
    for (std::string& t : types) out.emplace_back(std::move(t));
    return out;
  }

  Result<std::vector<WorkflowRecord>> WorkflowRuns(
      const std::optional<TaskId>& workflow_type) override {
    Result<Value> v = workflow_type
                          ? Checked(client_->Eval(RunsOfTypeScript(), {p_}, {workflow_type->str()}))
                          : Checked(client_->Command({"HVALS", p_ + "wfruns"}));
    if (!v.ok()) return v.status();
    std::vector<WorkflowRecord> out;
    for (const Value& e : v.value().elements) {
      if (e.is_nil()) continue;
      std::optional<WorkflowRecord> w = UnpackWorkflow(e.str);
      if (!w) return Corrupt("workflow run");
      out.push_back(*std::move(w));
    }
    std::sort(out.begin(), out.end(), [](const WorkflowRecord& a, const WorkflowRecord& b) {
      return a.workflow_id.str() < b.workflow_id.str();
    });
    return out;
  }

  Status StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                    const InvocationId& sub_invocation) override {
    return Checked(client_->Eval(StoreSubScript(), {p_}, {workflow.str(), sub_invocation.str()}))
        .status();
  }

  Result<std::vector<InvocationId>> WorkflowSubInvocations(const WorkflowId& workflow) override {
    return IdList({"ZRANGE", p_ + "wfsub:" + workflow.str(), "0", "-1"});
  }

  Status SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                         const std::string& value) override {
    return Checked(client_->Command({"HSET", p_ + "wfdata:" + workflow.str(), key, value}))
        .status();
  }

  Result<std::string> GetWorkflowData(const WorkflowId& workflow, const std::string& key) override {
    return HashGet(p_ + "wfdata:" + workflow.str(), key,
                   "no workflow data '" + key + "' for workflow " + workflow.str());
  }

  // Unlinks the keys an earlier layout kept and this one does not (P hinv:<id>:
  // each invocation's history positions, which P hkey:<id> holds too), by one
  // SCAN of the app's history keys, then marks the app's layout (P layout = 2)
  // so that later opens skip the scan.
  Status DropRetiredKeys() {
    const std::string marker = p_ + "layout";
    Result<Value> seen = Checked(client_->Command({"GET", marker}));
    if (!seen.ok()) return seen.status();
    if (seen.value().type == Value::Type::kString && seen.value().str == kLayout) {
      return Status::Ok();
    }
    Status dropped = UnlinkMatching(GlobEscape(p_ + "hinv:") + "*", {});
    if (!dropped.ok()) return dropped;
    return Checked(client_->Command({"SET", marker, kLayout})).status();
  }

  // SCAN over this app's state keys (never KEYS), deleted with UNLINK batch by
  // batch. The order counters and the layout mark are kept so orders stay
  // monotonic across purges.
  // Writes racing with a purge may survive it, as with any purge.
  Status Purge() override {
    return UnlinkMatching(GlobEscape(p_) + "*", {p_ + "seq", p_ + "hseq", p_ + "layout"});
  }

 private:
  // Unlinks every key matching the SCAN pattern `match` but those in `keep`,
  // one SCAN batch at a time (never KEYS).
  Status UnlinkMatching(const std::string& match, const std::vector<std::string>& keep) {
    std::string cursor = "0";
    do {
      Result<Value> v =
          Checked(client_->Command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"}));
      if (!v.ok()) return v.status();
      if (v.value().elements.size() != 2) return Corrupt("SCAN reply");
      cursor = v.value().elements[0].str;
      std::vector<std::string> argv = {"UNLINK"};
      for (const Value& k : v.value().elements[1].elements) {
        if (std::find(keep.begin(), keep.end(), k.str) == keep.end()) argv.push_back(k.str);
      }
      if (argv.size() > 1) {
        Status s = Checked(client_->Command(argv)).status();
        if (!s.ok()) return s;
      }
    } while (cursor != "0");
    return Status::Ok();
  }

  // A Redis error reply becomes kBackendFailure with the server's message.
  Result<Value> Checked(Result<Value> v) const {
    if (!v.ok()) return v.status();
    if (v.value().is_error()) {
      return Status::BackendFailure("redis state backend at " + client_->Describe() + ": " +
                                    v.value().str);
    }
    return v;
  }

  Status Corrupt(const std::string& what) const {
    return Status::BackendFailure("redis state backend at " + client_->Describe() +
                                  ": malformed stored " + what);
  }

  Result<std::vector<InvocationId>> IdList(const std::vector<std::string>& argv) {
    Result<Value> v = Checked(client_->Command(argv));
    if (!v.ok()) return v.status();
    return ToIds(v.value());
  }

  Result<std::string> HashGet(const std::string& key, const std::string& field,
                              const std::string& not_found) {
    Result<Value> v = Checked(client_->Command({"HGET", key, field}));
    if (!v.ok()) return v.status();
    if (v.value().is_nil()) return Status::NotFound(not_found);
    return std::move(v).value().str;
  }

  // {members, values} -> records. A member is pos+id, or pos alone when `id` is given.
  Result<std::vector<HistoryRecord>> Histories(const Value& reply, const InvocationId* id) const {
    std::vector<HistoryRecord> out;
    if (reply.elements.size() != 2 ||
        reply.elements[0].elements.size() < reply.elements[1].elements.size()) {
      return Corrupt("history reply");
    }
    const auto& members = reply.elements[0].elements;
    const auto& values = reply.elements[1].elements;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::string& m = members[i].str;
      if (m.size() < kPosLen || values[i].is_nil()) return Corrupt("history entry");
      std::optional<HistoryRecord> r =
          UnpackHistory(m.substr(0, kPosLen), id ? id->str() : m.substr(kPosLen), values[i].str);
      if (!r) return Corrupt("history entry");
      out.push_back(*std::move(r));
    }
    return out;
  }

  const std::shared_ptr<Client> client_;
  const std::string app_id_;
  const std::string p_;
};

}  // namespace

std::string HistoryPositionPrefix(TimestampUs ts) { return EncodeTs(ts); }

const char* StateLuaFragments() { return kStateFragments; }

std::vector<std::string> UpsertFields(const InvocationRecord& r) {
  auto opt = [](const std::optional<std::string>& v) { return v ? "=" + *v : std::string(); };
  return {PackInvocation(r), opt(OptStr(r.parent_invocation_id)), opt(r.parent_event_id),
          r.workflow ? "=" + r.workflow->workflow_id.str() : std::string(),
          r.workflow ? "=" + r.workflow->workflow_type.str() : std::string()};
}
std::string HistoryValue(const HistoryRecord& r) { return PackHistoryValue(r); }
std::optional<InvocationRecord> ParseInvocationRecord(const std::string& packed) {
  return UnpackInvocation(packed);
}

Result<std::unique_ptr<StateBackend>> NewRedisStateBackend(std::shared_ptr<Client> client,
                                                           const BackendConfig& config) {
  if (config.app_id.empty()) return Status::BadConfig("the redis state backend needs an app_id");
  std::unique_ptr<RedisStateBackend> backend(new RedisStateBackend(std::move(client), config));
  // Best effort: nothing reads those keys, so a failure (the server unreachable
  // for a moment) only leaves them, and the mark, for the next open.
  (void)backend->DropRetiredKeys();
  return std::unique_ptr<StateBackend>(std::move(backend));
}

Result<std::vector<std::pair<std::string, std::string>>> RedisDiscoverAppInfos(
    const std::shared_ptr<Client>& client) {
  Result<Value> v = client->Command({"HGETALL", kAppInfosKey});
  if (!v.ok()) return v.status();
  if (v.value().is_error()) {
    return Status::BackendFailure("redis app-info discovery at " + client->Describe() + ": " +
                                  v.value().str);
  }
  std::vector<std::pair<std::string, std::string>> out;
  const auto& e = v.value().elements;
  for (std::size_t i = 0; i + 1 < e.size(); i += 2) out.emplace_back(e[i].str, e[i + 1].str);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pynenc_cpp::redis
