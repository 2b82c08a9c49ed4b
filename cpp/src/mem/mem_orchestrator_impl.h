// Internal: the in-memory orchestrator class, shared by its source files
//   mem_orchestrator.cc           invocations, indexes, auto purge, wait graph
//   mem_orchestrator_runners.cc   heartbeats, recovery queries, atomic-service rows
// Not a public header; users go through NewMemOrchestrator (mem_orchestrator.h).
//
// Layout: one row per invocation keyed by id, plus ordered secondary indexes of
// registration sequence numbers (by task, call, status, argument pair, purge
// mark) so queries come back in registration order without sorting ids.
// Thread safety: one mutex (mu_) guards every member below it; each public
// method takes it once, so each is atomic. Methods named *Locked REQUIRE mu_.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "mem/mem_orchestrator.h"
#include "pynenc_cpp/core/spin_wait.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp::mem_orchestrator {

using Seq = std::uint64_t;
using SeqSet = std::set<Seq>;

struct InvocationRow {
  Seq seq = 0;
  TaskId task_id;
  CallId call_id;
  StatusRecord status;
  std::int64_t retries = 0;
  std::optional<TimestampUs> purge_mark_us;
  std::map<std::string, std::string> args;  // indexed arguments
};

struct RunnerRow {
  TimestampUs creation_us = 0;
  TimestampUs last_heartbeat_us = 0;
  bool can_run_atomic_service = false;
  std::vector<std::string> consumed_queues;
};

struct ExecutionRow {
  Seq seq = 0;  // insertion order: tie-break among equal start times
  AtomicServiceExecution execution;
};

// Bit i set: status i selected. An empty list selects every status.
std::uint32_t StatusMask(const std::vector<InvocationStatus>& statuses);

class MemOrchestrator final : public Orchestrator {
 public:
  explicit MemOrchestrator(const BackendConfig& config) : clock_(ClockOrReal(config)) {}

