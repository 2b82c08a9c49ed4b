// Lifecycle compliance suite (native mode's composite operations), run on every
// backend over real components: each composite must leave the stores exactly
// as pynenc's BaseOrchestrator sequence of calls would (status, history rows,
// waiters, auto-purge marks, results, retries, queues). SQLite-only cases check
// that an operation is one transaction (a failed step rolls the earlier ones back).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <type_traits>

#include "backend_fixture.h"
#include "pynenc_cpp/core/metrics.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "redis/redis_client.h"
#include "reply_dropping_proxy.h"

namespace pynenc_cpp {
namespace {

using S = InvocationStatus;
constexpr TimestampUs kStart = 1'700'000'000'000'000;
constexpr TimestampUs kSecond = 1'000'000;
const TriggerContextNames kNames{"StatusContext", "ResultContext", "ExceptionContext"};
const Actor kRunner{std::string("runner-1"), "runner-1"};

// One invocation of `task` to register and route.
NewRoutedInvocation NewItem(const std::string& id, const std::string& task = "mod.task",
                            const std::string& queue = "default", double priority = 0.0,
                            std::optional<std::string> parent = std::nullopt) {
  NewRoutedInvocation n;
  n.record.invocation_id = InvocationId(id);
  n.record.task_id = TaskId(task);
  n.record.call_id = CallId(task + ":" + id);
  n.record.arguments_id = id;
  n.record.serialized_arguments = "{}";
  if (parent) n.record.parent_invocation_id = InvocationId(*parent);
  n.queue = queue;
  n.priority = priority;
  return n;
}

template <typename B>
class LifecycleCompliance : public testing::BackendTest<B> {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kStart);
    const BackendConfig config = this->backend_.Config(clock_);
    orch_ = std::shared_ptr<Orchestrator>(OpenOrchestrator(config).value());
    state_ = std::shared_ptr<StateBackend>(OpenStateBackend(config).value());
    broker_ = std::shared_ptr<Broker>(OpenBroker(config).value());
    trigger_ = std::shared_ptr<TriggerStore>(OpenTriggerStore(config).value());
    auto opened = OpenLifecycle(LifecycleParts{orch_, state_, broker_, trigger_}, config, kNames);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    life_ = std::move(opened).value();
  }

