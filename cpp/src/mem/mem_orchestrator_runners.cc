// In-memory orchestrator, part 2: runner heartbeats, the recovery queries and
// atomic-service execution rows. Layout and locking: mem_orchestrator_impl.h.
#include <algorithm>

#include "mem/mem_orchestrator_impl.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp::mem_orchestrator {

Status MemOrchestrator::RegisterHeartbeats(
    const std::vector<std::string>& runner_ids, bool can_run_atomic_service,
    const std::optional<std::vector<std::string>>& consumed_queues) {
  if (Status s = CheckRunnerIds(runner_ids); !s.ok()) return s;
  MutexLock lock(mu_);
  const TimestampUs now = clock_->NowMicros();
  for (const std::string& id : runner_ids) {
    auto [it, inserted] = runners_.try_emplace(id);
    RunnerRow& row = it->second;
    if (inserted) row.creation_us = now;
    row.last_heartbeat_us = now;
    row.can_run_atomic_service = can_run_atomic_service;
    if (consumed_queues) row.consumed_queues = *consumed_queues;
  }
  return Status::Ok();
}

Status MemOrchestrator::DeregisterRunners(const std::vector<std::string>& runner_ids) {
  MutexLock lock(mu_);
  for (const std::string& id : runner_ids) runners_.erase(id);
  return Status::Ok();
}

Result<std::vector<RunnerInfo>> MemOrchestrator::ActiveRunners(
    TimestampUs timeout_us, std::optional<bool> can_run_atomic_service) {
  MutexLock lock(mu_);
  const TimestampUs cutoff = clock_->NowMicros() - timeout_us;
  std::vector<RunnerInfo> out;
  for (const auto& [id, row] : runners_) {
    if (row.last_heartbeat_us < cutoff) continue;
    if (can_run_atomic_service && row.can_run_atomic_service != *can_run_atomic_service) continue;
    out.push_back(RunnerInfo{id, row.creation_us, row.last_heartbeat_us, row.can_run_atomic_service,
                             row.consumed_queues});
  }
  std::sort(out.begin(), out.end(), [](const RunnerInfo& a, const RunnerInfo& b) {
    if (a.creation_us != b.creation_us) return a.creation_us < b.creation_us;
    return a.runner_id < b.runner_id;
  });
  return out;
}

Result<std::vector<InvocationId>> MemOrchestrator::PendingForRecovery(TimestampUs max_pending_us) {
  MutexLock lock(mu_);
  const TimestampUs cutoff = clock_->NowMicros() - max_pending_us;
  std::vector<InvocationId> out;
  for (Seq seq : by_status_[static_cast<std::size_t>(InvocationStatus::kPending)]) {
    const InvocationId& id = by_seq_.at(seq);
    if (rows_.at(id).status.timestamp_us <= cutoff) out.push_back(id);
  }
  return out;
}

std::vector<InvocationId> MemOrchestrator::OwnerDeadLocked(InvocationStatus status,
                                                           TimestampUs heartbeat_timeout_us,
                                                           bool missing_is_dead) const {
  const TimestampUs cutoff = clock_->NowMicros() - heartbeat_timeout_us;
  std::vector<InvocationId> out;
  for (Seq seq : by_status_[static_cast<std::size_t>(status)]) {
    const InvocationId& id = by_seq_.at(seq);
    const std::optional<std::string>& owner = rows_.at(id).status.runner_id;
    if (!owner || owner->empty()) continue;
    auto runner = runners_.find(*owner);
    const bool dead = runner == runners_.end() ? missing_is_dead
                                               : runner->second.last_heartbeat_us < cutoff;
    if (dead) out.push_back(id);
  }
  return out;
}

Result<std::vector<InvocationId>> MemOrchestrator::RunningForRecovery(
    TimestampUs heartbeat_timeout_us) {
  MutexLock lock(mu_);
  return OwnerDeadLocked(InvocationStatus::kRunning, heartbeat_timeout_us, true);
}

Result<std::vector<InvocationId>> MemOrchestrator::PendingOfDeadRunners(
    TimestampUs heartbeat_timeout_us) {
  MutexLock lock(mu_);
  return OwnerDeadLocked(InvocationStatus::kPending, heartbeat_timeout_us, false);
}

std::vector<const ExecutionRow*> MemOrchestrator::ExecutionsNewestFirstLocked() const {
  std::vector<const ExecutionRow*> rows;
  rows.reserve(executions_.size());
  for (const auto& [run_id, row] : executions_) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [](const ExecutionRow* a, const ExecutionRow* b) {
    if (a->execution.start_us != b->execution.start_us) {
      return a->execution.start_us > b->execution.start_us;
    }
    return a->seq > b->seq;
  });
  return rows;
}