  // mem_orchestrator.cc
  Result<StatusRecord> RegisterInvocations(const std::vector<NewInvocation>& invocations,
                                           const std::optional<std::string>& runner_id) override;
  Result<StatusRecord> TransitionStatus(const InvocationId& id, InvocationStatus to,
                                        const std::optional<std::string>& runner_id) override;
  Result<StatusRecord> TransitionStatusFromOwner(
      const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
      const std::optional<std::string>& expected_owner) override;
  Result<StatusRecord> GetStatusRecord(const InvocationId& id) override;
  Result<std::vector<InvocationId>> FilterByStatus(
      const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) override;
  // Sleeps on final_cv_ (notified by every transition to a final status): no
  // polling; spins on finals_ first, for the process's spin budget.
  Result<std::optional<InvocationId>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                   TimestampUs timeout_us) override;
  Status IndexArguments(const InvocationId& id,
                        const std::map<std::string, std::string>& args) override;
  Result<std::vector<InvocationId>> GetExistingInvocations(
      const TaskId& task_id, const std::map<std::string, std::string>& key_args,
      const std::vector<InvocationStatus>& statuses) override;
  Result<GateOutcome> GatedTransition(const GateRequest& gate) override;
  Result<std::vector<InvocationId>> GetTaskInvocations(const TaskId& task_id) override;
  Result<std::vector<InvocationId>> GetCallInvocations(const CallId& call_id) override;
  Result<std::vector<InvocationId>> ListInvocations(const std::optional<TaskId>& task_id,
                                                    const std::vector<InvocationStatus>& statuses,
                                                    std::int64_t limit,
                                                    std::int64_t offset) override;
  Result<std::int64_t> CountInvocations(const std::optional<TaskId>& task_id,
                                        const std::vector<InvocationStatus>& statuses) override;
  Status IncrementRetries(const InvocationId& id) override;
  Result<std::int64_t> GetRetries(const InvocationId& id) override;
  Status ScheduleAutoPurge(const InvocationId& id) override;
  Result<std::vector<InvocationId>> AutoPurge(TimestampUs older_than_us) override;
  Status WaitingForResults(const InvocationId& waiter,
                           const std::vector<InvocationId>& waited) override;
  Status ReleaseWaiters(const InvocationId& waited) override;
  Result<std::vector<InvocationId>> GetBlockingInvocations(std::int64_t max_count) override;
  Status Purge() override;

  // mem_orchestrator_runners.cc
  Status RegisterHeartbeats(
      const std::vector<std::string>& runner_ids, bool can_run_atomic_service,
      const std::optional<std::vector<std::string>>& consumed_queues) override;
  Status DeregisterRunners(const std::vector<std::string>& runner_ids) override;
  Result<std::vector<RunnerInfo>> ActiveRunners(
      TimestampUs timeout_us, std::optional<bool> can_run_atomic_service) override;
  Result<std::vector<InvocationId>> PendingForRecovery(TimestampUs max_pending_us) override;
  Result<std::vector<InvocationId>> RunningForRecovery(TimestampUs heartbeat_timeout_us) override;
  Result<std::vector<InvocationId>> PendingOfDeadRunners(TimestampUs heartbeat_timeout_us) override;
  Result<AtomicServiceStart> RecordAtomicServiceStart(const std::string& runner_id,
                                                      const std::string& run_id,
                                                      std::optional<TimestampUs> started_at_us,
                                                      AtomicServiceStatus status,
                                                      const std::string& reason) override;
  Status FinalizeAtomicService(const std::string& runner_id, const std::string& run_id,
                               TimestampUs end_us, AtomicServiceStatus status,
                               const std::string& reason) override;
  Result<std::vector<AtomicServiceExecution>> ActiveAtomicServiceExecutions() override;
  Result<std::vector<AtomicServiceExecution>> AtomicServiceExecutionsInRange(
      TimestampUs start_us, TimestampUs end_us, std::int64_t limit,
      const std::optional<std::string>& runner_id, TimestampUs min_duration_us) override;
  Result<std::int64_t> PurgeAtomicServiceExecutions(const ExecutionPurgePolicy& policy) override;

 private:
  // The row of `id`, or null. REQUIRES: mu_ held.
  InvocationRow* FindLocked(const InvocationId& id) PYNENC_REQUIRES(mu_);
  // Ids of `seqs`, in seq order, keeping those whose status is in `mask`.
  // REQUIRES: mu_ held.
  std::vector<InvocationId> IdsLocked(const SeqSet& seqs, std::uint32_t mask) const
      PYNENC_REQUIRES(mu_);
  // TransitionStatus / IndexArguments of a known row. REQUIRES: mu_ held.
  Result<StatusRecord> TransitionLocked(InvocationRow& row, InvocationStatus to,
                                        const std::optional<std::string>& runner_id)
      PYNENC_REQUIRES(mu_);
  void IndexLocked(InvocationRow& row, const std::map<std::string, std::string>& args)
      PYNENC_REQUIRES(mu_);
  // Removes every wait-graph edge into and out of `id`. REQUIRES: mu_ held.
  void ReleaseLocked(const InvocationId& id) PYNENC_REQUIRES(mu_);
  // Removes `id` and everything indexed about it. REQUIRES: mu_ held, id known.
  void ForgetLocked(const InvocationId& id) PYNENC_REQUIRES(mu_);
  // Candidate seqs for a task filter (nullopt: every invocation). REQUIRES: mu_ held.
  const SeqSet& TaskSeqsLocked(const std::optional<TaskId>& task_id) const PYNENC_REQUIRES(mu_);
  // Every execution, newest start first (ties: newest insertion first).
  // REQUIRES: mu_ held.
  std::vector<const ExecutionRow*> ExecutionsNewestFirstLocked() const PYNENC_REQUIRES(mu_);
  // Invocations in `status` whose owner's last heartbeat is older than the
  // timeout (an owner with no heartbeat counts as dead if `missing_is_dead`),
  // registration order: RunningForRecovery and PendingOfDeadRunners.
  std::vector<InvocationId> OwnerDeadLocked(InvocationStatus status,
                                            TimestampUs heartbeat_timeout_us,
                                            bool missing_is_dead) const PYNENC_REQUIRES(mu_);

  const std::shared_ptr<Clock> clock_;

  mutable Mutex mu_;
  // Notified (all) whenever an invocation reaches a final status; used with mu_.
  std::condition_variable final_cv_;
  // Bumped (under mu_) with each final_cv_ notification: what a waiter spins on
  // before it sleeps (core/spin_wait.h).
  std::atomic<std::uint64_t> finals_{0};
  SpinGate final_spin_;
  Seq next_seq_ PYNENC_GUARDED_BY(mu_) = 1;
  std::unordered_map<InvocationId, InvocationRow> rows_ PYNENC_GUARDED_BY(mu_);
  std::map<Seq, InvocationId> by_seq_ PYNENC_GUARDED_BY(mu_);
  SeqSet all_seqs_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<TaskId, SeqSet> by_task_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<CallId, SeqSet> by_call_ PYNENC_GUARDED_BY(mu_);
  std::array<SeqSet, kStatusCount> by_status_ PYNENC_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, SeqSet> by_arg_ PYNENC_GUARDED_BY(mu_);
  std::set<std::pair<TimestampUs, Seq>> purge_marks_ PYNENC_GUARDED_BY(mu_);
  // Wait graph: waiter -> invocations it waits for, and the reverse.
  std::unordered_map<InvocationId, std::unordered_set<InvocationId>> waiting_for_
      PYNENC_GUARDED_BY(mu_);
  std::unordered_map<InvocationId, std::unordered_set<InvocationId>> waited_by_
      PYNENC_GUARDED_BY(mu_);
  std::unordered_map<std::string, RunnerRow> runners_ PYNENC_GUARDED_BY(mu_);
  Seq next_execution_seq_ PYNENC_GUARDED_BY(mu_) = 1;
  std::unordered_map<std::string, ExecutionRow> executions_ PYNENC_GUARDED_BY(mu_);  // by run id
};

}  // namespace pynenc_cpp::mem_orchestrator