  static NewRoutedInvocation New(const std::string& id, const std::string& task = "mod.task",
                                 const std::string& queue = "default", double priority = 0.0,
                                 std::optional<std::string> parent = std::nullopt) {
    return NewItem(id, task, queue, priority, std::move(parent));
  }
  void Register(const std::string& id, const std::string& task = "mod.task") {
    auto r = life_->RegisterAndRoute({New(id, task)}, kRunner);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Registered, taken from the queue, PENDING and RUNNING for kRunner.
  void Running(const std::string& id) {
    Register(id);
    ASSERT_TRUE(broker_->Retrieve("default", 0).ok());
    life_->SetTaskRunsFreely(TaskId("mod.task"));
    auto c = life_->Claim(InvocationId(id), kRunner);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ(c.value().kind, ClaimKind::kClaimed);
    auto r = life_->ChangeStatus(InvocationId(id), S::kRunning, kRunner, std::nullopt, true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  S StatusOf(const std::string& id) {
    return orch_->GetStatusRecord(InvocationId(id)).value().status;
  }
  // 4 runners race to claim (start: ClaimAndStart) each of 20 invocations of a
  // free task: each is won exactly once, a lost race is reported as such (never
  // as a failure), and the winner's rows alone are written.
  void RaceForClaims(bool start) {
    life_->SetTaskRunsFreely(TaskId("mod.task"));
    constexpr int kInvocations = 20;
    constexpr int kThreads = 4;
    for (int i = 0; i < kInvocations; ++i) Register("r" + std::to_string(i));
    const ClaimKind won = start ? ClaimKind::kStarted : ClaimKind::kClaimed;
    std::atomic<int> claimed{0};
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const Actor me{"runner-" + std::to_string(t), "runner-" + std::to_string(t)};
        for (int i = 0; i < kInvocations; ++i) {
          const InvocationId id("r" + std::to_string(i));
          auto r = start ? life_->ClaimAndStart(id, me) : life_->Claim(id, me);
          if (r.ok() && r.value().kind == won) {
            ++claimed;
          } else if (!r.ok() && r.status().code() != ErrorCode::kIllegalTransition &&
                     r.status().code() != ErrorCode::kOwnershipViolation) {
            ++failed;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(claimed.load(), kInvocations);
    EXPECT_EQ(failed.load(), 0);
    const std::vector<S> rows = start ? std::vector<S>{S::kRegistered, S::kPending, S::kRunning}
                                      : std::vector<S>{S::kRegistered, S::kPending};
    for (int i = 0; i < kInvocations; ++i) {
      const std::string id = "r" + std::to_string(i);
      EXPECT_EQ(StatusOf(id), rows.back());
      EXPECT_EQ(HistoryOf(id), rows);
    }
  }
  std::vector<S> HistoryOf(const std::string& id) {
    std::vector<S> out;
    for (const HistoryRecord& h : state_->GetHistory(InvocationId(id)).value()) {
      out.push_back(h.status);
    }
    return out;
  }
  std::vector<std::string> Drain(const std::string& queue) {
    std::vector<std::string> out;
    while (true) {
      auto got = broker_->Retrieve(queue, 0);
      if (!got.ok() || !got.value()) return out;
      out.push_back(got.value()->str());
    }
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<Orchestrator> orch_;
  std::shared_ptr<StateBackend> state_;
  std::shared_ptr<Broker> broker_;
  std::shared_ptr<TriggerStore> trigger_;
  std::unique_ptr<Lifecycle> life_;
};

TYPED_TEST_SUITE(LifecycleCompliance, testing::AllBackends, testing::BackendNames);

TYPED_TEST(LifecycleCompliance, RegisterAndRouteStoresRegistersHistoriesAndRoutes) {
  auto r = this->life_->RegisterAndRoute(
      {this->New("a", "mod.t1", "q1", 1.0, "parent-x"), this->New("b", "mod.t2", "q2", 0.0),
       this->New("c", "mod.t1", "q1", 1.0)},
      kRunner);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().record.status, S::kRegistered);
  EXPECT_FALSE(r.value().status_watched);
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(this->StatusOf(id), S::kRegistered);
    EXPECT_TRUE(this->state_->GetInvocation(InvocationId(id)).ok());
    EXPECT_EQ(this->HistoryOf(id), std::vector<S>{S::kRegistered});
  }
  auto history = this->state_->GetHistory(InvocationId("a")).value();
  EXPECT_EQ(history[0].history_json,
            HistoryJson(InvocationId("a"), r.value().record, "runner-1", "parent-x"));
  // The indexes each component keeps (children by parent, invocations by task).
  auto children = this->state_->ChildInvocations(InvocationId("parent-x"));
  ASSERT_TRUE(children.ok()) << children.status().ToString();
  EXPECT_EQ(children.value(), std::vector<InvocationId>{InvocationId("a")});
  auto by_task = this->orch_->GetTaskInvocations(TaskId("mod.t1"));
  ASSERT_TRUE(by_task.ok());
  EXPECT_EQ(by_task.value(), (std::vector<InvocationId>{InvocationId("a"), InvocationId("c")}));
  EXPECT_EQ(this->orch_->GetStatusRecord(InvocationId("b")).value(), r.value().record);
  EXPECT_EQ(this->Drain("q1"), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(this->Drain("q2"), (std::vector<std::string>{"b"}));
}

TYPED_TEST(LifecycleCompliance, RegisterRejectsAnEmptyIdAndStoresNothing) {
  auto r = this->life_->RegisterAndRoute({this->New("a"), this->New("")}, kRunner);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(this->orch_->GetStatusRecord(InvocationId("a")).ok());
  EXPECT_EQ(this->broker_->Count({"default"}).value(), 0);
}

TYPED_TEST(LifecycleCompliance, WatchedFlagsFollowTheTriggerStore) {
  ASSERT_TRUE(this->trigger_->RegisterCondition("c-status", "{}", "StatusContext").ok());
  ASSERT_TRUE(this->trigger_->RegisterSourceTaskCondition("mod.watched", "c-status").ok());
  ASSERT_TRUE(this->trigger_->RegisterCondition("c-result", "{}", "ResultContext").ok());
  ASSERT_TRUE(this->trigger_->RegisterSourceTaskCondition("mod.task", "c-result").ok());
  auto watched = this->life_->RegisterAndRoute({this->New("w", "mod.watched")}, kRunner);
  ASSERT_TRUE(watched.ok());
  EXPECT_TRUE(watched.value().status_watched);
  auto plain = this->life_->RegisterAndRoute({this->New("p", "mod.task")}, kRunner);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain.value().status_watched);  // only a ResultContext condition watches it
  // A status change found by id looks the task up.
  auto changed = this->life_->ChangeStatus(InvocationId("w"), S::kPending, kRunner, std::nullopt,
                                           true);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(changed.value().status_watched);

  ASSERT_TRUE(this->broker_->Retrieve("default", 0).ok());
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_EQ(this->life_->Claim(InvocationId("p"), kRunner).value().kind, ClaimKind::kClaimed);
  ASSERT_TRUE(this->life_->ChangeStatus(InvocationId("p"), S::kRunning, kRunner, TaskId("mod.task"),
                                        true).ok());
  auto done = this->life_->FinishSuccess(InvocationId("p"), "42", kRunner, TaskId("mod.task"), true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(done.value().change.status_watched);
  EXPECT_TRUE(done.value().payload_watched);

  // Without a trigger store every flag is true: Python then always reports.
  auto blind = OpenLifecycle(LifecycleParts{this->orch_, this->state_, this->broker_, nullptr},
                             this->backend_.Config(this->clock_), kNames);
  ASSERT_TRUE(blind.ok());
  auto r = blind.value()->RegisterAndRoute({this->New("x")}, kRunner);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().status_watched);
}

TYPED_TEST(LifecycleCompliance, ChangeStatusToFinalReleasesWaitersAndMarksForPurge) {
  this->Running("a");
  this->Register("waiter");
  ASSERT_TRUE(this->orch_->WaitingForResults(InvocationId("waiter"), {InvocationId("a")}).ok());
  ASSERT_EQ(this->orch_->GetBlockingInvocations(10).value().size(), 0u);  // a is RUNNING
  auto r = this->life_->ChangeStatus(InvocationId("a"), S::kFailed, kRunner, std::nullopt, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(this->StatusOf("a"), S::kFailed);
  EXPECT_EQ(this->HistoryOf("a"),
            (std::vector<S>{S::kRegistered, S::kPending, S::kRunning, S::kFailed}));
  // The wait edge is gone: "waiter" waits for nothing any more...
  ASSERT_TRUE(this->orch_->WaitingForResults(InvocationId("other"), {InvocationId("waiter")}).ok());
  EXPECT_EQ(this->orch_->GetBlockingInvocations(10).value(),
            std::vector<InvocationId>{InvocationId("waiter")});
  // ... and "a" is marked for auto purge.
  this->clock_->Advance(10 * kSecond);
  auto purged = this->orch_->AutoPurge(kSecond);
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(purged.value(), std::vector<InvocationId>{InvocationId("a")});
}

TYPED_TEST(LifecycleCompliance, IllegalTransitionChangesNothing) {
  this->Register("a");
  auto r = this->life_->ChangeStatus(InvocationId("a"), S::kSuccess, kRunner, std::nullopt, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIllegalTransition);
  ASSERT_TRUE(r.status().transition().has_value());
  EXPECT_EQ(this->StatusOf("a"), S::kRegistered);
  EXPECT_EQ(this->HistoryOf("a"), std::vector<S>{S::kRegistered});
  auto missing =
      this->life_->ChangeStatus(InvocationId("nope"), S::kPending, kRunner, std::nullopt, true);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TYPED_TEST(LifecycleCompliance, ClaimChecksStatusAndConcurrencyKnowledge) {
  auto unknown = this->life_->Claim(InvocationId("nope"), kRunner);
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound);

  this->Register("a");
  auto first = this->life_->Claim(InvocationId("a"), kRunner);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first.value().kind, ClaimKind::kNeedsCheck);  // task not known to run freely
  ASSERT_TRUE(first.value().invocation.has_value());
  EXPECT_EQ(first.value().invocation->task_id, TaskId("mod.task"));
  EXPECT_EQ(this->StatusOf("a"), S::kRegistered);

  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  auto claimed = this->life_->Claim(InvocationId("a"), kRunner);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(claimed.value().kind, ClaimKind::kClaimed);
  EXPECT_EQ(claimed.value().record.status, S::kPending);
  EXPECT_EQ(claimed.value().record.runner_id, std::optional<std::string>("runner-1"));
  EXPECT_EQ(this->HistoryOf("a"), (std::vector<S>{S::kRegistered, S::kPending}));

  auto again = this->life_->Claim(InvocationId("a"), Actor{std::string("runner-2"), "runner-2"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().kind, ClaimKind::kNotAvailable);
  EXPECT_EQ(again.value().record.runner_id, std::optional<std::string>("runner-1"));
}

TYPED_TEST(LifecycleCompliance, ClaimAndStartMovesAFreeTaskOnToRunning) {
  auto unknown = this->life_->ClaimAndStart(InvocationId("nope"), kRunner);
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound);

  this->Register("a");
  auto first = this->life_->ClaimAndStart(InvocationId("a"), kRunner);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first.value().kind, ClaimKind::kNeedsCheck);  // not known to run freely: untouched
  EXPECT_EQ(this->StatusOf("a"), S::kRegistered);
  EXPECT_EQ(this->HistoryOf("a"), std::vector<S>{S::kRegistered});

  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  auto started = this->life_->ClaimAndStart(InvocationId("a"), kRunner);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ(started.value().kind, ClaimKind::kStarted);
  EXPECT_EQ(started.value().record.status, S::kRunning);
  EXPECT_EQ(started.value().record.runner_id, std::optional<std::string>("runner-1"));
  ASSERT_TRUE(started.value().invocation.has_value());
  EXPECT_EQ(started.value().invocation->task_id, TaskId("mod.task"));
  EXPECT_FALSE(started.value().status_watched);  // no condition watches mod.task
  const StatusRecord stored = this->orch_->GetStatusRecord(InvocationId("a")).value();
  EXPECT_EQ(stored.status, S::kRunning);
  EXPECT_EQ(stored.runner_id, std::optional<std::string>("runner-1"));
  EXPECT_EQ(stored.timestamp_us, started.value().record.timestamp_us);
  // Both rows, in order, the RUNNING one not before the PENDING one.
  const std::vector<HistoryRecord> rows = this->state_->GetHistory(InvocationId("a")).value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].status, S::kPending);
  EXPECT_EQ(rows[2].status, S::kRunning);
  EXPECT_LE(rows[1].timestamp_us, rows[2].timestamp_us);
  EXPECT_EQ(rows[2].timestamp_us, started.value().record.timestamp_us);

  // Another runner finds it taken; the owner finishes it as after ChangeStatus(RUNNING).
  auto again =
      this->life_->ClaimAndStart(InvocationId("a"), Actor{std::string("runner-2"), "runner-2"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().kind, ClaimKind::kNotAvailable);
  EXPECT_EQ(this->StatusOf("a"), S::kRunning);
  this->clock_->Advance(kSecond);  // the task's body
  auto done = this->life_->FinishSuccess(InvocationId("a"), "1", kRunner, TaskId("mod.task"), true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(this->HistoryOf("a"),
            (std::vector<S>{S::kRegistered, S::kPending, S::kRunning, S::kSuccess}));
}

// TakeAndStart: the broker's retrieve, then ClaimAndStart of the id taken (one
// script on Redis): the same rows as the two calls, and every outcome of a claim.
TYPED_TEST(LifecycleCompliance, TakeAndStartTakesAndStartsWhatTheQueueHolds) {
  auto empty = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_FALSE(empty.value().has_value());

  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(this->life_
                  ->RegisterAndRoute({this->New("a"), this->New("b", "mod.other"), this->New("c")},
                                     kRunner)
                  .ok());
  this->clock_->Advance(kSecond);
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a.value().has_value());
  EXPECT_EQ(a.value()->id, InvocationId("a"));
  ASSERT_TRUE(a.value()->claim_status.ok()) << a.value()->claim_status.ToString();
  const ClaimOutcome& started = a.value()->claim;
  EXPECT_EQ(started.kind, ClaimKind::kStarted);
  EXPECT_EQ(started.record.status, S::kRunning);
  EXPECT_EQ(started.record.runner_id, std::optional<std::string>("runner-1"));
  ASSERT_TRUE(started.invocation.has_value());
  EXPECT_EQ(started.invocation->task_id, TaskId("mod.task"));
  EXPECT_EQ(this->orch_->GetStatusRecord(InvocationId("a")).value(), started.record);
  const std::vector<HistoryRecord> rows = this->state_->GetHistory(InvocationId("a")).value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].status, S::kPending);
  EXPECT_EQ(rows[1].timestamp_us, kStart + kSecond);
  EXPECT_EQ(rows[2].timestamp_us, started.record.timestamp_us);
  EXPECT_LE(rows[1].timestamp_us, rows[2].timestamp_us);
  // The rows name the id taken, as the ports write them.
  EXPECT_EQ(rows[1].history_json,
            HistoryJson(InvocationId("a"), {S::kPending, "runner-1", kStart + kSecond},
                        "runner-1", std::nullopt));
  EXPECT_EQ(rows[2].history_json,
            HistoryJson(InvocationId("a"), started.record, "runner-1", std::nullopt));

