// MemOrchestrator: status machine CAS, queries, pagination, heartbeats and
// recovery (ManualClock), auto purge, blocking control, atomic-service rows.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {

using S = InvocationStatus;
constexpr TimestampUs kStart = 1'700'000'000'000'000;
constexpr TimestampUs kSecond = 1'000'000;

InvocationId Inv(const std::string& s) { return InvocationId(s); }
std::vector<InvocationId> Ids(std::initializer_list<const char*> names) {
  std::vector<InvocationId> out;
  for (const char* n : names) out.emplace_back(n);
  return out;
}

class MemOrchestratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kStart);
    auto opened = OpenOrchestrator(BackendConfig{"memory://", "test-app", clock_});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    orch_ = std::move(opened).value();
  }

  // Registers `id` of task `task` (call "<task>:<id>").
  void Register(const std::string& id, const std::string& task = "mod.task",
                std::optional<std::string> runner = std::nullopt) {
    auto r = orch_->RegisterInvocations(
        {NewInvocation{Inv(id), TaskId(task), CallId(task + ":" + id)}}, runner);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Move(const std::string& id, S to, const std::string& runner) {
    auto r = orch_->TransitionStatus(Inv(id), to, runner);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  S StatusOf(const std::string& id) { return orch_->GetStatusRecord(Inv(id)).value().status; }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<Orchestrator> orch_;
};

TEST(OpenOrchestratorTest, RejectsUnsupportedUri) {
  auto r = OpenOrchestrator(BackendConfig{"redis://localhost:6379/0", "app", nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
}

TEST(AtomicServiceStatusTest, NamesRoundTrip) {
  for (auto s : {AtomicServiceStatus::kRunning, AtomicServiceStatus::kCompleted,
                 AtomicServiceStatus::kAbandoned, AtomicServiceStatus::kBlocked}) {
    EXPECT_EQ(ParseAtomicServiceStatus(AtomicServiceStatusName(s)), s);
  }
  EXPECT_FALSE(ParseAtomicServiceStatus("nope").has_value());
}

TEST_F(MemOrchestratorTest, RegisterStoresRegisteredRecordWithRegisteringRunner) {
  auto r = orch_->RegisterInvocations({NewInvocation{Inv("a"), TaskId("t"), CallId("t:a")}},
                                      std::string("runner-1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), (StatusRecord{S::kRegistered, "runner-1", kStart}));
  EXPECT_EQ(orch_->GetStatusRecord(Inv("a")).value(), r.value());
  EXPECT_EQ(orch_->GetRetries(Inv("a")).value(), 0);
}

TEST_F(MemOrchestratorTest, RegisterLeavesKnownInvocationsUntouched) {
  Register("a");
  Move("a", S::kPending, "r1");
  ASSERT_TRUE(orch_->IncrementRetries(Inv("a")).ok());
  Register("a");
  EXPECT_EQ(StatusOf("a"), S::kPending);
  EXPECT_EQ(orch_->GetRetries(Inv("a")).value(), 1);
  EXPECT_EQ(orch_->CountInvocations(std::nullopt, {}).value(), 1);
}

TEST_F(MemOrchestratorTest, RegisterRejectsEmptyIdAndRegistersNothing) {
  auto r = orch_->RegisterInvocations({NewInvocation{Inv("ok"), TaskId("t"), CallId("c")},
                                       NewInvocation{Inv(""), TaskId("t"), CallId("c")}},
                                      std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(orch_->CountInvocations(std::nullopt, {}).value(), 0);
}

TEST_F(MemOrchestratorTest, TransitionFollowsOwnershipRules) {
  Register("a");
  clock_->Advance(kSecond);
  auto pending = orch_->TransitionStatus(Inv("a"), S::kPending, std::string("r1"));
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending.value(), (StatusRecord{S::kPending, "r1", kStart + kSecond}));

  // PENDING requires ownership: another runner may not move it.
  auto stolen = orch_->TransitionStatus(Inv("a"), S::kRunning, std::string("r2"));
  ASSERT_FALSE(stolen.ok());
  EXPECT_EQ(stolen.status().code(), ErrorCode::kOwnershipViolation);
  const Status violation = stolen.status();  // status() returns a copy
  const TransitionErrorInfo& info = *violation.transition();
  EXPECT_EQ(info.from, S::kPending);
  EXPECT_EQ(info.to, S::kRunning);
  EXPECT_EQ(info.current_owner, "r1");
  EXPECT_EQ(info.attempted_owner, "r2");
  EXPECT_EQ(StatusOf("a"), S::kPending);  // unchanged

  Move("a", S::kRunning, "r1");
  // Recovery overrides ownership and releases it.
  auto recovered = orch_->TransitionStatus(Inv("a"), S::kRunningRecovery, std::string("other"));
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered.value().runner_id, std::nullopt);
}

TEST_F(MemOrchestratorTest, AcquiringOwnershipNeedsARunner) {
  Register("a");
  auto r = orch_->TransitionStatus(Inv("a"), S::kPending, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kOwnershipViolation);
}

TEST_F(MemOrchestratorTest, FinalStatusCannotChange) {
  Register("a");
  Move("a", S::kPending, "r1");
  Move("a", S::kRunning, "r1");
  Move("a", S::kSuccess, "r1");
  for (S to : AllStatuses()) {
    auto r = orch_->TransitionStatus(Inv("a"), to, std::string("r1"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kIllegalTransition);
    EXPECT_EQ(r.status().transition()->from, S::kSuccess);
    EXPECT_TRUE(r.status().transition()->allowed.empty());
  }
}

TEST_F(MemOrchestratorTest, UnknownInvocationIsNotFound) {
  EXPECT_EQ(orch_->TransitionStatus(Inv("x"), S::kRegistered, std::nullopt).status().code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(orch_->GetStatusRecord(Inv("x")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(orch_->IncrementRetries(Inv("x")).code(), ErrorCode::kNotFound);
  EXPECT_EQ(orch_->GetRetries(Inv("x")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(orch_->ScheduleAutoPurge(Inv("x")).code(), ErrorCode::kNotFound);
  EXPECT_EQ(orch_->IndexArguments(Inv("x"), {{"k", "v"}}).code(), ErrorCode::kNotFound);
}

TEST_F(MemOrchestratorTest, RacingTransitionsHaveExactlyOneWinner) {
  constexpr int kThreads = 16;
  for (int round = 0; round < 20; ++round) {
    const std::string id = "race-" + std::to_string(round);
    Register(id);
    std::atomic<int> wins{0}, illegal{0}, other{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        auto r = orch_->TransitionStatus(Inv(id), S::kPending, "runner-" + std::to_string(t));
        if (r.ok()) {
          ++wins;
        } else if (r.status().code() == ErrorCode::kIllegalTransition) {
          ++illegal;
        } else {
          ++other;
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(illegal.load(), kThreads - 1);
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(orch_->CountInvocations(std::nullopt, {S::kPending}).value(), round + 1);
  }
}

TEST_F(MemOrchestratorTest, ExistingInvocationsFilterByTaskArgumentsAndStatus) {
  Register("a", "t1");
  Register("b", "t1");
  Register("c", "t1");
  Register("d", "t2");
  ASSERT_TRUE(orch_->IndexArguments(Inv("a"), {{"x", "1"}, {"y", "1"}}).ok());
  ASSERT_TRUE(orch_->IndexArguments(Inv("b"), {{"x", "1"}, {"y", "2"}}).ok());
  ASSERT_TRUE(orch_->IndexArguments(Inv("d"), {{"x", "1"}, {"y", "1"}}).ok());
  Move("b", S::kPending, "r");

  EXPECT_EQ(orch_->GetExistingInvocations(TaskId("t1"), {}, {}).value(), Ids({"a", "b", "c"}));
  EXPECT_EQ(orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}}, {}).value(), Ids({"a", "b"}));
  EXPECT_EQ(orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}, {"y", "2"}}, {}).value(),
            Ids({"b"}));
  EXPECT_EQ(orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}}, {S::kRegistered}).value(),
            Ids({"a"}));
  EXPECT_TRUE(orch_->GetExistingInvocations(TaskId("t1"), {{"x", "9"}}, {}).value().empty());
  EXPECT_TRUE(orch_->GetExistingInvocations(TaskId("none"), {}, {}).value().empty());

  // Re-indexing a key replaces the old value.
  ASSERT_TRUE(orch_->IndexArguments(Inv("a"), {{"x", "2"}}).ok());
  EXPECT_EQ(orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}}, {}).value(), Ids({"b"}));
  EXPECT_EQ(orch_->GetExistingInvocations(TaskId("t1"), {{"x", "2"}}, {}).value(), Ids({"a"}));
}

