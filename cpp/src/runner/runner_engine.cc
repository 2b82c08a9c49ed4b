#include "pynenc_cpp/runner/runner_engine.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/core/thread_name.h"

namespace pynenc_cpp::runner {

using Clock = std::chrono::steady_clock;

// How often a stopping engine interrupts its source again while a worker still
// waits on it (see Core::IdleWorkersLeftLocked).
constexpr auto kReinterruptEvery = std::chrono::milliseconds(200);

const char* RunnerStateName(RunnerState s) {
  switch (s) {
    case RunnerState::kCreated:
      return "created";
    case RunnerState::kRunning:
      return "running";
    case RunnerState::kDraining:
      return "draining";
    case RunnerState::kStopped:
      return "stopped";
    case RunnerState::kAborted:
      return "aborted";
  }
  return "?";
}

namespace {

struct Worker {
  int index = 0;
  std::thread thread;
  // Guarded by Core::mu.
  std::optional<std::string> current;
  Clock::time_point started{};
  bool waiting = false;
  bool abandoned = false;  // timed out or replaced: exits after its execute returns
  bool exited = false;
};

}  // namespace

struct RunnerEngine::Core {
  RunnerOptions options;
  std::unique_ptr<InvocationSource> source;
  RunnerHooks hooks;

  mutable Mutex mu;
  std::condition_variable cv;
  RunnerState state PYNENC_GUARDED_BY(mu) = RunnerState::kCreated;
  // Every worker ever started. The Worker fields are guarded by mu too (the
  // analysis cannot name another object's mutex there).
  std::vector<std::shared_ptr<Worker>> workers PYNENC_GUARDED_BY(mu);
  int next_index PYNENC_GUARDED_BY(mu) = 0;
  int waiting PYNENC_GUARDED_BY(mu) = 0;
  int live PYNENC_GUARDED_BY(mu) = 0;  // alive, not abandoned
  bool timer_exited PYNENC_GUARDED_BY(mu) = true;
  std::thread timer;
  std::vector<std::string> orphans PYNENC_GUARDED_BY(mu);
  std::int64_t executed PYNENC_GUARDED_BY(mu) = 0;
  std::uint64_t nudges PYNENC_GUARDED_BY(mu) = 0;  // Nudge() calls: end the Waits in progress
  // The last thread creation the OS refused ("" after a success).
  std::string spawn_error PYNENC_GUARDED_BY(mu);
  // The last spawn_error reported (reported once per change).
  std::string spawn_reported PYNENC_GUARDED_BY(mu);

  bool Stopping() const PYNENC_REQUIRES(mu) { return state != RunnerState::kRunning; }

  // A live worker that runs nothing: in (or on its way into, or out of) the
  // source's Next. A stop that lands between its last look at the state and the
  // start of its source's wait is not seen by that wait, so while one is left the
  // timer interrupts the source again (TimerMain).
  bool IdleWorkersLeftLocked() const PYNENC_REQUIRES(mu) {
    for (const auto& w : workers) {
      if (!w->exited && !w->abandoned && !w->current) return true;
    }
    return false;
  }

  // Forgets the workers whose thread has finished its work (retired, replaced
  // or timed out earlier), detaching their thread: it only has to return now,
  // and a detached thread's stack is freed when it does. Without this a
  // long-lived runner whose workers are replaced (tasks waiting on sub-results,
  // timeouts) would keep every exited thread's stack until Stop.
  void ReapExitedLocked() PYNENC_REQUIRES(mu) {
    std::erase_if(workers, [](const std::shared_ptr<Worker>& w) {
      if (!w->exited) return false;
      if (w->thread.joinable()) w->thread.detach();
      return true;
    });
  }

  // Starts one worker; false (and spawn_error set) when the OS refuses a new
  // thread, which is reported, never std::terminate.
  bool SpawnLocked(const std::shared_ptr<Core>& self) PYNENC_REQUIRES(mu) {
    ReapExitedLocked();
    auto w = std::make_shared<Worker>();
    w->index = next_index;
    try {
      w->thread = std::thread([self, w] { self->WorkerMain(self, w); });
    } catch (const std::system_error& e) {
      spawn_error = std::string("runner: cannot start a worker thread (") + e.what() + ")";
      return false;
    }
    ++next_index;
    ++live;
    workers.push_back(w);
    spawn_error.clear();
    return true;
  }

  // Non-waiting live workers beyond `workers` retire.
  bool SurplusLocked() const PYNENC_REQUIRES(mu) { return live - waiting > options.workers; }

