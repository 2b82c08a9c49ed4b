// In-memory orchestrator, part 1: invocation rows, their indexes, queries,
// auto purge and the wait graph. Layout and locking: mem_orchestrator_impl.h.
#include <algorithm>
#include <chrono>
#include <iterator>

#include "mem/mem_orchestrator_impl.h"
#include "pynenc_cpp/core/metrics.h"
#include "pynenc_cpp/core/spin_wait.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp {
namespace mem_orchestrator {
namespace {

bool InMask(std::uint32_t mask, InvocationStatus s) {
  return (mask >> static_cast<unsigned>(s)) & 1u;
}

// Longer waits are clamped (no time_point overflow): ~31 years.
constexpr TimestampUs kMaxWaitUs = 1'000'000'000'000'000;

Status UnknownInvocation(const InvocationId& id) {
  return Status::NotFound("invocation '" + id.str() + "' is not registered in the orchestrator");
}

}  // namespace

std::uint32_t StatusMask(const std::vector<InvocationStatus>& statuses) {
  if (statuses.empty()) return (1u << kStatusCount) - 1;
  std::uint32_t mask = 0;
  for (InvocationStatus s : statuses) mask |= 1u << static_cast<unsigned>(s);
  return mask;
}

InvocationRow* MemOrchestrator::FindLocked(const InvocationId& id) {
  auto it = rows_.find(id);
  return it == rows_.end() ? nullptr : &it->second;
}

std::vector<InvocationId> MemOrchestrator::IdsLocked(const SeqSet& seqs, std::uint32_t mask) const {
  std::vector<InvocationId> out;
  out.reserve(seqs.size());
  for (Seq seq : seqs) {
    const InvocationId& id = by_seq_.at(seq);
    if (InMask(mask, rows_.at(id).status.status)) out.push_back(id);
  }
  return out;
}

const SeqSet& MemOrchestrator::TaskSeqsLocked(const std::optional<TaskId>& task_id) const {
  static const SeqSet kEmpty;
  if (!task_id) return all_seqs_;
  auto it = by_task_.find(*task_id);
  return it == by_task_.end() ? kEmpty : it->second;
}

Result<StatusRecord> MemOrchestrator::RegisterInvocations(
    const std::vector<NewInvocation>& invocations, const std::optional<std::string>& runner_id) {
  for (const NewInvocation& inv : invocations) {
    if (inv.id.empty()) return Status::InvalidArgument("invocation id must not be empty");
  }
  MutexLock lock(mu_);
  const StatusRecord record{InvocationStatus::kRegistered, runner_id, clock_->NowMicros()};
  std::uint64_t added = 0;
  for (const NewInvocation& inv : invocations) {
    if (rows_.count(inv.id)) continue;
    ++added;
    const Seq seq = next_seq_++;
    rows_.emplace(inv.id, InvocationRow{seq, inv.task_id, inv.call_id, record, 0, {}, {}});
    by_seq_.emplace(seq, inv.id);
    all_seqs_.insert(seq);
    by_task_[inv.task_id].insert(seq);
    by_call_[inv.call_id].insert(seq);
    by_status_[static_cast<std::size_t>(record.status)].insert(seq);
  }
  metrics::OnEntered(record.status, added);
  return record;
}

Result<StatusRecord> MemOrchestrator::TransitionStatus(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id) {
  MutexLock lock(mu_);
  InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  return TransitionLocked(*row, to, runner_id);
}

Result<StatusRecord> MemOrchestrator::TransitionStatusFromOwner(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
    const std::optional<std::string>& expected_owner) {
  MutexLock lock(mu_);
  InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  if (Status s = ValidateExpectedOwner(row->status, to, runner_id, expected_owner); !s.ok()) {
    return s;
  }
  return TransitionLocked(*row, to, runner_id);
}

Result<StatusRecord> MemOrchestrator::TransitionLocked(
    InvocationRow& row, InvocationStatus to, const std::optional<std::string>& runner_id) {
  Result<StatusRecord> next = ApplyTransition(row.status, to, runner_id, clock_->NowMicros());
  if (!next.ok()) return next;
  by_status_[static_cast<std::size_t>(row.status.status)].erase(row.seq);
  by_status_[static_cast<std::size_t>(to)].insert(row.seq);
  metrics::OnTransition(row.status, next.value());
  row.status = next.value();
  if (IsFinal(to)) {
    finals_.fetch_add(1, std::memory_order_release);
    final_cv_.notify_all();
  }
  return next;
}

Result<std::optional<InvocationId>> MemOrchestrator::WaitAnyFinal(
    const std::vector<InvocationId>& ids, TimestampUs timeout_us) {
  if (ids.empty()) return Status::InvalidArgument("WaitAnyFinal needs at least one invocation id");
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(std::clamp<TimestampUs>(timeout_us, 0, kMaxWaitUs));
  UniqueLock lock(mu_);
  std::optional<InvocationId> found;
  auto any_final = [&]() PYNENC_REQUIRES(mu_) {
    for (const InvocationId& id : ids) {
      const InvocationRow* row = FindLocked(id);
      if (row != nullptr && IsFinal(row->status.status)) {
        found = id;
        return true;
      }
    }
    return false;
  };
  // A timeout of 0 is a look, not a wait: it neither spins nor marks the wait point idle.
  if (any_final() || timeout_us <= 0) return found;
  const std::uint64_t seen = finals_.load(std::memory_order_acquire);
  lock.Unlock();
  SpinUntil(final_spin_, deadline, [&] { return finals_.load(std::memory_order_acquire) != seen; });
  lock.Lock();
  final_cv_.wait_until(lock.native(), deadline, any_final);
  final_spin_.Settle(found.has_value());
  return found;
}

Result<StatusRecord> MemOrchestrator::GetStatusRecord(const InvocationId& id) {
  MutexLock lock(mu_);
  const InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  return row->status;
}

Result<std::vector<InvocationId>> MemOrchestrator::FilterByStatus(
    const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) {
  std::vector<InvocationId> out;
  if (statuses.empty()) return out;  // an empty filter selects nothing here
  const std::uint32_t mask = StatusMask(statuses);
  MutexLock lock(mu_);
  for (const InvocationId& id : ids) {
    const InvocationRow* row = FindLocked(id);
    if (row != nullptr && InMask(mask, row->status.status)) out.push_back(id);
  }
  return out;
}

Status MemOrchestrator::IndexArguments(const InvocationId& id,
                                       const std::map<std::string, std::string>& args) {
  MutexLock lock(mu_);
  InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  IndexLocked(*row, args);
  return Status::Ok();
}

void MemOrchestrator::IndexLocked(InvocationRow& row,
                                  const std::map<std::string, std::string>& args) {
  for (const auto& [key, value] : args) {
    auto old = row.args.find(key);
    if (old != row.args.end()) {
      auto idx = by_arg_.find({key, old->second});
      if (idx != by_arg_.end()) {
        idx->second.erase(row.seq);
        if (idx->second.empty()) by_arg_.erase(idx);
      }
    }
    row.args[key] = value;
    by_arg_[{key, value}].insert(row.seq);
  }
}

// Walks the rows in the blocking statuses (few: claimed or running ones), not the
// task's history.
Result<Orchestrator::GateOutcome> MemOrchestrator::GatedTransition(const GateRequest& gate) {
  if (Status st = gate.Check(); !st.ok()) return st;
  MutexLock lock(mu_);
  InvocationRow* row = FindLocked(gate.id);
  if (row == nullptr) return UnknownInvocation(gate.id);
  Result<StatusRecord> check =
      ApplyTransition(row->status, gate.to, gate.runner_id, clock_->NowMicros());
  if (!check.ok()) return check.status();  // nothing written, as TransitionStatus
  IndexLocked(*row, gate.index_args);
  std::optional<Seq> blocker;
  for (InvocationStatus st : gate.blocking) {
    for (Seq seq : by_status_[static_cast<std::size_t>(st)]) {
      if (seq == row->seq || (blocker && seq >= *blocker)) continue;
      const InvocationRow& other = rows_.at(by_seq_.at(seq));
      if (!(other.task_id == gate.task_id)) continue;
      bool match = true;
      for (const auto& [key, value] : gate.key_args) {
        auto it = other.args.find(key);
        match = match && it != other.args.end() && it->second == value;
      }
      if (match) blocker = seq;
    }
  }
  if (blocker) return GateOutcome{row->status, by_seq_.at(*blocker)};
  Result<StatusRecord> next = TransitionLocked(*row, gate.to, gate.runner_id);
  if (!next.ok()) return next.status();
  return GateOutcome{next.value(), std::nullopt};
}

Result<std::vector<InvocationId>> MemOrchestrator::GetExistingInvocations(
    const TaskId& task_id, const std::map<std::string, std::string>& key_args,
    const std::vector<InvocationStatus>& statuses) {
  const std::uint32_t mask = StatusMask(statuses);
  MutexLock lock(mu_);
  SeqSet candidates = TaskSeqsLocked(task_id);
  for (const auto& pair : key_args) {
    if (candidates.empty()) break;
    auto idx = by_arg_.find(pair);
    if (idx == by_arg_.end()) return std::vector<InvocationId>();
    SeqSet kept;
    std::set_intersection(candidates.begin(), candidates.end(), idx->second.begin(),
                          idx->second.end(), std::inserter(kept, kept.end()));
    candidates.swap(kept);
  }
  return IdsLocked(candidates, mask);
}

Result<std::vector<InvocationId>> MemOrchestrator::GetTaskInvocations(const TaskId& task_id) {
  MutexLock lock(mu_);
  return IdsLocked(TaskSeqsLocked(task_id), StatusMask({}));
}

Result<std::vector<InvocationId>> MemOrchestrator::GetCallInvocations(const CallId& call_id) {
  MutexLock lock(mu_);
  auto it = by_call_.find(call_id);
  if (it == by_call_.end()) return std::vector<InvocationId>();
  return IdsLocked(it->second, StatusMask({}));
}

Result<std::vector<InvocationId>> MemOrchestrator::ListInvocations(
    const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses,
    std::int64_t limit, std::int64_t offset) {
  if (limit < 0 || offset < 0) {
    return Status::InvalidArgument("limit and offset must be >= 0");
  }
  const std::uint32_t mask = StatusMask(statuses);
  MutexLock lock(mu_);
  std::vector<const InvocationRow*> matches;
  for (Seq seq : TaskSeqsLocked(task_id)) {
    const InvocationId& id = by_seq_.at(seq);
    const InvocationRow& row = rows_.at(id);
    if (InMask(mask, row.status.status)) matches.push_back(&row);
  }
  std::sort(matches.begin(), matches.end(), [](const InvocationRow* a, const InvocationRow* b) {
    if (a->status.timestamp_us != b->status.timestamp_us) {
      return a->status.timestamp_us > b->status.timestamp_us;
    }
    return a->seq > b->seq;
  });
  std::vector<InvocationId> out;
  const auto total = static_cast<std::int64_t>(matches.size());
  for (std::int64_t i = offset; i < total && i - offset < limit; ++i) {
    out.push_back(by_seq_.at(matches[static_cast<std::size_t>(i)]->seq));
  }
  return out;
}

Result<std::int64_t> MemOrchestrator::CountInvocations(
    const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses) {
  const std::uint32_t mask = StatusMask(statuses);
  MutexLock lock(mu_);
  const SeqSet& seqs = TaskSeqsLocked(task_id);
  if (statuses.empty()) return static_cast<std::int64_t>(seqs.size());
  std::int64_t count = 0;
  for (InvocationStatus s : AllStatuses()) {
    if (!InMask(mask, s)) continue;
    const SeqSet& in_status = by_status_[static_cast<std::size_t>(s)];
    if (!task_id) {
      count += static_cast<std::int64_t>(in_status.size());
      continue;
    }
    for (Seq seq : in_status) count += static_cast<std::int64_t>(seqs.count(seq));
  }
  return count;
}

Status MemOrchestrator::IncrementRetries(const InvocationId& id) {
  MutexLock lock(mu_);
  InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  ++row->retries;
  return Status::Ok();
}

Result<std::int64_t> MemOrchestrator::GetRetries(const InvocationId& id) {
  MutexLock lock(mu_);
  const InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  return row->retries;
}

Status MemOrchestrator::ScheduleAutoPurge(const InvocationId& id) {
  MutexLock lock(mu_);
  InvocationRow* row = FindLocked(id);
  if (row == nullptr) return UnknownInvocation(id);
  if (row->purge_mark_us) purge_marks_.erase({*row->purge_mark_us, row->seq});
  row->purge_mark_us = clock_->NowMicros();
  purge_marks_.insert({*row->purge_mark_us, row->seq});
  return Status::Ok();
}

Result<std::vector<InvocationId>> MemOrchestrator::AutoPurge(TimestampUs older_than_us) {
  MutexLock lock(mu_);
  const TimestampUs cutoff = clock_->NowMicros() - older_than_us;
  std::vector<InvocationId> purged;
  for (const auto& [mark, seq] : purge_marks_) {
    if (mark > cutoff) break;
    purged.push_back(by_seq_.at(seq));
  }
  for (const InvocationId& id : purged) ForgetLocked(id);
  return purged;
}

void MemOrchestrator::ForgetLocked(const InvocationId& id) {
  auto it = rows_.find(id);
  const InvocationRow& row = it->second;
  by_seq_.erase(row.seq);
  all_seqs_.erase(row.seq);
  if (auto t = by_task_.find(row.task_id); t != by_task_.end()) {
    t->second.erase(row.seq);
    if (t->second.empty()) by_task_.erase(t);
  }
  if (auto c = by_call_.find(row.call_id); c != by_call_.end()) {
    c->second.erase(row.seq);
    if (c->second.empty()) by_call_.erase(c);
  }
  by_status_[static_cast<std::size_t>(row.status.status)].erase(row.seq);
  for (const auto& pair : row.args) {
    if (auto a = by_arg_.find(pair); a != by_arg_.end()) {
      a->second.erase(row.seq);
      if (a->second.empty()) by_arg_.erase(a);
    }
  }
  if (row.purge_mark_us) purge_marks_.erase({*row.purge_mark_us, row.seq});
  ReleaseLocked(id);
  rows_.erase(it);
}

Status MemOrchestrator::WaitingForResults(const InvocationId& waiter,
                                          const std::vector<InvocationId>& waited) {
  MutexLock lock(mu_);
  for (const InvocationId& w : waited) {
    waiting_for_[waiter].insert(w);
    waited_by_[w].insert(waiter);
  }
  return Status::Ok();
}

void MemOrchestrator::ReleaseLocked(const InvocationId& id) {
  if (auto by = waited_by_.find(id); by != waited_by_.end()) {
    for (const InvocationId& waiter : by->second) {
      auto wf = waiting_for_.find(waiter);
      if (wf == waiting_for_.end()) continue;
      wf->second.erase(id);
      if (wf->second.empty()) waiting_for_.erase(wf);
    }
    waited_by_.erase(by);
  }
  if (auto wf = waiting_for_.find(id); wf != waiting_for_.end()) {
    for (const InvocationId& waited : wf->second) {
      auto by = waited_by_.find(waited);
      if (by == waited_by_.end()) continue;
      by->second.erase(id);
      if (by->second.empty()) waited_by_.erase(by);
    }
    waiting_for_.erase(wf);
  }
}

Status MemOrchestrator::ReleaseWaiters(const InvocationId& waited) {
  MutexLock lock(mu_);
  ReleaseLocked(waited);
  return Status::Ok();
}

Result<std::vector<InvocationId>> MemOrchestrator::GetBlockingInvocations(std::int64_t max_count) {
  if (max_count < 0) return Status::InvalidArgument("max_num_invocations must be >= 0");
  MutexLock lock(mu_);
  SeqSet blocking;
  for (const auto& [waited, waiters] : waited_by_) {
    if (waiters.empty() || waiting_for_.count(waited)) continue;
    const InvocationRow* row = FindLocked(waited);
    if (row != nullptr && IsAvailableForRun(row->status.status)) blocking.insert(row->seq);
  }
  std::vector<InvocationId> out;
  for (Seq seq : blocking) {
    if (static_cast<std::int64_t>(out.size()) >= max_count) break;
    out.push_back(by_seq_.at(seq));
  }
  return out;
}

Status MemOrchestrator::Purge() {
  MutexLock lock(mu_);
  rows_.clear();
  by_seq_.clear();
  all_seqs_.clear();
  by_task_.clear();
  by_call_.clear();
  for (SeqSet& s : by_status_) s.clear();
  by_arg_.clear();
  purge_marks_.clear();
  waiting_for_.clear();
  waited_by_.clear();
  runners_.clear();
  executions_.clear();
  return Status::Ok();
}

}  // namespace mem_orchestrator

std::unique_ptr<Orchestrator> NewMemOrchestrator(const BackendConfig& config) {
  return std::make_unique<mem_orchestrator::MemOrchestrator>(config);
}

}  // namespace pynenc_cpp
