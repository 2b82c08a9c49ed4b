// RunnerEngine (the C++ loop of CppRunner) without Python: a fake source and
// fake hooks. Covers the worker pool, the shutdown state machine (graceful and
// immediate), the task-timeout watchdog, waiting tasks freeing their slot,
// worker replacement, the timer hooks, and retrieval across broker queues.
#include "pynenc_cpp/runner/runner_engine.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "pynenc_cpp/ports/broker.h"

namespace pynenc_cpp::runner {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

// A blocking in-memory queue of ids: the runner's view of a broker.
class FakeSource final : public InvocationSource {
 public:
  void Push(const std::string& id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(id);
    }
    cv_.notify_all();
  }
  Result<std::optional<std::string>> Next(milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t epoch = interrupts_;
    cv_.wait_for(lock, timeout, [&] { return !q_.empty() || interrupts_ != epoch; });
    if (q_.empty()) return std::optional<std::string>();
    std::string id = q_.front();
    q_.pop_front();
    return std::optional<std::string>(id);
  }
  bool Blocks() const override { return true; }
  void Interrupt() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++interrupts_;
    }
    cv_.notify_all();
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return q_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> q_;
  std::uint64_t interrupts_ = 0;
};

// Records what the hooks saw; thread-safe.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::multiset<std::string> executed;
  std::set<int> started_threads, exited_threads;
  std::vector<std::string> timed_out;
  int heartbeats = 0, managements = 0;

  template <typename Pred>
  bool WaitFor(Pred pred, milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return pred(); });
  }
  void Note(const std::function<void()>& f) {
    {
      std::lock_guard<std::mutex> lock(mu);
      f();
    }
    cv.notify_all();
  }
};

// A latch tests open to let blocked tasks finish.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
};

RunnerHooks RecordingHooks(Log& log,
                           std::function<ExecOutcome(int, const std::string&)> body = {}) {
  RunnerHooks h;
  h.thread_started = [&log](int w) { log.Note([&] { log.started_threads.insert(w); }); };
  h.thread_exiting = [&log](int w) { log.Note([&] { log.exited_threads.insert(w); }); };
  h.execute = [&log, body](int w, const std::string& id, bool) {
    ExecOutcome out = body ? body(w, id) : ExecOutcome::kDone;
    log.Note([&] { log.executed.insert(id); });
    return out;
  };
  h.timed_out = [&log](int, const std::string& id) {
    log.Note([&] { log.timed_out.push_back(id); });
  };
  h.heartbeat = [&log] { log.Note([&] { ++log.heartbeats; }); };
  h.management = [&log] { log.Note([&] { ++log.managements; }); };
  return h;
}

// Polls `pred` (for engine state that no hook announces).
template <typename Pred>
bool Eventually(Pred pred, milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

RunnerOptions Options(int workers) {
  RunnerOptions o;
  o.workers = workers;
  o.retrieve_wait = 50ms;
  return o;
}

TEST(RunnerEngine, ExecutesEveryIdOnceAcrossWorkers) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  RunnerEngine engine(Options(4), std::move(source), RecordingHooks(log));
  ASSERT_TRUE(engine.Start().ok());
  for (int i = 0; i < 200; ++i) src->Push("inv-" + std::to_string(i));
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.size() == 200; }));
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
  EXPECT_EQ(engine.state(), RunnerState::kStopped);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(log.executed.count("inv-" + std::to_string(i)), 1u);
  EXPECT_EQ(engine.executed(), 200);
  // Every worker thread and the timer ran their start and exit hooks.
  EXPECT_EQ(log.started_threads, log.exited_threads);
  EXPECT_TRUE(log.started_threads.count(kTimerThread));
  EXPECT_EQ(log.started_threads.size(), 5u);
}

// The engine's threads carry names a profile shows (top -H, perf, /proc).
TEST(RunnerEngine, NamesItsThreads) {
  auto source = std::make_unique<FakeSource>();
  Log log;
  std::mutex mu;
  std::map<int, std::string> names;
  RunnerHooks hooks = RecordingHooks(log);
  hooks.thread_started = [&](int w) {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    std::lock_guard<std::mutex> lock(mu);
    names[w] = name;
  };
  RunnerEngine engine(Options(2), std::move(source), std::move(hooks));
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return names.size() == 3;
  }));
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(names[kTimerThread], "pynenc-timer");
  EXPECT_EQ(names[0], "pynenc-worker");
  EXPECT_EQ(names[1], "pynenc-worker");
}

