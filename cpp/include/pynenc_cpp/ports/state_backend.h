// StateBackend port: what pynenc's BaseStateBackend persists. Payloads the engine
// does not query (serialized arguments, history JSON, results, exceptions, app
// info, workflow data values) are opaque strings, serialized by the Python adapter
// exactly as pynenc's sqlite_state_backend does; the fields the engine queries on
// are typed and indexed.
//
// Mapping of pynenc's abstract members:
//   _upsert_invocations -> UpsertInvocations     _get_invocation -> GetInvocation
//   get_child_invocations -> ChildInvocations    get_invocations_by_parent_event
//                                                   -> InvocationsByParentEvent
//   get_invocation_ids_by_workflow -> InvocationIdsByWorkflow
//   _add_histories -> AddHistories               _get_history -> GetHistory
//   iter_history_in_timerange -> HistoryInRange (paged by HistoryPosition)
//   iter_invocations_in_timerange -> InvocationsInRange (paged by id)
//   _set_result/_get_result -> SetResult/GetResult
//   _set_exception/_get_exception -> SetException/GetException
//   _store_runner_context -> StoreRunnerContext  _get_runner_context -> GetRunnerContext
//   _get_runner_contexts -> GetRunnerContexts    get_matching_runner_contexts
//                                                   -> MatchRunnerContexts
//   store_app_info/get_app_info -> StoreAppInfo/GetAppInfo
//   discover_app_infos (static) -> DiscoverAppInfos(config) (free function)
//   store_workflow_run -> StoreWorkflowRun       get_all_workflow_types -> WorkflowTypes
//   get_all_workflow_runs/get_workflow_runs -> WorkflowRuns(type or nullopt)
//   store/get_workflow_sub_invocation(s) -> StoreWorkflowSubInvocation/WorkflowSubInvocations
//   set/get_workflow_data -> SetWorkflowData/GetWorkflowData
//   purge -> Purge
//
// Errors: a lookup of a record that does not exist returns kNotFound (invocation,
// result, exception, runner context, app info, workflow data key); queries that
// return collections return them empty instead. Nothing else fails for memory://.
// Thread safety: implementations are thread-safe; every call is atomic with
// respect to the others.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/ids.h"
#include "pynenc_cpp/core/status.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

// pynenc's WorkflowIdentity. `workflow_type` is the workflow task's TaskId.key.
struct WorkflowRecord {
  WorkflowId workflow_id;
  TaskId workflow_type;
  std::optional<WorkflowId> parent_workflow_id;

  bool operator==(const WorkflowRecord&) const = default;
};

// One stored invocation: pynenc's InvocationDTO + CallDTO, as sqlite stores them.
struct InvocationRecord {
  InvocationId invocation_id;
  CallId call_id;                    // CallId.key
  TaskId task_id;                    // CallId.task_id.key
  std::string arguments_id;          // CallId.args_id
  std::string serialized_arguments;  // opaque: json.dumps(CallDTO.serialized_arguments)
  std::optional<InvocationId> parent_invocation_id;
  std::optional<std::string> parent_event_id;
  std::optional<WorkflowRecord> workflow;

  bool operator==(const InvocationRecord&) const = default;
};

// One history entry of one invocation. `history_json` is InvocationHistory.to_json().
struct HistoryRecord {
  InvocationId invocation_id;
  TimestampUs timestamp_us = 0;
  InvocationStatus status = InvocationStatus::kRegistered;
  std::string history_json;

  bool operator==(const HistoryRecord&) const = default;
};

// A point in the engine's total order of history entries: by timestamp, then by
// arrival. Used as a resume cursor by HistoryInRange.
struct HistoryPosition {
  TimestampUs timestamp_us = 0;
  std::uint64_t sequence = 0;

  auto operator<=>(const HistoryPosition&) const = default;
};

struct HistoryPage {
  std::vector<HistoryRecord> records;
  // Pass back as `after` to read the next page; nullopt when this was the last one.
  std::optional<HistoryPosition> next;
};

// pynenc's RunnerContext, flattened as sqlite stores it (parent by id).
struct RunnerContextRecord {
  RunnerId runner_id;
  std::string runner_cls;
  std::optional<RunnerId> parent_runner_id;
  std::int64_t pid = 0;
  std::string hostname;
  std::int64_t thread_id = 0;

  bool operator==(const RunnerContextRecord&) const = default;
};

class StateBackend {
 public:
  StateBackend() = default;
  StateBackend(const StateBackend&) = delete;
  StateBackend& operator=(const StateBackend&) = delete;
  virtual ~StateBackend() = default;

  // --- invocations -------------------------------------------------------
  // Inserts or replaces each record, in order (a later duplicate id wins).
  // Replacing keeps the invocation's place in the parent / event / workflow
  // indexes' insertion order and moves it between them if those fields changed.
  virtual Status UpsertInvocations(const std::vector<InvocationRecord>& records) = 0;
  // kNotFound if `id` was never upserted (or was purged).
  virtual Result<InvocationRecord> GetInvocation(const InvocationId& id) = 0;
  // Ids whose parent_invocation_id is `parent`, in first-upsert order.
  virtual Result<std::vector<InvocationId>> ChildInvocations(const InvocationId& parent) = 0;
  // Ids whose parent_event_id is `event_id`, in first-upsert order.
  virtual Result<std::vector<InvocationId>> InvocationsByParentEvent(
      const std::string& event_id) = 0;
  // Ids of invocations that belong to a workflow, narrowed by each filter given
  // (nullopt or empty string: no filter on that field), in first-upsert order.
  virtual Result<std::vector<InvocationId>> InvocationIdsByWorkflow(
      const std::optional<std::string>& workflow_id,
      const std::optional<std::string>& workflow_type) = 0;