  // A task not known to run freely: taken, left untouched for the caller's check.
  auto b = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(b.ok() && b.value().has_value());
  EXPECT_EQ(b.value()->id, InvocationId("b"));
  ASSERT_TRUE(b.value()->claim_status.ok());
  EXPECT_EQ(b.value()->claim.kind, ClaimKind::kNeedsCheck);
  ASSERT_TRUE(b.value()->claim.invocation.has_value());
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
  EXPECT_EQ(this->HistoryOf("b"), std::vector<S>{S::kRegistered});

  // Started by another runner while still queued: taken, not available.
  const Actor other{std::string("runner-2"), "runner-2"};
  ASSERT_EQ(this->life_->ClaimAndStart(InvocationId("c"), other).value().kind, ClaimKind::kStarted);
  auto c = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(c.ok() && c.value().has_value());
  EXPECT_EQ(c.value()->id, InvocationId("c"));
  EXPECT_EQ(c.value()->claim.kind, ClaimKind::kNotAvailable);
  EXPECT_EQ(c.value()->claim.record.runner_id, std::optional<std::string>("runner-2"));
  EXPECT_EQ(this->HistoryOf("c"), (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  auto drained = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(drained.ok());
  EXPECT_FALSE(drained.value().has_value());
}

TYPED_TEST(LifecycleCompliance, TakeAndStartWaitsForWorkAndTakesEachIdOnce) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  std::thread router([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(this->life_->RegisterAndRoute({this->New("late")}, kRunner).ok());
  });
  auto late = this->life_->TakeAndStart("default", 10'000, kRunner);
  router.join();
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  ASSERT_TRUE(late.value().has_value()) << "the wait ends when an id arrives";
  EXPECT_EQ(late.value()->id, InvocationId("late"));
  EXPECT_EQ(late.value()->claim.kind, ClaimKind::kStarted);

  constexpr int kInvocations = 20;
  std::vector<NewRoutedInvocation> batch;
  for (int i = 0; i < kInvocations; ++i) batch.push_back(this->New("t" + std::to_string(i)));
  ASSERT_TRUE(this->life_->RegisterAndRoute(batch, kRunner).ok());
  std::mutex mu;
  std::vector<std::string> taken;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Actor me{"runner-" + std::to_string(t), "runner-" + std::to_string(t)};
      while (true) {
        auto r = this->life_->TakeAndStart("default", 0, me);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (!r.value()) return;
        if (r.value()->claim_status.ok() && r.value()->claim.kind == ClaimKind::kStarted &&
            this->orch_->GetStatusRecord(r.value()->id).value().runner_id == me.runner_id) {
          ++started;
        }
        std::lock_guard<std::mutex> lock(mu);
        taken.push_back(r.value()->id.str());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(started.load(), kInvocations);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(std::unique(taken.begin(), taken.end()), taken.end()) << "an id taken twice";
  EXPECT_EQ(taken.size(), static_cast<std::size_t>(kInvocations));
}

TYPED_TEST(LifecycleCompliance, ClaimAndStartReportsWatchingAndCountsBothChanges) {
  ASSERT_TRUE(this->trigger_->RegisterCondition("c-status", "{}", "StatusContext").ok());
  ASSERT_TRUE(this->trigger_->RegisterSourceTaskCondition("mod.watched", "c-status").ok());
  this->life_->SetTaskRunsFreely(TaskId("mod.watched"));
  ASSERT_TRUE(this->life_->RegisterAndRoute({this->New("w", "mod.watched")}, kRunner).ok());
  const metrics::Snapshot before = metrics::Take();
  this->clock_->Advance(3 * kSecond);
  auto started = this->life_->ClaimAndStart(InvocationId("w"), kRunner);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ(started.value().kind, ClaimKind::kStarted);
  EXPECT_TRUE(started.value().status_watched);
  const metrics::Snapshot after = metrics::Take();
  const auto entered = [&](S s) {
    const auto i = static_cast<std::size_t>(s);
    return after.entered[i] - before.entered[i];
  };
  EXPECT_EQ(entered(S::kPending), 1u);
  EXPECT_EQ(entered(S::kRunning), 1u);
  EXPECT_EQ(after.queue_wait.count - before.queue_wait.count, 1u);
  EXPECT_EQ(after.queue_wait.sum_us - before.queue_wait.sum_us, 3 * kSecond);
}

TYPED_TEST(LifecycleCompliance, FinishSuccessAndFailureStorePayloadAndStatus) {
  this->Running("ok");
  auto s = this->life_->FinishSuccess(InvocationId("ok"), "\"result\"", kRunner,
                                      TaskId("mod.task"), true);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s.value().change.record.status, S::kSuccess);
  EXPECT_EQ(s.value().change.record.runner_id, std::nullopt);  // released
  EXPECT_EQ(this->state_->GetResult(InvocationId("ok")).value(), "\"result\"");
  EXPECT_EQ(this->HistoryOf("ok").back(), S::kSuccess);

  this->Running("bad");
  auto f = this->life_->FinishFailure(InvocationId("bad"), "{\"error\": 1}", kRunner,
                                      TaskId("mod.task"), true);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(this->StatusOf("bad"), S::kFailed);
  EXPECT_EQ(this->state_->GetException(InvocationId("bad")).value(), "{\"error\": 1}");

  // Not the owner: refused.
  this->Running("other");
  auto stolen = this->life_->FinishSuccess(InvocationId("other"), "1",
                                           Actor{std::string("runner-2"), "runner-2"},
                                           TaskId("mod.task"), true);
  ASSERT_FALSE(stolen.ok());
  EXPECT_EQ(stolen.status().code(), ErrorCode::kOwnershipViolation);
  EXPECT_EQ(this->StatusOf("other"), S::kRunning);
}

// ReadFinal: the status record as GetStatusRecord reads it, with the result
// only for a SUCCESS whose result fits the size asked for.
TYPED_TEST(LifecycleCompliance, ReadFinalReadsTheResultOfASuccessOnly) {
  auto unknown = this->life_->ReadFinal(InvocationId("nope"), 1024);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound);

  this->Running("run");
  auto running = this->life_->ReadFinal(InvocationId("run"), 1024);
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(running.value().record, this->orch_->GetStatusRecord(InvocationId("run")).value());
  EXPECT_EQ(running.value().record.runner_id, kRunner.runner_id);
  EXPECT_EQ(running.value().result, std::nullopt);

  const std::string result = "\"" + std::string(100, 'r') + "\"";  // 102 bytes
  ASSERT_TRUE(this->life_->FinishSuccess(InvocationId("run"), result, kRunner,
                                         TaskId("mod.task"), true).ok());
  auto done = this->life_->ReadFinal(InvocationId("run"), result.size());
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done.value().record, this->orch_->GetStatusRecord(InvocationId("run")).value());
  EXPECT_EQ(done.value().record.status, S::kSuccess);
  EXPECT_EQ(done.value().result, std::optional<std::string>(result));
  auto too_long = this->life_->ReadFinal(InvocationId("run"), result.size() - 1);
  ASSERT_TRUE(too_long.ok());
  EXPECT_EQ(too_long.value().record.status, S::kSuccess);
  EXPECT_EQ(too_long.value().result, std::nullopt);
  auto not_asked = this->life_->ReadFinal(InvocationId("run"), 0);
  ASSERT_TRUE(not_asked.ok());
  EXPECT_EQ(not_asked.value().result, std::nullopt);

