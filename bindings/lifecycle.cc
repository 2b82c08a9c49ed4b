// _core.Lifecycle: the composite operations of native mode (see
// pynenc_cpp/native/lifecycle.h). Registrations and conversions only; every
// operation is one engine call with the GIL released, except the quick ones of an
// in-process lifecycle (Quick below). Values cross as:
//   status record   _core.StatusRecord(status, runner_id | None, timestamp_us)
//   outcomes        _core.Claim, _core.Change, _core.Finish (bindings/structs.h)
//   invocation      the state backend's record dict (bindings/records.h)
#include "pynenc_cpp/native/lifecycle.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "conversions.h"
#include "init.h"
#include "pynenc_cpp/runner/claiming_take.h"
#include "records.h"
#include "structs.h"

namespace pynenc_cpp::bindings {
namespace {

// A serialized result read with its status, as str; None when there is none, or
// it is not UTF-8 (a damaged store: get_result reads it again and reports it).
py::object ResultText(const std::optional<std::string>& result) {
  if (!result) return py::none();
  PyObject* text =
      PyUnicode_DecodeUTF8(result->data(), static_cast<Py_ssize_t>(result->size()), nullptr);
  if (text == nullptr) {
    PyErr_Clear();
    return py::none();
  }
  return py::reinterpret_steal<py::object>(text);
}

// (invocation_id, status record | None, serialized result | None)
py::tuple FinalWaitTuple(const FinalWait& w) {
  if (!w.read) return py::make_tuple(w.id.str(), py::none(), py::none());
  return py::make_tuple(w.id.str(), StatusRecordOf(w.read->record).obj, ResultText(w.read->result));
}

Actor MakeActor(std::optional<std::string> runner_id, std::string runner_context_id) {
  return Actor{std::move(runner_id), std::move(runner_context_id)};
}

std::optional<TaskId> OptTask(const std::optional<std::string>& key) {
  if (!key) return std::nullopt;
  return TaskId(*key);
}

RecoveryKind ParseRecoveryKind(const std::string& kind) {
  if (kind == "pending") return RecoveryKind::kPending;
  if (kind == "running") return RecoveryKind::kRunning;
  throw EngineException(
      Status::InvalidArgument("recovery kind must be 'pending' or 'running', got '" + kind + "'"));
}

// Runs `fn`, an operation of `l` that does not wait by design, as WithoutGil
// does, but keeps the GIL when `l` is in-process (memory://): the call takes
// microseconds, and releasing the GIL for it would hand the GIL to a waiting
// thread and make this one wait to take it back (two thread switches; measured
// in bench/results/2026-11-26-stop-32-less-python-gil.md).
// REQUIRES: GIL held; the engine never takes the GIL while holding the locks `fn` takes.
template <typename Fn>
auto Quick(const Lifecycle& l, Fn&& fn) {
  if (l.InProcess()) return Unwrap(fn());
  return WithoutGil(std::forward<Fn>(fn));
}

// FinishSuccess / FinishFailure called from Python; on a runner worker whose take
// armed its next one (runner/claiming_take.h) for this lifecycle, FinishThenTake,
// the invocation it took ahead left for the engine's next take.
FinishOutcome FinishTakingNext(Lifecycle& l, const InvocationId& id, const std::string& payload,
                               bool success, const Actor& actor, const TaskId& task,
                               bool release_waiters) {
  std::optional<runner::NextTake> next = runner::TakeArmedNext();
  if (!next || next->lifecycle != &l) {
    return Quick(l, [&] {
      return runner::FinishArmed(l, id, payload, success, actor, task, release_waiters, {});
    });
  }
  return WithoutGil([&] {
    return runner::FinishArmed(l, id, payload, success, actor, task, release_waiters,
                               std::move(next));
  });
}

}  // namespace

void InitLifecycle(py::module_& m) {
  py::class_<Lifecycle>(
      m, "Lifecycle",
      "Native mode's composite operations over one app's components (thread-safe). On\n"
      "sqlite:// each operation is one transaction; on redis:// claim and finish are one\n"
      "Lua script in their common case; otherwise a sequence of atomic steps (see\n"
      "docs/native.md).")
      .def(py::init([](const std::string& uri, const std::string& app_id,
                       std::shared_ptr<Orchestrator> orchestrator,
                       std::shared_ptr<StateBackend> state_backend, std::shared_ptr<Broker> broker,
                       std::shared_ptr<TriggerStore> trigger, std::string status_context,
                       std::string result_context, std::string exception_context) {
             return Unwrap(OpenLifecycle(
                 LifecycleParts{std::move(orchestrator), std::move(state_backend),
                                std::move(broker), std::move(trigger)},
                 BackendConfig{uri, app_id, nullptr},
                 TriggerContextNames{std::move(status_context), std::move(result_context),
                                     std::move(exception_context)}));
           }),
           py::arg("uri"), py::arg("app_id"), py::arg("orchestrator"), py::arg("state_backend"),
           py::arg("broker"), py::arg("trigger").none(true), py::arg("status_context"),
           py::arg("result_context"), py::arg("exception_context"),
           "Builds the composite operations over the given component objects, opened on\n"
           "`uri` for `app_id`. `trigger` may be None (every watched flag is then True).\n"
           "The *_context names are the context types trigger conditions are registered\n"
           "under. Raises ValueError (InvalidArgument) for a missing component.")
      .def(
          "register_and_route",
          [](Lifecycle& l, const py::list& items, std::optional<std::string> runner_id,
             std::string runner_context_id) {
            std::vector<NewRoutedInvocation> batch;
            batch.reserve(items.size());
            for (py::handle item : items) {
              auto t = item.cast<py::tuple>();
              if (t.size() != 3) throw py::value_error("expected (record, queue, priority) items");
              batch.push_back(NewRoutedInvocation{InvocationFromDict(t[0].cast<py::dict>()),
                                                  t[1].cast<std::string>(), t[2].cast<double>()});
            }
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            ChangeOutcome out = Quick(l, [&] { return l.RegisterAndRoute(batch, actor); });
            return ChangeOf(out);
          },
          py::arg("items"), py::arg("runner_id"), py::arg("runner_context_id"),
          "pynenc's register_new_invocations in one call: upsert the (record, queue, priority)\n"
          "items, register them, one REGISTERED history row each, route them. Returns\n"
          "a Change (record, status_watched).")
      .def(
          "register_guarded",
          [](Lifecycle& l, const py::dict& record, std::string queue, double priority,
             std::map<std::string, std::string> key_args,
             std::map<std::string, std::string> index_args, std::optional<std::string> runner_id,
             std::string runner_context_id) -> py::tuple {
            NewRoutedInvocation item{InvocationFromDict(record), std::move(queue), priority};
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            Lifecycle::GuardedRegistration out = Quick(
                l, [&] { return l.RegisterGuarded(item, key_args, index_args, actor); });
            if (out.existing) return py::make_tuple(py::str(out.existing->str()), py::none(), false);
            return py::make_tuple(py::none(), StatusRecordOf(out.registered.record).obj,
                                  out.registered.status_watched);
          },
          py::arg("record"), py::arg("queue"), py::arg("priority"), py::arg("key_arguments"),
          py::arg("index_arguments"), py::arg("runner_id"), py::arg("runner_context_id"),
          "pynenc's route_call for a task with registration concurrency control, as one step:\n"
          "unless an invocation of the task whose indexed arguments match `key_arguments` is\n"
          "REGISTERED, register_and_route of this one record with `index_arguments` indexed.\n"
          "Returns (existing id, None, False) when one was found (nothing written), else\n"
          "(None, status record, status_watched).")
      .def(
          "change_status",
          [](Lifecycle& l, InvocationId id, InvocationStatus to,
             std::optional<std::string> runner_id, std::string runner_context_id,
             std::optional<std::string> task_key, bool release_waiters) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            ChangeOutcome out = Quick(l, [&] {
              return l.ChangeStatus(id, to, actor, OptTask(task_key), release_waiters);
            });
            return ChangeOf(out);
          },
          py::arg("invocation_id"), py::arg("status"), py::arg("runner_id"),
          py::arg("runner_context_id"), py::arg("task_key") = py::none(),
          py::arg("release_waiters") = true,
          "pynenc's set_invocation_status in one call: transition, waiter release and\n"
          "auto-purge mark for a final status, history row. Returns a Change (record,\n"
          "status_watched).\n"
          "Raises InvocationNotFound, IllegalTransition or OwnershipViolation.")
      .def(
          "gated_change",
          [](Lifecycle& l, InvocationId id, InvocationStatus to,
             std::optional<std::string> runner_id, std::string runner_context_id,
             std::string task_key, std::map<std::string, std::string> key_args,
             std::vector<InvocationStatus> blocking,
             std::map<std::string, std::string> index_args,
             std::vector<InvocationStatus> defer_path, std::optional<std::string> defer_queue,
             double defer_priority, bool release_waiters) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            std::optional<Deferral> deferral;
            if (!defer_path.empty()) {
              deferral = Deferral{std::move(defer_path), std::nullopt, release_waiters};
              if (defer_queue) deferral->route = std::make_pair(*defer_queue, defer_priority);
            }
            GatedChangeOutcome out = Quick(l, [&] {
              return l.GatedChange(id, to, actor, TaskId(task_key), key_args, blocking,
                                   index_args, deferral);
            });
            py::object blocker = py::none();
            if (out.blocker) blocker = py::str(out.blocker->str());
            const bool watched = out.change && out.change->status_watched;
            py::list deferred;
            for (const ChangeOutcome& c : out.deferred) {
              deferred.append(ChangeOf(c).obj);
            }
            return py::make_tuple(StatusRecordOf(out.record).obj, watched, blocker, deferred);
          },
          py::arg("invocation_id"), py::arg("status"), py::arg("runner_id"),
          py::arg("runner_context_id"), py::arg("task_key"), py::arg("key_arguments"),
          py::arg("blocking"), py::arg("index_arguments"),
          py::arg("defer_path") = std::vector<InvocationStatus>(),
          py::arg("defer_queue") = py::none(), py::arg("defer_priority") = 0.0,
          py::arg("release_waiters") = true,
          "pynenc's running concurrency control and the status change it guards (a claim:\n"
          "PENDING unless another is PENDING or RUNNING; a start: RUNNING unless another is\n"
          "RUNNING) as one step, with the history row (one transaction on SQLite). Blocked,\n"
          "the invocation goes through `defer_path` (each status with its history row) and,\n"
          "with `defer_queue`, is routed there, in the same operation. Returns (record,\n"
          "status_watched, blocker id | None, [a Change of each deferral step]). Raises InvocationNotFound, IllegalTransition or OwnershipViolation.")
      .def(
          "claim",
          [](Lifecycle& l, InvocationId id, std::optional<std::string> runner_id,
             std::string runner_context_id, bool start) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            ClaimOutcome out =
                Quick(l, [&] { return start ? l.ClaimAndStart(id, actor) : l.Claim(id, actor); });
            return ClaimOf(out);
          },
          py::arg("invocation_id"), py::arg("runner_id"), py::arg("runner_context_id"),
          py::arg("start") = false,
          "Claims one id taken from the broker: returns a Claim (kind, record, invocation dict |\n"
          "None, status_watched); kind is 'claimed' (now PENDING), 'not_available' or 'needs_check'\n"
          "(its task may have running concurrency control: nothing changed). With start=True\n"
          "a claimed invocation moves on to RUNNING in the same operation (both history\n"
          "rows; one script on Redis, one transaction on SQLite): kind 'started' instead.")
      .def(
          "take_and_start",
          [](Lifecycle& l, const std::string& queue, double timeout_sec,
             std::optional<std::string> runner_id, std::string runner_context_id) -> py::object {
            if (!(timeout_sec >= 0) || timeout_sec > 1e6) {
              throw py::value_error("timeout_sec must be a number of seconds in [0, 1e6]");
            }
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            std::optional<TakenClaim> taken = WithoutGil([&] {
              return l.TakeAndStart(queue, static_cast<std::int64_t>(timeout_sec * 1000.0), actor);
            });
            if (!taken) return py::none();
            py::object claim = taken->claim_status.ok() ? ClaimOf(taken->claim).obj
                                                        : StatusError(taken->claim_status);
            return py::make_tuple(taken->id.str(), claim);
          },
          py::arg("queue"), py::arg("timeout_sec"), py::arg("runner_id"),
          py::arg("runner_context_id"),
          "The broker's retrieve from `queue` (waiting up to `timeout_sec`), then claim(...,\n"
          "start=True) of the id taken: one Lua script on Redis when the queue has an id.\n"
          "Returns None (nothing arrived) or (invocation_id, claim), claim being claim()'s\n"
          "tuple or, when the claim failed, the exception it raised (not raised: the id has\n"
          "left the queue, the caller routes it back). Raises when the retrieval failed.")
      .def(
          "take_and_claim",
          [](Lifecycle& l, const std::string& queue, int max, std::optional<std::string> runner_id,
             std::string runner_context_id) -> py::list {
            if (max < 0 || max > 10'000) throw py::value_error("max must be in [0, 10000]");
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            std::vector<TakenClaim> taken =
                WithoutGil([&] { return l.TakeAndClaim(queue, max, actor); });
            py::list out;
            for (const TakenClaim& t : taken) {
              py::object claim = t.claim_status.ok() ? ClaimOf(t.claim).obj
                                                     : StatusError(t.claim_status);
              out.append(py::make_tuple(t.id.str(), claim));
            }
            return out;
          },
          py::arg("queue"), py::arg("max"), py::arg("runner_id"), py::arg("runner_context_id"),
          "A runner's prefetch: up to `max` ids of `queue` taken and claimed (claim(), no\n"
          "start) in one operation (one transaction on SQLite, one script on Redis), without\n"
          "waiting. Returns [(invocation_id, claim), ...] in queue order; the list ends at the\n"
          "first id not claimed at once (on Redis and SQLite left in the queue; in memory\n"
          "taken, with its claim tuple or the exception its claim raised). Raises when\n"
          "nothing could be taken for an error.")
      .def(
          "read_final",
          [](Lifecycle& l, InvocationId id, std::size_t max_result_bytes, bool arm) {
            FinalRead out = Quick(l, [&]() -> Result<FinalRead> {
              if (!arm) return l.ReadFinal(id, max_result_bytes);
              Result<FinalReads> armed = l.ReadFinalArmed(id, {}, max_result_bytes);
              if (!armed.ok()) return armed.status();
              return std::move(armed).value().first;
            });
            return py::make_tuple(StatusRecordOf(out.record).obj, ResultText(out.result));
          },
          py::arg("invocation_id"), py::arg("max_result_bytes"), py::arg("arm") = false,
          "(status record, serialized result | None): the result is there when the status\n"
          "is SUCCESS and the stored result is at most max_result_bytes long (one script on\n"
          "Redis). Raises InvocationNotFound for an unknown id. With arm=True, a status not\n"
          "final also registers this thread's next wait_any_final of the id (Redis: no\n"
          "registration round trip of its own when it follows within 5 s).")
      .def(
          "read_final_ahead",
          [](Lifecycle& l, InvocationId id, std::vector<InvocationId> ahead,
             std::size_t max_result_bytes, bool arm) {
            FinalReads out = Quick(l, [&] {
              return arm ? l.ReadFinalArmed(id, ahead, max_result_bytes)
                         : l.ReadFinalAhead(id, ahead, max_result_bytes);
            });
            py::list more;
            for (const auto& [ahead_id, read] : out.ahead) {
              more.append(py::make_tuple(ahead_id.str(), StatusRecordOf(read.record).obj,
                                         ResultText(read.result)));
            }
            return py::make_tuple(StatusRecordOf(out.first.record).obj, ResultText(out.first.result),
                                  more);
          },
          py::arg("invocation_id"), py::arg("ahead"), py::arg("max_result_bytes"),
          py::arg("arm") = false,
          "read_final(invocation_id, arm=arm) and, when that status is final, read_final of\n"
          "each id of `ahead` whose status is final too, in one call (one script on Redis):\n"
          "returns (status record, serialized result | None, [(id, status record, serialized\n"
          "result | None) for each final ahead id]). Raises InvocationNotFound for an unknown\n"
          "invocation_id; unknown ahead ids are left out.")
      .def(
          "wait_any_final",
          [](Lifecycle& l, std::vector<InvocationId> ids, double timeout_sec,
             std::size_t max_result_bytes) -> py::object {
            const TimestampUs timeout_us = TimeoutMicros(timeout_sec);
            std::optional<FinalWait> got =
                WithoutGil([&] { return l.WaitAnyFinal(ids, timeout_us, max_result_bytes); });
            if (!got) return py::none();
            return FinalWaitTuple(*got);
          },
          py::arg("invocation_ids"), py::arg("timeout_sec"), py::arg("max_result_bytes"),
          "The orchestrator's wait_any_final and read_final of the id it found, in one call\n"
          "(GIL released): None on timeout, else (invocation_id, status record | None,\n"
          "serialized result | None). The record is None when the wait could not read it\n"
          "(the caller reads it). On Redis the read costs no round trip of its own.")
      .def(
          "set_task_runs_freely",
          [](Lifecycle& l, const std::string& task_key) { l.SetTaskRunsFreely(TaskId(task_key)); },
          py::arg("task_key"),
          "Declares that the task has running concurrency control disabled, so claim moves\n"
          "its invocations to PENDING directly.")
      .def(
          "finish_success",
          [](Lifecycle& l, InvocationId id, std::string result,
             std::optional<std::string> runner_id, std::string runner_context_id,
             std::string task_key, bool release_waiters) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            return FinishOf(
                FinishTakingNext(l, id, result, true, actor, TaskId(task_key), release_waiters));
          },
          py::arg("invocation_id"), py::arg("serialized_result"), py::arg("runner_id"),
          py::arg("runner_context_id"), py::arg("task_key"), py::arg("release_waiters") = true,
          "pynenc's set_invocation_result in one call: store the result, then SUCCESS as\n"
          "change_status. Returns a Finish (record, status_watched, outcome_watched: the result).")
      .def(
          "finish_failure",
          [](Lifecycle& l, InvocationId id, std::string exception,
             std::optional<std::string> runner_id, std::string runner_context_id,
             std::string task_key, bool release_waiters) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            return FinishOf(FinishTakingNext(l, id, exception, false, actor, TaskId(task_key),
                                                release_waiters));
          },
          py::arg("invocation_id"), py::arg("serialized_exception"), py::arg("runner_id"),
          py::arg("runner_context_id"), py::arg("task_key"), py::arg("release_waiters") = true,
          "pynenc's set_invocation_exception in one call: store the exception, then FAILED as\n"
          "change_status. Returns a Finish (record, status_watched, outcome_watched: the\n"
          "exception).")
      .def(
          "retry",
          [](Lifecycle& l, InvocationId id, std::string queue, double priority,
             std::optional<std::string> runner_id, std::string runner_context_id,
             std::string task_key) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            ChangeOutcome out =
                WithoutGil([&] { return l.Retry(id, queue, priority, actor, TaskId(task_key)); });
            return ChangeOf(out);
          },
          py::arg("invocation_id"), py::arg("queue"), py::arg("priority"), py::arg("runner_id"),
          py::arg("runner_context_id"), py::arg("task_key"),
          "pynenc's set_invocation_retry in one call: RETRY (history), retries + 1, route to\n"
          "`queue` at `priority`. Returns a Change (record, status_watched).")
      .def(
          "reroute",
          [](Lifecycle& l, InvocationId id, std::string queue, double priority,
             std::optional<std::string> runner_id, std::string runner_context_id,
             std::string task_key) {
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            ChangeOutcome out =
                WithoutGil([&] { return l.Reroute(id, queue, priority, actor, TaskId(task_key)); });
            return ChangeOf(out);
          },
          py::arg("invocation_id"), py::arg("queue"), py::arg("priority"), py::arg("runner_id"),
          py::arg("runner_context_id"), py::arg("task_key"),
          "One invocation of pynenc's reroute_invocations in one call: REROUTED (history),\n"
          "route to `queue` at `priority`. Returns a Change (record, status_watched).")
      .def(
          "recover_stale",
          [](Lifecycle& l, const std::string& kind, std::int64_t limit_us,
             std::optional<std::string> runner_id, std::string runner_context_id) {
            RecoveryKind parsed = ParseRecoveryKind(kind);
            Actor actor = MakeActor(std::move(runner_id), std::move(runner_context_id));
            std::vector<Recovered> found =
                WithoutGil([&] { return l.RecoverStale(parsed, limit_us, actor); });
            py::list out;
            for (const Recovered& r : found) {
              out.append(
                  py::make_tuple(r.id, StatusRecordOf(r.change.record).obj, r.change.status_watched));
            }
            return out;
          },
          py::arg("kind"), py::arg("limit_us"), py::arg("runner_id"), py::arg("runner_context_id"),
          "The recovery sweep: kind 'pending' moves invocations PENDING for longer than\n"
          "`limit_us` to PENDING_RECOVERY, 'running' moves RUNNING ones whose owner's last\n"
          "heartbeat is older than `limit_us` to RUNNING_RECOVERY (history rows written).\n"
          "Returns [(invocation_id, record, status_watched)].");

  m.def(
      "history_json",
      [](InvocationId id, InvocationStatus status, std::optional<std::string> runner_id,
         std::int64_t timestamp_us, std::string runner_context_id,
         std::optional<std::string> registered_by) {
        return HistoryJson(id, StatusRecord{status, std::move(runner_id), timestamp_us},
                           runner_context_id, registered_by);
      },
      py::arg("invocation_id"), py::arg("status"), py::arg("runner_id"), py::arg("timestamp_us"),
      py::arg("runner_context_id"), py::arg("registered_by") = py::none(),
      "The history JSON the Lifecycle writes (pynenc's InvocationHistory.to_json layout).");
}

}  // namespace pynenc_cpp::bindings
