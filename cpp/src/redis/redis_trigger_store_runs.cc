// Redis trigger store: trigger runs, their relation indexes, and the run
// retention primitives (age and capacity purges, cascades).
#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

#include "redis/redis_trigger_store_impl.h"

namespace pynenc_cpp {
namespace redis_trigger {
namespace {

using redis::Value;
constexpr TimestampUs kNoTime = std::numeric_limits<TimestampUs>::min();

Status CorruptRun(const std::string& id) {
  return Status::BackendFailure("redis trigger store: undecodable trigger run " + id);
}

}  // namespace

TimestampUs RunTime(const TriggerRunRow& run) {
  if (run.executed_at_us) return *run.executed_at_us;
  if (run.claimed_at_us) return *run.claimed_at_us;
  return kNoTime;
}

std::string EncodeRun(const TriggerRunRow& row) {
  Writer w;
  w.Str(row.trigger_run_id);
  w.Str(row.trigger_id);
  w.Str(row.task_id_key);
  w.Str(row.logic);
  w.OptInt(row.claimed_at_us);
  w.OptInt(row.executed_at_us);
  w.Opt(row.triggered_invocation_id);
  w.Opt(row.atomic_service_run_id);
  w.Str(row.json);
  w.List(row.event_ids);
  w.List(row.source_invocation_ids);
  w.List(row.valid_condition_ids);
  return w.Take();
}

bool DecodeRun(const std::string& blob, TriggerRunRow* row) {
  Reader r(blob);
  return r.Str(&row->trigger_run_id) && r.Str(&row->trigger_id) && r.Str(&row->task_id_key) &&
         r.Str(&row->logic) && r.OptInt(&row->claimed_at_us) && r.OptInt(&row->executed_at_us) &&
         r.Opt(&row->triggered_invocation_id) && r.Opt(&row->atomic_service_run_id) &&
         r.Str(&row->json) && r.List(&row->event_ids) && r.List(&row->source_invocation_ids) &&
         r.List(&row->valid_condition_ids) && r.Done();
}

void RedisTriggerStore::AddRunOps(const TriggerRunRow& row, const std::string& blob,
                                  Change* c) const {
  const std::string& id = row.trigger_run_id;
  c->Op({"HSET", K(redis::keys::kRun), id, blob});
  c->Op({"ZADD", K(redis::keys::kRunTime), "0", OrderKey(RunTime(row)) + id});
  for (const std::string& e : row.event_ids) c->Op({"SADD", K(redis::keys::kRunEv + e), id});
  if (row.triggered_invocation_id) {
    c->Op({"SADD", K(redis::keys::kRunInv + *row.triggered_invocation_id), id});
  }
  for (const std::string& s : row.source_invocation_ids)
    c->Op({"SADD", K(redis::keys::kRunSrc + s), id});
  for (const std::string& v : row.valid_condition_ids)
    c->Op({"SADD", K(redis::keys::kRunVc + v), id});
  if (row.atomic_service_run_id && !row.atomic_service_run_id->empty()) {
    c->Op({"HINCRDEL", K(redis::keys::kAsr), *row.atomic_service_run_id, "1"});
  }
}

void RedisTriggerStore::RemoveRunOps(const TriggerRunRow& row, const std::string& blob,
                                     Change* c) const {
  const std::string& id = row.trigger_run_id;
  c->guards.push_back({K(redis::keys::kRun), id, blob});
  c->Op({"HDEL", K(redis::keys::kRun), id});
  c->Op({"ZREM", K(redis::keys::kRunTime), OrderKey(RunTime(row)) + id});
  for (const std::string& e : row.event_ids) c->Op({"SREM", K(redis::keys::kRunEv + e), id});
  if (row.triggered_invocation_id) {
    c->Op({"SREM", K(redis::keys::kRunInv + *row.triggered_invocation_id), id});
  }
  for (const std::string& s : row.source_invocation_ids)
    c->Op({"SREM", K(redis::keys::kRunSrc + s), id});
  for (const std::string& v : row.valid_condition_ids)
    c->Op({"SREM", K(redis::keys::kRunVc + v), id});
  if (row.atomic_service_run_id && !row.atomic_service_run_id->empty()) {
    c->Op({"HINCRDEL", K(redis::keys::kAsr), *row.atomic_service_run_id, "-1"});
  }
}

Status RedisTriggerStore::StoreTriggerRun(const TriggerRunRow& run) {
  const std::string blob = EncodeRun(run);
  return ApplyWithRetry([&]() -> Result<Change> {
    Result<Value> old = Cmd({"HGET", K(redis::keys::kRun), run.trigger_run_id});
    if (!old.ok()) return old.status();
    Change c;
    if (old.value().is_nil()) {
      c.guards.push_back({K(redis::keys::kRun), run.trigger_run_id, std::nullopt});
    } else {
      TriggerRunRow prev;
      if (!DecodeRun(old.value().str, &prev)) return CorruptRun(run.trigger_run_id);
      RemoveRunOps(prev, old.value().str, &c);
    }
    AddRunOps(run, blob, &c);
    return c;
  });
}

Result<std::optional<std::string>> RedisTriggerStore::GetTriggerRun(
    const std::string& trigger_run_id) {
  Result<Value> r = Cmd({"HGET", K(redis::keys::kRun), trigger_run_id});
  if (!r.ok()) return r.status();
  if (r.value().is_nil()) return std::optional<std::string>();
  TriggerRunRow row;
  if (!DecodeRun(r.value().str, &row)) return CorruptRun(trigger_run_id);
  return std::optional<std::string>(row.json);
}

Result<std::vector<std::string>> RedisTriggerStore::RunsFromSet(const std::string& key) {
  Result<std::vector<std::string>> ids = SMembers(key);
  if (!ids.ok()) return ids.status();
  Result<std::vector<std::optional<std::string>>> blobs = HMGet(K(redis::keys::kRun), ids.value());
  if (!blobs.ok()) return blobs.status();
  std::vector<TriggerRunRow> rows;
  for (std::size_t i = 0; i < blobs.value().size(); ++i) {
    if (!blobs.value()[i]) continue;  // deleted between the two reads
    TriggerRunRow row;
    if (!DecodeRun(*blobs.value()[i], &row)) return CorruptRun(ids.value()[i]);
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const TriggerRunRow& a, const TriggerRunRow& b) {
    return std::make_pair(RunTime(a), a.trigger_run_id) <
           std::make_pair(RunTime(b), b.trigger_run_id);
  });
  std::vector<std::string> out;
  for (TriggerRunRow& row : rows) out.push_back(std::move(row.json));
  return out;
}

Result<std::vector<std::string>> RedisTriggerStore::RunsForEvent(const std::string& event_id) {
  return RunsFromSet(K(redis::keys::kRunEv + event_id));
}

Result<std::vector<std::string>> RedisTriggerStore::RunsForInvocation(
    const std::string& invocation_id) {
  return RunsFromSet(K(redis::keys::kRunInv + invocation_id));
}

Result<std::vector<std::string>> RedisTriggerStore::RunsSourcedByInvocation(
    const std::string& invocation_id) {
  return RunsFromSet(K(redis::keys::kRunSrc + invocation_id));
}

Result<std::vector<std::string>> RedisTriggerStore::RunsForValidCondition(
    const std::string& valid_condition_id) {
  return RunsFromSet(K(redis::keys::kRunVc + valid_condition_id));
}

Result<std::vector<std::string>> RedisTriggerStore::RunsInTimeRange(
    const TriggerRunFilter& filter) {
  if (filter.limit && *filter.limit < 0) {
    return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(*filter.limit));
  }
  std::vector<std::string> out;
  // Runs without a time (kNoTime) never match: start the range after them.
  const TimestampUs start = std::max(filter.start_us, kNoTime + 1);
  if (start > filter.end_us) return out;
  const std::string max = filter.end_us == std::numeric_limits<TimestampUs>::max()
                              ? "+"
                              : "(" + OrderKey(filter.end_us + 1);
  Result<Value> r = Cmd({"ZRANGEBYLEX", K(redis::keys::kRunTime), "[" + OrderKey(start), max});
  if (!r.ok()) return r.status();
  std::vector<std::string> ids;
  for (const Value& v : r.value().elements) ids.push_back(v.str.substr(kOrderKeyLen));
  Result<std::vector<std::optional<std::string>>> blobs = HMGet(K(redis::keys::kRun), ids);
  if (!blobs.ok()) return blobs.status();
  std::vector<TriggerRunRow> rows;
  std::set<std::string> event_ids;
  for (std::size_t i = 0; i < blobs.value().size(); ++i) {
    if (!blobs.value()[i]) continue;
    TriggerRunRow row;
    if (!DecodeRun(*blobs.value()[i], &row)) return CorruptRun(ids[i]);
    if (filter.task_id_key && row.task_id_key != *filter.task_id_key) continue;
    if (filter.event_code) event_ids.insert(row.event_ids.begin(), row.event_ids.end());
    rows.push_back(std::move(row));
  }
  std::unordered_map<std::string, std::string> code_of;
  if (filter.event_code && !event_ids.empty()) {
    std::vector<std::string> eids(event_ids.begin(), event_ids.end());
    Result<std::vector<std::optional<std::string>>> evs = HMGet(K(redis::keys::kEv), eids);
    if (!evs.ok()) return evs.status();
    for (std::size_t i = 0; i < eids.size(); ++i) {
      EventRow ev;
      if (evs.value()[i] && DecodeEvent(eids[i], *evs.value()[i], &ev)) {
        code_of[eids[i]] = ev.event_code;
      }
    }
  }
  for (TriggerRunRow& row : rows) {
    if (filter.limit && static_cast<std::int64_t>(out.size()) >= *filter.limit) break;
    if (filter.event_code) {
      bool touches = std::any_of(row.event_ids.begin(), row.event_ids.end(), [&](const auto& e) {
        auto it = code_of.find(e);
        return it != code_of.end() && it->second == *filter.event_code;
      });
      if (!touches) continue;
    }
    out.push_back(std::move(row.json));
  }
  return out;
}

