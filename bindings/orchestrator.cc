// Bindings of the Orchestrator port (blocking control included; see
// ports/orchestrator.h). Plain values only: ids and statuses as str, times as
// int microseconds since the epoch, records as tuples:
//   status record        (status, runner_id | None, timestamp_us)
//   runner               (runner_id, creation_us, last_heartbeat_us,
//                         can_run_atomic_service, [queue, ...])
//   atomic-service row   (runner_id, run_id, start_us, end_us | None, status, reason)
#include "pynenc_cpp/ports/orchestrator.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "conversions.h"
#include "init.h"
#include "structs.h"

namespace pynenc_cpp::bindings {
namespace {

py::tuple ExecutionTuple(const AtomicServiceExecution& e) {
  return py::make_tuple(e.runner_id, e.run_id, e.start_us, e.end_us,
                        std::string(AtomicServiceStatusName(e.status)), e.reason);
}

py::list ExecutionList(const std::vector<AtomicServiceExecution>& rows) {
  py::list out;
  for (const AtomicServiceExecution& e : rows) out.append(ExecutionTuple(e));
  return out;
}

AtomicServiceStatus ParseServiceStatus(const std::string& name) {
  auto parsed = ParseAtomicServiceStatus(name);
  if (!parsed) {
    throw EngineException(
        Status::InvalidArgument("unknown atomic service execution status '" + name + "'"));
  }
  return *parsed;
}

}  // namespace

void InitOrchestrator(py::module_& m) {
  py::class_<Orchestrator, std::shared_ptr<Orchestrator>>(
      m, "Orchestrator",
      "Invocation status records and indexes, blocking control, runner heartbeats and\n"
      "atomic-service execution rows (thread-safe; every call is atomic).")
      .def(OpenFromUri(&OpenOrchestrator), py::arg("uri") = "memory://",
           py::arg("app_id") = "pynenc",
           "Opens the orchestrator named by `uri` for `app_id`. Raises BadConfig for an "
           "unusable URI.")
      // ---- invocations ----
      .def(
          "register",
          [](Orchestrator& o, const std::vector<std::tuple<InvocationId, TaskId, CallId>>& invs,
             std::optional<std::string> runner_id) {
            std::vector<NewInvocation> rows;
            rows.reserve(invs.size());
            for (const auto& [id, task, call] : invs) rows.push_back(NewInvocation{id, task, call});
            return StatusRecordOf(WithoutGil([&] { return o.RegisterInvocations(rows, runner_id); }));
          },
          py::arg("invocations"), py::arg("runner_id") = py::none(),
          "Registers (invocation_id, task_key, call_key) triples not yet known as REGISTERED\n"
          "owned by `runner_id`; known ids are untouched. Returns the REGISTERED record.")
      .def(
          "transition",
          [](Orchestrator& o, InvocationId id, InvocationStatus to,
             std::optional<std::string> runner_id) {
            return StatusRecordOf(WithoutGil([&] { return o.TransitionStatus(id, to, runner_id); }));
          },
          py::arg("invocation_id"), py::arg("status"), py::arg("runner_id") = py::none(),
          "Atomically validates and applies a status transition; returns the new record.\n"
          "Raises InvocationNotFound, IllegalTransition or OwnershipViolation.")
      .def(
          "transition_from_owner",
          [](Orchestrator& o, InvocationId id, InvocationStatus to,
             std::optional<std::string> runner_id, std::optional<std::string> expected_owner) {
            return StatusRecordOf(WithoutGil(
                [&] { return o.TransitionStatusFromOwner(id, to, runner_id, expected_owner); }));
          },
          py::arg("invocation_id"), py::arg("status"), py::arg("runner_id"),
          py::arg("expected_owner"),
          "transition(), applied only while the invocation is owned by `expected_owner`\n"
          "(None: by no runner), in the same compare-and-set: the fence of a recovery that\n"
          "found that owner dead. Raises OwnershipViolation when it changed hands since,\n"
          "InvocationNotFound, IllegalTransition.")
      .def(
          "status_record",
          [](Orchestrator& o, InvocationId id) {
            return StatusRecordOf(WithoutGil([&] { return o.GetStatusRecord(id); }));
          },
          py::arg("invocation_id"),
          "The current status record. Raises InvocationNotFound for an unknown id.")
      .def(
          "filter_by_status",
          [](Orchestrator& o, std::vector<InvocationId> ids,
             std::vector<InvocationStatus> statuses) {
            return WithoutGil([&] { return o.FilterByStatus(ids, statuses); });
          },
          py::arg("invocation_ids"), py::arg("statuses"),
          "The ids whose status is in `statuses`, in input order; unknown ids left out.")
      .def(
          "wait_any_final",
          [](Orchestrator& o, std::vector<InvocationId> ids,
             double timeout_sec) -> std::optional<InvocationId> {
            const TimestampUs timeout_us = TimeoutMicros(timeout_sec);
            return WithoutGil([&] { return o.WaitAnyFinal(ids, timeout_us); });
          },
          py::arg("invocation_ids"), py::arg("timeout_sec"),
          "Blocks (GIL released) until one of `invocation_ids` has a final status or\n"
          "`timeout_sec` passed; returns the first final id in input order, or None on\n"
          "timeout. Returns at once if one is already final; timeout <= 0 is a single check.\n"
          "Unknown ids count as not final. Memory: woken by the finishing transition;\n"
          "SQLite and Redis: polls the status rows (pause: a quarter of the time waited,\n"
          "100 us to 2 ms).\n"
          "Raises InvalidArgument for an empty id list or a NaN timeout.")
      .def(
          "index_arguments",
          [](Orchestrator& o, InvocationId id, std::map<std::string, std::string> args) {
            WithoutGil([&] { return o.IndexArguments(id, args); });
          },
          py::arg("invocation_id"), py::arg("serialized_arguments"),
          "Indexes the serialized arguments of a registered invocation.")
      .def(
          "existing_invocations",
          [](Orchestrator& o, TaskId task, std::map<std::string, std::string> key_args,
             std::vector<InvocationStatus> statuses) {
            return WithoutGil([&] { return o.GetExistingInvocations(task, key_args, statuses); });
          },
          py::arg("task_key"), py::arg("key_arguments"), py::arg("statuses"),
          "Invocations of a task matching every key argument and any of `statuses`\n"
          "(empty: no filter), in registration order.")
      .def(
          "gated_transition",
          [](Orchestrator& o, InvocationId id, TaskId task,
             std::map<std::string, std::string> key_args, std::vector<InvocationStatus> blocking,
             std::map<std::string, std::string> index_args, InvocationStatus to,
             std::optional<std::string> runner_id) {
            Orchestrator::GateOutcome out = WithoutGil([&] {
              return o.GatedTransition({id, task, std::move(key_args), std::move(blocking),
                                        std::move(index_args), to, std::move(runner_id)});
            });
            py::object blocker = py::none();
            if (out.blocker) blocker = py::str(out.blocker->str());
            return py::make_tuple(StatusRecordOf(out.record).obj, blocker);
          },
          py::arg("invocation_id"), py::arg("task_key"), py::arg("key_arguments"),
          py::arg("blocking"), py::arg("index_arguments"), py::arg("status"),
          py::arg("runner_id") = py::none(),
          "pynenc's running concurrency control and the transition it guards, in one atomic\n"
          "step: indexes `index_arguments`, then, unless another invocation of the task whose\n"
          "indexed arguments match `key_arguments` has a status in `blocking`, transitions to\n"
          "`status`. Returns (record, blocker id | None): the new record, or (blocked) the\n"
          "current one. Raises InvocationNotFound, IllegalTransition or OwnershipViolation.")
      .def(
          "task_invocations",
          [](Orchestrator& o, TaskId task) {
            return WithoutGil([&] { return o.GetTaskInvocations(task); });
          },
          py::arg("task_key"), "Every invocation of a task, in registration order.")
      .def(
          "call_invocations",
          [](Orchestrator& o, CallId call) {
            return WithoutGil([&] { return o.GetCallInvocations(call); });
          },
          py::arg("call_key"), "Every invocation of a call, in registration order.")
      .def(
          "list_invocations",
          [](Orchestrator& o, std::optional<TaskId> task, std::vector<InvocationStatus> statuses,
             std::int64_t limit, std::int64_t offset) {
            return WithoutGil([&] { return o.ListInvocations(task, statuses, limit, offset); });
          },
          py::arg("task_key") = py::none(), py::arg("statuses") = std::vector<InvocationStatus>{},
          py::arg("limit") = 100, py::arg("offset") = 0,
          "A page of matching invocations, newest status first. Raises InvalidArgument for a\n"
          "negative limit or offset.")
      .def(
          "count_invocations",
          [](Orchestrator& o, std::optional<TaskId> task, std::vector<InvocationStatus> statuses) {
            return WithoutGil([&] { return o.CountInvocations(task, statuses); });
          },
          py::arg("task_key") = py::none(), py::arg("statuses") = std::vector<InvocationStatus>{},
          "Number of matching invocations.")
      .def(
          "increment_retries",
          [](Orchestrator& o, InvocationId id) {
            WithoutGil([&] { return o.IncrementRetries(id); });
          },
          py::arg("invocation_id"), "Adds one retry. Raises InvocationNotFound for an unknown id.")
      .def(
          "retries",
          [](Orchestrator& o, InvocationId id) {
            return WithoutGil([&] { return o.GetRetries(id); });
          },
          py::arg("invocation_id"), "The retry count. Raises InvocationNotFound for an unknown id.")
      .def(
          "schedule_auto_purge",
          [](Orchestrator& o, InvocationId id) {
            WithoutGil([&] { return o.ScheduleAutoPurge(id); });
          },
          py::arg("invocation_id"),
          "Marks an invocation for auto_purge, stamped now. Raises InvocationNotFound.")
      .def(
          "auto_purge",
          [](Orchestrator& o, std::int64_t older_than_us) {
            return WithoutGil([&] { return o.AutoPurge(older_than_us); });
          },
          py::arg("older_than_us"),
          "Forgets every invocation marked at or before now - older_than_us; returns their ids.")
      // ---- blocking control ----
      .def(
          "waiting_for_results",
          [](Orchestrator& o, InvocationId waiter, std::vector<InvocationId> waited) {
            WithoutGil([&] { return o.WaitingForResults(waiter, waited); });
          },
          py::arg("caller_invocation_id"), py::arg("result_invocation_ids"),
          "Records that the caller waits for each of the result invocations.")
      .def(
          "release_waiters",
          [](Orchestrator& o, InvocationId waited) {
            WithoutGil([&] { return o.ReleaseWaiters(waited); });
          },
          py::arg("waited_invocation_id"), "Drops every wait edge into and out of the invocation.")
      .def(
          "blocking_invocations",
          [](Orchestrator& o, std::int64_t max_count) {
            return WithoutGil([&] { return o.GetBlockingInvocations(max_count); });
          },
          py::arg("max_num_invocations"),
          "Up to max_num_invocations ids waited on, not waiting, available to run; oldest first.")
      // ---- runners and recovery ----
      .def(
          "deregister_runners",
          [](Orchestrator& o, std::vector<std::string> runner_ids) {
            WithoutGil([&] { return o.DeregisterRunners(runner_ids); });
          },
          py::arg("runner_ids"),
          "Forgets each runner's heartbeat row (a graceful stop); unknown ids are skipped.")
      .def(
          "register_heartbeats",
          [](Orchestrator& o, std::vector<std::string> ids, bool can_run,
             std::optional<std::vector<std::string>> queues) {
            WithoutGil([&] { return o.RegisterHeartbeats(ids, can_run, queues); });
          },
          py::arg("runner_ids"), py::arg("can_run_atomic_service") = false,
          py::arg("consumed_queues") = py::none(),
          "Creates or refreshes runner heartbeats (one timestamp for the batch).")
      .def(
          "active_runners",
          [](Orchestrator& o, std::int64_t timeout_us, std::optional<bool> can_run) {
            auto runners = WithoutGil([&] { return o.ActiveRunners(timeout_us, can_run); });
            py::list out;
            for (const RunnerInfo& r : runners) {
              out.append(py::make_tuple(r.runner_id, r.creation_us, r.last_heartbeat_us,
                                        r.can_run_atomic_service, r.consumed_queues));
            }
            return out;
          },
          py::arg("timeout_us"), py::arg("can_run_atomic_service") = py::none(),
          "Runners with a heartbeat within timeout_us, by creation time then id.")
      .def(
          "pending_for_recovery",
          [](Orchestrator& o, std::int64_t max_pending_us) {
            return WithoutGil([&] { return o.PendingForRecovery(max_pending_us); });
          },
          py::arg("max_pending_us"), "PENDING invocations older than max_pending_us.")
      .def(
          "running_for_recovery",
          [](Orchestrator& o, std::int64_t timeout_us) {
            return WithoutGil([&] { return o.RunningForRecovery(timeout_us); });
          },
          py::arg("timeout_us"),
          "RUNNING invocations whose owner has no heartbeat within timeout_us.")
      .def(
          "pending_of_dead_runners",
          [](Orchestrator& o, std::int64_t timeout_us) {
            return WithoutGil([&] { return o.PendingOfDeadRunners(timeout_us); });
          },
          py::arg("timeout_us"),
          "PENDING invocations claimed by a runner whose last heartbeat is older than\n"
          "timeout_us (an owner that never heartbeated is left to pending_for_recovery).")
      // ---- atomic-service executions ----
      .def(
          "record_atomic_service_start",
          [](Orchestrator& o, std::string runner_id, std::string run_id,
             std::optional<std::int64_t> started_at_us, std::string status, std::string reason) {
            const AtomicServiceStatus s = ParseServiceStatus(status);
            auto r = WithoutGil([&] {
              return o.RecordAtomicServiceStart(runner_id, run_id, started_at_us, s, reason);
            });
            return py::make_tuple(r.accepted, r.started_at_us);
          },
          py::arg("runner_id"), py::arg("run_id"), py::arg("started_at_us"),
          py::arg("status") = "running", py::arg("reason") = "",
          "Inserts an execution row; for 'running' at most one may be active.\n"
          "Returns (accepted, started_at_us).")
      .def(
          "finalize_atomic_service",
          [](Orchestrator& o, std::string runner_id, std::string run_id, std::int64_t end_us,
             std::string status, std::string reason) {
            const AtomicServiceStatus s = ParseServiceStatus(status);
            WithoutGil(
                [&] { return o.FinalizeAtomicService(runner_id, run_id, end_us, s, reason); });
          },
          py::arg("runner_id"), py::arg("run_id"), py::arg("end_us"), py::arg("status"),
          py::arg("reason") = "",
          "Moves a running execution to a terminal status (first finalisation wins).")
      .def(
          "active_atomic_service_executions",
          [](Orchestrator& o) {
            return ExecutionList(WithoutGil([&] { return o.ActiveAtomicServiceExecutions(); }));
          },
          "Running executions, most recently started first.")
      .def(
          "atomic_service_executions_in_range",
          [](Orchestrator& o, std::int64_t start_us, std::int64_t end_us, std::int64_t limit,
             std::optional<std::string> runner_id, std::int64_t min_duration_us) {
            return ExecutionList(WithoutGil([&] {
              return o.AtomicServiceExecutionsInRange(start_us, end_us, limit, runner_id,
                                                      min_duration_us);
            }));
          },
          py::arg("start_us"), py::arg("end_us"), py::arg("limit") = 1000,
          py::arg("runner_id") = py::none(), py::arg("min_duration_us") = 0,
          "Executions overlapping [start_us, end_us], most recently started first.")
      .def(
          "purge_atomic_service_executions",
          [](Orchestrator& o, std::int64_t retention_us, std::int64_t max_records,
             std::vector<std::string> protected_run_ids) {
            ExecutionPurgePolicy policy{retention_us, max_records, std::move(protected_run_ids)};
            return WithoutGil([&] { return o.PurgeAtomicServiceExecutions(policy); });
          },
          py::arg("retention_us"), py::arg("max_records"),
          py::arg("protected_run_ids") = std::vector<std::string>{},
          "Drops finished executions by age and count, sparing protected run ids; returns\n"
          "how many were dropped.")
      .def(
          "purge", [](Orchestrator& o) { WithoutGil([&] { return o.Purge(); }); },
          "Forgets every invocation, wait edge, runner and execution.");
}

}  // namespace pynenc_cpp::bindings