  this->Running("bad");
  ASSERT_TRUE(this->life_->FinishFailure(InvocationId("bad"), "{}", kRunner, TaskId("mod.task"),
                                         true).ok());
  auto failed = this->life_->ReadFinal(InvocationId("bad"), 1024);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed.value().record.status, S::kFailed);
  EXPECT_EQ(failed.value().result, std::nullopt);  // an exception is not a result
}

// A client blocked in WaitAnyFinal wakes for the composite finishes too (on
// Redis the Finish script pushes the notification, on SQLite its commit bumps
// the wake board). On Redis one BLPOP covers the whole 5 s timeout, so without
// the notification the wait would sleep it out and return nothing.
TYPED_TEST(LifecycleCompliance, WaitAnyFinalWakesForAFinish) {
  this->Running("w-ok");
  this->Running("w-bad");
  for (const bool success : {true, false}) {
    const std::string id = success ? "w-ok" : "w-bad";
    std::thread finisher([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (success) {
        ASSERT_TRUE(
            this->life_->FinishSuccess(InvocationId(id), "1", kRunner, TaskId("mod.task"), true)
                .ok());
      } else {
        ASSERT_TRUE(
            this->life_->FinishFailure(InvocationId(id), "{}", kRunner, TaskId("mod.task"), true)
                .ok());
      }
    });
    auto got = this->orch_->WaitAnyFinal({InvocationId("never"), InvocationId(id)},
                                         5 * kSecond);
    finisher.join();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got.value(), InvocationId(id));
  }
}

