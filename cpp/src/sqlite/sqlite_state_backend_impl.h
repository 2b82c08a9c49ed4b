// Internal to the SQLite state backend: the backend class, shared by its files
//   sqlite_state_backend.cc            schema, factory, invocations, results, purge
//   sqlite_state_backend_history.cc    history (by invocation and by time range)
//   sqlite_state_backend_workflows.cc  runner contexts, app info, workflows
// Not a public header; users go through sqlite_state_backend.h.
//
// Thread safety: the object holds no mutable state of its own; every method is
// one Database::Read or Database::Write transaction (sqlite_state_backend.h).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/ports/state_backend.h"
#include "sqlite/sqlite_db.h"

// Error plumbing of the state backend's files. sqlite_orchestrator_impl.h has
// macros of the same names, defined otherwise: a file includes one of the two.
#define SQ_RETURN_IF_ERROR(expr)           \
  do {                                     \
    ::pynenc_cpp::Status sq_status_ = (expr); \
    if (!sq_status_.ok()) return sq_status_;  \
  } while (false)

// Declares `Stmt& var` prepared from `sql` on `conn`, or returns the error.
#define SQ_PREPARE(var, conn, sql)             \
  Result<Stmt*> var##_or = (conn).Prepare(sql); \
  if (!var##_or.ok()) return var##_or.status(); \
  Stmt& var = *var##_or.value()

namespace pynenc_cpp::sqlite::state_impl {

// Steps `q` to the end, calling `row(q)` for each row; stops at the first
// non-OK Status `row` returns.
template <typename F>
Status EachRow(Stmt& q, F&& row) {
  while (true) {
    Result<bool> has = q.Step();
    if (!has.ok()) return has.status();
    if (!has.value()) return Status::Ok();
    SQ_RETURN_IF_ERROR(row(q));
  }
}

class SqliteStateBackend final : public StateBackend {
 public:
  SqliteStateBackend(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  // --- invocations (sqlite_state_backend.cc) ---
  Status UpsertInvocations(const std::vector<InvocationRecord>& records) override;
  Result<InvocationRecord> GetInvocation(const InvocationId& id) override;
  Result<std::vector<InvocationId>> ChildInvocations(const InvocationId& parent) override;
  Result<std::vector<InvocationId>> InvocationsByParentEvent(const std::string& event_id) override;
  Result<std::vector<InvocationId>> InvocationIdsByWorkflow(
      const std::optional<std::string>& workflow_id,
      const std::optional<std::string>& workflow_type) override;

  // --- history (sqlite_state_backend_history.cc) ---
  Status AddHistories(const std::vector<InvocationId>& ids, const HistoryRecord& record) override;
  Result<std::vector<HistoryRecord>> GetHistory(const InvocationId& id) override;
  Result<HistoryPage> HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                     std::optional<HistoryPosition> after,
                                     std::size_t limit) override;
  Result<std::vector<InvocationId>> InvocationsInRange(TimestampUs start_us, TimestampUs end_us,
                                                       const std::optional<InvocationId>& after,
                                                       std::size_t limit) override;

  // --- results and exceptions (sqlite_state_backend.cc) ---
  Status SetResult(const InvocationId& id, const std::string& serialized) override;
  Result<std::string> GetResult(const InvocationId& id) override;
  Status SetException(const InvocationId& id, const std::string& serialized) override;
  Result<std::string> GetException(const InvocationId& id) override;

  // --- runner contexts (sqlite_state_backend_workflows.cc) ---
  Status StoreRunnerContext(const RunnerContextRecord& r) override;
  Result<RunnerContextRecord> GetRunnerContext(const RunnerId& runner_id) override;
  Result<std::vector<RunnerContextRecord>> GetRunnerContexts(
      const std::vector<RunnerId>& runner_ids) override;
  Result<std::vector<RunnerContextRecord>> MatchRunnerContexts(
      const std::string& partial_id) override;

  // --- app info (sqlite_state_backend_workflows.cc) ---
  Status StoreAppInfo(const std::string& app_id, const std::string& app_info_json) override;
  Result<std::string> GetAppInfo() override;

  // --- workflows (sqlite_state_backend_workflows.cc) ---
  Status StoreWorkflowRun(const WorkflowRecord& run) override;
  Result<std::vector<TaskId>> WorkflowTypes() override;
  Result<std::vector<WorkflowRecord>> WorkflowRuns(
      const std::optional<TaskId>& workflow_type) override;
  Status StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                    const InvocationId& sub_invocation) override;
  Result<std::vector<InvocationId>> WorkflowSubInvocations(const WorkflowId& workflow) override;
  Status SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                         const std::string& value) override;
  Result<std::string> GetWorkflowData(const WorkflowId& workflow, const std::string& key) override;

  // --- purge (sqlite_state_backend.cc) ---
  Status Purge() override;

 private:
  // Statement helpers (sqlite_state_backend.cc).
  Result<std::vector<InvocationId>> Ids(const std::string& sql,
                                        const std::vector<std::string>& params);
  Status PutValue(const char* table, const InvocationId& id, const std::string& value);
  Result<std::string> GetValue(const char* table, const InvocationId& id,
                               const std::string& missing);

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
};

}  // namespace pynenc_cpp::sqlite::state_impl
