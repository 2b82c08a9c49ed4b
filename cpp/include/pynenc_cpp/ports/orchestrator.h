// Orchestrator port: invocation lifecycle records, their indexes and queries,
// blocking control, runner heartbeats and atomic-service execution records.
// Maps pynenc 0.4.0's BaseOrchestrator and its BaseBlockingControl:
//   _register_new_invocations            -> RegisterInvocations
//   _atomic_status_transition            -> TransitionStatus
//   get_invocation_status_record         -> GetStatusRecord
//   filter_by_status                     -> FilterByStatus
//   (result waiting, no pynenc equivalent) -> WaitAnyFinal
//   index_arguments_for_concurrency_control -> IndexArguments
//   get_existing_invocations             -> GetExistingInvocations
//   (is_candidate / is_authorize_to_run_by_concurrency_control + the status
//    change they guard, as one step)     -> GatedTransition
//   get_task_invocation_ids              -> GetTaskInvocations
//   get_call_invocation_ids              -> GetCallInvocations
//   get_invocation_ids_paginated         -> ListInvocations
//   count_invocations                    -> CountInvocations
//   increment/get_invocation_retries     -> IncrementRetries / GetRetries
//   set_up_invocation_auto_purge         -> ScheduleAutoPurge
//   auto_purge                           -> AutoPurge
//   register_runner_heartbeats           -> RegisterHeartbeats
//   (a graceful stop, no pynenc equivalent) -> DeregisterRunners
//   _get_active_runners                  -> ActiveRunners
//   get_pending_invocations_for_recovery -> PendingForRecovery
//   _get_running_invocations_for_recovery -> RunningForRecovery
//   record_atomic_service_execution_start -> RecordAtomicServiceStart
//   finalize_atomic_service_execution    -> FinalizeAtomicService
//   get_active_atomic_service_executions -> ActiveAtomicServiceExecutions
//   get_atomic_service_executions_in_timerange -> AtomicServiceExecutionsInRange
//   purge_atomic_service_executions      -> PurgeAtomicServiceExecutions
//   purge                                -> Purge
//   blocking_control.waiting_for_results -> WaitingForResults
//   blocking_control.release_waiters     -> ReleaseWaiters
//   blocking_control.get_blocking_invocations -> GetBlockingInvocations
//
// Blocking control is part of this port rather than a port of its own: its one
// query ("waited on, not waiting, and available to run") joins the wait graph
// with invocation statuses, and only one store can answer that atomically
// (pynenc's SQLite backend joins the two tables for the same reason).
//
// Ordering: "registration order" is the order in which RegisterInvocations first
// saw each id. Timestamps come only from the BackendConfig's Clock.
// Thread safety: implementations are thread-safe; every method is atomic with
// respect to every other (TransitionStatus is a compare-and-set: of several
// racing transitions from the same record, each sees the previous one's result).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/ids.h"
#include "pynenc_cpp/core/status.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

// pynenc's AtomicServiceExecutionStatus.
enum class AtomicServiceStatus : unsigned char { kRunning, kCompleted, kAbandoned, kBlocked };

// pynenc's string value ("running", "completed", "abandoned", "blocked").
std::string_view AtomicServiceStatusName(AtomicServiceStatus status);
// Inverse of AtomicServiceStatusName; nullopt for an unknown name.
std::optional<AtomicServiceStatus> ParseAtomicServiceStatus(std::string_view name);
// FinalizeAtomicService's arguments: a terminal status and a run id
// (kInvalidArgument otherwise).
Status CheckFinalize(AtomicServiceStatus status, const std::string& run_id);
// RegisterHeartbeats' runner ids: none empty (kInvalidArgument otherwise).
Status CheckRunnerIds(const std::vector<std::string>& runner_ids);

// What the orchestrator indexes of a new invocation.
struct NewInvocation {
  InvocationId id;
  TaskId task_id;
  CallId call_id;
};

// A runner's heartbeat row (pynenc's ActiveRunnerInfo).
struct RunnerInfo {
  std::string runner_id;
  TimestampUs creation_us = 0;  // first heartbeat
  TimestampUs last_heartbeat_us = 0;
  bool can_run_atomic_service = false;
  std::vector<std::string> consumed_queues;
};

// One atomic-service execution attempt (pynenc's AtomicServiceExecution).
struct AtomicServiceExecution {
  std::string runner_id;
  std::string run_id;  // atomic_service_run_id; unique among stored executions
  TimestampUs start_us = 0;
  std::optional<TimestampUs> end_us;
  AtomicServiceStatus status = AtomicServiceStatus::kRunning;
  std::string reason;
};