  // After MarkWaiting or a replacement. Stops at the first thread the OS
  // refuses; the timer thread tries again.
  void FillSlotsLocked(const std::shared_ptr<Core>& self) PYNENC_REQUIRES(mu) {
    while (state == RunnerState::kRunning && live - waiting < options.workers) {
      if (!SpawnLocked(self)) return;
    }
  }

  void WorkerMain(const std::shared_ptr<Core>& self, const std::shared_ptr<Worker>& w) {
    NameThisThread("pynenc-worker");
    if (hooks.thread_started) hooks.thread_started(w->index);
    while (true) {
      {
        MutexLock lock(mu);
        if (Stopping() || w->abandoned) break;
        if (SurplusLocked()) {
          w->abandoned = true;  // retire: not counted from here on
          --live;
          break;
        }
      }
      std::optional<std::string> id;
      bool claimed = false;
      if (hooks.next_blocking && waiting_hint()) {
        id = hooks.next_blocking(w->index);
        claimed = id.has_value();
      }
      if (!id) {
        Result<std::optional<std::string>> got = source->Next(options.retrieve_wait);
        if (!got.ok()) {
          if (hooks.report_error)
            hooks.report_error("runner retrieval failed: " + got.status().ToString());
          UniqueLock lock(mu);
          cv.wait_for(lock.native(), options.error_backoff,
                      [&]() PYNENC_REQUIRES(mu) { return Stopping(); });
          continue;
        }
        id = std::move(got).value();
        if (!id) {
          if (!source->Blocks()) {
            UniqueLock lock(mu);
            cv.wait_for(lock.native(), options.idle_backoff,
                        [&]() PYNENC_REQUIRES(mu) { return Stopping(); });
          }
          continue;
        }
      }
      {
        MutexLock lock(mu);
        if (state != RunnerState::kRunning) {
          orphans.push_back(*id);  // popped after Stop/Abort: the caller routes it again
          break;
        }
        w->current = *id;
        w->started = Clock::now();
      }
      const ExecOutcome outcome = hooks.execute(w->index, *id, claimed);
      bool leave = false, wake = false;
      {
        MutexLock lock(mu);
        ++executed;
        w->current.reset();
        if (w->waiting) {
          w->waiting = false;
          --waiting;
        }
        if (outcome == ExecOutcome::kReplaceWorker && !w->abandoned) {
          w->abandoned = true;
          --live;
          FillSlotsLocked(self);
        }
        leave = w->abandoned;
        // What the timer, Wait and the destructor wait for is a state change or a
        // worker leaving: a task done alone changes neither, and waking them for
        // each task cost two context switches a task.
        wake = leave || state != RunnerState::kRunning;
      }
      if (wake) cv.notify_all();
      if (leave) break;
    }
    if (hooks.thread_exiting) hooks.thread_exiting(w->index);
    {
      MutexLock lock(mu);
      if (!w->abandoned) --live;
      w->exited = true;
      if (w->waiting) {
        w->waiting = false;
        --waiting;
      }
      if (state == RunnerState::kDraining && live == 0) state = RunnerState::kStopped;
    }
    cv.notify_all();
  }

  bool waiting_hint() {
    MutexLock lock(mu);
    return waiting > 0;
  }

