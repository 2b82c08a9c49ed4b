// CppRunner's engine (cpp/include/pynenc_cpp/runner) exposed to Python: the
// part of the runner that touches Python.
//
// Every engine thread (worker or timer) creates ONE Python thread state when it
// starts (PyThreadState_New on the main interpreter) and reuses it for every
// call: PyEval_RestoreThread before Python code, PyEval_SaveThread after, so the
// GIL is held only while Python runs. The thread state is cleared and deleted
// when the thread exits. Each entry passes the Python gate (python_gate.h): once
// the interpreter exits, engine threads no longer enter Python (their work is
// abandoned; the process is exiting).
//
// This file: the Python object (PyRunnerEngine: the engine plus the callables it
// calls, RunnerEngine in Python); the engine threads' Python side and the hooks:
// runner_hooks.h / runner_hooks.cc.
#include <Python.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conversions.h"
#include "init.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/runner/claiming_take.h"
#include "pynenc_cpp/runner/fd_watch.h"
#include "pynenc_cpp/runner/runner_engine.h"
#include "records.h"
#include "runner_hooks.h"

namespace pynenc_cpp::bindings {
namespace {

using runner::RunnerEngine;
using runner::RunnerOptions;
using runner_hooks::MakeHooks;
using runner_hooks::OptionalStr;
using runner_hooks::PendingFinish;
using runner_hooks::PyCallbacks;
using runner_hooks::EngineWorker;
using runner_hooks::MakeClaimingSource;
using runner_hooks::WithGil;

// RunnerEngine's three arguments, bound as RunnerSettings, RunnerSource and
// RunnerCallbacks: each is checked when it is made, so a bad value is reported
// against its own name.

// How many workers, how often the timer acts, how a worker takes.
struct EngineSettings {
  RunnerOptions options;
  runner::TakePolicy take;

  EngineSettings(int workers, double task_timeout_sec, double heartbeat_interval_sec,
                 double management_interval_sec, double retrieve_wait_sec,
                 double idle_backoff_sec, bool take_ahead, int prefetch) {
    auto ms = [](double sec, const char* name) {
      if (!(sec >= 0) || sec > 1e9) {
        throw py::value_error(std::string(name) + " must be a number of seconds >= 0");
      }
      return std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000.0));
    };
    if (workers < 1) throw py::value_error("workers must be >= 1, got " + std::to_string(workers));
    if (prefetch < 1 || prefetch > 1000) {
      throw py::value_error("prefetch must be in [1, 1000], got " + std::to_string(prefetch));
    }
    RunnerOptions& o = options;
    o.workers = workers;
    o.task_timeout = ms(task_timeout_sec, "task_timeout_sec");
    o.heartbeat_interval = ms(heartbeat_interval_sec, "heartbeat_interval_sec");
    o.management_interval = ms(management_interval_sec, "management_interval_sec");
    o.retrieve_wait = ms(retrieve_wait_sec, "retrieve_wait_sec");
    o.idle_backoff = ms(idle_backoff_sec, "idle_backoff_sec");
    if (o.task_timeout.count() > 0) {
      o.watchdog_tick = std::clamp(o.task_timeout / 10, std::chrono::milliseconds(10),
                                   std::chrono::milliseconds(500));
    }
    take = runner::TakePolicy{prefetch, take_ahead};
  }
};

// Where workers take invocations from: an engine broker over `queues`, with a
// lifecycle claiming in the same step (for `actor`), or a Python poll.
struct EngineSource {
  py::object broker, lifecycle, fallback_next;
  std::vector<std::string> queues;
  Actor actor;

  EngineSource(py::object broker_in, std::vector<std::string> queues_in, py::object lifecycle_in,
               std::optional<std::string> runner_id, std::string runner_context_id,
               py::object fallback_next_in)
      : broker(std::move(broker_in)),
        lifecycle(std::move(lifecycle_in)),
        fallback_next(std::move(fallback_next_in)),
        queues(std::move(queues_in)),
        actor{std::move(runner_id), std::move(runner_context_id)} {
    if (!broker.is_none()) {
      Cast<Broker>(broker, "broker must be an engine Broker (Storage.broker())");
      if (queues.empty()) throw py::value_error("queues must not be empty");
    } else if (!lifecycle.is_none()) {
      throw py::value_error("a lifecycle needs its engine broker");
    } else if (fallback_next.is_none()) {
      throw py::value_error("either an engine broker or fallback_next is required");
    }
    if (!lifecycle.is_none()) {
      Cast<Lifecycle>(lifecycle, "lifecycle must be an engine Lifecycle (Storage.lifecycle())");
    }
  }
  // `o` as the engine object it holds (pybind11's cast: a wrapper that forwards
  // pybind11's conduit, as a test's proxy does, counts), or a TypeError.
  template <typename T>
  static T* Cast(const py::object& o, const char* what) {
    try {
      return o.cast<T*>();
    } catch (const py::cast_error&) {
      throw py::type_error(std::string(what) + ", got " +
                           py::str(py::type::of(o).attr("__name__")).cast<std::string>());
    }
  }
};

