// CppRunner's engine hooks (runner_hooks.h): what each engine thread does on
// the Python side when it starts and exits, and each call into Python (execute,
// the store of a task's result left to the engine, heartbeat, management,
// timeouts, error reports). The Python object: runner.cc.
#include "runner_hooks.h"

#include <climits>
#include <utility>

#include "records.h"
#include "structs.h"

namespace pynenc_cpp::bindings {
namespace runner_hooks __attribute__((visibility("hidden"))) {

using runner::ExecOutcome;
using runner::RunnerHooks;

namespace {

// This engine thread's persistent Python thread state and identity.
thread_local PyThreadState* tls_tstate = nullptr;
thread_local const void* tls_engine = nullptr;
thread_local int tls_worker = INT_MIN;
// What this worker's source last took and claimed (runner::ClaimingTake), for the
// execute hook that follows on the same thread.
thread_local std::optional<TakenClaim> tls_taken;
// References this thread dropped while it did not hold the GIL (a finished run's
// PendingFinish state, the task's result in it): released at its next entry into
// Python, or when its take finds the queue empty (MakeClaimingSource).
thread_local std::vector<PyObject*> tls_to_drop;

}  // namespace

PyThreadState* EngineThreadState() { return tls_tstate; }

int EngineWorker(const void* engine_key) {
  return tls_engine == engine_key && tls_worker >= 0 ? tls_worker : -1;
}

void DropStashed() {
  if (tls_to_drop.empty()) return;
  std::vector<PyObject*> drop;
  drop.swap(tls_to_drop);
  for (PyObject* o : drop) Py_DECREF(o);
}

std::optional<std::string> OptionalStr(const py::object& o) {
  if (o.is_none()) return std::nullopt;
  return o.cast<std::string>();
}

namespace {

// execute_taken's return value: None, or a PendingFinish. REQUIRES: the GIL.
std::optional<PendingFinish> ReadPending(const py::object& r) {
  if (r.is_none()) return std::nullopt;
  if (!py::isinstance<PendingFinish>(r)) {
    throw py::type_error("execute_taken must return None or a _core.PendingFinish, got " +
                         std::string(py::str(py::type::of(r).attr("__name__"))));
  }
  return r.cast<const PendingFinish&>();
}

// Stores `p`'s result (FinishSuccess, with this worker's armed next take) without
// the GIL, then calls finished_taken(state, outcome) where Python has work left: an
// error, a trigger watching the status or the result, or the log line. Returns false
// when that raised (the worker is replaced). REQUIRES: the GIL not held.
bool FinishPending(PyCallbacks& cb, PendingFinish& p) {
  Lifecycle& lifecycle = *cb.engine_lifecycle;
  Result<FinishOutcome> out =
      runner::FinishArmed(lifecycle, p.id, p.serialized, true, Actor{p.runner_id, p.runner_id},
                  TaskId(p.task_key), p.release_waiters, runner::TakeArmedNext());
  if (!out.ok() && out.status().code() == ErrorCode::kBackendFailure) {
    metrics::OnBackendError(out.status().connection_lost());  // as EngineException counts it
  }
  const bool call_after =
      p.logs || !out.ok() || out.value().change.status_watched || out.value().payload_watched;
  if (!call_after) {
    tls_to_drop.push_back(p.state.release().ptr());
    return true;
  }
  const bool ok = WithGil("CppRunner worker", [&] {
    py::object state = std::move(p.state);
    cb.finished_taken(state,
                      out.ok() ? FinishOf(out.value()).obj : StatusError(out.status()));
  });
  if (p.state) p.state.release();  // Python was not entered: the process is exiting
  return ok;
}

}  // namespace

RunnerHooks MakeHooks(const std::shared_ptr<PyCallbacks>& cb, const void* engine_key) {
  RunnerHooks h;
  h.thread_started = [cb, engine_key](int worker) {
    PythonEntry entry;
    if (!entry) return;
    tls_tstate = PyThreadState_New(cb->interp);
    tls_engine = engine_key;
    tls_worker = worker;
    WithGil("CppRunner thread start", [&] {
      {
        std::lock_guard<std::mutex> lock(cb->mu);
        cb->idents[worker] = PyThread_get_thread_ident();
      }
      if (!cb->thread_started.is_none()) cb->thread_started(worker);
    });
  };
  h.thread_exiting = [cb](int worker) {
    {
      std::lock_guard<std::mutex> lock(cb->mu);
      cb->idents.erase(worker);
    }
    if (PythonEntry entry; tls_tstate != nullptr && entry) {
      PyEval_RestoreThread(tls_tstate);
      DropStashed();
      PyThreadState_Clear(tls_tstate);
      PyThreadState_DeleteCurrent();  // releases the GIL
    }
    tls_tstate = nullptr;
    tls_engine = nullptr;
    tls_worker = INT_MIN;
    tls_taken.reset();
    runner::DisarmNext();
    tls_to_drop.clear();  // left only when Python is gone: leaked with the process
  };
  h.execute = [cb](int, const std::string& id, bool claimed) {
    std::optional<TakenClaim> taken;
    if (tls_taken && tls_taken->id.str() == id) taken.swap(tls_taken);
    tls_taken.reset();
    std::optional<PendingFinish> pending;
    bool ok = WithGil("CppRunner worker", [&] {
      if (!taken) {
        cb->execute(py::str(id), claimed);
        return;
      }
      py::object claim = taken->claim_status.ok() ? ClaimOf(taken->claim).obj
                                                  : StatusError(taken->claim_status);
      pending = ReadPending(cb->execute_taken(py::str(id), claim));
    });
    // The task returned: its result is stored here, with the GIL released.
    if (pending) ok = FinishPending(*cb, *pending) && ok;
    return ok ? ExecOutcome::kDone : ExecOutcome::kReplaceWorker;
  };
  if (!cb->next_blocking.is_none()) {
    h.next_blocking = [cb](int) {
      std::optional<std::string> id;
      WithGil("CppRunner blocking invocations", [&] { id = OptionalStr(cb->next_blocking()); });
      return id;
    };
  }
  if (!cb->heartbeat.is_none()) {
    h.heartbeat = [cb] { WithGil("CppRunner heartbeat", [&] { cb->heartbeat(); }); };
  }
  if (!cb->management.is_none()) {
    h.management = [cb] { WithGil("CppRunner management", [&] { cb->management(); }); };
  }
  if (!cb->timed_out.is_none()) {
    h.timed_out = [cb](int worker, const std::string& id) {
      const unsigned long ident = cb->Ident(worker);
      WithGil("CppRunner task timeout", [&] { cb->timed_out(py::str(id), ident); });
    };
  }
  if (!cb->report_error.is_none()) {
    h.report_error = [cb](const std::string& message) {
      // Also called on worker threads that have a thread state.
      WithGil("CppRunner error report", [&] { cb->report_error(py::str(message)); });
    };
  }
  return h;
}

std::unique_ptr<runner::InvocationSource> MakeClaimingSource(
    const std::shared_ptr<PyCallbacks>& cb, std::shared_ptr<runner::ClaimingTake> take,
    Broker* broker, std::vector<std::string> queues) {
  std::weak_ptr<PyCallbacks> weak_cb = cb;
  auto next = [take = std::move(take), weak_cb](
                  const std::string& queue,
                  std::int64_t timeout_ms) -> Result<std::optional<std::string>> {
    Result<std::optional<runner::Taken>> r = take->Take(queue, timeout_ms);
    if (!r.ok()) return r.status();
    if (!r.value()) {
      // Idle: what the last run left to release is not kept while it waits.
      if (!tls_to_drop.empty()) WithGil("CppRunner worker", [] {});
      return std::optional<std::string>();
    }
    runner::Taken& taken = *r.value();
    if (!taken.prefetch_error.ok()) {
      std::shared_ptr<PyCallbacks> c = weak_cb.lock();
      if (c && !c->report_error.is_none()) {
        const std::string message = "prefetch failed: " + taken.prefetch_error.ToString();
        WithGil("CppRunner error report", [&] { c->report_error(py::str(message)); });
      }
    }
    std::string id = taken.claim.id.str();
    tls_taken = std::move(taken.claim);
    return std::optional<std::string>(std::move(id));
  };
  return runner::MakeQueueSource(
      std::move(next), [broker] { broker->Interrupt(); }, std::move(queues));
}

}  // namespace runner_hooks
}  // namespace pynenc_cpp::bindings
