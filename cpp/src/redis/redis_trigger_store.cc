// Redis trigger store: plumbing (codec, guarded apply), conditions, trigger
// definitions and the purge. Valid conditions, pending reports, cron and claims:
// redis_trigger_store_loop.cc; events: redis_trigger_store_events.cc; runs and
// retention: redis_trigger_store_runs.cc.
#include "redis/redis_trigger_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "redis/redis_keys.h"
#include "redis/redis_trigger_store_impl.h"

namespace pynenc_cpp {
namespace redis_trigger {
namespace {

using redis::MatchPrefix;
using redis::Value;

constexpr int kMaxAttempts = 100;

// ARGV: guard count, guards (key, field, '0' absent | '1' value, value), then
// ops as (argc, args...). Returns 1 if every guard held and the ops ran, else 0.
const redis::Script kApply(R"lua(
local i = 1
local ng = tonumber(ARGV[i]); i = i + 1
for g = 1, ng do
  local v = redis.call('HGET', ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] == '0' then
    if v then return 0 end
  elseif v ~= ARGV[i + 3] then
    return 0
  end
  i = i + 4
end
while i <= #ARGV do
  local n = tonumber(ARGV[i]); i = i + 1
  local op = ARGV[i]
  if op == 'ZADDSEQ' then
    if not redis.call('ZSCORE', ARGV[i + 1], ARGV[i + 2]) then
      redis.call('ZADD', ARGV[i + 1], redis.call('INCR', ARGV[i + 3]), ARGV[i + 2])
    end
  elseif op == 'WAKE' then
    -- WAKE waiters note-prefix: one note on each live waiter's list (a list of
    -- at most one note: a waiter needs to know that, not how often).
    local t = redis.call('TIME')
    redis.call('ZREMRANGEBYSCORE', ARGV[i + 1], '-inf', t[1] * 1000 + math.floor(t[2] / 1000))
    for _, w in ipairs(redis.call('ZRANGE', ARGV[i + 1], 0, -1)) do
      local nk = ARGV[i + 2] .. w
      redis.call('LPUSH', nk, '1')
      redis.call('LTRIM', nk, 0, 0)
      redis.call('PEXPIRE', nk, 60000)
    end
  elseif op == 'HINCRDEL' then
    if redis.call('HINCRBY', ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]) <= 0 then
      redis.call('HDEL', ARGV[i + 1], ARGV[i + 2])
    end
  else
    redis.call(unpack(ARGV, i, i + n - 1))
  end
  i = i + n
end
return 1
)lua");

std::string EncodeTrigger(const TriggerDefinitionRow& row) {
  Writer w;
  w.Str(row.task_id_key);
  w.List(row.condition_ids);
  w.Str(row.logic);
  w.Opt(row.argument_provider_json);
  return w.Take();
}

bool DecodeTrigger(const std::string& id, const std::string& blob, TriggerDefinitionRow* row) {
  Reader r(blob);
  row->trigger_id = id;
  return r.Str(&row->task_id_key) && r.List(&row->condition_ids) && r.Str(&row->logic) &&
         r.Opt(&row->argument_provider_json) && r.Done();
}

}  // namespace

Status Corrupt(const std::string& what) {
  return Status::BackendFailure("redis trigger store: undecodable record " + what);
}

// ---- Codec -----------------------------------------------------------------

std::string OrderKey(std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v) ^ (std::uint64_t{1} << 63);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(u));
  return buf;
}

void Writer::Str(const std::string& s) {
  out_ += std::to_string(s.size());
  out_ += ':';
  out_ += s;
}
void Writer::Opt(const std::optional<std::string>& s) {
  if (!s) {
    out_ += '-';
    return;
  }
  out_ += '+';
  Str(*s);
}
void Writer::OptInt(const std::optional<std::int64_t>& v) {
  Opt(v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt);
}
void Writer::List(const std::vector<std::string>& v) {
  Int(static_cast<std::int64_t>(v.size()));
  for (const std::string& s : v) Str(s);
}