Result<std::vector<std::string>> RedisTriggerStore::ReferencedAtomicServiceRunIds() {
  Result<Value> r = Cmd({"HKEYS", K(redis::keys::kAsr)});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const Value& v : r.value().elements) out.push_back(v.str);
  std::sort(out.begin(), out.end());
  return out;
}

// ---- Run retention ---------------------------------------------------------

Result<std::int64_t> RedisTriggerStore::DeleteRuns(const std::vector<std::string>& ids) {
  std::int64_t removed = 0;
  if (ids.empty()) return removed;
  Status s = ApplyWithRetry([&]() -> Result<Change> {
    Result<std::vector<std::optional<std::string>>> blobs = HMGet(K(redis::keys::kRun), ids);
    if (!blobs.ok()) return blobs.status();
    Change c;
    removed = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!blobs.value()[i]) continue;
      TriggerRunRow row;
      if (!DecodeRun(*blobs.value()[i], &row)) return CorruptRun(ids[i]);
      RemoveRunOps(row, *blobs.value()[i], &c);
      ++removed;
    }
    return c;
  });
  if (!s.ok()) return s;
  return removed;
}

Result<std::int64_t> RedisTriggerStore::AgePurgeTriggerRuns(TimestampUs threshold_us) {
  if (threshold_us <= kNoTime + 1) return std::int64_t{0};
  Result<Value> r = Cmd({"ZRANGEBYLEX", K(redis::keys::kRunTime), "[" + OrderKey(kNoTime + 1),
                         "(" + OrderKey(threshold_us)});
  if (!r.ok()) return r.status();
  std::vector<std::string> ids;
  for (const Value& v : r.value().elements) ids.push_back(v.str.substr(kOrderKeyLen));
  return DeleteRuns(ids);
}