// The Python callables the engine's threads call, with the GIL.
struct EngineCallbacks {
  py::object execute, execute_taken, finished_taken, next_blocking, heartbeat, management,
      timed_out, thread_started, report_error;

  EngineCallbacks(py::object execute_in, py::object execute_taken_in,
                  py::object finished_taken_in, py::object next_blocking_in,
                  py::object heartbeat_in, py::object management_in, py::object timed_out_in,
                  py::object thread_started_in, py::object report_error_in)
      : execute(std::move(execute_in)),
        execute_taken(std::move(execute_taken_in)),
        finished_taken(std::move(finished_taken_in)),
        next_blocking(std::move(next_blocking_in)),
        heartbeat(std::move(heartbeat_in)),
        management(std::move(management_in)),
        timed_out(std::move(timed_out_in)),
        thread_started(std::move(thread_started_in)),
        report_error(std::move(report_error_in)) {
    if (!Callable(execute)) throw py::type_error("execute must be callable");
  }
  static bool Callable(const py::object& f) { return !f.is_none() && PyCallable_Check(f.ptr()); }
};

// The Python object: the engine plus the callables it calls.
class PyRunnerEngine {
 public:
  PyRunnerEngine(const EngineSettings& settings, const EngineSource& from,
                 const EngineCallbacks& calls) {
    auto cb = std::make_shared<PyCallbacks>();
    cb->interp = PyInterpreterState_Main();
    cb->broker = from.broker;
    cb->fallback_next = from.fallback_next;
    cb->execute = calls.execute;
    cb->next_blocking = calls.next_blocking;
    cb->heartbeat = calls.heartbeat;
    cb->management = calls.management;
    cb->timed_out = calls.timed_out;
    cb->thread_started = calls.thread_started;
    cb->report_error = calls.report_error;
    std::unique_ptr<runner::InvocationSource> source;
    if (!from.lifecycle.is_none()) {
      if (!EngineCallbacks::Callable(calls.execute_taken)) {
        throw py::type_error("execute_taken must be callable when a lifecycle is given");
      }
      if (!EngineCallbacks::Callable(calls.finished_taken)) {
        throw py::type_error("finished_taken must be callable when a lifecycle is given");
      }
      auto* engine_lifecycle = from.lifecycle.cast<Lifecycle*>();
      auto* engine_broker = from.broker.cast<Broker*>();
      cb->lifecycle = from.lifecycle;
      cb->engine_lifecycle = engine_lifecycle;
      cb->execute_taken = calls.execute_taken;
      cb->finished_taken = calls.finished_taken;
      auto take = std::make_shared<runner::ClaimingTake>(engine_lifecycle, engine_broker, cb->held,
                                                         from.actor, settings.take);
      source = MakeClaimingSource(cb, std::move(take), engine_broker, from.queues);
    } else if (!from.broker.is_none()) {
      source = runner::MakeBrokerSource(from.broker.cast<Broker*>(), from.queues);
    } else {
      source = runner::MakeFunctionSource([cb]() -> Result<std::optional<std::string>> {
        std::optional<std::string> id;
        bool ok = WithGil("CppRunner retrieval", [&] { id = OptionalStr(cb->fallback_next()); });
        if (!ok) return Status::BackendFailure("the fallback retrieval raised (see the log)");
        return id;
      });
    }
    callbacks_ = cb;
    engine_ =
        std::make_unique<RunnerEngine>(settings.options, std::move(source), MakeHooks(cb, this));
  }

  ~PyRunnerEngine() {
    signal_watch_.reset();  // its thread nudges the engine: gone before it
    // Joining threads that need the GIL: drop it while the engine stops.
    if (PyGILState_Check()) {
      GilRelease release;
      engine_.reset();
    } else {
      engine_.reset();
    }
  }