bool Reader::Str(std::string* s) {
  std::size_t colon = in_.find(':', pos_);
  if (colon == std::string::npos || colon == pos_) return false;
  std::size_t len = 0;
  for (std::size_t i = pos_; i < colon; ++i) {
    if (in_[i] < '0' || in_[i] > '9') return false;
    len = len * 10 + static_cast<std::size_t>(in_[i] - '0');
  }
  if (colon + 1 + len > in_.size()) return false;
  *s = in_.substr(colon + 1, len);
  pos_ = colon + 1 + len;
  return true;
}
bool Reader::Opt(std::optional<std::string>* s) {
  if (pos_ >= in_.size()) return false;
  const char tag = in_[pos_++];
  if (tag == '-') {
    s->reset();
    return true;
  }
  if (tag != '+') return false;
  std::string v;
  if (!Str(&v)) return false;
  *s = std::move(v);
  return true;
}
bool Reader::Int(std::int64_t* v) {
  std::string s;
  if (!Str(&s)) return false;
  try {
    std::size_t used = 0;
    *v = std::stoll(s, &used);
    return used == s.size();
  } catch (...) {
    return false;
  }
}
bool Reader::OptInt(std::optional<std::int64_t>* v) {
  std::optional<std::string> s;
  if (!Opt(&s)) return false;
  if (!s) {
    v->reset();
    return true;
  }
  try {
    *v = std::stoll(*s);
  } catch (...) {
    return false;
  }
  return true;
}
bool Reader::List(std::vector<std::string>* v) {
  std::int64_t n = 0;
  if (!Int(&n) || n < 0) return false;
  v->clear();
  for (std::int64_t i = 0; i < n; ++i) {
    std::string s;
    if (!Str(&s)) return false;
    v->push_back(std::move(s));
  }
  return true;
}

// ---- Plumbing --------------------------------------------------------------

Result<Value> RedisTriggerStore::Cmd(const std::vector<std::string>& argv) {
  Result<Value> r = client_->Command(argv);
  if (!r.ok()) return r.status();
  if (r.value().is_error()) {
    return Status::BackendFailure("redis " + argv[0] + " failed on " + client_->Describe() + ": " +
                                  r.value().str);
  }
  return r;
}

Result<bool> RedisTriggerStore::Apply(const Change& change) {
  std::vector<std::string> args;
  args.push_back(std::to_string(change.guards.size()));
  for (const Guard& g : change.guards) {
    args.push_back(g.key);
    args.push_back(g.field);
    args.push_back(g.value ? "1" : "0");
    args.push_back(g.value ? *g.value : std::string());
  }
  for (const auto& op : change.ops) {
    args.push_back(std::to_string(op.size()));
    args.insert(args.end(), op.begin(), op.end());
  }
  Result<Value> r = client_->Eval(kApply, {K(redis::keys::kSeq)}, args);
  if (!r.ok()) return r.status();
  if (r.value().is_error()) {
    return Status::BackendFailure("redis trigger script failed on " + client_->Describe() + ": " +
                                  r.value().str);
  }
  return r.value().integer == 1;
}

Status RedisTriggerStore::ApplyWithRetry(const std::function<Result<Change>()>& build) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    Result<Change> change = build();
    if (!change.ok()) return change.status();
    Result<bool> applied = Apply(change.value());
    if (!applied.ok()) return applied.status();
    if (applied.value()) return Status::Ok();
  }
  return Status::BackendFailure("redis trigger store: write still contended after " +
                                std::to_string(kMaxAttempts) + " attempts");
}

Result<std::vector<std::optional<std::string>>> RedisTriggerStore::HMGet(
    const std::string& key, const std::vector<std::string>& fields) {
  std::vector<std::optional<std::string>> out;
  if (fields.empty()) return out;
  std::vector<std::string> argv{"HMGET", key};
  argv.insert(argv.end(), fields.begin(), fields.end());
  Result<Value> r = Cmd(argv);
  if (!r.ok()) return r.status();
  for (const Value& v : r.value().elements) {
    out.push_back(v.is_nil() ? std::nullopt : std::optional<std::string>(v.str));
  }
  return out;
}

Result<std::vector<std::string>> RedisTriggerStore::ZMembers(const std::string& key) {
  Result<Value> r = Cmd({"ZRANGE", key, "0", "-1"});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const Value& v : r.value().elements) out.push_back(v.str);
  return out;
}

Result<std::vector<std::string>> RedisTriggerStore::SMembers(const std::string& key) {
  Result<Value> r = Cmd({"SMEMBERS", key});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const Value& v : r.value().elements) out.push_back(v.str);
  return out;
}

// ---- Conditions ------------------------------------------------------------

