// In-memory trigger store: trigger runs, their relation indexes, and the
// retention primitives (age and capacity purges, cascades).
#include <algorithm>

#include "mem/mem_trigger_store_impl.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp {
namespace mem_trigger {
namespace {

void AddToIndex(std::unordered_map<std::string, std::unordered_set<std::string>>& index,
                const std::string& key, const std::string& run_id) {
  index[key].insert(run_id);
}

void EraseFromIndex(std::unordered_map<std::string, std::unordered_set<std::string>>& index,
                    const std::string& key, const std::string& run_id) {
  auto it = index.find(key);
  if (it == index.end()) return;
  it->second.erase(run_id);
  if (it->second.empty()) index.erase(it);
}

}  // namespace

void MemTriggerStore::IndexRunLocked(const TriggerRunRow& run) {
  const std::string& id = run.trigger_run_id;
  runs_by_time_.insert({RunTime(run), id});
  for (const std::string& e : run.event_ids) AddToIndex(runs_by_event_, e, id);
  if (run.triggered_invocation_id)
    AddToIndex(runs_by_invocation_, *run.triggered_invocation_id, id);
  for (const std::string& s : run.source_invocation_ids) AddToIndex(runs_by_source_, s, id);
  for (const std::string& v : run.valid_condition_ids) AddToIndex(runs_by_valid_condition_, v, id);
}

void MemTriggerStore::EraseRunLocked(const std::string& trigger_run_id) {
  auto it = runs_.find(trigger_run_id);
  if (it == runs_.end()) return;
  const TriggerRunRow& run = it->second;
  const std::string& id = run.trigger_run_id;
  runs_by_time_.erase({RunTime(run), id});
  for (const std::string& e : run.event_ids) EraseFromIndex(runs_by_event_, e, id);
  if (run.triggered_invocation_id) {
    EraseFromIndex(runs_by_invocation_, *run.triggered_invocation_id, id);
  }
  for (const std::string& s : run.source_invocation_ids) EraseFromIndex(runs_by_source_, s, id);
  for (const std::string& v : run.valid_condition_ids) {
    EraseFromIndex(runs_by_valid_condition_, v, id);
  }
  runs_.erase(it);
}

std::vector<std::string> MemTriggerStore::RunsFromIndexLocked(const IdIndex& index,
                                                              const std::string& key) const {
  std::vector<TimeKey> keys;
  if (auto it = index.find(key); it != index.end()) {
    for (const std::string& id : it->second) keys.push_back({RunTime(runs_.at(id)), id});
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const TimeKey& k : keys) out.push_back(runs_.at(k.second).json);
  return out;
}

Status MemTriggerStore::StoreTriggerRun(const TriggerRunRow& run) {
  MutexLock lock(mu_);
  EraseRunLocked(run.trigger_run_id);
  IndexRunLocked(run);
  runs_[run.trigger_run_id] = run;
  return Status::Ok();
}

Result<std::optional<std::string>> MemTriggerStore::GetTriggerRun(
    const std::string& trigger_run_id) {
  MutexLock lock(mu_);
  auto it = runs_.find(trigger_run_id);
  if (it == runs_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second.json);
}

Result<std::vector<std::string>> MemTriggerStore::RunsForEvent(const std::string& event_id) {
  MutexLock lock(mu_);
  return RunsFromIndexLocked(runs_by_event_, event_id);
}

Result<std::vector<std::string>> MemTriggerStore::RunsForInvocation(
    const std::string& invocation_id) {
  MutexLock lock(mu_);
  return RunsFromIndexLocked(runs_by_invocation_, invocation_id);
}

Result<std::vector<std::string>> MemTriggerStore::RunsSourcedByInvocation(
    const std::string& invocation_id) {
  MutexLock lock(mu_);
  return RunsFromIndexLocked(runs_by_source_, invocation_id);
}

Result<std::vector<std::string>> MemTriggerStore::RunsForValidCondition(
    const std::string& valid_condition_id) {
  MutexLock lock(mu_);
  return RunsFromIndexLocked(runs_by_valid_condition_, valid_condition_id);
}

Result<std::vector<std::string>> MemTriggerStore::RunsInTimeRange(const TriggerRunFilter& filter) {
  if (filter.limit && *filter.limit < 0) {
    return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(*filter.limit));
  }
  MutexLock lock(mu_);
  std::vector<std::string> out;
  // Runs without a time (kNoTime) never match: start the walk after them.
  const TimestampUs start = std::max(filter.start_us, kNoTime + 1);
  for (auto it = runs_by_time_.lower_bound({start, std::string()}); it != runs_by_time_.end();
       ++it) {
    if (it->first > filter.end_us) break;
    if (filter.limit && static_cast<std::int64_t>(out.size()) >= *filter.limit) break;
    const TriggerRunRow& run = runs_.at(it->second);
    if (filter.task_id_key && run.task_id_key != *filter.task_id_key) continue;
    if (filter.event_code) {
      auto has_code = [&](const auto& e) PYNENC_REQUIRES(mu_) {
        auto ev = events_.find(e);
        return ev != events_.end() && ev->second.event_code == *filter.event_code;
      };
      if (!std::any_of(run.event_ids.begin(), run.event_ids.end(), has_code)) continue;
    }
    out.push_back(run.json);
  }
  return out;
}

