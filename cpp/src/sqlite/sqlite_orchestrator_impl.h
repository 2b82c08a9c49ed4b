// Internal: the SQLite orchestrator class, shared by its source files
//   sqlite_orchestrator.cc          schema, invocations, indexes, auto purge, wait graph
//   sqlite_orchestrator_runners.cc  heartbeats, recovery queries, atomic-service rows
// Not a public header; users go through NewSqliteOrchestrator.
//
// Thread safety: the object holds no mutable state of its own; every public
// method runs as one Database::Read or Database::Write transaction, so each is
// atomic with respect to every other call, in this process or another one on
// the same file. Every read-validate-write (status CAS, single-runner gate,
// first-finalisation-wins) happens inside one BEGIN IMMEDIATE transaction.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sqlite/sqlite_orchestrator.h"

namespace pynenc_cpp::sqlite_orchestrator {

// Error plumbing for the transaction callbacks (which return Status).
// SQ_PREPARE(q, conn, sql) declares `sqlite::Stmt& q` or returns the error.
#define SQ_PREPARE(name, conn, sql)                            \
  Result<sqlite::Stmt*> name##_prepared = (conn).Prepare(sql); \
  if (!name##_prepared.ok()) return name##_prepared.status();  \
  sqlite::Stmt& name = *name##_prepared.value()
// SQ_STEP(row, q) declares `const bool row` (a row is available) or returns the error.
#define SQ_STEP(var, stmt)                                \
  Result<bool> var##_stepped = (stmt).Step();             \
  if (!var##_stepped.ok()) return var##_stepped.status(); \
  const bool var = var##_stepped.value()
#define SQ_RETURN_IF_ERROR(expr)             \
  do {                                       \
    Status sq_status_ = (expr);              \
    if (!sq_status_.ok()) return sq_status_; \
  } while (0)

// " AND <column> IN ('a','b')" for a non-empty list, "" for an empty one (no
// filter). The names are the fixed StatusName literals, never user text.
std::string StatusFilter(const std::string& column, const std::vector<InvocationStatus>& statuses);

// Reads a status stored as its name; kBackendFailure for an unknown one.
Result<InvocationStatus> StatusFromColumn(const sqlite::Stmt& stmt, int col);

class SqliteOrchestrator final : public Orchestrator {
 public:
  SqliteOrchestrator(std::shared_ptr<sqlite::Database> db, const BackendConfig& config)
      : db_(std::move(db)), app_id_(config.app_id), clock_(ClockOrReal(config)) {}

  // Creates the tables and indexes unless present.
  Status Init();

  // sqlite_orchestrator.cc
  Result<StatusRecord> RegisterInvocations(const std::vector<NewInvocation>& invocations,
                                           const std::optional<std::string>& runner_id) override;
  Result<StatusRecord> TransitionStatus(const InvocationId& id, InvocationStatus to,
                                        const std::optional<std::string>& runner_id) override;
  Result<StatusRecord> TransitionStatusFromOwner(
      const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
      const std::optional<std::string>& expected_owner) override;
  // TransitionStatus, and with `expected_owner` (not null) TransitionStatusFromOwner.
  Result<StatusRecord> Transition(const InvocationId& id, InvocationStatus to,
                                  const std::optional<std::string>& runner_id,
                                  const std::optional<std::string>* expected_owner);
  Result<StatusRecord> GetStatusRecord(const InvocationId& id) override;
  Result<std::vector<InvocationId>> FilterByStatus(
      const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) override;
  // Blocks on the database's WakeBoard final-status slot (any process), no polling.
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

  // sqlite_orchestrator_runners.cc
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
  // Runs `sql` (a SELECT whose column 0 is an invocation id and whose
  // parameter 1 is the app id) in one read transaction and collects the ids.
  // `bind` binds the remaining parameters.
  Result<std::vector<InvocationId>> SelectIds(
      const std::string& sql, const std::function<void(sqlite::Stmt&)>& bind = nullptr);
  // Deletes `id`'s row, argument index and wait-graph edges. REQUIRES: inside a
  // Write transaction.
  Status ForgetInTxn(sqlite::Conn& conn, const std::string& id);
  // Deletes every wait-graph edge into and out of `id`. REQUIRES: inside a Write.
  Status ReleaseInTxn(sqlite::Conn& conn, const std::string& id);

  const std::shared_ptr<sqlite::Database> db_;
  const std::string app_id_;
  const std::shared_ptr<Clock> clock_;
};

}  // namespace pynenc_cpp::sqlite_orchestrator
