// The runner engine: the loop of pynenc-cpp's CppRunner, with no Python in it.
//
// A pool of worker threads takes invocation ids from an InvocationSource and
// hands each to the `execute` hook; a timer thread calls the `heartbeat` and
// `management` hooks on their intervals and runs the task-timeout watchdog.
// What an invocation *is* (claiming it, running the task, storing results) is
// entirely the hooks' business: the Python bindings implement them with one
// persistent Python thread state per engine thread (`thread_started` /
// `thread_exiting` run first and last on every engine thread).
//
// Lifecycle (state machine):
//   kCreated --Start--> kRunning --Stop--> kDraining --(last worker exits)--> kStopped
//                           \________________Abort________________> kAborted
// kRunning:  workers retrieve and execute; the timer runs.
// kDraining: no worker retrieves any more; the ones executing finish their
//            invocation, then exit; heartbeats continue until the last exits.
// kAborted:  like draining, but Abort() returns what was executing so the caller
//            can kill and reroute it; the engine does not wait for those workers.
//
// Slots: `workers` workers retrieve at any time. A worker whose task waits for
// other invocations (MarkWaiting) does not count: an extra worker is started
// for it and retires when the slot is no longer needed. A worker whose task
// outlives `task_timeout` is abandoned (the `timed_out` hook reports it) and
// replaced; an abandoned worker exits as soon as its task returns. An execute
// hook that returns kReplaceWorker (its thread state is unusable) is replaced
// the same way.
//
// Ids popped from the source after Stop() or Abort() (a retrieval that was
// already under way) are not executed: they are kept (TakeOrphans) so the caller
// can route them again; nothing popped is dropped.
//
// Thread safety: every public method is thread-safe. Hooks are called with no
// engine lock held. The destructor aborts if needed, waits up to one second
// for workers to exit and detaches the ones still inside a hook (they keep the
// shared state alive; the hooks object is destroyed by the last thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/runner/invocation_source.h"

namespace pynenc_cpp::runner {

struct RunnerOptions {
  int workers = 1;                                          // >= 1
  std::chrono::milliseconds retrieve_wait{500};             // one blocking Next() at most
  std::chrono::milliseconds idle_backoff{10};               // after an empty non-blocking Next()
  std::chrono::milliseconds error_backoff{200};             // after a failed Next()
  std::chrono::milliseconds task_timeout{0};                // 0: no watchdog
  std::chrono::milliseconds heartbeat_interval{0};          // 0: no heartbeats
  std::chrono::milliseconds management_interval{0};         // 0: no management duties
  std::chrono::milliseconds watchdog_tick{100};             // how often timeouts are checked
};

enum class ExecOutcome {
  kDone,           // the worker continues
  kReplaceWorker,  // the worker's thread state is unusable: it exits and is replaced
};

// Worker index of the timer thread in thread_started / thread_exiting.
inline constexpr int kTimerThread = -1;

struct RunnerHooks {
  // First and last call on every engine thread (worker index, or kTimerThread).
  std::function<void(int)> thread_started;
  std::function<void(int)> thread_exiting;
  // Runs one invocation. `claimed`: it came from `next_blocking` (already claimed).
  std::function<ExecOutcome(int worker, const std::string& invocation_id, bool claimed)> execute;
  // Optional. Asked before the source while some task of this runner waits for
  // results: an already-claimed invocation that blocks others, or nullopt.
  std::function<std::optional<std::string>(int worker)> next_blocking;
  std::function<void()> heartbeat;   // optional, timer thread
  std::function<void()> management;  // optional, timer thread, only while kRunning
  // Optional, timer thread: `invocation_id` on `worker` passed task_timeout.
  std::function<void(int worker, const std::string& invocation_id)> timed_out;
  // Optional: a failure the engine recovered from (source error), for the logs.
  std::function<void(const std::string& message)> report_error;
};

struct RunningTask {
  int worker;
  std::string invocation_id;
};

enum class RunnerState { kCreated, kRunning, kDraining, kStopped, kAborted };
const char* RunnerStateName(RunnerState s);

class RunnerEngine {
 public:
  // REQUIRES: source != nullptr, hooks.execute set.
  RunnerEngine(RunnerOptions options, std::unique_ptr<InvocationSource> source,
               RunnerHooks hooks);
  RunnerEngine(const RunnerEngine&) = delete;
  RunnerEngine& operator=(const RunnerEngine&) = delete;
  ~RunnerEngine();

  // Starts the workers and the timer. kInvalidArgument for bad options or a
  // second Start().
  Status Start();
  // Graceful stop (kRunning -> kDraining); no-op in any other state.
  void Stop();
  // Immediate stop: returns the invocations being executed (not the abandoned
  // ones). Later calls return an empty list.
  std::vector<RunningTask> Abort();
  // Waits up to `timeout` for every non-abandoned worker and the timer to exit
  // (after Stop or Abort). True when they have.
  bool Wait(std::chrono::milliseconds timeout);
  // Wait, ended early (false) too by a Nudge() made after nudges() returned
  // `nudges_seen` (one made before this call ends it at once).
  bool Wait(std::chrono::milliseconds timeout, std::uint64_t nudges_seen);
  // Ends the Wait calls in progress early (they return false unless the engine is
  // done): a thread blocked in Wait gets to act on something outside the engine,
  // e.g. a signal arrived. Thread-safe; async-signal-unsafe (call it from a thread).
  void Nudge();
  std::uint64_t nudges() const;  // Nudge() calls so far
  // The calling hook's task, on `worker`, waits for other invocations: the
  // worker stops counting as a slot until its execute returns. Idempotent.
  void MarkWaiting(int worker);

  RunnerState state() const;
  std::vector<RunningTask> Running() const;
  std::vector<std::string> TakeOrphans();
  int waiting() const;
  // Workers alive and not abandoned (retrieving or executing).
  int live_workers() const;
  std::int64_t executed() const;  // execute calls returned so far

  struct Core;  // shared with the engine's threads

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace pynenc_cpp::runner