Result<AtomicServiceStart> MemOrchestrator::RecordAtomicServiceStart(
    const std::string& runner_id, const std::string& run_id,
    std::optional<TimestampUs> started_at_us, AtomicServiceStatus status,
    const std::string& reason) {
  if (run_id.empty()) return Status::InvalidArgument("atomic_service_run_id must not be empty");
  MutexLock lock(mu_);
  const TimestampUs start = started_at_us.value_or(clock_->NowMicros());
  AtomicServiceExecution row{runner_id, run_id, start, std::nullopt, status, reason};
  if (status == AtomicServiceStatus::kRunning) {
    for (const ExecutionRow* prior : ExecutionsNewestFirstLocked()) {
      const AtomicServiceExecution& p = prior->execution;
      if (p.status != AtomicServiceStatus::kRunning) continue;
      if (p.run_id == run_id) return AtomicServiceStart{true, p.start_us};
      row.status = AtomicServiceStatus::kBlocked;
      if (row.reason.empty()) row.reason = "prior_running:" + p.run_id + " runner:" + p.runner_id;
      break;
    }
  }
  if (row.status == AtomicServiceStatus::kBlocked) row.end_us = start;
  const bool accepted = row.status != AtomicServiceStatus::kBlocked;
  executions_[run_id] = ExecutionRow{next_execution_seq_++, std::move(row)};
  return AtomicServiceStart{accepted, start};
}

Status MemOrchestrator::FinalizeAtomicService(const std::string& runner_id,
                                              const std::string& run_id, TimestampUs end_us,
                                              AtomicServiceStatus status,
                                              const std::string& reason) {
  if (Status s = CheckFinalize(status, run_id); !s.ok()) return s;
  MutexLock lock(mu_);
  auto it = executions_.find(run_id);
  if (it == executions_.end()) {
    executions_.emplace(run_id, ExecutionRow{next_execution_seq_++,
                                             {runner_id, run_id, end_us, end_us, status, reason}});
    return Status::Ok();
  }
  AtomicServiceExecution& e = it->second.execution;
  if (e.status != AtomicServiceStatus::kRunning) return Status::Ok();  // first finalisation wins
  e.end_us = end_us;
  e.status = status;
  if (!reason.empty()) e.reason = reason;
  return Status::Ok();
}

Result<std::vector<AtomicServiceExecution>> MemOrchestrator::ActiveAtomicServiceExecutions() {
  MutexLock lock(mu_);
  std::vector<AtomicServiceExecution> out;
  for (const ExecutionRow* row : ExecutionsNewestFirstLocked()) {
    if (row->execution.status == AtomicServiceStatus::kRunning) out.push_back(row->execution);
  }
  return out;
}

Result<std::vector<AtomicServiceExecution>> MemOrchestrator::AtomicServiceExecutionsInRange(
    TimestampUs start_us, TimestampUs end_us, std::int64_t limit,
    const std::optional<std::string>& runner_id, TimestampUs min_duration_us) {
  MutexLock lock(mu_);
  std::vector<AtomicServiceExecution> out;
  for (const ExecutionRow* row : ExecutionsNewestFirstLocked()) {
    if (static_cast<std::int64_t>(out.size()) >= limit) break;
    const AtomicServiceExecution& e = row->execution;
    if (e.end_us.value_or(e.start_us) < start_us || e.start_us > end_us) continue;
    if (runner_id && e.runner_id != *runner_id) continue;
    if (min_duration_us > 0 && (!e.end_us || *e.end_us - e.start_us < min_duration_us)) continue;
    out.push_back(e);
  }
  return out;
}

Result<std::int64_t> MemOrchestrator::PurgeAtomicServiceExecutions(
    const ExecutionPurgePolicy& policy) {
  MutexLock lock(mu_);
  std::vector<FinishedExecution> finished;  // oldest start first
  const std::vector<const ExecutionRow*> newest_first = ExecutionsNewestFirstLocked();
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) {
    const AtomicServiceExecution& e = (*it)->execution;
    if (e.status != AtomicServiceStatus::kRunning) finished.push_back({e.run_id, e.end_us});
  }
  const std::vector<bool> dropped = DroppedExecutions(finished, policy, clock_->NowMicros());
  std::vector<std::string> drop;  // copied first: erasing frees the names `finished` views
  for (std::size_t i = 0; i < finished.size(); ++i) {
    if (dropped[i]) drop.emplace_back(finished[i].run_id);
  }
  for (const std::string& run_id : drop) executions_.erase(run_id);
  const auto removed = static_cast<std::int64_t>(drop.size());
  return removed;
}

}  // namespace pynenc_cpp::mem_orchestrator