  void Start() {
    WithoutGil([&] { return engine_->Start(); });
  }
  void Stop() {
    GilRelease release;
    engine_->Stop();
  }
  py::list Abort() {
    std::vector<runner::RunningTask> running;
    {
      GilRelease release;
      running = engine_->Abort();
    }
    return Describe(running);
  }
  py::list Running() const { return Describe(engine_->Running()); }

  // From now on a byte readable on `fd` (Python's signal wakeup fd) ends the
  // Wait in progress at once (after running the signal handlers), so they run
  // without waiting for a slice to end. Replaces an earlier watch. `fd` must stay open until
  // UnwatchSignals() (or this engine's end).
  void WatchSignals(int fd) {
    signal_watch_.reset();
    RunnerEngine* engine = engine_.get();
    signal_watch_ = Unwrap(runner::FdWatch::Start(fd, [engine] { engine->Nudge(); }));
  }
  void Nudge() { engine_->Nudge(); }
  // Ends the watch of WatchSignals (its thread never takes the GIL: joined with it held).
  void UnwatchSignals() { signal_watch_.reset(); }

  // Waits in slices with the GIL released; between slices runs Python's signal
  // handlers (main thread), so a SIGINT/SIGTERM handler acts within one slice, or
  // at once with WatchSignals. A nudge ends it (false) after the handlers ran.
  bool Wait(double timeout_sec, double slice_sec) {
    if (!(timeout_sec >= 0) || !(slice_sec > 0)) {
      throw py::value_error("timeout_sec must be >= 0 and slice_sec > 0");
    }
    // inf (or any huge value) means "as long as it takes": clamped before the
    // conversion to integers, which would otherwise be undefined.
    constexpr double kMaxSec = 1e9;  // ~31 years
    timeout_sec = std::min(timeout_sec, kMaxSec);
    slice_sec = std::min(slice_sec, kMaxSec);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(static_cast<std::int64_t>(timeout_sec * 1e6));
    const auto slice = std::chrono::milliseconds(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(slice_sec * 1000)));
    const std::uint64_t nudges = engine_->nudges();  // a later nudge ends this wait
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      bool done;
      {
        GilRelease release;
        done = engine_->Wait(std::max(std::chrono::milliseconds(0), std::min(left, slice)), nudges);
      }
      if (done) return true;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (left.count() <= 0 || engine_->nudges() != nudges) return false;
    }
  }

  bool MarkWaiting() {
    const int worker = EngineWorker(this);
    if (worker < 0) return false;
    engine_->MarkWaiting(worker);
    return true;
  }

  bool OnWorkerThread() const { return EngineWorker(this) >= 0; }
  std::string State() const { return runner::RunnerStateName(engine_->state()); }
  // The engine's orphans, and the invocations finishes took ahead or prefetches
  // claimed that no worker ran (after this, nothing is taken ahead or prefetched).
  std::vector<std::string> TakeOrphans() {
    std::vector<std::string> ids = engine_->TakeOrphans();
    std::vector<std::string> held;
    {
      GilRelease release;  // waits for a finish in flight, which may need the GIL after
      held = callbacks_->held->Close();
    }
    ids.insert(ids.end(), held.begin(), held.end());
    return ids;
  }
  // What finishes took ahead and prefetches claimed that no worker ran (after
  // this, nothing more is taken ahead or prefetched): a graceful stop routes
  // them back at once instead of holding them while running tasks finish.
  std::vector<std::string> TakeHeld() {
    GilRelease release;  // waits for a finish in flight, which may need the GIL after
    return callbacks_->held->Close();
  }
  int Waiting() const { return engine_->waiting(); }
  int LiveWorkers() const { return engine_->live_workers(); }
  std::int64_t Executed() const { return engine_->executed(); }
  std::int64_t TakenAhead() const { return callbacks_->held->handed_out(); }
  std::int64_t Prefetched() const { return callbacks_->held->prefetched(); }

 private:
  py::list Describe(const std::vector<runner::RunningTask>& tasks) const {
    py::list out;
    for (const auto& t : tasks)
      out.append(py::make_tuple(t.invocation_id, callbacks_->Ident(t.worker)));
    return out;
  }

  std::shared_ptr<PyCallbacks> callbacks_;
  std::unique_ptr<RunnerEngine> engine_;
  std::unique_ptr<runner::FdWatch> signal_watch_;  // WatchSignals; reset before engine_ goes
};

}  // namespace