Status RedisTriggerStore::RegisterCondition(const std::string& condition_id,
                                            const std::string& json,
                                            const std::string& context_type) {
  Change c;
  c.Op({"HSET", K(redis::keys::kCond), condition_id, json});
  c.Op({"HSET", K(redis::keys::kCondCtx), condition_id, context_type});
  c.Op({"ZADDSEQ", K(redis::keys::kCondOrder), condition_id, K(redis::keys::kSeq)});
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::optional<std::string>> RedisTriggerStore::GetCondition(
    const std::string& condition_id) {
  Result<Value> r = Cmd({"HGET", K(redis::keys::kCond), condition_id});
  if (!r.ok()) return r.status();
  if (r.value().is_nil()) return std::optional<std::string>();
  return std::optional<std::string>(r.value().str);
}

Result<std::vector<std::string>> RedisTriggerStore::AllConditions() {
  Result<std::vector<std::string>> ids = ZMembers(K(redis::keys::kCondOrder));
  if (!ids.ok()) return ids.status();
  Result<std::vector<std::optional<std::string>>> jsons = HMGet(K(redis::keys::kCond), ids.value());
  if (!jsons.ok()) return jsons.status();
  std::vector<std::string> out;
  for (const auto& j : jsons.value()) {
    if (j) out.push_back(*j);
  }
  return out;
}

Status RedisTriggerStore::RegisterSourceTaskCondition(const std::string& task_id_key,
                                                      const std::string& condition_id) {
  Change c;
  c.Op({"ZADDSEQ", K(redis::keys::kSrc + task_id_key), condition_id, K(redis::keys::kSeq)});
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<std::string>> RedisTriggerStore::ConditionsSourcedFromTask(
    const std::string& task_id_key, const std::optional<std::string>& context_type) {
  Result<std::vector<std::string>> ids = ZMembers(K(redis::keys::kSrc + task_id_key));
  if (!ids.ok()) return ids.status();
  std::vector<std::string> out;
  if (ids.value().empty()) return out;
  std::vector<std::string> a{"HMGET", K(redis::keys::kCond)}, b{"HMGET", K(redis::keys::kCondCtx)};
  a.insert(a.end(), ids.value().begin(), ids.value().end());
  b.insert(b.end(), ids.value().begin(), ids.value().end());
  Result<std::vector<Value>> replies = client_->Pipeline({a, b});
  if (!replies.ok()) return replies.status();
  for (const Value& v : replies.value()) {
    if (v.is_error()) return Status::BackendFailure("redis HMGET failed: " + v.str);
  }
  const auto& jsons = replies.value()[0].elements;
  const auto& ctxs = replies.value()[1].elements;
  for (std::size_t i = 0; i < jsons.size() && i < ctxs.size(); ++i) {
    if (jsons[i].is_nil()) continue;
    if (context_type && (ctxs[i].is_nil() || ctxs[i].str != *context_type)) continue;
    out.push_back(jsons[i].str);
  }
  return out;
}

// ---- Trigger definitions ---------------------------------------------------

Status RedisTriggerStore::RegisterTrigger(const TriggerDefinitionRow& trigger) {
  TriggerDefinitionRow row = trigger;
  row.condition_ids.clear();
  std::set<std::string> seen;
  for (const std::string& id : trigger.condition_ids) {
    if (seen.insert(id).second) row.condition_ids.push_back(id);
  }
  const std::string blob = EncodeTrigger(row);
  return ApplyWithRetry([&]() -> Result<Change> {
    Result<Value> old = Cmd({"HGET", K(redis::keys::kTrig), row.trigger_id});
    if (!old.ok()) return old.status();
    Change c;
    if (old.value().is_nil()) {
      c.guards.push_back({K(redis::keys::kTrig), row.trigger_id, std::nullopt});
    } else {
      TriggerDefinitionRow prev;
      if (!DecodeTrigger(row.trigger_id, old.value().str, &prev)) return Corrupt("trigger");
      c.guards.push_back({K(redis::keys::kTrig), row.trigger_id, old.value().str});
      for (const std::string& cond : prev.condition_ids) {
        c.Op({"ZREM", K(redis::keys::kCtrig + cond), row.trigger_id});
      }
      c.Op({"SREM", K(redis::keys::kTtask + prev.task_id_key), row.trigger_id});
    }
    for (const std::string& cond : row.condition_ids) {
      c.Op({"ZADDSEQ", K(redis::keys::kCtrig + cond), row.trigger_id, K(redis::keys::kSeq)});
    }
    c.Op({"SADD", K(redis::keys::kTtask + row.task_id_key), row.trigger_id});
    c.Op({"HSET", K(redis::keys::kTrig), row.trigger_id, blob});
    return c;
  });
}

Result<std::optional<TriggerDefinitionRow>> RedisTriggerStore::GetTrigger(
    const std::string& trigger_id) {
  Result<Value> r = Cmd({"HGET", K(redis::keys::kTrig), trigger_id});
  if (!r.ok()) return r.status();
  if (r.value().is_nil()) return std::optional<TriggerDefinitionRow>();
  TriggerDefinitionRow row;
  if (!DecodeTrigger(trigger_id, r.value().str, &row)) return Corrupt("trigger " + trigger_id);
  return std::optional<TriggerDefinitionRow>(std::move(row));
}

Result<std::vector<TriggerDefinitionRow>> RedisTriggerStore::TriggersForCondition(
    const std::string& condition_id) {
  Result<std::vector<std::string>> ids = ZMembers(K(redis::keys::kCtrig + condition_id));
  if (!ids.ok()) return ids.status();
  Result<std::vector<std::optional<std::string>>> blobs = HMGet(K(redis::keys::kTrig), ids.value());
  if (!blobs.ok()) return blobs.status();
  std::vector<TriggerDefinitionRow> out;
  for (std::size_t i = 0; i < blobs.value().size(); ++i) {
    if (!blobs.value()[i]) continue;
    TriggerDefinitionRow row;
    if (!DecodeTrigger(ids.value()[i], *blobs.value()[i], &row)) return Corrupt("trigger");
    out.push_back(std::move(row));
  }
  return out;
}

Result<std::int64_t> RedisTriggerStore::CleanTaskTriggers(const std::string& task_id_key) {
  std::int64_t removed = 0;
  Status s = ApplyWithRetry([&]() -> Result<Change> {
    Result<std::vector<std::string>> ids = SMembers(K(redis::keys::kTtask + task_id_key));
    if (!ids.ok()) return ids.status();
    Result<std::vector<std::optional<std::string>>> blobs =
        HMGet(K(redis::keys::kTrig), ids.value());
    if (!blobs.ok()) return blobs.status();
    Change c;
    removed = 0;
    for (std::size_t i = 0; i < ids.value().size(); ++i) {
      const std::string& id = ids.value()[i];
      c.Op({"SREM", K(redis::keys::kTtask + task_id_key), id});
      if (!blobs.value()[i]) continue;
      TriggerDefinitionRow row;
      if (!DecodeTrigger(id, *blobs.value()[i], &row)) return Corrupt("trigger");
      c.guards.push_back({K(redis::keys::kTrig), id, *blobs.value()[i]});
      for (const std::string& cond : row.condition_ids)
        c.Op({"ZREM", K(redis::keys::kCtrig + cond), id});
      c.Op({"HDEL", K(redis::keys::kTrig), id});
      ++removed;
    }
    return c;
  });
  if (!s.ok()) return s;
  return removed;
}

Status RedisTriggerStore::Purge() {
  std::string cursor = "0";
  const std::string pattern = MatchPrefix(p_);
  do {
    Result<Value> r = Cmd({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.elements.size() != 2) return Status::BackendFailure("redis SCAN: unexpected reply");
    cursor = v.elements[0].str;
    std::vector<std::string> del{"UNLINK"};
    for (const Value& key : v.elements[1].elements) del.push_back(key.str);
    if (del.size() > 1) {
      Result<Value> d = Cmd(del);
      if (!d.ok()) return d.status();
    }
  } while (cursor != "0");
  return Status::Ok();
}

}  // namespace redis_trigger

namespace redis {

const char* TriggerLuaWatched() {
  return R"lua(
local function trigger_watched(Pt, task, ctx, ctx2)
  local w, w2 = 0, 0
  for _, c in ipairs(redis.call('ZRANGE', Pt .. ${src} .. task, 0, -1)) do
    if redis.call('HEXISTS', Pt .. ${cond}, c) == 1 then
      local cc = redis.call('HGET', Pt .. ${cond_ctx}, c)
      if cc == ctx then w = 1 end
      if ctx2 and cc == ctx2 then w2 = 1 end
      if w == 1 and (not ctx2 or w2 == 1) then break end
    end
  end
  return w, w2
end
)lua";
}

}  // namespace redis

Result<std::unique_ptr<TriggerStore>> NewRedisTriggerStore(std::shared_ptr<redis::Client> client,
                                                           const BackendConfig& config) {
  return std::unique_ptr<TriggerStore>(std::make_unique<redis_trigger::RedisTriggerStore>(
      std::move(client), ClockOrReal(config),
      redis::KeyPrefix(config.app_id, redis::keys::kTrigger)));
}

}  // namespace pynenc_cpp