// Outcome of RecordAtomicServiceStart.
struct AtomicServiceStart {
  bool accepted = false;          // the run may execute work
  TimestampUs started_at_us = 0;  // start time stored for the run
};

// Trimming rules of PurgeAtomicServiceExecutions.
struct ExecutionPurgePolicy {
  TimestampUs retention_us = 0;  // > 0: drop finished rows that ended before now - retention
  std::int64_t max_records = 0;  // > 0: keep at most this many finished rows (newest by start)
  std::vector<std::string> protected_run_ids;  // never dropped by either rule
};

// One finished atomic-service execution as PurgeAtomicServiceExecutions sees it.
struct FinishedExecution {
  std::string_view run_id;
  std::optional<TimestampUs> end_us;
};
// Which of `finished` (oldest start first) `policy` drops at `now_us`: those that
// ended before now - retention, then the oldest beyond max_records; never a
// protected run (which still counts toward max_records, so protected runs can
// leave more than max_records). Element i of the result is true when finished[i] is dropped.
std::vector<bool> DroppedExecutions(const std::vector<FinishedExecution>& finished,
                                    const ExecutionPurgePolicy& policy, TimestampUs now_us);

class Orchestrator {
 public:
  Orchestrator() = default;
  Orchestrator(const Orchestrator&) = delete;
  Orchestrator& operator=(const Orchestrator&) = delete;
  virtual ~Orchestrator() = default;

  // ---- invocations --------------------------------------------------------
  // Registers each invocation not yet known with status REGISTERED owned by
  // `runner_id` (pynenc stores the registering runner), 0 retries. Known ids are
  // left untouched. Returns the REGISTERED record stamped now.
  // kInvalidArgument for an empty id (nothing is registered then).
  virtual Result<StatusRecord> RegisterInvocations(const std::vector<NewInvocation>& invocations,
                                                   const std::optional<std::string>& runner_id) = 0;

  // Atomic compare-and-set of the status: validates the transition and the
  // ownership rules against the current record and stores the new one
  // (ApplyTransition, core/status.h). Returns the new record.
  // kNotFound for an unknown id; kIllegalTransition / kOwnershipViolation (with
  // TransitionErrorInfo) when the status machine forbids it; nothing changes then.
  virtual Result<StatusRecord> TransitionStatus(const InvocationId& id, InvocationStatus to,
                                                const std::optional<std::string>& runner_id) = 0;

  // TransitionStatus fenced on the owner: applied, in the same compare-and-set,
  // only while the current record is owned by `expected_owner` (nullopt: no
  // owner); kOwnershipViolation otherwise (ValidateExpectedOwner), nothing changes.
  // A recovery names the owner it found dead: RUNNING_RECOVERY overrides ownership,
  // so without the fence it would also take an invocation that another runner
  // recovered and started again since it looked.
  virtual Result<StatusRecord> TransitionStatusFromOwner(
      const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
      const std::optional<std::string>& expected_owner) = 0;

  // The current record; kNotFound for an unknown id.
  virtual Result<StatusRecord> GetStatusRecord(const InvocationId& id) = 0;

  // The ids of `ids` whose status is in `statuses`, in input order. Unknown ids
  // are left out.
  virtual Result<std::vector<InvocationId>> FilterByStatus(
      const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) = 0;