TEST_F(MemOrchestratorTest, TaskCallAndStatusFilters) {
  Register("a", "t1");
  Register("b", "t1");
  Register("c", "t2");
  EXPECT_EQ(orch_->GetTaskInvocations(TaskId("t1")).value(), Ids({"a", "b"}));
  EXPECT_EQ(orch_->GetCallInvocations(CallId("t2:c")).value(), Ids({"c"}));
  EXPECT_TRUE(orch_->GetCallInvocations(CallId("nope")).value().empty());
  Move("b", S::kPending, "r");
  EXPECT_EQ(orch_->FilterByStatus(Ids({"c", "b", "a", "unknown"}), {S::kRegistered}).value(),
            Ids({"c", "a"}));
  EXPECT_TRUE(orch_->FilterByStatus(Ids({"a"}), {}).value().empty());
}

TEST_F(MemOrchestratorTest, PaginationIsNewestFirstAndStable) {
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    Register(id, "t1");
    clock_->Advance(kSecond);
  }
  Register("f", "t2");          // same timestamp as a later transition below
  Move("a", S::kPending, "r");  // a now has the newest timestamp (ties f; a registered first)
  EXPECT_EQ(orch_->ListInvocations(std::nullopt, {}, 100, 0).value(),
            Ids({"f", "a", "e", "d", "c", "b"}));
  EXPECT_EQ(orch_->ListInvocations(std::nullopt, {}, 2, 2).value(), Ids({"e", "d"}));
  EXPECT_EQ(orch_->ListInvocations(std::nullopt, {}, 2, 5).value(), Ids({"b"}));
  EXPECT_TRUE(orch_->ListInvocations(std::nullopt, {}, 2, 50).value().empty());
  EXPECT_TRUE(orch_->ListInvocations(std::nullopt, {}, 0, 0).value().empty());
  EXPECT_EQ(orch_->ListInvocations(TaskId("t1"), {S::kRegistered}, 10, 0).value(),
            Ids({"e", "d", "c", "b"}));
  EXPECT_EQ(orch_->ListInvocations(std::nullopt, {}, -1, 0).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(orch_->ListInvocations(std::nullopt, {}, 1, -1).status().code(),
            ErrorCode::kInvalidArgument);

  EXPECT_EQ(orch_->CountInvocations(std::nullopt, {}).value(), 6);
  EXPECT_EQ(orch_->CountInvocations(TaskId("t1"), {}).value(), 5);
  EXPECT_EQ(orch_->CountInvocations(TaskId("t1"), {S::kPending}).value(), 1);
  EXPECT_EQ(orch_->CountInvocations(std::nullopt, {S::kRegistered, S::kPending}).value(), 6);
  EXPECT_EQ(orch_->CountInvocations(TaskId("none"), {}).value(), 0);
}