// Context switches so far of thread `tid` of this process (0 if unreadable).
std::int64_t ThreadSwitches(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
  std::int64_t total = 0;
  std::string key;
  std::int64_t value = 0;
  while (in >> key) {
    if (key == "voluntary_ctxt_switches:" || key == "nonvoluntary_ctxt_switches:") {
      in >> value;
      total += value;
    }
  }
  return total;
}

// The timer waits for a state change or a worker leaving (and its ticks); a task
// done is neither, so a burst of tasks leaves it asleep (it used to wake per task).
TEST(RunnerEngine, TasksDoneDoNotWakeTheTimer) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  std::atomic<pid_t> timer_tid{0};
  // Tasks of 1 ms: the timer would be asleep again when the next one ends. No
  // heartbeat, management or watchdog ticks.
  RunnerHooks hooks = RecordingHooks(log, [](int, const std::string&) {
    std::this_thread::sleep_for(1ms);
    return ExecOutcome::kDone;
  });
  hooks.thread_started = [&timer_tid](int w) {
    if (w == kTimerThread) timer_tid = static_cast<pid_t>(gettid());
  };
  RunnerEngine engine(Options(2), std::move(source), std::move(hooks));
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(Eventually([&] { return timer_tid.load() != 0; }));
  std::this_thread::sleep_for(50ms);  // the timer reaches its wait
  const std::int64_t before = ThreadSwitches(timer_tid);
  for (int i = 0; i < 400; ++i) src->Push("inv-" + std::to_string(i));
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.size() == 400; }));
  const std::int64_t after = ThreadSwitches(timer_tid);
  EXPECT_LT(after - before, 40) << "the timer woke " << (after - before) << " times";
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
}

TEST(RunnerEngine, GracefulStopLetsRunningTasksFinishAndRetrievesNoMore) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  Gate gate;
  std::atomic<int> entered{0};
  RunnerEngine engine(Options(2), std::move(source),
                      RecordingHooks(log, [&](int, const std::string&) {
                        entered.fetch_add(1);
                        gate.Pass();
                        return ExecOutcome::kDone;
                      }));
  ASSERT_TRUE(engine.Start().ok());
  src->Push("a");
  src->Push("b");
  while (entered.load() < 2) std::this_thread::sleep_for(1ms);
  engine.Stop();
  EXPECT_EQ(engine.state(), RunnerState::kDraining);
  src->Push("c");                    // arrives during the drain: not taken
  EXPECT_FALSE(engine.Wait(100ms));  // two tasks still running
  gate.Open();
  ASSERT_TRUE(engine.Wait(5s));
  EXPECT_EQ(engine.state(), RunnerState::kStopped);
  EXPECT_EQ(log.executed, (std::multiset<std::string>{"a", "b"}));
  EXPECT_EQ(src->size(), 1u);
}

TEST(RunnerEngine, NudgeEndsAWaitEarlyAndOnlyThatWait) {
  Log log;
  RunnerEngine engine(Options(1), std::make_unique<FakeSource>(), RecordingHooks(log));
  ASSERT_TRUE(engine.Start().ok());
  std::atomic<bool> returned{false};
  bool result = true;
  std::thread waiter([&] {
    result = engine.Wait(60s);  // running: only a nudge ends it before 60 s
    returned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned.load());
  engine.Nudge();
  waiter.join();         // would block for a minute without the nudge
  EXPECT_FALSE(result);  // nudged, not done
  EXPECT_EQ(engine.state(), RunnerState::kRunning);
  EXPECT_FALSE(engine.Wait(20ms));  // an earlier nudge does not end a later Wait
  engine.Stop();
  EXPECT_TRUE(engine.Wait(5s));
  engine.Nudge();  // after the end: harmless
  EXPECT_TRUE(engine.Wait(0ms));
}

TEST(RunnerEngine, AbortReturnsWhatIsRunningAndDoesNotWaitForIt) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  Gate gate;
  std::atomic<int> entered{0};
  RunnerEngine engine(Options(1), std::move(source),
                      RecordingHooks(log, [&](int, const std::string&) {
                        entered.fetch_add(1);
                        gate.Pass();
                        return ExecOutcome::kDone;
                      }));
  ASSERT_TRUE(engine.Start().ok());
  src->Push("slow");
  while (entered.load() < 1) std::this_thread::sleep_for(1ms);
  std::vector<RunningTask> running = engine.Abort();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].invocation_id, "slow");
  EXPECT_EQ(engine.state(), RunnerState::kAborted);
  EXPECT_TRUE(engine.Abort().empty());  // second call: nothing more
  EXPECT_FALSE(engine.Wait(50ms));
  gate.Open();
  ASSERT_TRUE(engine.Wait(5s));
}