Result<std::vector<std::string>> MemTriggerStore::ReferencedAtomicServiceRunIds() {
  MutexLock lock(mu_);
  std::set<std::string> ids;
  for (const auto& [id, run] : runs_) {
    if (run.atomic_service_run_id && !run.atomic_service_run_id->empty()) {
      ids.insert(*run.atomic_service_run_id);
    }
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

// ---- Retention -------------------------------------------------------------

Result<std::vector<std::string>> MemTriggerStore::AgePurgeEvents(TimestampUs threshold_us) {
  MutexLock lock(mu_);
  std::vector<std::string> removed;
  for (auto it = events_by_time_.begin(); it != events_by_time_.end() && it->first < threshold_us;
       ++it) {
    removed.push_back(it->second);
  }
  for (const std::string& id : removed) EraseEventLocked(id);
  return removed;
}

Result<std::int64_t> MemTriggerStore::AgePurgeTriggerRuns(TimestampUs threshold_us) {
  MutexLock lock(mu_);
  std::vector<std::string> removed;
  for (auto it = runs_by_time_.lower_bound({kNoTime + 1, std::string()});
       it != runs_by_time_.end() && it->first < threshold_us; ++it) {
    removed.push_back(it->second);
  }
  for (const std::string& id : removed) EraseRunLocked(id);
  return static_cast<std::int64_t>(removed.size());
}

Result<std::vector<std::string>> MemTriggerStore::CapPurgeEvents(std::int64_t max_records) {
  MutexLock lock(mu_);
  std::vector<std::string> removed;
  if (max_records <= 0) return removed;
  std::int64_t kept = 0;
  for (auto it = events_by_time_.rbegin(); it != events_by_time_.rend(); ++it) {
    if (kept < max_records) {
      ++kept;
    } else {
      removed.push_back(it->second);
    }
  }
  for (const std::string& id : removed) EraseEventLocked(id);
  return removed;
}

Result<std::int64_t> MemTriggerStore::CapPurgeTriggerRuns(std::int64_t max_records) {
  MutexLock lock(mu_);
  if (max_records <= 0 || static_cast<std::int64_t>(runs_.size()) <= max_records) return 0;
  std::vector<std::string> removed;
  std::int64_t kept = 0;
  for (auto it = runs_by_time_.rbegin(); it != runs_by_time_.rend(); ++it) {
    if (kept < max_records) {
      ++kept;
    } else {
      removed.push_back(it->second);
    }
  }
  for (const std::string& id : removed) EraseRunLocked(id);
  return static_cast<std::int64_t>(removed.size());
}

Result<std::int64_t> MemTriggerStore::CascadeDeleteRunsForEvents(
    const std::vector<std::string>& event_ids) {
  MutexLock lock(mu_);
  std::set<std::string> doomed;
  for (const std::string& event_id : event_ids) {
    if (auto it = runs_by_event_.find(event_id); it != runs_by_event_.end()) {
      doomed.insert(it->second.begin(), it->second.end());
    }
  }
  for (const std::string& id : doomed) EraseRunLocked(id);
  return static_cast<std::int64_t>(doomed.size());
}

}  // namespace mem_trigger
}  // namespace pynenc_cpp