TEST_F(MemOrchestratorTest, RetriesCount) {
  Register("a");
  ASSERT_TRUE(orch_->IncrementRetries(Inv("a")).ok());
  ASSERT_TRUE(orch_->IncrementRetries(Inv("a")).ok());
  EXPECT_EQ(orch_->GetRetries(Inv("a")).value(), 2);
}

TEST_F(MemOrchestratorTest, HeartbeatsOrderFilterAndExpire) {
  ASSERT_TRUE(orch_->RegisterHeartbeats({"r2", "r1"}, false, std::vector<std::string>{"q"}).ok());
  clock_->Advance(kSecond);
  ASSERT_TRUE(orch_->RegisterHeartbeats({"r0"}, true, std::nullopt).ok());
  clock_->Advance(kSecond);
  // Refresh keeps creation time and queues when none are given.
  ASSERT_TRUE(orch_->RegisterHeartbeats({"r2"}, false, std::nullopt).ok());

  auto all = orch_->ActiveRunners(10 * kSecond, std::nullopt).value();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].runner_id, "r1");  // equal creation: by id
  EXPECT_EQ(all[1].runner_id, "r2");
  EXPECT_EQ(all[2].runner_id, "r0");
  EXPECT_EQ(all[1].creation_us, kStart);
  EXPECT_EQ(all[1].last_heartbeat_us, kStart + 2 * kSecond);
  EXPECT_EQ(all[1].consumed_queues, std::vector<std::string>{"q"});

  auto eligible = orch_->ActiveRunners(10 * kSecond, true).value();
  ASSERT_EQ(eligible.size(), 1u);
  EXPECT_EQ(eligible[0].runner_id, "r0");
  EXPECT_TRUE(eligible[0].can_run_atomic_service);

  // Boundary: a heartbeat exactly `timeout` old is still active.
  auto recent = orch_->ActiveRunners(kSecond, std::nullopt).value();
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].runner_id, "r2");
  EXPECT_EQ(recent[1].runner_id, "r0");
  EXPECT_EQ(orch_->ActiveRunners(0, std::nullopt).value().size(), 1u);
  EXPECT_EQ(orch_->RegisterHeartbeats({""}, false, std::nullopt).code(),
            ErrorCode::kInvalidArgument);
}

