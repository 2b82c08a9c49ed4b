// Lifecycle compliance suite (native mode's composite operations), run on every
// backend over real components: each composite must leave the stores exactly
// as pynenc's BaseOrchestrator sequence of calls would (status, history rows,
// waiters, auto-purge marks, results, retries, queues). SQLite-only cases check
// that an operation is one transaction (a failed step rolls the earlier ones back).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

#include "lifecycle_fixture.h"
#include "pynenc_cpp/core/metrics.h"

namespace pynenc_cpp {
namespace {

using namespace lifecycle_test;  // NOLINT: the suite's fixtures and constants

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

TYPED_TEST(LifecycleCompliance, OnlyTheInMemoryLifecycleIsInProcess) {
  // The bindings keep the GIL around the quick operations of an in-process
  // lifecycle only: SQLite and Redis operations wait on files and servers.
  EXPECT_EQ(this->life_->InProcess(), std::string(TypeParam::kName) == "Mem");
}

TYPED_TEST(LifecycleCompliance, RegisterRejectsAnEmptyIdAndStoresNothing) {
  auto r = this->life_->RegisterAndRoute({this->New("a"), this->New("")}, kRunner);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(this->orch_->GetStatusRecord(InvocationId("a")).ok());
  EXPECT_EQ(this->broker_->Count({"default"}).value(), 0);
}

TYPED_TEST(LifecycleCompliance, AnIdSubmittedTwiceAtOneInstantKeepsItsHistoryReadable) {
  // Same id twice in one batch, then again in another call, all at one instant
  // (the clock does not move): every row written under the same key. Whatever
  // rows a backend keeps, a time range reads exactly those, page by page.
  ASSERT_TRUE(this->life_->RegisterAndRoute({this->New("a"), this->New("a")}, kRunner).ok());
  ASSERT_TRUE(this->life_->RegisterAndRoute({this->New("a"), this->New("b")}, kRunner).ok());
  std::size_t rows = 0;
  for (const char* id : {"a", "b"}) {
    auto h = this->state_->GetHistory(InvocationId(id));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_FALSE(h.value().empty());
    rows += h.value().size();
  }
  std::size_t paged = 0;
  std::optional<HistoryPosition> after;
  for (int page = 0; page < 10; ++page) {
    auto p = this->state_->HistoryInRange(0, kStart + 1, after, 1);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    paged += p.value().records.size();
    if (!p.value().next) break;
    after = p.value().next;
  }
  EXPECT_EQ(paged, rows);
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

  // A result stored by the ports (pynenc's own steps: mixed mode) reads the same.
  this->Running("port");
  const std::string other = "[1, 2]";
  ASSERT_TRUE(this->state_->SetResult(InvocationId("port"), other).ok());
  ASSERT_TRUE(
      this->orch_->TransitionStatus(InvocationId("port"), S::kSuccess, kRunner.runner_id).ok());
  EXPECT_EQ(this->life_->ReadFinal(InvocationId("port"), other.size()).value().result,
            std::optional<std::string>(other));
  EXPECT_EQ(this->life_->ReadFinal(InvocationId("port"), other.size() - 1).value().result,
            std::nullopt);

  this->Running("bad");
  ASSERT_TRUE(this->life_->FinishFailure(InvocationId("bad"), "{}", kRunner, TaskId("mod.task"),
                                         true).ok());
  auto failed = this->life_->ReadFinal(InvocationId("bad"), 1024);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed.value().record.status, S::kFailed);
  EXPECT_EQ(failed.value().result, std::nullopt);  // an exception is not a result
}

// ReadFinalAhead: ReadFinal of the id and, only when it is final, of the ahead ids
// that are final (in the order asked; unknown and not final ones left out). The
// port path (memory, SQLite) reads the id only.
TYPED_TEST(LifecycleCompliance, ReadFinalAheadReadsOnlyFinalIdsAfterAFinalOne) {
  auto unknown = this->life_->ReadFinalAhead(InvocationId("nope"), {InvocationId("x")}, 1024);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound);

  for (const char* id : {"first", "ok", "bad", "busy"}) this->Running(id);
  ASSERT_TRUE(this->life_->FinishSuccess(InvocationId("ok"), "\"fine\"", kRunner,
                                         TaskId("mod.task"), true).ok());
  ASSERT_TRUE(this->life_->FinishFailure(InvocationId("bad"), "{}", kRunner, TaskId("mod.task"),
                                         true).ok());
  const std::vector<InvocationId> ahead = {InvocationId("busy"), InvocationId("bad"),
                                           InvocationId("nope"), InvocationId("ok")};
  // Not final yet: nothing read ahead.
  auto running = this->life_->ReadFinalAhead(InvocationId("first"), ahead, 1024);
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(running.value().first.record.status, S::kRunning);
  EXPECT_TRUE(running.value().ahead.empty());

