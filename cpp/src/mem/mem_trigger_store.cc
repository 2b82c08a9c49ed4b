// In-memory trigger store: conditions, trigger definitions, valid conditions,
// cron last executions, trigger-run claims and the full purge. Events live in
// mem_trigger_store_events.cc, runs and retention in mem_trigger_store_runs.cc.
#include <algorithm>
#include <chrono>
#include <string>

#include "mem/mem_trigger_store_impl.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp {
namespace mem_trigger {
namespace {

constexpr std::int64_t kMicrosPerSecond = 1'000'000;
// Expired claims are swept after this many claims, so the table stays bounded.
constexpr std::uint64_t kClaimSweepInterval = 1024;
// Longest claim accepted (about 300 years); keeps now + expiration in range.
constexpr std::int64_t kMaxExpirationSeconds = 10'000'000'000;

}  // namespace

void OrderedIds::Erase(const std::string& id) {
  if (present_.erase(id) == 0) return;
  order_.erase(std::find(order_.begin(), order_.end(), id));
}

// ---- Conditions ------------------------------------------------------------

Status MemTriggerStore::RegisterCondition(const std::string& condition_id, const std::string& json,
                                          const std::string& context_type) {
  MutexLock lock(mu_);
  auto [it, inserted] = conditions_.try_emplace(condition_id);
  if (inserted) {
    it->second.seq = next_seq_++;
    condition_order_[it->second.seq] = condition_id;
  }
  it->second.json = json;
  it->second.context_type = context_type;
  return Status::Ok();
}

Result<std::optional<std::string>> MemTriggerStore::GetCondition(const std::string& condition_id) {
  MutexLock lock(mu_);
  auto it = conditions_.find(condition_id);
  if (it == conditions_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second.json);
}

Result<std::vector<std::string>> MemTriggerStore::AllConditions() {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  out.reserve(condition_order_.size());
  for (const auto& [seq, id] : condition_order_) out.push_back(conditions_.at(id).json);
  return out;
}

Status MemTriggerStore::RegisterSourceTaskCondition(const std::string& task_id_key,
                                                    const std::string& condition_id) {
  MutexLock lock(mu_);
  source_task_conditions_[task_id_key].Insert(condition_id);
  return Status::Ok();
}

Result<std::vector<std::string>> MemTriggerStore::ConditionsSourcedFromTask(
    const std::string& task_id_key, const std::optional<std::string>& context_type) {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  auto it = source_task_conditions_.find(task_id_key);
  if (it == source_task_conditions_.end()) return out;
  for (const std::string& id : it->second.items()) {
    auto cond = conditions_.find(id);
    if (cond == conditions_.end()) continue;
    if (context_type && cond->second.context_type != *context_type) continue;
    out.push_back(cond->second.json);
  }
  return out;
}

// ---- Trigger definitions ---------------------------------------------------

void MemTriggerStore::UnlinkTriggerLocked(const std::string& trigger_id) {
  auto it = triggers_.find(trigger_id);
  if (it == triggers_.end()) return;
  for (const std::string& condition_id : it->second.condition_ids) {
    auto links = condition_triggers_.find(condition_id);
    if (links == condition_triggers_.end()) continue;
    links->second.Erase(trigger_id);
    if (links->second.empty()) condition_triggers_.erase(links);
  }
}

Status MemTriggerStore::RegisterTrigger(const TriggerDefinitionRow& trigger) {
  TriggerDefinitionRow row = trigger;
  OrderedIds unique;
  for (const std::string& id : trigger.condition_ids) unique.Insert(id);
  row.condition_ids = unique.items();
  MutexLock lock(mu_);
  UnlinkTriggerLocked(row.trigger_id);
  for (const std::string& condition_id : row.condition_ids) {
    condition_triggers_[condition_id].Insert(row.trigger_id);
  }
  triggers_[row.trigger_id] = std::move(row);
  return Status::Ok();
}

Result<std::optional<TriggerDefinitionRow>> MemTriggerStore::GetTrigger(
    const std::string& trigger_id) {
  MutexLock lock(mu_);
  auto it = triggers_.find(trigger_id);
  if (it == triggers_.end()) return std::optional<TriggerDefinitionRow>();
  return std::optional<TriggerDefinitionRow>(it->second);
}

Result<std::vector<TriggerDefinitionRow>> MemTriggerStore::TriggersForCondition(
    const std::string& condition_id) {
  MutexLock lock(mu_);
  std::vector<TriggerDefinitionRow> out;
  auto it = condition_triggers_.find(condition_id);
  if (it == condition_triggers_.end()) return out;
  for (const std::string& trigger_id : it->second.items()) {
    auto trig = triggers_.find(trigger_id);
    if (trig != triggers_.end()) out.push_back(trig->second);
  }
  return out;
}

Result<std::int64_t> MemTriggerStore::CleanTaskTriggers(const std::string& task_id_key) {
  MutexLock lock(mu_);
  std::vector<std::string> doomed;
  for (const auto& [id, row] : triggers_) {
    if (row.task_id_key == task_id_key) doomed.push_back(id);
  }
  for (const std::string& id : doomed) {
    UnlinkTriggerLocked(id);
    triggers_.erase(id);
  }
  return static_cast<std::int64_t>(doomed.size());
}

// ---- Valid conditions ------------------------------------------------------

Status MemTriggerStore::RecordValidConditions(const std::vector<IdJson>& valid_conditions) {
  MutexLock lock(mu_);
  for (const IdJson& vc : valid_conditions) {
    auto [it, inserted] = valid_conditions_.try_emplace(vc.id);
    if (inserted) {
      it->second.seq = next_seq_++;
      valid_order_[it->second.seq] = vc.id;
    }
    it->second.json = vc.json;
  }
  if (!valid_conditions.empty()) {
    ++valid_recorded_;
    wake_cv_.notify_all();
  }
  return Status::Ok();
}

// ---- Pending reports -------------------------------------------------------

Status MemTriggerStore::NotePendingReports(const std::vector<IdJson>& notes) {
  MutexLock lock(mu_);
  for (const IdJson& note : notes) pending_reports_[note.id] = note.json;
  return Status::Ok();
}

Result<std::vector<IdJson>> MemTriggerStore::PendingReports() {
  MutexLock lock(mu_);
  std::vector<IdJson> out;
  out.reserve(pending_reports_.size());
  for (const auto& [id, json] : pending_reports_) out.push_back({id, json});
  return out;
}

Status MemTriggerStore::ClearPendingReports(const std::vector<std::string>& note_ids) {
  MutexLock lock(mu_);
  for (const std::string& id : note_ids) pending_reports_.erase(id);
  return Status::Ok();
}

Result<bool> MemTriggerStore::WaitValidConditions(std::string* cursor, TimestampUs timeout_us) {
  UniqueLock lock(mu_);
  const std::string now = std::to_string(valid_recorded_);
  if (cursor->empty()) {
    *cursor = now;
    return true;
  }
  if (*cursor == now) {
    // Longer waits are clamped (no time_point overflow): ~31 years.
    constexpr TimestampUs kMaxWaitUs = 1'000'000'000'000'000;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(std::clamp<TimestampUs>(timeout_us, 0, kMaxWaitUs));
    const std::uint64_t seen = valid_recorded_;
    wake_cv_.wait_until(lock.native(), deadline, [&]() PYNENC_REQUIRES(mu_) {
      return valid_recorded_ != seen;
    });
  }
  const std::string after = std::to_string(valid_recorded_);
  const bool woken = after != *cursor;
  *cursor = after;
  return woken;
}

Status MemTriggerStore::NudgeValidConditionsWaiter(const std::string& cursor) {
  (void)cursor;  // one process: every waiter of this store wakes
  MutexLock lock(mu_);
  ++valid_recorded_;
  wake_cv_.notify_all();
  return Status::Ok();
}

Result<std::vector<IdJson>> MemTriggerStore::ValidConditions() {
  MutexLock lock(mu_);
  std::vector<IdJson> out;
  out.reserve(valid_order_.size());
  for (const auto& [seq, id] : valid_order_) out.push_back({id, valid_conditions_.at(id).json});
  return out;
}

Status MemTriggerStore::ClearValidConditions(const std::vector<std::string>& valid_condition_ids) {
  MutexLock lock(mu_);
  for (const std::string& id : valid_condition_ids) {
    auto it = valid_conditions_.find(id);
    if (it == valid_conditions_.end()) continue;
    valid_order_.erase(it->second.seq);
    valid_conditions_.erase(it);
  }
  return Status::Ok();
}

// ---- Cron and claims -------------------------------------------------------

Result<std::optional<TimestampUs>> MemTriggerStore::LastCronExecution(
    const std::string& condition_id) {
  MutexLock lock(mu_);
  auto it = cron_.find(condition_id);
  if (it == cron_.end()) return std::optional<TimestampUs>();
  return std::optional<TimestampUs>(it->second);
}

Result<bool> MemTriggerStore::StoreLastCronExecution(const std::string& condition_id,
                                                     TimestampUs execution_us,
                                                     CronExpectation expected) {
  MutexLock lock(mu_);
  auto it = cron_.find(condition_id);
  switch (expected.kind) {
    case CronExpectation::Kind::kAny:
      break;
    case CronExpectation::Kind::kAbsent:
      if (it != cron_.end()) return false;
      break;
    case CronExpectation::Kind::kValue:
      if (it == cron_.end() || it->second != expected.value) return false;
      break;
  }
  cron_[condition_id] = execution_us;
  return true;
}

Result<bool> MemTriggerStore::ClaimTriggerRun(const std::string& trigger_run_id,
                                              std::int64_t expiration_seconds) {
  if (expiration_seconds < 0 || expiration_seconds > kMaxExpirationSeconds) {
    return Status::InvalidArgument("expiration_seconds must be in [0, 1e10], got " +
                                   std::to_string(expiration_seconds));
  }
  MutexLock lock(mu_);
  const TimestampUs now = clock_->NowMicros();
  if (++claims_since_sweep_ >= kClaimSweepInterval) {
    claims_since_sweep_ = 0;
    std::erase_if(claims_, [now](const auto& claim) { return claim.second <= now; });
  }
  auto it = claims_.find(trigger_run_id);
  if (it != claims_.end() && it->second > now) return false;
  claims_[trigger_run_id] = now + expiration_seconds * kMicrosPerSecond;
  return true;
}

Status MemTriggerStore::Purge() {
  MutexLock lock(mu_);
  conditions_.clear();
  condition_order_.clear();
  source_task_conditions_.clear();
  triggers_.clear();
  condition_triggers_.clear();
  valid_conditions_.clear();
  valid_order_.clear();
  pending_reports_.clear();
  cron_.clear();
  claims_.clear();
  events_.clear();
  events_by_time_.clear();
  events_by_code_.clear();
  events_by_emitter_.clear();
  links_.clear();
  runs_.clear();
  runs_by_time_.clear();
  runs_by_event_.clear();
  runs_by_invocation_.clear();
  runs_by_source_.clear();
  runs_by_valid_condition_.clear();
  return Status::Ok();
}

}  // namespace mem_trigger

std::unique_ptr<TriggerStore> NewMemTriggerStore(const BackendConfig& config) {
  return std::make_unique<mem_trigger::MemTriggerStore>(ClockOrReal(config));
}

}  // namespace pynenc_cpp