  void TimerMain(const std::shared_ptr<Core>& self) {
    NameThisThread("pynenc-timer");
    if (hooks.thread_started) hooks.thread_started(kTimerThread);
    const auto now0 = Clock::now();
    Clock::time_point next_heartbeat = now0, next_management = now0;
    const bool heartbeats = hooks.heartbeat && options.heartbeat_interval.count() > 0;
    const bool management = hooks.management && options.management_interval.count() > 0;
    const bool watchdog = options.task_timeout.count() > 0;
    Clock::time_point next_interrupt = Clock::time_point::max();
    UniqueLock lock(mu);
    while (state == RunnerState::kRunning || state == RunnerState::kDraining) {
      const auto now = Clock::now();
      if (state == RunnerState::kDraining && IdleWorkersLeftLocked()) {
        if (next_interrupt == Clock::time_point::max()) {
          next_interrupt = now + kReinterruptEvery;  // Stop() interrupted it just now
        } else if (now >= next_interrupt) {
          lock.Unlock();
          source->Interrupt();
          lock.Lock();
          next_interrupt = Clock::now() + kReinterruptEvery;
          continue;
        }
      } else {
        next_interrupt = Clock::time_point::max();  // none waits: no wake-up for it
      }
      if (heartbeats && now >= next_heartbeat) {
        lock.Unlock();
        hooks.heartbeat();
        lock.Lock();
        next_heartbeat = Clock::now() + options.heartbeat_interval;
        continue;
      }
      if (management && state == RunnerState::kRunning && now >= next_management) {
        lock.Unlock();
        hooks.management();
        lock.Lock();
        next_management = Clock::now() + options.management_interval;
        continue;
      }
      if (watchdog) {
        std::vector<RunningTask> expired;
        for (const auto& w : workers) {
          if (w->current && !w->abandoned && now - w->started >= options.task_timeout) {
            w->abandoned = true;
            --live;
            expired.push_back({w->index, *w->current});
          }
        }
        if (!expired.empty()) {
          FillSlotsLocked(self);
          lock.Unlock();
          if (hooks.timed_out) {
            for (const RunningTask& t : expired) hooks.timed_out(t.worker, t.invocation_id);
          }
          lock.Lock();
          if (state == RunnerState::kDraining && live == 0) state = RunnerState::kStopped;
          cv.notify_all();
          continue;
        }
      }
      if (state == RunnerState::kRunning && live - waiting < options.workers) {
        FillSlotsLocked(self);  // a spawn the OS refused earlier: try again
      }
      if (spawn_error != spawn_reported) {
        spawn_reported = spawn_error;
        const std::string message = spawn_error;
        if (!message.empty() && hooks.report_error) {
          lock.Unlock();
          hooks.report_error(message);
          lock.Lock();
          continue;
        }
      }
      Clock::time_point wake = now + std::chrono::hours(1);
      if (!spawn_error.empty()) wake = std::min(wake, now + std::chrono::milliseconds(100));
      if (heartbeats) wake = std::min(wake, next_heartbeat);
      if (management && state == RunnerState::kRunning) wake = std::min(wake, next_management);
      if (watchdog) wake = std::min(wake, now + options.watchdog_tick);
      wake = std::min(wake, next_interrupt);
      const RunnerState seen = state;
      cv.wait_until(lock.native(), wake, [&]() PYNENC_REQUIRES(mu) { return state != seen; });
    }
    // Aborted: the same for the workers that still wait on the source.
    while (state == RunnerState::kAborted && IdleWorkersLeftLocked()) {
      cv.wait_for(lock.native(), kReinterruptEvery);
      if (state != RunnerState::kAborted || !IdleWorkersLeftLocked()) break;
      lock.Unlock();
      source->Interrupt();
      lock.Lock();
    }
    lock.Unlock();
    if (hooks.thread_exiting) hooks.thread_exiting(kTimerThread);
    lock.Lock();
    timer_exited = true;
    lock.Unlock();
    cv.notify_all();
  }
};

RunnerEngine::RunnerEngine(RunnerOptions options, std::unique_ptr<InvocationSource> source,
                           RunnerHooks hooks)
    : core_(std::make_shared<Core>()) {
  core_->options = options;
  core_->source = std::move(source);
  core_->hooks = std::move(hooks);
}

RunnerEngine::~RunnerEngine() {
  if (state() == RunnerState::kCreated) return;
  Stop();
  if (!Wait(std::chrono::seconds(1))) Abort();
  Wait(std::chrono::seconds(1));
  std::vector<std::thread> done, busy;
  {
    UniqueLock lock(core_->mu);
    // Abandoned (timed-out) workers too get a moment to leave their hook.
    core_->cv.wait_for(lock.native(), std::chrono::seconds(1), [&]() PYNENC_REQUIRES(core_->mu) {
      for (const auto& w : core_->workers) {
        if (!w->exited) return false;
      }
      return core_->timer_exited;
    });
    for (const auto& w : core_->workers) {
      if (!w->thread.joinable()) continue;
      (w->exited ? done : busy).push_back(std::move(w->thread));
    }
    if (core_->timer.joinable()) {
      (core_->timer_exited ? done : busy).push_back(std::move(core_->timer));
    }
  }
  for (std::thread& t : done) t.join();
  for (std::thread& t : busy) t.detach();  // still inside a hook; it keeps the core alive
}

Status RunnerEngine::Start() {
  if (!core_->hooks.execute) return Status::InvalidArgument("runner: the execute hook is required");
  if (!core_->source) return Status::InvalidArgument("runner: an invocation source is required");
  if (core_->options.workers < 1) {
    return Status::InvalidArgument("runner: workers must be >= 1, got " +
                                   std::to_string(core_->options.workers));
  }
  if (core_->options.task_timeout.count() < 0 || core_->options.retrieve_wait.count() < 0) {
    return Status::InvalidArgument("runner: timeouts must be >= 0");
  }
  MutexLock lock(core_->mu);
  if (core_->state != RunnerState::kCreated) {
    return Status::InvalidArgument(std::string("runner: Start() in state ") +
                                   RunnerStateName(core_->state));
  }
  core_->state = RunnerState::kRunning;
  core_->FillSlotsLocked(core_);
  std::shared_ptr<Core> self = core_;
  if (core_->live == 0) {  // not a single worker: refuse to start, clearly
    core_->state = RunnerState::kStopped;
    return Status::BackendFailure(core_->spawn_error);
  }
  try {
    core_->timer = std::thread([self] { self->TimerMain(self); });
  } catch (const std::system_error& e) {
    core_->state = core_->live == 0 ? RunnerState::kStopped : RunnerState::kDraining;
    core_->cv.notify_all();
    core_->source->Interrupt();
    return Status::BackendFailure(std::string("runner: cannot start the timer thread (") +
                                  e.what() + ")");
  }
  core_->timer_exited = false;
  return Status::Ok();
}

void RunnerEngine::Stop() {
  {
    MutexLock lock(core_->mu);
    if (core_->state != RunnerState::kRunning) return;
    core_->state = core_->live == 0 ? RunnerState::kStopped : RunnerState::kDraining;
  }
  core_->cv.notify_all();
  core_->source->Interrupt();
}

std::vector<RunningTask> RunnerEngine::Abort() {
  std::vector<RunningTask> running;
  {
    MutexLock lock(core_->mu);
    if (core_->state == RunnerState::kAborted || core_->state == RunnerState::kCreated ||
        core_->state == RunnerState::kStopped) {
      return running;
    }
    core_->state = RunnerState::kAborted;
    for (const auto& w : core_->workers) {
      if (w->current && !w->abandoned) running.push_back({w->index, *w->current});
    }
  }
  core_->cv.notify_all();
  core_->source->Interrupt();
  return running;
}

void RunnerEngine::Nudge() {
  {
    MutexLock lock(core_->mu);
    ++core_->nudges;
  }
  core_->cv.notify_all();
}

std::uint64_t RunnerEngine::nudges() const {
  MutexLock lock(core_->mu);
  return core_->nudges;
}

bool RunnerEngine::Wait(std::chrono::milliseconds timeout) { return Wait(timeout, nudges()); }

bool RunnerEngine::Wait(std::chrono::milliseconds timeout, std::uint64_t nudges_seen) {
  UniqueLock lock(core_->mu);
  auto done = [&]() PYNENC_REQUIRES(core_->mu) {
    if (core_->state == RunnerState::kRunning) return false;
    if (!core_->timer_exited) return false;
    for (const auto& w : core_->workers) {
      if (!w->exited && !w->abandoned) return false;
    }
    return true;
  };
  const bool woke = core_->cv.wait_for(lock.native(), timeout, [&]() PYNENC_REQUIRES(core_->mu) {
    return core_->nudges != nudges_seen || done();
  });
  if (!woke || !done()) return false;
  // Join the threads that are done so their resources go now.
  for (const auto& w : core_->workers) {
    if (w->exited && w->thread.joinable()) {
      std::thread t = std::move(w->thread);
      lock.Unlock();
      t.join();
      lock.Lock();
    }
  }
  return true;
}

void RunnerEngine::MarkWaiting(int worker) {
  {
    MutexLock lock(core_->mu);
    for (const auto& w : core_->workers) {
      if (w->index != worker) continue;
      if (w->waiting || !w->current || w->abandoned) return;
      w->waiting = true;
      ++core_->waiting;
      core_->FillSlotsLocked(core_);
      return;
    }
  }
}

RunnerState RunnerEngine::state() const {
  MutexLock lock(core_->mu);
  return core_->state;
}

std::vector<RunningTask> RunnerEngine::Running() const {
  MutexLock lock(core_->mu);
  std::vector<RunningTask> out;
  for (const auto& w : core_->workers) {
    if (w->current && !w->abandoned) out.push_back({w->index, *w->current});
  }
  return out;
}

std::vector<std::string> RunnerEngine::TakeOrphans() {
  MutexLock lock(core_->mu);
  return std::exchange(core_->orphans, {});
}

int RunnerEngine::waiting() const {
  MutexLock lock(core_->mu);
  return core_->waiting;
}

int RunnerEngine::live_workers() const {
  MutexLock lock(core_->mu);
  return core_->live;
}

std::int64_t RunnerEngine::executed() const {
  MutexLock lock(core_->mu);
  return core_->executed;
}

}  // namespace pynenc_cpp::runner