  ASSERT_TRUE(this->life_->FinishSuccess(InvocationId("first"), "1", kRunner,
                                         TaskId("mod.task"), true).ok());
  auto done = this->life_->ReadFinalAhead(InvocationId("first"), ahead, 1024);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done.value().first.record, this->orch_->GetStatusRecord(InvocationId("first")).value());
  EXPECT_EQ(done.value().first.result, std::optional<std::string>("1"));
  const auto& got = done.value().ahead;
  constexpr bool kReadsAhead = std::is_same_v<TypeParam, testing::RedisBackend>;
  if (kReadsAhead) {
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].first, InvocationId("bad"));
    EXPECT_EQ(got[1].first, InvocationId("ok"));
  } else {
    EXPECT_TRUE(got.empty());  // the port path reads the id only
  }
  for (const auto& [id, read] : got) {  // each as ReadFinal reads it
    auto alone = this->life_->ReadFinal(id, 1024);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(read.record, alone.value().record) << id.str();
    EXPECT_EQ(read.result, alone.value().result) << id.str();
  }
  // The size limit holds for the ids read ahead too.
  auto small = this->life_->ReadFinalAhead(InvocationId("first"), {InvocationId("ok")}, 3);
  ASSERT_TRUE(small.ok());
  ASSERT_EQ(small.value().ahead.size(), kReadsAhead ? 1u : 0u);
  for (const auto& [id, read] : small.value().ahead) {
    EXPECT_EQ(read.record.status, S::kSuccess);
    EXPECT_EQ(read.result, std::nullopt);
  }
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

// Redis: Claim and Finish are one script, one round trip, in their common case;
// the uncommon case falls back to the port-by-port sequence with its exact error.
TYPED_TEST_SUITE(LifecycleRoundTrips, ::testing::Types<testing::RedisBackend>,
                 testing::BackendNames);

TYPED_TEST(LifecycleRoundTrips, ReadFinalAheadIsOneRoundTrip) {
  for (const char* id : {"a", "b", "c"}) {
    this->Running(id);
    ASSERT_TRUE(this->life_->FinishSuccess(InvocationId(id), "2", kRunner, TaskId("mod.task"),
                                           true).ok());
  }
  ASSERT_TRUE(this->life_->ReadFinalAhead(InvocationId("a"), {InvocationId("b")}, 64).ok());
  const std::int64_t before = this->Scripts();
  auto read = this->life_->ReadFinalAhead(InvocationId("a"), {InvocationId("b"), InvocationId("c")},
                                          64);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(this->Scripts() - before, 1);
  ASSERT_EQ(read.value().ahead.size(), 2u);
  EXPECT_EQ(read.value().ahead[1].second.result, std::optional<std::string>("2"));
}

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

TEST(HistoryJsonTest, MatchesPynencLayout) {
  StatusRecord rec{InvocationStatus::kPending, std::string("r\"1"), 1'700'000'000'123'456};
  EXPECT_EQ(HistoryJson(InvocationId("inv"), rec, "ctx", std::nullopt),
            "{\"invocation_id\": \"inv\", \"_timestamp\": \"2023-11-14T22:13:20.123456+00:00\", "
            "\"status_record\": {\"status\": \"pending\", \"runner_id\": \"r\\\"1\", "
            "\"timestamp\": \"2023-11-14T22:13:20.123456+00:00\"}, \"runner_context_id\": "
            "\"ctx\", \"registered_by_inv_id\": null}");
  EXPECT_EQ(IsoFormatUtc(1'700'000'000'000'000), "2023-11-14T22:13:20+00:00");
}

TEST(HistoryJsonTest, QuotesAsJsonDumps) {
  // json.dumps (ensure_ascii): control characters, DEL, quotes, backslashes and
  // non-ASCII are escaped; other printable ASCII is kept.
  StatusRecord rec{InvocationStatus::kRunning, std::nullopt, 1'700'000'000'000'007};
  EXPECT_EQ(HistoryJson(InvocationId("i\x7f"), rec, "a\tb\\c\x01" "caf\xc3\xa9", "p"),
            "{\"invocation_id\": \"i\\u007f\", \"_timestamp\": "
            "\"2023-11-14T22:13:20.000007+00:00\", \"status_record\": {\"status\": "
            "\"running\", \"runner_id\": null, \"timestamp\": "
            "\"2023-11-14T22:13:20.000007+00:00\"}, \"runner_context_id\": "
            "\"a\\tb\\\\c\\u0001caf\\u00e9\", \"registered_by_inv_id\": \"p\"}");
}

TEST(HistoryJsonTest, EachSecondIsFormattedAfresh) {
  // The date part is kept per thread between calls: moving between seconds, and
  // back, must give each its own text.
  EXPECT_EQ(IsoFormatUtc(1'700'000'000'000'001), "2023-11-14T22:13:20.000001+00:00");
  EXPECT_EQ(IsoFormatUtc(1'700'000'001'500'000), "2023-11-14T22:13:21.500000+00:00");
  EXPECT_EQ(IsoFormatUtc(1'700'000'000'999'999), "2023-11-14T22:13:20.999999+00:00");
  EXPECT_EQ(IsoFormatUtc(0), "1970-01-01T00:00:00+00:00");
  EXPECT_EQ(IsoFormatUtc(-1), "1969-12-31T23:59:59.999999+00:00");
  EXPECT_EQ(IsoFormatUtc(-1'000'000), "1969-12-31T23:59:59+00:00");
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