TEST_F(MemOrchestratorTest, PendingRecoveryUsesStatusAge) {
  Register("old");
  Register("new");
  Register("reg");
  Move("old", S::kPending, "r");
  clock_->Advance(3 * kSecond);
  Move("new", S::kPending, "r");
  EXPECT_EQ(orch_->PendingForRecovery(3 * kSecond).value(), Ids({"old"}));
  EXPECT_TRUE(orch_->PendingForRecovery(4 * kSecond).value().empty());
  EXPECT_EQ(orch_->PendingForRecovery(0).value(), Ids({"old", "new"}));
}

TEST_F(MemOrchestratorTest, RunningRecoveryFindsOwnersWithoutRecentHeartbeat) {
  ASSERT_TRUE(orch_->RegisterHeartbeats({"alive", "stale"}, false, std::nullopt).ok());
  for (const char* id : {"a", "s", "g", "done"}) Register(id);
  Move("a", S::kPending, "alive");
  Move("a", S::kRunning, "alive");
  Move("s", S::kPending, "stale");
  Move("s", S::kRunning, "stale");
  Move("g", S::kPending, "ghost");  // never heartbeated
  Move("g", S::kRunning, "ghost");
  Move("done", S::kPending, "ghost");
  Move("done", S::kRunning, "ghost");
  Move("done", S::kSuccess, "ghost");
  clock_->Advance(60 * kSecond);
  ASSERT_TRUE(orch_->RegisterHeartbeats({"alive"}, false, std::nullopt).ok());
  EXPECT_EQ(orch_->RunningForRecovery(30 * kSecond).value(), Ids({"s", "g"}));
  EXPECT_EQ(orch_->RunningForRecovery(120 * kSecond).value(), Ids({"g"}));
}

