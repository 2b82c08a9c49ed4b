// CppRunner's engine threads on the Python side (the rest of the runner that
// touches Python: runner.cc): each engine thread's persistent Python thread state
// and what it carries between calls, WithGil (every entry into Python), the Python
// callables of one engine (PyCallbacks) and the engine hooks made of them
// (MakeHooks, runner_hooks.cc). Thread model: runner.cc's first comment.
#pragma once

#include <Python.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "conversions.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "pynenc_cpp/runner/claiming_take.h"
#include "pynenc_cpp/runner/invocation_source.h"
#include "pynenc_cpp/runner/runner_engine.h"

// Hidden, as pybind11's own namespace is (PyCallbacks holds py::objects): as when
// these were file-local to runner.cc, nothing here is exported from the module.
namespace pynenc_cpp::bindings {
namespace runner_hooks __attribute__((visibility("hidden"))) {

// This engine thread's persistent Python thread state (nullptr: not an engine
// thread, or it has none). The per-thread state itself (thread state, identity, the
// last take, references to release) is runner_hooks.cc's alone.
PyThreadState* EngineThreadState();
// The index of this thread among the workers of the engine `engine_key` (-1: not
// one of its worker threads).
int EngineWorker(const void* engine_key);
// Releases what this thread dropped while it did not hold the GIL.
// REQUIRES: the GIL, on this thread.
void DropStashed();

// A task's result that its run left for the engine to store, as execute_taken
// returns it (_core.PendingFinish; pynenc_cpp._run makes it).
struct PendingFinish {
  InvocationId id;
  std::string serialized;  // the result, serialized
  std::string task_key;
  bool release_waiters = true;
  std::string runner_id;
  py::object state;   // Python's, for finished_taken. REQUIRES: released with the GIL
  bool logs = false;  // Python writes the status change's log line: always called back
};

// The Python callables of one engine. Destroyed by whichever thread drops the
// engine's shared state last: with the GIL when possible, else leaked (the
// process is exiting).
struct PyCallbacks {
  py::object broker;     // keeps the engine broker (a BrokerSource's target) alive
  py::object lifecycle;  // keeps the Lifecycle of a claiming source alive
  Lifecycle* engine_lifecycle = nullptr;  // `lifecycle`'s engine object (set with it)
  // Invocations its finishes took ahead and its takes prefetched
  // (runner/claiming_take.h).
  std::shared_ptr<runner::HeldClaims> held = std::make_shared<runner::HeldClaims>();
  py::object execute, execute_taken, finished_taken, fallback_next, next_blocking, heartbeat,
      management, timed_out;
  py::object thread_started, report_error;
  PyInterpreterState* interp = nullptr;
  std::mutex mu;
  std::map<int, unsigned long> idents;  // worker index -> Python thread ident

  ~PyCallbacks() {
    DropPyObjects({&broker, &lifecycle, &execute, &execute_taken, &finished_taken, &fallback_next,
                   &next_blocking, &heartbeat, &management, &timed_out, &thread_started,
                   &report_error});
  }

  unsigned long Ident(int worker) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = idents.find(worker);
    return it == idents.end() ? 0 : it->second;
  }
};

// Runs `fn` with the GIL on this engine thread's persistent thread state.
// A Python exception escaping `fn` is reported as unraisable; returns false then.
template <typename Fn>
bool WithGil(const char* what, Fn&& fn) {
  PyThreadState* const tstate = EngineThreadState();
  if (tstate == nullptr) return false;
  PythonEntry entry;
  if (!entry) return false;
  PyEval_RestoreThread(tstate);
  DropStashed();
  bool ok = true;
  try {
    fn();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable(what);
    ok = false;
  } catch (const std::exception& e) {
    PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s: %s", what, e.what());
    PyErr_Clear();
    ok = false;
  }
  if (PyThreadState_Get() != tstate) ok = false;  // the callee swapped thread states
  PyEval_SaveThread();
  return ok;
}

// None -> nullopt, else the str. REQUIRES: the GIL.
std::optional<std::string> OptionalStr(const py::object& o);

// The engine's hooks (thread start / exit, execute, the optional ones that
// `cb` has a callable for), each entering Python through WithGil. `engine_key`
// identifies the engine for the worker-thread checks (EngineWorker).
runner::RunnerHooks MakeHooks(const std::shared_ptr<PyCallbacks>& cb, const void* engine_key);

// The workers' source in native mode: `take` over `queues` (woken through
// `broker`); what each take claimed goes to the execute hook on the same thread.
std::unique_ptr<runner::InvocationSource> MakeClaimingSource(
    const std::shared_ptr<PyCallbacks>& cb, std::shared_ptr<runner::ClaimingTake> take,
    Broker* broker, std::vector<std::string> queues);

}  // namespace runner_hooks
}  // namespace pynenc_cpp::bindings