Result<std::int64_t> RedisTriggerStore::CapPurgeTriggerRuns(std::int64_t max_records) {
  if (max_records <= 0) return std::int64_t{0};
  Result<Value> n = Cmd({"ZCARD", K(redis::keys::kRunTime)});
  if (!n.ok()) return n.status();
  if (n.value().integer <= max_records) return std::int64_t{0};
  Result<Value> r = Cmd({"ZRANGE", K(redis::keys::kRunTime), "0",
                         std::to_string(n.value().integer - max_records - 1)});
  if (!r.ok()) return r.status();
  std::vector<std::string> ids;
  for (const Value& v : r.value().elements) ids.push_back(v.str.substr(kOrderKeyLen));
  return DeleteRuns(ids);
}

Result<std::int64_t> RedisTriggerStore::CascadeDeleteRunsForEvents(
    const std::vector<std::string>& event_ids) {
  if (event_ids.empty()) return std::int64_t{0};
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& e : event_ids) cmds.push_back({"SMEMBERS", K(redis::keys::kRunEv + e)});
  Result<std::vector<Value>> replies = client_->Pipeline(cmds);
  if (!replies.ok()) return replies.status();
  std::set<std::string> doomed;
  for (const Value& v : replies.value()) {
    if (v.is_error()) return Status::BackendFailure("redis SMEMBERS failed: " + v.str);
    for (const Value& id : v.elements) doomed.insert(id.str);
  }
  return DeleteRuns(std::vector<std::string>(doomed.begin(), doomed.end()));
}

}  // namespace redis_trigger
}  // namespace pynenc_cpp