TEST(RunnerEngine, TimedOutTaskIsReportedAndItsWorkerReplaced) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  Gate gate;
  RunnerOptions options = Options(1);
  options.task_timeout = 100ms;
  options.watchdog_tick = 10ms;
  RunnerEngine engine(options, std::move(source),
                      RecordingHooks(log, [&](int, const std::string& id) {
                        if (id == "hang") gate.Pass();
                        return ExecOutcome::kDone;
                      }));
  ASSERT_TRUE(engine.Start().ok());
  src->Push("hang");
  ASSERT_TRUE(log.WaitFor([&] { return log.timed_out.size() == 1; }));
  EXPECT_EQ(log.timed_out[0], "hang");
  // The slot was replaced: later work runs although "hang" still blocks.
  src->Push("next");
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.count("next") == 1; }));
  EXPECT_EQ(engine.live_workers(), 1);
  // The abandoned one is never listed as running.
  EXPECT_TRUE(Eventually([&] { return engine.Running().empty(); }));
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));  // abandoned workers are not waited for
  gate.Open();
  ASSERT_TRUE(log.WaitFor([&] { return log.exited_threads.count(0) == 1; }));
  EXPECT_EQ(log.timed_out.size(), 1u);
}

TEST(RunnerEngine, WaitingTaskFreesItsSlotSoOneWorkerCannotDeadlock) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  RunnerEngine* engine_ptr = nullptr;
  std::atomic<bool> child_done{false};
  RunnerEngine engine(Options(1), std::move(source),
                      RecordingHooks(log, [&](int w, const std::string& id) {
                        if (id == "parent") {
                          src->Push("child");
                          engine_ptr->MarkWaiting(w);
                          engine_ptr->MarkWaiting(w);  // idempotent
                          while (!child_done.load()) std::this_thread::sleep_for(1ms);
                        } else {
                          child_done.store(true);
                        }
                        return ExecOutcome::kDone;
                      }));
  engine_ptr = &engine;
  ASSERT_TRUE(engine.Start().ok());
  src->Push("parent");
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.size() == 2; }));
  // The extra worker retires once nobody waits: back to one retrieving worker.
  ASSERT_TRUE(Eventually([&] { return engine.live_workers() == 1 && engine.waiting() == 0; }));
  src->Push("later");
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.count("later") == 1; }));
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
}

TEST(RunnerEngine, WorkerWithUnusableStateIsReplaced) {
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  RunnerEngine engine(Options(1), std::move(source),
                      RecordingHooks(log, [&](int, const std::string& id) {
                        return id == "poison" ? ExecOutcome::kReplaceWorker : ExecOutcome::kDone;
                      }));
  ASSERT_TRUE(engine.Start().ok());
  src->Push("poison");
  src->Push("after");
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.size() == 2; }));
  ASSERT_TRUE(log.WaitFor([&] { return log.exited_threads.count(0) == 1; }));
  EXPECT_TRUE(log.started_threads.count(1));  // the replacement
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
}

// The virtual memory of this process, in KiB (VmSize of /proc/self/status).
std::int64_t VmSizeKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7));
  }
  return -1;
}