TEST_F(MemOrchestratorTest, AutoPurgeForgetsMarkedInvocationsAfterTheDelay) {
  Register("a", "t");
  Register("b", "t");
  ASSERT_TRUE(orch_->IndexArguments(Inv("a"), {{"k", "v"}}).ok());
  ASSERT_TRUE(orch_->WaitingForResults(Inv("b"), {Inv("a")}).ok());
  ASSERT_TRUE(orch_->ScheduleAutoPurge(Inv("a")).ok());
  clock_->Advance(10 * kSecond);

  EXPECT_TRUE(orch_->AutoPurge(11 * kSecond).value().empty());
  EXPECT_EQ(orch_->AutoPurge(10 * kSecond).value(), Ids({"a"}));
  EXPECT_EQ(orch_->GetStatusRecord(Inv("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(orch_->GetTaskInvocations(TaskId("t")).value(), Ids({"b"}));
  EXPECT_TRUE(orch_->GetCallInvocations(CallId("t:a")).value().empty());
  EXPECT_TRUE(orch_->GetExistingInvocations(TaskId("t"), {{"k", "v"}}, {}).value().empty());
  EXPECT_EQ(orch_->CountInvocations(std::nullopt, {S::kRegistered}).value(), 1);
  // b no longer waits for anything, so nothing is blocking.
  EXPECT_TRUE(orch_->GetBlockingInvocations(10).value().empty());
  EXPECT_TRUE(orch_->AutoPurge(0).value().empty());
}

TEST_F(MemOrchestratorTest, BlockingInvocationsAreWaitedOnNotWaitingAndRunnable) {
  for (const char* id : {"top", "mid", "leaf1", "leaf2", "busy"}) Register(id);
  ASSERT_TRUE(orch_->WaitingForResults(Inv("top"), {Inv("mid")}).ok());
  ASSERT_TRUE(orch_->WaitingForResults(Inv("mid"), {Inv("leaf2"), Inv("leaf1")}).ok());
  ASSERT_TRUE(orch_->WaitingForResults(Inv("top"), {Inv("busy"), Inv("unregistered")}).ok());
  Move("busy", S::kPending, "r");  // not available for run

  EXPECT_EQ(orch_->GetBlockingInvocations(10).value(), Ids({"leaf1", "leaf2"}));
  EXPECT_EQ(orch_->GetBlockingInvocations(1).value(), Ids({"leaf1"}));
  EXPECT_TRUE(orch_->GetBlockingInvocations(0).value().empty());
  EXPECT_EQ(orch_->GetBlockingInvocations(-1).status().code(), ErrorCode::kInvalidArgument);

  ASSERT_TRUE(orch_->ReleaseWaiters(Inv("leaf1")).ok());
  EXPECT_EQ(orch_->GetBlockingInvocations(10).value(), Ids({"leaf2"}));
  ASSERT_TRUE(orch_->ReleaseWaiters(Inv("leaf2")).ok());
  EXPECT_EQ(orch_->GetBlockingInvocations(10).value(), Ids({"mid"}));
  ASSERT_TRUE(orch_->ReleaseWaiters(Inv("never-seen")).ok());
}

TEST_F(MemOrchestratorTest, AtomicServiceStartIsASingleRunningGate) {
  auto first = orch_->RecordAtomicServiceStart("r1", "run-1", std::nullopt,
                                               AtomicServiceStatus::kRunning, "");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first.value().accepted);
  EXPECT_EQ(first.value().started_at_us, kStart);

  clock_->Advance(kSecond);
  auto again = orch_->RecordAtomicServiceStart("r1", "run-1", std::nullopt,
                                               AtomicServiceStatus::kRunning, "");
  EXPECT_TRUE(again.value().accepted);
  EXPECT_EQ(again.value().started_at_us, kStart);

  auto second =
      orch_->RecordAtomicServiceStart("r2", "run-2", kStart + 5, AtomicServiceStatus::kRunning, "");
  EXPECT_FALSE(second.value().accepted);
  EXPECT_EQ(second.value().started_at_us, kStart + 5);

  auto active = orch_->ActiveAtomicServiceExecutions().value();
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].run_id, "run-1");

  auto rows =
      orch_->AtomicServiceExecutionsInRange(0, kStart + kSecond, 10, std::nullopt, 0).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].run_id, "run-2");
  EXPECT_EQ(rows[0].status, AtomicServiceStatus::kBlocked);
  EXPECT_EQ(rows[0].end_us, kStart + 5);
  EXPECT_EQ(rows[0].reason, "prior_running:run-1 runner:r1");

  auto blocked = orch_->RecordAtomicServiceStart("r3", "run-3", std::nullopt,
                                                 AtomicServiceStatus::kBlocked, "late");
  EXPECT_FALSE(blocked.value().accepted);
}