  // --- history -----------------------------------------------------------
  // Adds `record` (its invocation_id ignored) to the history of each id. An entry
  // with the same (id, timestamp, status) as an existing one replaces its JSON
  // (like sqlite's primary key) and keeps its position.
  virtual Status AddHistories(const std::vector<InvocationId>& ids,
                              const HistoryRecord& record) = 0;
  // The history of `id`, ordered by timestamp then arrival; empty if none.
  virtual Result<std::vector<HistoryRecord>> GetHistory(const InvocationId& id) = 0;
  // Up to `limit` (> 0, else kInvalidArgument) entries with start <= timestamp <=
  // end, in the same total order, strictly after `after` when given.
  virtual Result<HistoryPage> HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                             std::optional<HistoryPosition> after,
                                             std::size_t limit) = 0;
  // Up to `limit` (> 0, else kInvalidArgument) distinct ids with at least one
  // history entry in [start, end], ascending by id, strictly greater than `after`
  // when given. Fewer than `limit` means there are no more.
  virtual Result<std::vector<InvocationId>> InvocationsInRange(
      TimestampUs start_us, TimestampUs end_us, const std::optional<InvocationId>& after,
      std::size_t limit) = 0;

  // --- results and exceptions (opaque serialized strings) ----------------
  virtual Status SetResult(const InvocationId& id, const std::string& serialized) = 0;
  // kNotFound if no result was set for `id`.
  virtual Result<std::string> GetResult(const InvocationId& id) = 0;
  virtual Status SetException(const InvocationId& id, const std::string& serialized) = 0;
  // kNotFound if no exception was set for `id`.
  virtual Result<std::string> GetException(const InvocationId& id) = 0;

  // --- runner contexts ---------------------------------------------------
  // Inserts or replaces the context with the same runner_id.
  virtual Status StoreRunnerContext(const RunnerContextRecord& record) = 0;
  // kNotFound if no context with `runner_id` was stored.
  virtual Result<RunnerContextRecord> GetRunnerContext(const RunnerId& runner_id) = 0;
  // The stored contexts among `runner_ids`, in request order; unknown ids and
  // repeats are skipped.
  virtual Result<std::vector<RunnerContextRecord>> GetRunnerContexts(
      const std::vector<RunnerId>& runner_ids) = 0;
  // Contexts whose runner_id contains `partial_id` (case-sensitive substring),
  // ascending by runner_id.
  virtual Result<std::vector<RunnerContextRecord>> MatchRunnerContexts(
      const std::string& partial_id) = 0;

  // --- app info ----------------------------------------------------------
  // Registers `app_info_json` (AppInfo.to_json()) under `app_id` where
  // DiscoverAppInfos will find it (memory://: a process-wide registry).
  virtual Status StoreAppInfo(const std::string& app_id, const std::string& app_info_json) = 0;
  // The info registered under this backend's own app id; kNotFound if none.
  virtual Result<std::string> GetAppInfo() = 0;

  // --- workflows ---------------------------------------------------------
  // Inserts or replaces the run with the same workflow_id.
  virtual Status StoreWorkflowRun(const WorkflowRecord& run) = 0;
  // Distinct workflow types of the stored runs, ascending.
  virtual Result<std::vector<TaskId>> WorkflowTypes() = 0;
  // Stored runs of `workflow_type` (every run when nullopt), ascending by id.
  virtual Result<std::vector<WorkflowRecord>> WorkflowRuns(
      const std::optional<TaskId>& workflow_type) = 0;
  // Records that `sub_invocation` runs inside `workflow`; idempotent.
  virtual Status StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                            const InvocationId& sub_invocation) = 0;
  // Sub-invocations of `workflow`, in first-store order; empty if none.
  virtual Result<std::vector<InvocationId>> WorkflowSubInvocations(const WorkflowId& workflow) = 0;
  // Stores `value` (opaque serialized) under (workflow, key), replacing any old one.
  virtual Status SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                                 const std::string& value) = 0;
  // kNotFound if nothing is stored under (workflow, key).
  virtual Result<std::string> GetWorkflowData(const WorkflowId& workflow,
                                              const std::string& key) = 0;

  // Drops every record of this backend: invocations, history, results,
  // exceptions, runner contexts, workflow runs, sub-invocations and data. The app
  // info registration is kept: it describes the app, not its work, and pynenc
  // registers it only once, when the app opens its state backend.
  virtual Status Purge() = 0;
};

// Opens the state backend named by `config.uri`. kBadConfig for an unusable URI.
Result<std::unique_ptr<StateBackend>> OpenStateBackend(const BackendConfig& config);

// Every app info registered in the storage named by `config.uri` (config.app_id
// is ignored), as (app_id, app_info_json) pairs ascending by app id. For
// memory:// that is every app of this process. kBadConfig for an unusable URI.
Result<std::vector<std::pair<std::string, std::string>>> DiscoverAppInfos(
    const BackendConfig& config);

}  // namespace pynenc_cpp