// A long-lived runner whose workers keep being replaced (tasks waiting on
// sub-results, timeouts) must not keep the exited threads: an unjoined thread
// keeps its stack (2-8 MiB) mapped until the engine stops.
TEST(RunnerEngine, ReplacedWorkersDoNotAccumulate) {
#if defined(__GLIBC__)
  // glibc's malloc gives a thread that finds every arena busy an arena of its
  // own, each a 64 MiB reservation never unmapped (up to 8 per core): on a loaded
  // machine the replacement threads grew VmSize by 600-900 MiB that way, stacks
  // or not. No new arenas from here on in this process (ctest runs each test in
  // its own), so VmSize measures what the test is about. (A sanitizer's
  // allocator has no arenas; its mallopt does nothing.)
  (void)mallopt(M_ARENA_MAX, 1);
#endif
  auto source = std::make_unique<FakeSource>();
  FakeSource* src = source.get();
  Log log;
  RunnerEngine engine(
      Options(1), std::move(source),
      RecordingHooks(log, [](int, const std::string&) { return ExecOutcome::kReplaceWorker; }));
  ASSERT_TRUE(engine.Start().ok());
  src->Push("warm");
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.size() == 1; }));
  const std::int64_t before = VmSizeKb();
  constexpr int kTasks = 600;
  for (int i = 0; i < kTasks; ++i) src->Push("t" + std::to_string(i));
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.size() == kTasks + 1; }));
  ASSERT_TRUE(log.WaitFor([&] { return log.exited_threads.size() >= kTasks; }));
  // A worker reports its exit a moment before its thread returns and its stack
  // is unmapped; on a loaded machine many can be in that moment at once. What
  // must not happen is that they stay mapped (600 x 8 MiB before the fix).
  std::int64_t grown_mb = 0;
  for (int i = 0; i < 200; ++i) {
    grown_mb = (VmSizeKb() - before) / 1024;
    if (grown_mb < 512) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_LT(grown_mb, 512) << kTasks << " replaced workers kept " << grown_mb << " MiB mapped";
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The OS refusing a thread is a clear error from Start, never std::terminate.
// In a child process whose address space is capped just above what it uses,
// no thread stack can be mapped. (Not under sanitizers: they reserve their
// shadow memory lazily and cannot run under an address-space cap.)
TEST(RunnerEngine, ThreadCreationFailureIsAClearError) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto source = std::make_unique<FakeSource>();
    Log log;
    RunnerEngine engine(Options(2), std::move(source), RecordingHooks(log));
    rlimit cap{};
    cap.rlim_cur = cap.rlim_max = static_cast<rlim_t>(VmSizeKb() + 1024) * 1024;
    if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(3);
    const Status s = engine.Start();
    if (s.ok()) _exit(4);
    if (s.message().find("cannot start a worker thread") == std::string::npos) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
#endif

TEST(RunnerEngine, TimerRunsHeartbeatsAndManagementUntilStopped) {
  Log log;
  RunnerOptions options = Options(1);
  options.heartbeat_interval = 10ms;
  options.management_interval = 10ms;
  RunnerEngine engine(options, std::make_unique<FakeSource>(), RecordingHooks(log));
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(log.WaitFor([&] { return log.heartbeats >= 3 && log.managements >= 3; }));
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
  int hb = 0;
  log.Note([&] { hb = log.heartbeats; });
  std::this_thread::sleep_for(50ms);
  log.Note([&] { EXPECT_EQ(log.heartbeats, hb); });
}

TEST(RunnerEngine, RejectsBadOptionsAndSecondStart) {
  Log log;
  RunnerEngine zero(Options(0), std::make_unique<FakeSource>(), RecordingHooks(log));
  EXPECT_EQ(zero.Start().code(), ErrorCode::kInvalidArgument);
  RunnerEngine no_exec(Options(1), std::make_unique<FakeSource>(), RunnerHooks{});
  EXPECT_EQ(no_exec.Start().code(), ErrorCode::kInvalidArgument);
  RunnerEngine twice(Options(1), std::make_unique<FakeSource>(), RecordingHooks(log));
  ASSERT_TRUE(twice.Start().ok());
  EXPECT_EQ(twice.Start().code(), ErrorCode::kInvalidArgument);
  twice.Stop();
  EXPECT_TRUE(twice.Wait(5s));
}

TEST(RunnerEngine, NonBlockingSourceIsPolledWithBackoff) {
  std::atomic<int> calls{0};
  auto source = MakeFunctionSource([&]() -> Result<std::optional<std::string>> {
    int n = calls.fetch_add(1);
    if (n == 3) return Status::BackendFailure("flaky");
    if (n == 5) return std::optional<std::string>("found");
    return std::optional<std::string>();
  });
  Log log;
  std::vector<std::string> errors;
  RunnerHooks hooks = RecordingHooks(log);
  hooks.report_error = [&](const std::string& m) { log.Note([&] { errors.push_back(m); }); };
  RunnerOptions options = Options(1);
  options.error_backoff = 1ms;
  RunnerEngine engine(options, std::move(source), hooks);
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(log.WaitFor([&] { return log.executed.count("found") == 1; }));
  engine.Stop();
  ASSERT_TRUE(engine.Wait(5s));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("flaky"), std::string::npos);
}