  // Blocks until at least one of `ids` has a final status or `timeout_us` (real
  // time, not the BackendConfig's Clock) has passed; returns the first id of
  // `ids` (input order) that is final, or nullopt on timeout. Returns at once if
  // one is already final; a timeout <= 0 is a single check. Unknown ids count as
  // not final (they may be registered later), so an id that never exists just
  // waits out the timeout. An empty `ids` is kInvalidArgument.
  // Default implementation (used by SQLite and Redis, which have no cross-process
  // notification here): polls FilterByStatus, pausing a quarter of the time waited
  // so far, within [100 us, 2 ms]. The memory backend overrides it with a
  // condition variable notified by TransitionStatus (no polling).
  virtual Result<std::optional<InvocationId>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                           TimestampUs timeout_us);

  // Indexes the serialized arguments of `id` for GetExistingInvocations; a key
  // indexed before is replaced. kNotFound for an unknown id.
  virtual Status IndexArguments(const InvocationId& id,
                                const std::map<std::string, std::string>& args) = 0;

  // Invocations of `task_id` whose indexed arguments match every pair of
  // `key_args` (empty: no argument filter) and whose status is in `statuses`
  // (empty: any), in registration order.
  virtual Result<std::vector<InvocationId>> GetExistingInvocations(
      const TaskId& task_id, const std::map<std::string, std::string>& key_args,
      const std::vector<InvocationStatus>& statuses) = 0;

  // One GatedTransition: move `id` to `to` for `runner_id` unless an invocation of
  // `task_id` blocks it.
  struct GateRequest {
    InvocationId id;
    TaskId task_id;
    std::map<std::string, std::string> key_args;  // the task's key (empty: any)
    std::vector<InvocationStatus> blocking;       // the statuses that block `to`
    std::map<std::string, std::string> index_args;
    InvocationStatus to = InvocationStatus::kPending;
    std::optional<std::string> runner_id;

    // kInvalidArgument for an empty `blocking`.
    Status Check() const {
      if (!blocking.empty()) return Status::Ok();
      return Status::InvalidArgument("GatedTransition needs blocking statuses");
    }
  };
  // pynenc's running concurrency control and the status change it guards, as ONE
  // step (atomic with respect to every other method): indexes `index_args` for
  // `id` (as IndexArguments; empty: nothing), then looks for an invocation of
  // `task_id` other than `id` whose indexed arguments match every pair of
  // `key_args` (empty: any) and whose status is in `blocking`.
  //   * none: TransitionStatus(id, to, runner_id); its record is returned with no
  //     blocker, and its errors unchanged (nothing is written then, the index
  //     included);
  //   * one: nothing changes but the index; the current record of `id` is returned
  //     with that blocker (the first in registration order).
  // pynenc checks {PENDING, RUNNING} before the move to PENDING (a claim) and
  // {RUNNING} before the move to RUNNING (a run's start): with every such move
  // made here, no two invocations of one controlled key hold those statuses at
  // once. kNotFound for an unknown id; kInvalidArgument for an empty `blocking`.
  struct GateOutcome {
    StatusRecord record;
    std::optional<InvocationId> blocker;
  };
  virtual Result<GateOutcome> GatedTransition(const GateRequest& gate) = 0;

  // Every invocation of a task / a call, in registration order.
  virtual Result<std::vector<InvocationId>> GetTaskInvocations(const TaskId& task_id) = 0;
  virtual Result<std::vector<InvocationId>> GetCallInvocations(const CallId& call_id) = 0;

  // A page of the invocations matching the filters (nullopt / empty: no filter),
  // newest status timestamp first, ties newest registration first.
  // kInvalidArgument for a negative limit or offset.
  virtual Result<std::vector<InvocationId>> ListInvocations(
      const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses,
      std::int64_t limit, std::int64_t offset) = 0;

  // Number of invocations matching the filters (nullopt / empty: no filter).
  virtual Result<std::int64_t> CountInvocations(const std::optional<TaskId>& task_id,
                                                const std::vector<InvocationStatus>& statuses) = 0;

  // Retry counter of an invocation. kNotFound for an unknown id.
  virtual Status IncrementRetries(const InvocationId& id) = 0;
  virtual Result<std::int64_t> GetRetries(const InvocationId& id) = 0;

  // Marks `id` for AutoPurge, stamped now (a later call re-stamps it).
  // kNotFound for an unknown id.
  virtual Status ScheduleAutoPurge(const InvocationId& id) = 0;

  // Forgets every invocation marked at or before now - `older_than_us`: its
  // record, indexes, retries and wait-graph edges. Returns the ids forgotten,
  // oldest mark first.
  virtual Result<std::vector<InvocationId>> AutoPurge(TimestampUs older_than_us) = 0;

  // ---- blocking control ---------------------------------------------------
  // Records that `waiter` waits for each of `waited`.
  virtual Status WaitingForResults(const InvocationId& waiter,
                                   const std::vector<InvocationId>& waited) = 0;
  // Drops every edge into and out of `waited` (it finished). Unknown ids: no-op.
  virtual Status ReleaseWaiters(const InvocationId& waited) = 0;
  // Up to `max_count` invocations that others wait for, that wait for nobody,
  // and that are registered with an available-for-run status; oldest
  // registration first. kInvalidArgument for a negative `max_count`.
  virtual Result<std::vector<InvocationId>> GetBlockingInvocations(std::int64_t max_count) = 0;

  // ---- runners and recovery -----------------------------------------------
  // Creates (creation = now) or refreshes (last heartbeat = now) each runner and
  // sets its atomic-service eligibility; `consumed_queues`, when given, replaces
  // the stored queues. One `now` for the whole batch.
  virtual Status RegisterHeartbeats(
      const std::vector<std::string>& runner_ids, bool can_run_atomic_service,
      const std::optional<std::vector<std::string>>& consumed_queues) = 0;

  // Forgets each runner's heartbeat row (a runner that stopped gracefully: its
  // invocations all ended). Unknown ids are skipped. What it still owns then has
  // an owner with no heartbeat: RunningForRecovery takes its RUNNING invocations
  // at once, PendingForRecovery its PENDING ones past their age limit.
  virtual Status DeregisterRunners(const std::vector<std::string>& runner_ids) = 0;

  // Runners whose last heartbeat is at or after now - `timeout_us`, optionally
  // only those with the given eligibility; creation time ascending, then id.
  virtual Result<std::vector<RunnerInfo>> ActiveRunners(
      TimestampUs timeout_us, std::optional<bool> can_run_atomic_service) = 0;

  // PENDING invocations whose status was set at or before now - `max_pending_us`.
  virtual Result<std::vector<InvocationId>> PendingForRecovery(TimestampUs max_pending_us) = 0;

  // RUNNING invocations whose owner has no heartbeat, or whose last heartbeat is
  // before now - `heartbeat_timeout_us`; registration order.
  virtual Result<std::vector<InvocationId>> RunningForRecovery(
      TimestampUs heartbeat_timeout_us) = 0;

  // PENDING invocations claimed by a runner that did heartbeat but whose last
  // heartbeat is before now - `heartbeat_timeout_us` (a dead runner's claims,
  // recovered without waiting for max_pending_seconds); registration order. An
  // owner with no heartbeat at all is left to PendingForRecovery's age limit:
  // pynenc's own runners claim under ids that need not heartbeat. Not in
  // pynenc's ABC; CppRunner's native recovery uses it.
  virtual Result<std::vector<InvocationId>> PendingOfDeadRunners(
      TimestampUs heartbeat_timeout_us) = 0;

  // ---- atomic-service executions ------------------------------------------
  // Inserts the execution `run_id` (replacing a stored one with that id) started
  // at `started_at_us` (nullopt: now).
  // For kRunning this is the single-runner gate: if another execution is RUNNING
  // the row is stored as BLOCKED (end = start, reason = `reason` or
  // "prior_running:<run id> runner:<runner id>" of the newest running one) and
  // the result is not accepted; if `run_id` itself is RUNNING it is accepted
  // again unchanged. Other statuses are stored as given (kBlocked with
  // end = start) and accepted unless kBlocked.
  virtual Result<AtomicServiceStart> RecordAtomicServiceStart(
      const std::string& runner_id, const std::string& run_id,
      std::optional<TimestampUs> started_at_us, AtomicServiceStatus status,
      const std::string& reason) = 0;

  // Moves RUNNING execution `run_id` to terminal `status` ending at `end_us`
  // (`reason` replaces the stored one unless empty). Already terminal: no-op
  // (the first finalisation wins). Unknown: inserts it with start = end.
  // kInvalidArgument if `status` is kRunning.
  virtual Status FinalizeAtomicService(const std::string& runner_id, const std::string& run_id,
                                       TimestampUs end_us, AtomicServiceStatus status,
                                       const std::string& reason) = 0;

  // RUNNING executions, most recently started first.
  virtual Result<std::vector<AtomicServiceExecution>> ActiveAtomicServiceExecutions() = 0;

  // Executions overlapping [start_us, end_us] (a running one by its start),
  // optionally of one runner, of at least `min_duration_us` when > 0 (running
  // ones then never match); most recently started first, at most `limit`
  // (negative: none).
  virtual Result<std::vector<AtomicServiceExecution>> AtomicServiceExecutionsInRange(
      TimestampUs start_us, TimestampUs end_us, std::int64_t limit,
      const std::optional<std::string>& runner_id, TimestampUs min_duration_us) = 0;

  // Applies `policy`; RUNNING rows are never dropped. Returns the number dropped.
  virtual Result<std::int64_t> PurgeAtomicServiceExecutions(const ExecutionPurgePolicy& policy) = 0;

  // Forgets everything of this app: invocations, wait graph, runners, executions.
  virtual Status Purge() = 0;
};

// Opens the orchestrator named by `config.uri`. kBadConfig for an unusable URI.
Result<std::unique_ptr<Orchestrator>> OpenOrchestrator(const BackendConfig& config);

}  // namespace pynenc_cpp