void InitRunner(py::module_& m) {
  py::class_<PendingFinish>(
      m, "PendingFinish",
      "A task's result that its run left for CppRunner's engine to store\n"
      "(pynenc_cpp._run.run_invocation_to_finish): the engine stores it with the GIL\n"
      "released, then calls finished_taken(state, outcome) where Python has work left.")
      .def(py::init([](std::string invocation_id, std::string serialized, std::string task_key,
                       bool release_waiters, std::string runner_id, py::object state,
                       bool logs) {
             return PendingFinish{InvocationId(std::move(invocation_id)), std::move(serialized),
                                  std::move(task_key), release_waiters, std::move(runner_id),
                                  std::move(state), logs};
           }),
           py::arg("invocation_id"), py::arg("serialized"), py::arg("task_key"),
           py::arg("release_waiters"), py::arg("runner_id"), py::arg("state"), py::arg("logs"),
           "The result `serialized` of the task `task_key` that invocation `invocation_id`\n"
           "ran for `runner_id`, left to store; `state` is handed back to finished_taken.")
      .def_property_readonly("invocation_id",
                             [](const PendingFinish& p) { return p.id.str(); })
      .def_readonly("serialized", &PendingFinish::serialized)
      .def_readonly("task_key", &PendingFinish::task_key)
      .def_readonly("release_waiters", &PendingFinish::release_waiters,
                    "Whether the final status releases the invocations waiting on it.")
      .def_readonly("runner_id", &PendingFinish::runner_id)
      .def_readonly("state", &PendingFinish::state,
                    "Python's own, handed back to finished_taken.")
      .def_readonly("logs", &PendingFinish::logs,
                    "Python writes the status change's log line: finished_taken is always\n"
                    "called.");
  py::class_<EngineSettings>(m, "RunnerSettings",
                             "How a RunnerEngine runs: checked when made (ValueError).")
      .def(py::init<int, double, double, double, double, double, bool, int>(),
           py::arg("workers"), py::arg("task_timeout_sec"), py::arg("heartbeat_interval_sec"),
           py::arg("management_interval_sec"), py::arg("retrieve_wait_sec") = 5.0,
           py::arg("idle_backoff_sec") = 0.01, py::arg("take_ahead") = true,
           py::arg("prefetch") = 1,
           "`workers` threads; 0 disables an interval or the task timeout. With\n"
           "`take_ahead`, a worker's finish also takes its next invocation where the storage\n"
           "does both in one operation (SQLite, Redis: Lifecycle.FinishThenTake). With\n"
           "`prefetch` K > 1, a take that leaves the queue non-empty also claims up to K - 1\n"
           "more in one operation (Lifecycle.take_and_claim), held for this engine's workers.");
  py::class_<EngineSource>(m, "RunnerSource",
                           "Where a RunnerEngine's workers take invocations from.")
      .def(py::init<py::object, std::vector<std::string>, py::object, std::optional<std::string>,
                    std::string, py::object>(),
           py::arg("broker") = py::none(), py::arg("queues") = std::vector<std::string>{},
           py::arg("lifecycle") = py::none(), py::arg("runner_id") = py::none(),
           py::arg("runner_context_id") = "", py::arg("fallback_next") = py::none(),
           "`broker`: an engine Broker to block on over `queues`, or None to poll\n"
           "`fallback_next() -> str | None` (GIL held, the settings' idle_backoff_sec between\n"
           "empty answers). With `lifecycle` (a native Lifecycle over `broker`), workers take\n"
           "and claim in one step (Lifecycle.take_and_start for runner_id /\n"
           "runner_context_id).");
  py::class_<EngineCallbacks>(m, "RunnerCallbacks",
                              "The callables a RunnerEngine's threads call, with the GIL.")
      .def(py::init<py::object, py::object, py::object, py::object, py::object, py::object,
                    py::object, py::object, py::object>(),
           py::arg("execute"), py::arg("execute_taken") = py::none(),
           py::arg("finished_taken") = py::none(), py::arg("next_blocking") = py::none(),
           py::arg("heartbeat") = py::none(), py::arg("management") = py::none(),
           py::arg("timed_out") = py::none(), py::arg("thread_started") = py::none(),
           py::arg("report_error") = py::none(),
           "execute(id, claimed), next_blocking() -> str | None, heartbeat(), management(),\n"
           "timed_out(id, thread_ident), thread_started(worker_index), report_error(message).\n"
           "With a source's lifecycle, workers call execute_taken(id, claim) instead, claim as\n"
           "take_and_start returns it; it returns None, or a task's serialized result left to\n"
           "store (PendingFinish), which the worker stores with the GIL\n"
           "released, then calls finished_taken(state, outcome) when the store failed, a\n"
           "trigger watches it or a log line is due.");
  py::class_<PyRunnerEngine>(
      m, "RunnerEngine",
      "The C++ loop of CppRunner: worker threads (one persistent Python thread state each)\n"
      "retrieving from an engine broker with the GIL released, a timer thread for\n"
      "heartbeats, management duties and the task-timeout watchdog. Thread-safe.")
      .def(py::init<const EngineSettings&, const EngineSource&, const EngineCallbacks&>(),
           py::arg("settings"), py::arg("source"), py::arg("callbacks"),
           "Builds a stopped engine: `settings` (RunnerSettings), where its workers take\n"
           "invocations from (RunnerSource) and the Python callables its threads call\n"
           "(RunnerCallbacks).")
      .def("start", &PyRunnerEngine::Start, "Starts the workers and the timer thread.")
      .def("stop", &PyRunnerEngine::Stop,
           "Graceful stop: no more retrieval; running invocations finish.")
      .def("abort", &PyRunnerEngine::Abort,
           "Immediate stop: returns [(invocation_id, thread_ident)] of what was running.")
      .def("running", &PyRunnerEngine::Running,
           "[(invocation_id, thread_ident)] being executed (timed-out ones excluded).")
      .def("wait", &PyRunnerEngine::Wait, py::arg("timeout_sec"), py::arg("slice_sec") = 0.1,
           "Waits (GIL released, signal handlers run between slices) until every worker and\n"
           "the timer exited after stop()/abort(). True if they did within `timeout_sec`;\n"
           "False when the time is over or nudge() (or a watched signal) ended the wait.")
      .def("watch_signals", &PyRunnerEngine::WatchSignals, py::arg("fd"),
           "A byte readable on `fd` (the read end of the pipe given to\n"
           "signal.set_wakeup_fd) ends the wait() in progress at once (it runs the signal\n"
           "handlers and returns False), so wait() can use long slices. The bytes are\n"
           "read and discarded. `fd` must stay open until unwatch_signals().")
      .def("nudge", &PyRunnerEngine::Nudge,
           "Ends the wait() in progress at once (it returns False, after signal handlers\n"
           "ran): a caller changed something the waiting thread must look at.")
      .def("unwatch_signals", &PyRunnerEngine::UnwatchSignals,
           "Ends the watch of watch_signals(); a no-op without one.")
      .def("mark_waiting", &PyRunnerEngine::MarkWaiting,
           "From a task on one of this engine's workers: its worker waits for results and\n"
           "stops counting as a slot until the task returns. False off a worker thread.")
      .def("on_worker_thread", &PyRunnerEngine::OnWorkerThread,
           "True when called from one of this engine's worker threads.")
      .def("take_orphans", &PyRunnerEngine::TakeOrphans,
           "Invocation ids retrieved after stop() or abort() and not run, and those finishes\n"
           "took ahead or prefetches claimed that no worker ran (from here on nothing is taken\n"
           "ahead or prefetched); the caller routes them again.")
      .def("take_held", &PyRunnerEngine::TakeHeld,
           "Invocations finishes took ahead and prefetches claimed that no worker ran;\n"
           "from here on nothing is taken ahead or prefetched. For stop(): the caller\n"
           "routes them back (take_orphans returns the ones left after this).")
      .def_property_readonly("prefetched", &PyRunnerEngine::Prefetched,
                             "Invocations claimed by prefetches (Lifecycle.take_and_claim).")
      .def_property_readonly("taken_ahead", &PyRunnerEngine::TakenAhead,
                             "Invocations a finish took and started ahead, with its own\n"
                             "operation (Lifecycle.FinishThenTake), and a worker then ran.")
      .def_property_readonly("state", &PyRunnerEngine::State,
                             "created, running, draining, stopped or aborted.")
      .def_property_readonly("waiting", &PyRunnerEngine::Waiting,
                             "Workers whose task waits for results.")
      .def_property_readonly("live_workers", &PyRunnerEngine::LiveWorkers,
                             "Workers alive and not abandoned.")
      .def_property_readonly("executed", &PyRunnerEngine::Executed,
                             "Invocations handed to execute() so far.");
}

}  // namespace pynenc_cpp::bindings