TEST_F(MemOrchestratorTest, AtomicServiceRacingStartsHaveOneWinner) {
  constexpr int kThreads = 12;
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto r = orch_->RecordAtomicServiceStart("r" + std::to_string(t), "run-" + std::to_string(t),
                                               std::nullopt, AtomicServiceStatus::kRunning, "");
      if (r.ok() && r.value().accepted) ++accepted;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 1);
  EXPECT_EQ(orch_->ActiveAtomicServiceExecutions().value().size(), 1u);
}

TEST_F(MemOrchestratorTest, AtomicServiceFinalizeFirstTerminalWins) {
  ASSERT_TRUE(
      orch_->RecordAtomicServiceStart("r1", "run-1", kStart, AtomicServiceStatus::kRunning, "why")
          .ok());
  ASSERT_TRUE(orch_
                  ->FinalizeAtomicService("r1", "run-1", kStart + kSecond,
                                          AtomicServiceStatus::kCompleted, "")
                  .ok());
  ASSERT_TRUE(orch_
                  ->FinalizeAtomicService("r1", "run-1", kStart + 9 * kSecond,
                                          AtomicServiceStatus::kAbandoned, "reaper")
                  .ok());
  auto rows = orch_->AtomicServiceExecutionsInRange(0, kStart * 2, 10, std::nullopt, 0).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, AtomicServiceStatus::kCompleted);
  EXPECT_EQ(rows[0].end_us, kStart + kSecond);
  EXPECT_EQ(rows[0].reason, "why");
  EXPECT_TRUE(orch_->ActiveAtomicServiceExecutions().value().empty());

  // Unknown run: inserted with start == end.
  ASSERT_TRUE(orch_
                  ->FinalizeAtomicService("r2", "run-2", kStart + 3 * kSecond,
                                          AtomicServiceStatus::kAbandoned, "lost")
                  .ok());
  rows = orch_->AtomicServiceExecutionsInRange(0, kStart * 2, 10, std::string("r2"), 0).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].start_us, kStart + 3 * kSecond);
  EXPECT_EQ(rows[0].end_us, kStart + 3 * kSecond);

  EXPECT_EQ(
      orch_->FinalizeAtomicService("r1", "run-1", kStart, AtomicServiceStatus::kRunning, "").code(),
      ErrorCode::kInvalidArgument);
}