// Returns "late" once, only after the test opens its gate, whatever Interrupt() says:
// a retrieval that was under way when the runner stopped.
class LateSource final : public InvocationSource {
 public:
  Result<std::optional<std::string>> Next(milliseconds) override {
    if (served_.exchange(true)) {
      std::this_thread::sleep_for(1ms);
      return std::optional<std::string>();
    }
    inside.store(true);
    gate.Pass();
    return std::optional<std::string>("late");
  }
  bool Blocks() const override { return true; }
  void Interrupt() override {}
  std::atomic<bool> inside{false};
  Gate gate;

 private:
  std::atomic<bool> served_{false};
};

TEST(RunnerEngine, IdRetrievedAfterStopIsKeptForTheCallerNotRun) {
  auto source = std::make_unique<LateSource>();
  LateSource* src = source.get();
  Log log;
  RunnerEngine engine(Options(1), std::move(source), RecordingHooks(log));
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(Eventually([&] { return src->inside.load(); }));
  engine.Stop();
  src->gate.Open();
  ASSERT_TRUE(engine.Wait(5s));
  EXPECT_EQ(engine.TakeOrphans(), std::vector<std::string>{"late"});
  EXPECT_TRUE(engine.TakeOrphans().empty());
  log.Note([&] { EXPECT_TRUE(log.executed.empty()); });
}

// Like a broker: a Next reads the interrupt epoch when its wait starts, so an
// Interrupt() made before that (a stop landing between the worker's last look at
// the state and its wait) is not seen by the wait. Its first Next passes a gate
// the test opens before it reads the epoch, then waits for a later interrupt.
class EpochSource final : public InvocationSource {
 public:
  Result<std::optional<std::string>> Next(milliseconds timeout) override {
    if (!first_.exchange(false)) return Wait(timeout);
    inside.store(true);
    gate.Pass();
    return Wait(timeout);
  }
  bool Blocks() const override { return true; }
  void Interrupt() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++interrupts_;
    }
    interrupt_calls.fetch_add(1);
    cv_.notify_all();
  }
  std::atomic<bool> inside{false};
  std::atomic<int> interrupt_calls{0};
  Gate gate;

 private:
  Result<std::optional<std::string>> Wait(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t epoch = interrupts_;
    cv_.wait_for(lock, timeout, [&] { return interrupts_ != epoch; });
    return std::optional<std::string>();
  }
  std::atomic<bool> first_{true};
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t interrupts_ = 0;
};

TEST(RunnerEngine, AStopThatLandsBeforeAWaitStartsStillEndsIt) {
  for (const bool abort : {false, true}) {
    auto source = std::make_unique<EpochSource>();
    EpochSource* src = source.get();
    Log log;
    RunnerOptions options = Options(1);
    options.retrieve_wait = 60s;  // a missed stop would wait this long
    RunnerEngine engine(options, std::move(source), RecordingHooks(log));
    ASSERT_TRUE(engine.Start().ok());
    ASSERT_TRUE(Eventually([&] { return src->inside.load(); }));
    if (abort) {
      EXPECT_TRUE(engine.Abort().empty());
    } else {
      engine.Stop();
    }
    const int at_stop = src->interrupt_calls.load();
    src->gate.Open();  // the wait starts after the stop's interrupt
    EXPECT_TRUE(engine.Wait(10s)) << (abort ? "abort" : "stop");
    EXPECT_GT(src->interrupt_calls.load(), at_stop) << "interrupted again";
  }
}