TYPED_TEST(LifecycleCompliance, RetryCountsAndRoutesAgain) {
  this->Running("a");
  auto r = this->life_->Retry(InvocationId("a"), "retry-q", 2.0, kRunner, TaskId("mod.task"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(this->StatusOf("a"), S::kRetry);
  EXPECT_EQ(this->orch_->GetRetries(InvocationId("a")).value(), 1);
  EXPECT_EQ(this->Drain("retry-q"), std::vector<std::string>{"a"});
  EXPECT_EQ(this->HistoryOf("a").back(), S::kRetry);
}

TYPED_TEST(LifecycleCompliance, RerouteMovesAndRoutes) {
  this->Register("a");
  ASSERT_TRUE(this->broker_->Retrieve("default", 0).ok());
  ASSERT_TRUE(this->life_->ChangeStatus(InvocationId("a"), S::kConcurrencyControlled, kRunner,
                                        std::nullopt, true).ok());
  auto r = this->life_->Reroute(InvocationId("a"), "default", 0.0, kRunner, TaskId("mod.task"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(this->StatusOf("a"), S::kRerouted);
  EXPECT_EQ(this->Drain("default"), std::vector<std::string>{"a"});
}

TYPED_TEST(LifecycleCompliance, RecoverStaleMovesOnlyStaleInvocations) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("old");
  ASSERT_EQ(this->life_->Claim(InvocationId("old"), kRunner).value().kind, ClaimKind::kClaimed);
  this->clock_->Advance(100 * kSecond);
  this->Register("young");
  ASSERT_EQ(this->life_->Claim(InvocationId("young"), kRunner).value().kind, ClaimKind::kClaimed);
  auto pending = this->life_->RecoverStale(RecoveryKind::kPending, 50 * kSecond,
                                           Actor{std::string("recoverer"), "recoverer"});
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  ASSERT_EQ(pending.value().size(), 1u);
  EXPECT_EQ(pending.value()[0].id, InvocationId("old"));
  EXPECT_EQ(this->StatusOf("old"), S::kPendingRecovery);
  EXPECT_EQ(this->StatusOf("young"), S::kPending);
  EXPECT_EQ(this->HistoryOf("old").back(), S::kPendingRecovery);

  // RUNNING owned by a runner with no heartbeat -> RUNNING_RECOVERY.
  ASSERT_TRUE(this->life_->ChangeStatus(InvocationId("young"), S::kRunning, kRunner, std::nullopt,
                                        true).ok());
  auto running = this->life_->RecoverStale(RecoveryKind::kRunning, 50 * kSecond,
                                           Actor{std::string("recoverer"), "recoverer"});
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_EQ(running.value().size(), 1u);
  EXPECT_EQ(this->StatusOf("young"), S::kRunningRecovery);
}

// Each applied change is counted once, with the time spent queued (routed ->
// PENDING) and running (RUNNING -> SUCCESS) from the records' timestamps; a
// refused change is not counted.
TYPED_TEST(LifecycleCompliance, MetricsCountAppliedChangesAndTheirDurations) {
  const metrics::Snapshot before = metrics::Take();
  this->Register("m");
  this->clock_->Advance(3 * kSecond);
  ASSERT_TRUE(this->broker_->Retrieve("default", 0).ok());
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_EQ(this->life_->Claim(InvocationId("m"), kRunner).value().kind, ClaimKind::kClaimed);
  ASSERT_TRUE(
      this->life_->ChangeStatus(InvocationId("m"), S::kRunning, kRunner, std::nullopt, true).ok());
  this->clock_->Advance(2 * kSecond);
  ASSERT_TRUE(
      this->life_->FinishSuccess(InvocationId("m"), "1", kRunner, TaskId("mod.task"), true).ok());
  EXPECT_FALSE(
      this->life_->ChangeStatus(InvocationId("m"), S::kRunning, kRunner, std::nullopt, true).ok());
  const metrics::Snapshot after = metrics::Take();
  const auto entered = [&](S s) {
    const auto i = static_cast<std::size_t>(s);
    return after.entered[i] - before.entered[i];
  };
  EXPECT_EQ(entered(S::kRegistered), 1u);
  EXPECT_EQ(entered(S::kPending), 1u);
  EXPECT_EQ(entered(S::kRunning), 1u);
  EXPECT_EQ(entered(S::kSuccess), 1u);
  EXPECT_EQ(entered(S::kFailed), 0u);
  EXPECT_EQ(after.queue_wait.count - before.queue_wait.count, 1u);
  EXPECT_EQ(after.queue_wait.sum_us - before.queue_wait.sum_us, 3 * kSecond);
  EXPECT_EQ(after.run_time.count - before.run_time.count, 1u);
  EXPECT_EQ(after.run_time.sum_us - before.run_time.sum_us, 2 * kSecond);
}

TYPED_TEST(LifecycleCompliance, RacingClaimsHaveExactlyOneWinner) {
  this->RaceForClaims(false);
}

TYPED_TEST(LifecycleCompliance, RacingClaimAndStartsHaveExactlyOneWinner) {
  this->RaceForClaims(true);
}

// SQLite: every operation is one transaction, so a failing step undoes the ones
// before it (here the result stored before a refused SUCCESS transition).
template <typename B>
class LifecycleTransactional : public LifecycleCompliance<B> {};
TYPED_TEST_SUITE(LifecycleTransactional, ::testing::Types<testing::SqliteBackend>,
                 testing::BackendNames);

TYPED_TEST(LifecycleTransactional, RefusedFinishLeavesNoResult) {
  this->Register("a");  // REGISTERED -> SUCCESS is illegal
  auto r = this->life_->FinishSuccess(InvocationId("a"), "1", kRunner, TaskId("mod.task"), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIllegalTransition);
  EXPECT_EQ(this->state_->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
}

TYPED_TEST(LifecycleTransactional, RefusedFailureLeavesNoException) {
  this->Register("a");  // REGISTERED -> FAILED is illegal
  auto r = this->life_->FinishFailure(InvocationId("a"), "e", kRunner, TaskId("mod.task"), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(this->state_->GetException(InvocationId("a")).status().code(), ErrorCode::kNotFound);
}

// SQLite: the take and the claim are one transaction; a claim that fails rolls
// the take back, and the two-step path then takes the id and reports the claim's
// own error (the id has left the queue).
TYPED_TEST(LifecycleTransactional, TakeAndStartReportsAFailedClaimAndTakesTheId) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(this->broker_->Route({InvocationId("ghost")}, "default", 0.0).ok());
  this->Register("a");
  auto ghost = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(ghost.ok()) << ghost.status().ToString();
  ASSERT_TRUE(ghost.value().has_value());
  EXPECT_EQ(ghost.value()->id, InvocationId("ghost"));
  EXPECT_EQ(ghost.value()->claim_status.code(), ErrorCode::kNotFound);
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(a.value()->id, InvocationId("a"));
  EXPECT_EQ(a.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_TRUE(this->Drain("default").empty());
}

// Redis: Claim and Finish are one script, one round trip, in their common case;
// the uncommon case falls back to the port-by-port sequence with its exact error.
template <typename B>
class LifecycleRoundTrips : public LifecycleCompliance<B> {
 protected:
  // EVALSHA calls the server has processed (a script's own commands are
  // counted under their names; the port-by-port path runs several scripts).
  std::int64_t Scripts() {
    auto client = redis::OpenClient(this->backend_.Config(this->clock_));
    auto info = client.value()->Command({"INFO", "commandstats"});
    const std::string& text = info.value().str;
    const std::string key = "cmdstat_evalsha:calls=";
    const std::size_t at = text.find(key);
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + key.size(), text.find(',', at) - at - key.size()));
  }
};
TYPED_TEST_SUITE(LifecycleRoundTrips, ::testing::Types<testing::RedisBackend>,
                 testing::BackendNames);

TYPED_TEST(LifecycleRoundTrips, ClaimAndFinishAreOneRoundTripEach) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("warm");  // loads the scripts once
  ASSERT_TRUE(this->life_->Claim(InvocationId("warm"), kRunner).ok());
  ASSERT_TRUE(this->life_->ChangeStatus(InvocationId("warm"), S::kRunning, kRunner, std::nullopt,
                                        true).ok());
  ASSERT_TRUE(this->life_->FinishSuccess(InvocationId("warm"), "0", kRunner, TaskId("mod.task"),
                                         true).ok());
  ASSERT_TRUE(this->life_->ReadFinal(InvocationId("warm"), 1024).ok());
  std::int64_t before = this->Scripts();
  auto submitted = this->life_->RegisterAndRoute(
      {this->New("a"), this->New("x", "mod.other", "q9", 2.0, "a")}, kRunner);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  EXPECT_EQ(this->Scripts() - before, 1) << "a submit (any batch) is one script";
  before = this->Scripts();
  auto claimed = this->life_->Claim(InvocationId("a"), kRunner);
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  EXPECT_EQ(claimed.value().kind, ClaimKind::kClaimed);
  EXPECT_EQ(this->Scripts() - before, 1);
  before = this->Scripts();
  auto running =
      this->life_->ChangeStatus(InvocationId("a"), S::kRunning, kRunner, std::nullopt, true);
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(this->Scripts() - before, 1) << "PENDING -> RUNNING is one script";
  EXPECT_EQ(running.value().record.status, S::kRunning);
  EXPECT_EQ(running.value().record.runner_id, kRunner.runner_id);
  EXPECT_EQ(this->orch_->GetStatusRecord(InvocationId("a")).value(), running.value().record);
  EXPECT_EQ(this->state_->GetHistory(InvocationId("a")).value().back().history_json,
            HistoryJson(InvocationId("a"), running.value().record, "runner-1", std::nullopt));
  before = this->Scripts();
  auto done = this->life_->FinishSuccess(InvocationId("a"), "7", kRunner, TaskId("mod.task"), true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(this->Scripts() - before, 1);
  EXPECT_EQ(this->StatusOf("a"), S::kSuccess);
  EXPECT_EQ(this->state_->GetResult(InvocationId("a")).value(), "7");
  EXPECT_EQ(this->HistoryOf("a"),
            (std::vector<S>{S::kRegistered, S::kPending, S::kRunning, S::kSuccess}));
  // The history rows written by the script are the ones the ports would write.
  auto rows = this->state_->GetHistory(InvocationId("a")).value();
  EXPECT_EQ(rows.back().history_json,
            HistoryJson(InvocationId("a"), done.value().change.record, "runner-1", std::nullopt));

  before = this->Scripts();
  auto read = this->life_->ReadFinal(InvocationId("a"), 1024);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(this->Scripts() - before, 1) << "status and result in one script";
  EXPECT_EQ(read.value().result, std::optional<std::string>("7"));

  // Uncommon case: finishing an invocation that is not RUNNING falls back and
  // reports the port's error.
  this->Register("b");
  auto refused = this->life_->FinishSuccess(InvocationId("b"), "1", kRunner, TaskId("mod.task"),
                                            true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kIllegalTransition);

  // A status change the script does not take (RUNNING of a REGISTERED
  // invocation; RUNNING by another runner) falls back and reports the port's
  // error, writing nothing.
  auto illegal =
      this->life_->ChangeStatus(InvocationId("b"), S::kRunning, kRunner, std::nullopt, true);
  ASSERT_FALSE(illegal.ok());
  EXPECT_EQ(illegal.status().code(), ErrorCode::kIllegalTransition);
  this->Running("c");
  ASSERT_TRUE(this->life_->ChangeStatus(InvocationId("c"), S::kPaused, kRunner, std::nullopt, true)
                  .ok());
  auto foreign = this->life_->ChangeStatus(InvocationId("c"), S::kRunning,
                                           Actor{std::string("runner-2"), "runner-2"},
                                           std::nullopt, true);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), ErrorCode::kOwnershipViolation);
  EXPECT_EQ(this->StatusOf("c"), S::kPaused);
  EXPECT_EQ(this->HistoryOf("c").back(), S::kPaused);
}

TYPED_TEST(LifecycleRoundTrips, TakeAndStartIsOneRoundTrip) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("warm");
  ASSERT_TRUE(this->life_->TakeAndStart("default", 0, kRunner).ok());  // loads the script
  this->Register("a");
  const std::int64_t before = this->Scripts();
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(this->Scripts() - before, 1) << "pop, claim and RUNNING in one script";
  EXPECT_EQ(a.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(this->HistoryOf("a"), (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  // An id whose history text needs JSON escapes is claimed by the claim script.
  const std::string odd = "q\"x\\y\n\xc3\xa9";
  ASSERT_TRUE(this->life_->RegisterAndRoute({this->New(odd)}, kRunner).ok());
  auto escaped = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(escaped.ok() && escaped.value().has_value());
  EXPECT_EQ(escaped.value()->id, InvocationId(odd));
  ASSERT_TRUE(escaped.value()->claim_status.ok());
  EXPECT_EQ(escaped.value()->claim.kind, ClaimKind::kStarted);
  const std::vector<HistoryRecord> rows = this->state_->GetHistory(InvocationId(odd)).value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].history_json, HistoryJson(InvocationId(odd), escaped.value()->claim.record,
                                              "runner-1", std::nullopt));

  // A PENDING time before the current status's (the taker's clock behind, or an
  // id registered after the arguments were built): the take script writes
  // nothing; the claim script with fresh arguments, then the port path, claim it.
  this->clock_->Advance(kSecond);
  this->Register("early");
  this->clock_->Set(kStart);
  const std::int64_t at = this->Scripts();
  auto early = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(early.ok() && early.value().has_value());
  EXPECT_GT(this->Scripts() - at, 1) << "the port path's scripts follow the take";
  EXPECT_EQ(early.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(this->StatusOf("early"), S::kRunning);
  EXPECT_EQ(this->HistoryOf("early").size(), 3u);  // by time: the rows behind the clock first
}

// Redis: the reply of a TakeAndStart lost with the connection. What its script
// did is read back by the next TakeAndStart of the same thread: a claim it made
// is handed over (never redelivered, never left RUNNING with no one running it);
// an id it took without claiming is claimed then.
TEST(RedisTakeAndStart, AReplyLostWithTheConnectionIsReadBack) {
  testing::RedisServer server;
  testing::ReplyDroppingProxy proxy(server.port());
  auto clock = std::make_shared<ManualClock>(kStart);
  const BackendConfig config{"redis://127.0.0.1:" + std::to_string(proxy.port()) + "/0",
                             "lost-reply-app", clock};
  auto orch = std::shared_ptr<Orchestrator>(OpenOrchestrator(config).value());
  auto state = std::shared_ptr<StateBackend>(OpenStateBackend(config).value());
  auto broker = std::shared_ptr<Broker>(OpenBroker(config).value());
  auto trigger = std::shared_ptr<TriggerStore>(OpenTriggerStore(config).value());
  auto opened = OpenLifecycle(LifecycleParts{orch, state, broker, trigger}, config, kNames);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Lifecycle> life = std::move(opened).value();
  life->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(life->RegisterAndRoute({NewItem("a"), NewItem("b"), NewItem("c", "mod.other")},
                                     kRunner)
                  .ok());
  auto a = life->TakeAndStart("default", 0, kRunner);  // loads the script
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(a.value()->claim.kind, ClaimKind::kStarted);

  proxy.DropNextReply();
  auto lost = life->TakeAndStart("default", 0, kRunner);
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(lost.status().connection_lost()) << lost.status().ToString();
  auto b = life->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b.value().has_value());
  EXPECT_EQ(b.value()->id, InvocationId("b"));
  ASSERT_TRUE(b.value()->claim_status.ok()) << b.value()->claim_status.ToString();
  EXPECT_EQ(b.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(b.value()->claim.record.status, S::kRunning);
  EXPECT_EQ(b.value()->claim.record.runner_id, std::optional<std::string>("runner-1"));
  ASSERT_TRUE(b.value()->claim.invocation.has_value());
  EXPECT_EQ(b.value()->claim.invocation->task_id, TaskId("mod.task"));

  // c's task is not known to run freely: its lost attempt took it and claimed
  // nothing; read back, it is claimed now (the caller's check).
  proxy.DropNextReply();
  ASSERT_FALSE(life->TakeAndStart("default", 0, kRunner).ok());
  auto c = life->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(c.ok() && c.value().has_value()) << c.status().ToString();
  EXPECT_EQ(c.value()->id, InvocationId("c"));
  EXPECT_EQ(c.value()->claim.kind, ClaimKind::kNeedsCheck);

  // Nothing redelivered, nothing left; b's rows written once.
  auto after = life->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after.value().has_value());
  std::vector<S> rows;
  for (const HistoryRecord& h : state->GetHistory(InvocationId("b")).value()) {
    rows.push_back(h.status);
  }
  EXPECT_EQ(rows, (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  // A lost attempt on an empty queue took nothing: the next one goes on as usual.
  proxy.DropNextReply();
  ASSERT_FALSE(life->TakeAndStart("default", 0, kRunner).ok());
  auto none = life->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none.value().has_value());
}

TEST(HistoryJsonTest, MatchesPynencLayout) {
  StatusRecord rec{InvocationStatus::kPending, std::string("r\"1"), 1'700'000'000'123'456};
  EXPECT_EQ(HistoryJson(InvocationId("inv"), rec, "ctx", std::nullopt),
            "{\"invocation_id\": \"inv\", \"_timestamp\": \"2023-11-14T22:13:20.123456+00:00\", "
            "\"status_record\": {\"status\": \"pending\", \"runner_id\": \"r\\\"1\", "
            "\"timestamp\": \"2023-11-14T22:13:20.123456+00:00\"}, \"runner_context_id\": "
            "\"ctx\", \"registered_by_inv_id\": null}");
  EXPECT_EQ(IsoFormatUtc(1'700'000'000'000'000), "2023-11-14T22:13:20+00:00");
}

// A broker whose Route finds the server gone before anything is sent (a refused
// reconnect), for the port-by-port path's report of a cut operation.
class RefusingBroker : public Broker {
 public:
  explicit RefusingBroker(std::shared_ptr<Broker> inner) : inner_(std::move(inner)) {}
  Status Route(const std::vector<InvocationId>&, const std::string&, double) override {
    return Status::ConnectionLost("connection refused", false);
  }
  Result<std::optional<InvocationId>> Retrieve(const std::string& queue,
                                               std::int64_t wait_ms) override {
    return inner_->Retrieve(queue, wait_ms);
  }
  Result<std::int64_t> Count(const std::vector<std::string>& queues) override {
    return inner_->Count(queues);
  }
  Status Purge() override { return inner_->Purge(); }
  void Interrupt() override { inner_->Interrupt(); }

 private:
  std::shared_ptr<Broker> inner_;
};

TEST(PortLifecycleTest, AConnectionLostAfterAnAppliedStepMayHaveBeenApplied) {
  const BackendConfig config{"memory://", "cut", nullptr};
  std::shared_ptr<Orchestrator> orch(OpenOrchestrator(config).value());
  std::shared_ptr<StateBackend> state(OpenStateBackend(config).value());
  std::shared_ptr<Broker> broker(OpenBroker(config).value());
  auto life = OpenLifecycle(LifecycleParts{orch, state, broker, nullptr}, config, kNames).value();
  NewRoutedInvocation n;
  n.record.invocation_id = InvocationId("a");
  n.record.task_id = TaskId("mod.task");
  n.record.call_id = CallId("mod.task:a");
  n.record.arguments_id = "a";
  n.record.serialized_arguments = "{}";
  n.queue = "default";
  ASSERT_TRUE(life->RegisterAndRoute({n}, kRunner).ok());
  ASSERT_TRUE(broker->Retrieve("default", 0).ok());
  life->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(life->Claim(InvocationId("a"), kRunner).ok());
  ASSERT_TRUE(life->ChangeStatus(InvocationId("a"), S::kRunning, kRunner, std::nullopt, true).ok());

  auto cut = OpenLifecycle(
      LifecycleParts{orch, state, std::make_shared<RefusingBroker>(broker), nullptr}, config,
      kNames);
  ASSERT_TRUE(cut.ok());
  auto r = cut.value()->Retry(InvocationId("a"), "default", 0.0, kRunner, TaskId("mod.task"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().connection_lost());
  // The status and the retry count landed before the route was refused.
  EXPECT_TRUE(r.status().maybe_applied());
  EXPECT_EQ(orch->GetStatusRecord(InvocationId("a")).value().status, S::kRetry);
  EXPECT_EQ(orch->GetRetries(InvocationId("a")).value(), 1);
}

TEST(OpenLifecycleTest, RejectsMissingParts) {
  auto r = OpenLifecycle(LifecycleParts{}, BackendConfig{}, kNames);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pynenc_cpp