TEST_F(MemOrchestratorTest, AtomicServiceRangeFilters) {
  auto record = [&](const std::string& runner, const std::string& run, TimestampUs start,
                    TimestampUs end) {
    ASSERT_TRUE(
        orch_->RecordAtomicServiceStart(runner, run, start, AtomicServiceStatus::kRunning, "")
            .ok());
    ASSERT_TRUE(
        orch_->FinalizeAtomicService(runner, run, end, AtomicServiceStatus::kCompleted, "").ok());
  };
  record("a", "short", kStart, kStart + 5000);
  record("b", "long", kStart + 10 * kSecond, kStart + 12 * kSecond);
  record("a", "before", kStart - 100 * kSecond, kStart - 90 * kSecond);

  auto in = [&](TimestampUs s, TimestampUs e, std::int64_t limit, std::optional<std::string> r,
                TimestampUs min_d) {
    std::vector<std::string> ids;
    // Keep the Result alive: value() of a temporary would dangle in a range-for.
    auto rows = orch_->AtomicServiceExecutionsInRange(s, e, limit, r, min_d);
    for (const auto& x : rows.value()) {
      ids.push_back(x.run_id);
    }
    return ids;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(in(kStart - kSecond, kStart + 20 * kSecond, 10, std::nullopt, 0), (V{"long", "short"}));
  EXPECT_EQ(in(kStart - kSecond, kStart + 20 * kSecond, 1, std::nullopt, 0), (V{"long"}));
  EXPECT_EQ(in(kStart - kSecond, kStart + 20 * kSecond, -1, std::nullopt, 0), V{});
  EXPECT_EQ(in(kStart - kSecond, kStart + 20 * kSecond, 10, std::string("a"), 0), (V{"short"}));
  EXPECT_EQ(in(kStart - kSecond, kStart + 20 * kSecond, 10, std::nullopt, kSecond), (V{"long"}));
  // Overlap: ends inside the window although it started before it.
  EXPECT_EQ(in(kStart + 11 * kSecond, kStart + 11 * kSecond, 10, std::nullopt, 0), (V{"long"}));
}

TEST_F(MemOrchestratorTest, AtomicServicePurgeByAgeAndCapacitySparesRunningAndProtected) {
  for (int i = 0; i < 5; ++i) {
    const std::string run = "run-" + std::to_string(i);
    const TimestampUs start = kStart - (100 - i) * kSecond;
    ASSERT_TRUE(
        orch_->RecordAtomicServiceStart("r", run, start, AtomicServiceStatus::kRunning, "").ok());
    ASSERT_TRUE(
        orch_->FinalizeAtomicService("r", run, start + 1, AtomicServiceStatus::kCompleted, "")
            .ok());
  }
  ASSERT_TRUE(orch_
                  ->RecordAtomicServiceStart("r", "live", kStart - 200 * kSecond,
                                             AtomicServiceStatus::kRunning, "")
                  .ok());
  // Capacity: 5 finished rows, keep 2 (+ protected run-0); running row kept.
  auto removed = orch_->PurgeAtomicServiceExecutions({0, 2, {"run-0"}});
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed.value(), 3);
  std::vector<std::string> left;
  auto rows = orch_->AtomicServiceExecutionsInRange(0, kStart, 100, std::nullopt, 0);
  for (const auto& e : rows.value()) {
    left.push_back(e.run_id);
  }
  EXPECT_EQ(left, (std::vector<std::string>{"run-4", "run-0", "live"}));

  // Age: everything finished before now - 50s goes, except protected.
  EXPECT_EQ(orch_->PurgeAtomicServiceExecutions({50 * kSecond, 0, {"run-0"}}).value(), 1);
  EXPECT_EQ(orch_->PurgeAtomicServiceExecutions({50 * kSecond, 0, {}}).value(), 1);
  EXPECT_EQ(orch_->ActiveAtomicServiceExecutions().value().size(), 1u);
}

TEST_F(MemOrchestratorTest, PurgeForgetsEverything) {
  Register("a");
  ASSERT_TRUE(orch_->WaitingForResults(Inv("x"), {Inv("a")}).ok());
  ASSERT_TRUE(orch_->RegisterHeartbeats({"r"}, true, std::nullopt).ok());
  ASSERT_TRUE(
      orch_->RecordAtomicServiceStart("r", "run", kStart, AtomicServiceStatus::kRunning, "").ok());
  ASSERT_TRUE(orch_->Purge().ok());
  EXPECT_EQ(orch_->CountInvocations(std::nullopt, {}).value(), 0);
  EXPECT_EQ(orch_->GetRetries(Inv("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(orch_->GetBlockingInvocations(5).value().empty());
  EXPECT_TRUE(orch_->ActiveRunners(kSecond, std::nullopt).value().empty());
  EXPECT_TRUE(orch_->ActiveAtomicServiceExecutions().value().empty());
  Register("a");  // usable again
  EXPECT_EQ(StatusOf("a"), S::kRegistered);
}

}  // namespace
}  // namespace pynenc_cpp