// Serves "long" once; every later Next passes `gate` (held there, it is a worker
// idle on the source that no interrupt reaches yet), then waits as EpochSource.
class OneTaskThenGatedSource final : public InvocationSource {
 public:
  Result<std::optional<std::string>> Next(milliseconds timeout) override {
    if (!served_.exchange(true)) return std::optional<std::string>("long");
    inside.store(true);
    gate.Pass();
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t epoch = interrupts_;
    cv_.wait_for(lock, timeout, [&] { return interrupts_ != epoch; });
    return std::optional<std::string>();
  }
  bool Blocks() const override { return true; }
  void Interrupt() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++interrupts_;
    }
    cv_.notify_all();
  }
  std::atomic<bool> inside{false};
  Gate gate;

 private:
  std::atomic<bool> served_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t interrupts_ = 0;
};

// A graceful stop: one worker runs a task, the other waits on the source past the
// stop (re-interrupted until it leaves). Once it left, the timer sleeps until the
// task ends (no re-interrupt is due): it does not spin. The process's CPU time
// while the task still runs stays far below the wall time.
TEST(RunnerEngine, DrainingWithABusyWorkerDoesNotSpin) {
  auto source = std::make_unique<OneTaskThenGatedSource>();
  OneTaskThenGatedSource* src = source.get();
  Log log;
  Gate release;
  std::atomic<bool> running{false};
  RunnerOptions options = Options(2);
  options.retrieve_wait = 60s;
  RunnerEngine engine(options, std::move(source), RecordingHooks(log, [&](int, const std::string&) {
                        running.store(true);
                        release.Pass();
                        return ExecOutcome::kDone;
                      }));
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(Eventually([&] { return running.load() && src->inside.load(); }));
  engine.Stop();
  std::this_thread::sleep_for(300ms);  // the timer sees a worker waiting on the source
  src->gate.Open();  // it waits now, until the next re-interrupt ends its wait
  ASSERT_TRUE(Eventually([&] { return engine.live_workers() == 1; }));
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  EXPECT_FALSE(engine.Wait(1s)) << "still draining: the task runs";
  getrusage(RUSAGE_SELF, &after);
  const auto cpu_us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1'000'000 + r.ru_utime.tv_usec +
           r.ru_stime.tv_usec;
  };
  EXPECT_LT(cpu_us(after) - cpu_us(before), 300'000) << "CPU time over 1 s of draining";
  release.Open();
  EXPECT_TRUE(engine.Wait(5s));
}

TEST(RunnerEngine, BrokerSourceTakesFromEveryQueueAndWakesOnRoute) {
  auto broker = OpenBroker(BackendConfig{"memory://", "runner-test", nullptr});
  ASSERT_TRUE(broker.ok());
  std::unique_ptr<Broker> b = std::move(broker).value();
  auto source = MakeBrokerSource(b.get(), {"high", "low"}, 10ms);
  ASSERT_TRUE(b->Route({InvocationId("l1")}, "low", 0).ok());
  ASSERT_TRUE(b->Route({InvocationId("h1")}, "high", 0).ok());
  auto first = source->Next(0ms);
  ASSERT_TRUE(first.ok() && first.value());
  EXPECT_EQ(*first.value(), "h1");  // queues in order
  auto second = source->Next(0ms);
  ASSERT_TRUE(second.ok() && second.value());
  EXPECT_EQ(*second.value(), "l1");
  std::thread producer([&] {
    std::this_thread::sleep_for(30ms);
    (void)b->Route({InvocationId("l2")}, "low", 0);
  });
  auto waited = source->Next(5s);
  producer.join();
  ASSERT_TRUE(waited.ok() && waited.value());
  EXPECT_EQ(*waited.value(), "l2");
  // Interrupt wakes a waiting Next with nothing.
  std::thread interrupter([&] {
    std::this_thread::sleep_for(30ms);
    source->Interrupt();
  });
  auto none = source->Next(10s);
  interrupter.join();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value());
}

}  // namespace
}  // namespace pynenc_cpp::runner
