// Orchestrator compliance suite, run on every backend (backend_fixture.h):
// status machine CAS, queries, pagination, heartbeats and recovery
// (ManualClock), auto purge, blocking control, atomic-service rows; plus app
// isolation, durability across reopen and contested writes from many threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <type_traits>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/orchestrator.h"
#include "sqlite/sqlite_db.h"

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

template <typename B>
class OrchestratorCompliance : public testing::BackendTest<B> {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kStart);
    orch_ = Open();
    ASSERT_NE(orch_, nullptr);
  }

  // A fresh handle on this backend's store for `app_id` (null on failure).
  std::unique_ptr<Orchestrator> Open(const std::string& app_id = "compliance-app") {
    auto opened = OpenOrchestrator(this->backend_.Config(clock_, app_id));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
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


TYPED_TEST_SUITE(OrchestratorCompliance, testing::AllBackends, testing::BackendNames);

// Reopening, cross-process and unusable-file cases, for durable shared backends.
template <typename B>
class OrchestratorDurable : public OrchestratorCompliance<B> {};
TYPED_TEST_SUITE(OrchestratorDurable, testing::DurableBackends, testing::BackendNames);

TEST(OpenOrchestratorTest, RejectsUnsupportedUri) {
  auto r = OpenOrchestrator(BackendConfig{"nosuch://localhost:6379/0", "app", nullptr});
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

TYPED_TEST(OrchestratorCompliance, RegisterStoresRegisteredRecordWithRegisteringRunner) {
  auto r = this->orch_->RegisterInvocations({NewInvocation{Inv("a"), TaskId("t"), CallId("t:a")}},
                                            std::string("runner-1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), (StatusRecord{S::kRegistered, "runner-1", kStart}));
  EXPECT_EQ(this->orch_->GetStatusRecord(Inv("a")).value(), r.value());
  EXPECT_EQ(this->orch_->GetRetries(Inv("a")).value(), 0);
}

TYPED_TEST(OrchestratorCompliance, RegisterLeavesKnownInvocationsUntouched) {
  this->Register("a");
  this->Move("a", S::kPending, "r1");
  ASSERT_TRUE(this->orch_->IncrementRetries(Inv("a")).ok());
  this->Register("a");
  EXPECT_EQ(this->StatusOf("a"), S::kPending);
  EXPECT_EQ(this->orch_->GetRetries(Inv("a")).value(), 1);
  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {}).value(), 1);
}

TYPED_TEST(OrchestratorCompliance, RegisterRejectsEmptyIdAndRegistersNothing) {
  auto r = this->orch_->RegisterInvocations({NewInvocation{Inv("ok"), TaskId("t"), CallId("c")},
                                             NewInvocation{Inv(""), TaskId("t"), CallId("c")}},
                                            std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {}).value(), 0);
}

TYPED_TEST(OrchestratorCompliance, TransitionFollowsOwnershipRules) {
  this->Register("a");
  this->clock_->Advance(kSecond);
  auto pending = this->orch_->TransitionStatus(Inv("a"), S::kPending, std::string("r1"));
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending.value(), (StatusRecord{S::kPending, "r1", kStart + kSecond}));

  // PENDING requires ownership: another runner may not move it.
  auto stolen = this->orch_->TransitionStatus(Inv("a"), S::kRunning, std::string("r2"));
  ASSERT_FALSE(stolen.ok());
  EXPECT_EQ(stolen.status().code(), ErrorCode::kOwnershipViolation);
  const Status violation = stolen.status();  // status() returns a copy
  const TransitionErrorInfo& info = *violation.transition();
  EXPECT_EQ(info.from, S::kPending);
  EXPECT_EQ(info.to, S::kRunning);
  EXPECT_EQ(info.current_owner, "r1");
  EXPECT_EQ(info.attempted_owner, "r2");
  EXPECT_EQ(this->StatusOf("a"), S::kPending);  // unchanged

  this->Move("a", S::kRunning, "r1");
  // Recovery overrides ownership and releases it.
  auto recovered =
      this->orch_->TransitionStatus(Inv("a"), S::kRunningRecovery, std::string("other"));
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered.value().runner_id, std::nullopt);
}

TYPED_TEST(OrchestratorCompliance, AcquiringOwnershipNeedsARunner) {
  this->Register("a");
  auto r = this->orch_->TransitionStatus(Inv("a"), S::kPending, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kOwnershipViolation);
}

TYPED_TEST(OrchestratorCompliance, FinalStatusCannotChange) {
  this->Register("a");
  this->Move("a", S::kPending, "r1");
  this->Move("a", S::kRunning, "r1");
  this->Move("a", S::kSuccess, "r1");
  for (S to : AllStatuses()) {
    auto r = this->orch_->TransitionStatus(Inv("a"), to, std::string("r1"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kIllegalTransition);
    EXPECT_EQ(r.status().transition()->from, S::kSuccess);
    EXPECT_TRUE(r.status().transition()->allowed.empty());
  }
}

TYPED_TEST(OrchestratorCompliance, UnknownInvocationIsNotFound) {
  EXPECT_EQ(this->orch_->TransitionStatus(Inv("x"), S::kRegistered, std::nullopt).status().code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(this->orch_->GetStatusRecord(Inv("x")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->orch_->IncrementRetries(Inv("x")).code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->orch_->GetRetries(Inv("x")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->orch_->ScheduleAutoPurge(Inv("x")).code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->orch_->IndexArguments(Inv("x"), {{"k", "v"}}).code(), ErrorCode::kNotFound);
}

TYPED_TEST(OrchestratorCompliance, RacingTransitionsHaveExactlyOneWinner) {
  constexpr int kThreads = 16;
  for (int round = 0; round < 20; ++round) {
    const std::string id = "race-" + std::to_string(round);
    this->Register(id);
    std::atomic<int> wins{0}, illegal{0}, other{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        auto r = this->orch_->TransitionStatus(Inv(id), S::kPending, "runner-" + std::to_string(t));
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
    EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {S::kPending}).value(), round + 1);
  }
}

TYPED_TEST(OrchestratorCompliance, ExistingInvocationsFilterByTaskArgumentsAndStatus) {
  this->Register("a", "t1");
  this->Register("b", "t1");
  this->Register("c", "t1");
  this->Register("d", "t2");
  ASSERT_TRUE(this->orch_->IndexArguments(Inv("a"), {{"x", "1"}, {"y", "1"}}).ok());
  ASSERT_TRUE(this->orch_->IndexArguments(Inv("b"), {{"x", "1"}, {"y", "2"}}).ok());
  ASSERT_TRUE(this->orch_->IndexArguments(Inv("d"), {{"x", "1"}, {"y", "1"}}).ok());
  this->Move("b", S::kPending, "r");

  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("t1"), {}, {}).value(),
            Ids({"a", "b", "c"}));
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}}, {}).value(),
            Ids({"a", "b"}));
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}, {"y", "2"}}, {}).value(),
            Ids({"b"}));
  EXPECT_EQ(
      this->orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}}, {S::kRegistered}).value(),
      Ids({"a"}));
  EXPECT_TRUE(this->orch_->GetExistingInvocations(TaskId("t1"), {{"x", "9"}}, {}).value().empty());
  EXPECT_TRUE(this->orch_->GetExistingInvocations(TaskId("none"), {}, {}).value().empty());

  // Re-indexing a key replaces the old value.
  ASSERT_TRUE(this->orch_->IndexArguments(Inv("a"), {{"x", "2"}}).ok());
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("t1"), {{"x", "1"}}, {}).value(),
            Ids({"b"}));
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("t1"), {{"x", "2"}}, {}).value(),
            Ids({"a"}));
}

TYPED_TEST(OrchestratorCompliance, TaskCallAndStatusFilters) {
  this->Register("a", "t1");
  this->Register("b", "t1");
  this->Register("c", "t2");
  EXPECT_EQ(this->orch_->GetTaskInvocations(TaskId("t1")).value(), Ids({"a", "b"}));
  EXPECT_EQ(this->orch_->GetCallInvocations(CallId("t2:c")).value(), Ids({"c"}));
  EXPECT_TRUE(this->orch_->GetCallInvocations(CallId("nope")).value().empty());
  this->Move("b", S::kPending, "r");
  EXPECT_EQ(this->orch_->FilterByStatus(Ids({"c", "b", "a", "unknown"}), {S::kRegistered}).value(),
            Ids({"c", "a"}));
  EXPECT_TRUE(this->orch_->FilterByStatus(Ids({"a"}), {}).value().empty());
}

TYPED_TEST(OrchestratorCompliance, PaginationIsNewestFirstAndStable) {
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    this->Register(id, "t1");
    this->clock_->Advance(kSecond);
  }
  this->Register("f", "t2");          // same timestamp as a later transition below
  this->Move("a", S::kPending, "r");  // a now has the newest timestamp (ties f; a registered first)
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, {}, 100, 0).value(),
            Ids({"f", "a", "e", "d", "c", "b"}));
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, {}, 2, 2).value(), Ids({"e", "d"}));
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, {}, 2, 5).value(), Ids({"b"}));
  EXPECT_TRUE(this->orch_->ListInvocations(std::nullopt, {}, 2, 50).value().empty());
  EXPECT_TRUE(this->orch_->ListInvocations(std::nullopt, {}, 0, 0).value().empty());
  EXPECT_EQ(this->orch_->ListInvocations(TaskId("t1"), {S::kRegistered}, 10, 0).value(),
            Ids({"e", "d", "c", "b"}));
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, {}, -1, 0).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, {}, 1, -1).status().code(),
            ErrorCode::kInvalidArgument);

  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {}).value(), 6);
  EXPECT_EQ(this->orch_->CountInvocations(TaskId("t1"), {}).value(), 5);
  EXPECT_EQ(this->orch_->CountInvocations(TaskId("t1"), {S::kPending}).value(), 1);
  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {S::kRegistered, S::kPending}).value(), 6);
  EXPECT_EQ(this->orch_->CountInvocations(TaskId("none"), {}).value(), 0);
}

TYPED_TEST(OrchestratorCompliance, StatusFilteredPagesMergeStatusesNewestFirst) {
  for (const char* id : {"a", "b", "c", "d", "e", "f"}) {
    this->Register(id, std::string(id) < "d" ? "t1" : "t2");
    this->clock_->Advance(kSecond);
  }
  this->Move("b", S::kPending, "r");  // newest
  this->Move("e", S::kPending, "r");  // same time as b, registered later: before b
  this->Move("e", S::kRunning, "r");
  this->clock_->Advance(kSecond);
  this->Move("a", S::kPending, "r");
  const std::vector<S> waiting{S::kRegistered, S::kPending};
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, waiting, 100, 0).value(),
            Ids({"a", "b", "f", "d", "c"}));
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, waiting, 2, 1).value(), Ids({"b", "f"}));
  EXPECT_EQ(this->orch_->ListInvocations(TaskId("t2"), waiting, 1, 1).value(), Ids({"d"}));
  EXPECT_EQ(this->orch_->ListInvocations(TaskId("t2"), {}, 10, 0).value(), Ids({"e", "f", "d"}));
  EXPECT_EQ(this->orch_->ListInvocations(std::nullopt, {S::kRunning}, 10, 0).value(), Ids({"e"}));
  EXPECT_TRUE(this->orch_->ListInvocations(std::nullopt, {S::kFailed}, 10, 0).value().empty());
  EXPECT_EQ(this->orch_->CountInvocations(TaskId("t2"), waiting).value(), 2);
  this->clock_->Advance(10 * kSecond);
  EXPECT_EQ(this->orch_->PendingForRecovery(5 * kSecond).value(), Ids({"a", "b"}));
}

TYPED_TEST(OrchestratorCompliance, RetriesCount) {
  this->Register("a");
  ASSERT_TRUE(this->orch_->IncrementRetries(Inv("a")).ok());
  ASSERT_TRUE(this->orch_->IncrementRetries(Inv("a")).ok());
  EXPECT_EQ(this->orch_->GetRetries(Inv("a")).value(), 2);
}

TYPED_TEST(OrchestratorCompliance, HeartbeatsOrderFilterAndExpire) {
  ASSERT_TRUE(
      this->orch_->RegisterHeartbeats({"r2", "r1"}, false, std::vector<std::string>{"q"}).ok());
  this->clock_->Advance(kSecond);
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"r0"}, true, std::nullopt).ok());
  this->clock_->Advance(kSecond);
  // Refresh keeps creation time and queues when none are given.
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"r2"}, false, std::nullopt).ok());

  auto all = this->orch_->ActiveRunners(10 * kSecond, std::nullopt).value();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].runner_id, "r1");  // equal creation: by id
  EXPECT_EQ(all[1].runner_id, "r2");
  EXPECT_EQ(all[2].runner_id, "r0");
  EXPECT_EQ(all[1].creation_us, kStart);
  EXPECT_EQ(all[1].last_heartbeat_us, kStart + 2 * kSecond);
  EXPECT_EQ(all[1].consumed_queues, std::vector<std::string>{"q"});

  auto eligible = this->orch_->ActiveRunners(10 * kSecond, true).value();
  ASSERT_EQ(eligible.size(), 1u);
  EXPECT_EQ(eligible[0].runner_id, "r0");
  EXPECT_TRUE(eligible[0].can_run_atomic_service);

  // Boundary: a heartbeat exactly `timeout` old is still active.
  auto recent = this->orch_->ActiveRunners(kSecond, std::nullopt).value();
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].runner_id, "r2");
  EXPECT_EQ(recent[1].runner_id, "r0");
  EXPECT_EQ(this->orch_->ActiveRunners(0, std::nullopt).value().size(), 1u);
  EXPECT_EQ(this->orch_->RegisterHeartbeats({""}, false, std::nullopt).code(),
            ErrorCode::kInvalidArgument);
}

TYPED_TEST(OrchestratorCompliance, PendingRecoveryUsesStatusAge) {
  this->Register("old");
  this->Register("new");
  this->Register("reg");
  this->Move("old", S::kPending, "r");
  this->clock_->Advance(3 * kSecond);
  this->Move("new", S::kPending, "r");
  EXPECT_EQ(this->orch_->PendingForRecovery(3 * kSecond).value(), Ids({"old"}));
  EXPECT_TRUE(this->orch_->PendingForRecovery(4 * kSecond).value().empty());
  EXPECT_EQ(this->orch_->PendingForRecovery(0).value(), Ids({"old", "new"}));
}

TYPED_TEST(OrchestratorCompliance, RecoveryFencedOnTheOwnerItFoundDead) {
  this->Register("a");
  this->Move("a", S::kPending, "dead");
  this->Move("a", S::kRunning, "dead");
  // Recovered by another runner and started again by a live one since the sweep
  // that found it looked: the sweep's change, fenced on "dead", is refused.
  this->Move("a", S::kRunningRecovery, "rescuer");
  this->Move("a", S::kRerouted, "rescuer");
  this->Move("a", S::kPending, "live");
  this->Move("a", S::kRunning, "live");
  auto late = this->orch_->TransitionStatusFromOwner(Inv("a"), S::kRunningRecovery,
                                                     std::string("sweeper"), std::string("dead"));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), ErrorCode::kOwnershipViolation);
  const Status violation = late.status();
  EXPECT_EQ(violation.transition()->current_owner, "live");
  EXPECT_EQ(this->orch_->GetStatusRecord(Inv("a")).value().runner_id, "live");  // unchanged
  EXPECT_EQ(this->StatusOf("a"), S::kRunning);

  // Fenced on the owner it holds now, it is the plain transition.
  auto now = this->orch_->TransitionStatusFromOwner(Inv("a"), S::kRunningRecovery,
                                                    std::string("sweeper"), std::string("live"));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now.value().status, S::kRunningRecovery);
  EXPECT_EQ(now.value().runner_id, std::nullopt);
  // No owner is a value of its own; an unknown id is kNotFound.
  this->Register("b");
  EXPECT_TRUE(this->orch_
                  ->TransitionStatusFromOwner(Inv("b"), S::kPending, std::string("r"), std::nullopt)
                  .ok());
  EXPECT_EQ(this->orch_
                ->TransitionStatusFromOwner(Inv("nope"), S::kRunningRecovery, std::string("r"),
                                            std::string("dead"))
                .status()
                .code(),
            ErrorCode::kNotFound);
}

TYPED_TEST(OrchestratorCompliance, RunningRecoveryFindsOwnersWithoutRecentHeartbeat) {
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"alive", "stale"}, false, std::nullopt).ok());
  for (const char* id : {"a", "s", "g", "done"}) this->Register(id);
  this->Move("a", S::kPending, "alive");
  this->Move("a", S::kRunning, "alive");
  this->Move("s", S::kPending, "stale");
  this->Move("s", S::kRunning, "stale");
  this->Move("g", S::kPending, "ghost");  // never heartbeated
  this->Move("g", S::kRunning, "ghost");
  this->Move("done", S::kPending, "ghost");
  this->Move("done", S::kRunning, "ghost");
  this->Move("done", S::kSuccess, "ghost");
  this->clock_->Advance(60 * kSecond);
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"alive"}, false, std::nullopt).ok());
  EXPECT_EQ(this->orch_->RunningForRecovery(30 * kSecond).value(), Ids({"s", "g"}));
  EXPECT_EQ(this->orch_->RunningForRecovery(120 * kSecond).value(), Ids({"g"}));
}

TYPED_TEST(OrchestratorCompliance, DeregisteredRunnersAreForgottenAndTheirRunningRecovered) {
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"stays", "leaves"}, true, std::nullopt).ok());
  this->Register("r");
  this->Move("r", S::kPending, "leaves");
  this->Move("r", S::kRunning, "leaves");
  ASSERT_TRUE(this->orch_->DeregisterRunners({"leaves", "unknown"}).ok());
  ASSERT_TRUE(this->orch_->DeregisterRunners({}).ok());
  auto active = this->orch_->ActiveRunners(3600 * kSecond, std::nullopt).value();
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].runner_id, "stays");
  // What it still owned has an owner with no heartbeat: recovered at once.
  EXPECT_EQ(this->orch_->RunningForRecovery(3600 * kSecond).value(), Ids({"r"}));
  // A later heartbeat registers it anew.
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"leaves"}, false, std::nullopt).ok());
  EXPECT_EQ(this->orch_->ActiveRunners(3600 * kSecond, std::nullopt).value().size(), 2u);
}

TYPED_TEST(OrchestratorCompliance, PendingOfDeadRunnersNeedsAStaleHeartbeatNotAnOldStatus) {
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"alive", "stale"}, false, std::nullopt).ok());
  for (const char* id : {"a", "s1", "g", "run", "s2"}) this->Register(id);
  this->Move("a", S::kPending, "alive");
  this->Move("s1", S::kPending, "stale");
  this->Move("g", S::kPending, "ghost");  // never heartbeated: left to the age limit
  this->Move("run", S::kPending, "stale");
  this->Move("run", S::kRunning, "stale");  // RUNNING: RunningForRecovery's
  this->clock_->Advance(60 * kSecond);
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"alive"}, false, std::nullopt).ok());
  this->Move("s2", S::kPending, "stale");  // a fresh claim of the dead runner counts too
  EXPECT_EQ(this->orch_->PendingOfDeadRunners(30 * kSecond).value(), Ids({"s1", "s2"}));
  EXPECT_TRUE(this->orch_->PendingOfDeadRunners(120 * kSecond).value().empty());
  // The age limit still sees every old PENDING one, whoever claimed it.
  EXPECT_EQ(this->orch_->PendingForRecovery(30 * kSecond).value(), Ids({"a", "s1", "g"}));
}

TYPED_TEST(OrchestratorCompliance, AutoPurgeForgetsMarkedInvocationsAfterTheDelay) {
  this->Register("a", "t");
  this->Register("b", "t");
  ASSERT_TRUE(this->orch_->IndexArguments(Inv("a"), {{"k", "v"}}).ok());
  ASSERT_TRUE(this->orch_->WaitingForResults(Inv("b"), {Inv("a")}).ok());
  ASSERT_TRUE(this->orch_->ScheduleAutoPurge(Inv("a")).ok());
  this->clock_->Advance(10 * kSecond);

  EXPECT_TRUE(this->orch_->AutoPurge(11 * kSecond).value().empty());
  EXPECT_EQ(this->orch_->AutoPurge(10 * kSecond).value(), Ids({"a"}));
  EXPECT_EQ(this->orch_->GetStatusRecord(Inv("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->orch_->GetTaskInvocations(TaskId("t")).value(), Ids({"b"}));
  EXPECT_TRUE(this->orch_->GetCallInvocations(CallId("t:a")).value().empty());
  EXPECT_TRUE(this->orch_->GetExistingInvocations(TaskId("t"), {{"k", "v"}}, {}).value().empty());
  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {S::kRegistered}).value(), 1);
  // b no longer waits for anything, so nothing is blocking.
  EXPECT_TRUE(this->orch_->GetBlockingInvocations(10).value().empty());
  EXPECT_TRUE(this->orch_->AutoPurge(0).value().empty());
}

TYPED_TEST(OrchestratorCompliance, BlockingInvocationsAreWaitedOnNotWaitingAndRunnable) {
  for (const char* id : {"top", "mid", "leaf1", "leaf2", "busy"}) this->Register(id);
  ASSERT_TRUE(this->orch_->WaitingForResults(Inv("top"), {Inv("mid")}).ok());
  ASSERT_TRUE(this->orch_->WaitingForResults(Inv("mid"), {Inv("leaf2"), Inv("leaf1")}).ok());
  ASSERT_TRUE(this->orch_->WaitingForResults(Inv("top"), {Inv("busy"), Inv("unregistered")}).ok());
  this->Move("busy", S::kPending, "r");  // not available for run

  EXPECT_EQ(this->orch_->GetBlockingInvocations(10).value(), Ids({"leaf1", "leaf2"}));
  EXPECT_EQ(this->orch_->GetBlockingInvocations(1).value(), Ids({"leaf1"}));
  EXPECT_TRUE(this->orch_->GetBlockingInvocations(0).value().empty());
  EXPECT_EQ(this->orch_->GetBlockingInvocations(-1).status().code(), ErrorCode::kInvalidArgument);

  ASSERT_TRUE(this->orch_->ReleaseWaiters(Inv("leaf1")).ok());
  EXPECT_EQ(this->orch_->GetBlockingInvocations(10).value(), Ids({"leaf2"}));
  ASSERT_TRUE(this->orch_->ReleaseWaiters(Inv("leaf2")).ok());
  EXPECT_EQ(this->orch_->GetBlockingInvocations(10).value(), Ids({"mid"}));
  ASSERT_TRUE(this->orch_->ReleaseWaiters(Inv("never-seen")).ok());
}

TYPED_TEST(OrchestratorCompliance, AtomicServiceStartIsASingleRunningGate) {
  auto first = this->orch_->RecordAtomicServiceStart("r1", "run-1", std::nullopt,
                                                     AtomicServiceStatus::kRunning, "");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first.value().accepted);
  EXPECT_EQ(first.value().started_at_us, kStart);

  this->clock_->Advance(kSecond);
  auto again = this->orch_->RecordAtomicServiceStart("r1", "run-1", std::nullopt,
                                                     AtomicServiceStatus::kRunning, "");
  EXPECT_TRUE(again.value().accepted);
  EXPECT_EQ(again.value().started_at_us, kStart);

  auto second = this->orch_->RecordAtomicServiceStart("r2", "run-2", kStart + 5,
                                                      AtomicServiceStatus::kRunning, "");
  EXPECT_FALSE(second.value().accepted);
  EXPECT_EQ(second.value().started_at_us, kStart + 5);

  auto active = this->orch_->ActiveAtomicServiceExecutions().value();
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].run_id, "run-1");

  auto rows =
      this->orch_->AtomicServiceExecutionsInRange(0, kStart + kSecond, 10, std::nullopt, 0).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].run_id, "run-2");
  EXPECT_EQ(rows[0].status, AtomicServiceStatus::kBlocked);
  EXPECT_EQ(rows[0].end_us, kStart + 5);
  EXPECT_EQ(rows[0].reason, "prior_running:run-1 runner:r1");

  auto blocked = this->orch_->RecordAtomicServiceStart("r3", "run-3", std::nullopt,
                                                       AtomicServiceStatus::kBlocked, "late");
  EXPECT_FALSE(blocked.value().accepted);
}

TYPED_TEST(OrchestratorCompliance, AtomicServiceRacingStartsHaveOneWinner) {
  constexpr int kThreads = 12;
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto r =
          this->orch_->RecordAtomicServiceStart("r" + std::to_string(t), "run-" + std::to_string(t),
                                                std::nullopt, AtomicServiceStatus::kRunning, "");
      if (r.ok() && r.value().accepted) ++accepted;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 1);
  EXPECT_EQ(this->orch_->ActiveAtomicServiceExecutions().value().size(), 1u);
}

TYPED_TEST(OrchestratorCompliance, AtomicServiceFinalizeFirstTerminalWins) {
  ASSERT_TRUE(
      this->orch_
          ->RecordAtomicServiceStart("r1", "run-1", kStart, AtomicServiceStatus::kRunning, "why")
          .ok());
  ASSERT_TRUE(this->orch_
                  ->FinalizeAtomicService("r1", "run-1", kStart + kSecond,
                                          AtomicServiceStatus::kCompleted, "")
                  .ok());
  ASSERT_TRUE(this->orch_
                  ->FinalizeAtomicService("r1", "run-1", kStart + 9 * kSecond,
                                          AtomicServiceStatus::kAbandoned, "reaper")
                  .ok());
  auto rows =
      this->orch_->AtomicServiceExecutionsInRange(0, kStart * 2, 10, std::nullopt, 0).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, AtomicServiceStatus::kCompleted);
  EXPECT_EQ(rows[0].end_us, kStart + kSecond);
  EXPECT_EQ(rows[0].reason, "why");
  EXPECT_TRUE(this->orch_->ActiveAtomicServiceExecutions().value().empty());

  // Unknown run: inserted with start == end.
  ASSERT_TRUE(this->orch_
                  ->FinalizeAtomicService("r2", "run-2", kStart + 3 * kSecond,
                                          AtomicServiceStatus::kAbandoned, "lost")
                  .ok());
  rows =
      this->orch_->AtomicServiceExecutionsInRange(0, kStart * 2, 10, std::string("r2"), 0).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].start_us, kStart + 3 * kSecond);
  EXPECT_EQ(rows[0].end_us, kStart + 3 * kSecond);

  EXPECT_EQ(
      this->orch_->FinalizeAtomicService("r1", "run-1", kStart, AtomicServiceStatus::kRunning, "")
          .code(),
      ErrorCode::kInvalidArgument);
}

TYPED_TEST(OrchestratorCompliance, AtomicServiceRangeFilters) {
  auto record = [&](const std::string& runner, const std::string& run, TimestampUs start,
                    TimestampUs end) {
    ASSERT_TRUE(
        this->orch_->RecordAtomicServiceStart(runner, run, start, AtomicServiceStatus::kRunning, "")
            .ok());
    ASSERT_TRUE(
        this->orch_->FinalizeAtomicService(runner, run, end, AtomicServiceStatus::kCompleted, "")
            .ok());
  };
  record("a", "short", kStart, kStart + 5000);
  record("b", "long", kStart + 10 * kSecond, kStart + 12 * kSecond);
  record("a", "before", kStart - 100 * kSecond, kStart - 90 * kSecond);

  auto in = [&](TimestampUs s, TimestampUs e, std::int64_t limit, std::optional<std::string> r,
                TimestampUs min_d) {
    std::vector<std::string> ids;
    // Keep the Result alive: value() of a temporary would dangle in a range-for.
    auto rows = this->orch_->AtomicServiceExecutionsInRange(s, e, limit, r, min_d);
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

TYPED_TEST(OrchestratorCompliance, AtomicServicePurgeByAgeAndCapacitySparesRunningAndProtected) {
  for (int i = 0; i < 5; ++i) {
    const std::string run = "run-" + std::to_string(i);
    const TimestampUs start = kStart - (100 - i) * kSecond;
    ASSERT_TRUE(
        this->orch_->RecordAtomicServiceStart("r", run, start, AtomicServiceStatus::kRunning, "")
            .ok());
    ASSERT_TRUE(
        this->orch_->FinalizeAtomicService("r", run, start + 1, AtomicServiceStatus::kCompleted, "")
            .ok());
  }
  ASSERT_TRUE(this->orch_
                  ->RecordAtomicServiceStart("r", "live", kStart - 200 * kSecond,
                                             AtomicServiceStatus::kRunning, "")
                  .ok());
  // Capacity: 5 finished rows, keep 2 (+ protected run-0); running row kept.
  auto removed = this->orch_->PurgeAtomicServiceExecutions({0, 2, {"run-0"}});
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed.value(), 3);
  std::vector<std::string> left;
  auto rows = this->orch_->AtomicServiceExecutionsInRange(0, kStart, 100, std::nullopt, 0);
  for (const auto& e : rows.value()) {
    left.push_back(e.run_id);
  }
  EXPECT_EQ(left, (std::vector<std::string>{"run-4", "run-0", "live"}));

  // Age: everything finished before now - 50s goes, except protected.
  EXPECT_EQ(this->orch_->PurgeAtomicServiceExecutions({50 * kSecond, 0, {"run-0"}}).value(), 1);
  EXPECT_EQ(this->orch_->PurgeAtomicServiceExecutions({50 * kSecond, 0, {}}).value(), 1);
  EXPECT_EQ(this->orch_->ActiveAtomicServiceExecutions().value().size(), 1u);
}

TYPED_TEST(OrchestratorCompliance, PurgeForgetsEverything) {
  this->Register("a");
  ASSERT_TRUE(this->orch_->WaitingForResults(Inv("x"), {Inv("a")}).ok());
  ASSERT_TRUE(this->orch_->RegisterHeartbeats({"r"}, true, std::nullopt).ok());
  ASSERT_TRUE(
      this->orch_->RecordAtomicServiceStart("r", "run", kStart, AtomicServiceStatus::kRunning, "")
          .ok());
  ASSERT_TRUE(this->orch_->Purge().ok());
  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {}).value(), 0);
  EXPECT_EQ(this->orch_->GetRetries(Inv("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(this->orch_->GetBlockingInvocations(5).value().empty());
  EXPECT_TRUE(this->orch_->ActiveRunners(kSecond, std::nullopt).value().empty());
  EXPECT_TRUE(this->orch_->ActiveAtomicServiceExecutions().value().empty());
  this->Register("a");  // usable again
  EXPECT_EQ(this->StatusOf("a"), S::kRegistered);
}

// ---- store-level properties (what a durable backend must add) --------------

TYPED_TEST(OrchestratorCompliance, AppsSharingAStoreAreIsolated) {
  std::unique_ptr<Orchestrator> other = this->Open("other-app");
  ASSERT_NE(other, nullptr);
  this->Register("a", "t");
  ASSERT_TRUE(
      other
          ->RegisterInvocations({NewInvocation{Inv("a"), TaskId("t"), CallId("t:a")}}, std::nullopt)
          .ok());
  this->Move("a", S::kPending, "r1");
  EXPECT_EQ(other->GetStatusRecord(Inv("a")).value().status, S::kRegistered);
  ASSERT_TRUE(other->IndexArguments(Inv("a"), {{"k", "v"}}).ok());
  EXPECT_TRUE(this->orch_->GetExistingInvocations(TaskId("t"), {{"k", "v"}}, {}).value().empty());
  ASSERT_TRUE(other->IncrementRetries(Inv("a")).ok());
  EXPECT_EQ(this->orch_->GetRetries(Inv("a")).value(), 0);
  EXPECT_EQ(other->CountInvocations(std::nullopt, {S::kPending}).value(), 0);

  ASSERT_TRUE(other->WaitingForResults(Inv("x"), {Inv("a")}).ok());
  EXPECT_EQ(other->GetBlockingInvocations(10).value(), Ids({"a"}));
  EXPECT_TRUE(this->orch_->GetBlockingInvocations(10).value().empty());

  ASSERT_TRUE(other->RegisterHeartbeats({"r-other"}, true, std::nullopt).ok());
  EXPECT_TRUE(this->orch_->ActiveRunners(kSecond, std::nullopt).value().empty());
  // The single-runner gate is per app: both apps may run their atomic service.
  EXPECT_TRUE(
      this->orch_
          ->RecordAtomicServiceStart("r1", "run", std::nullopt, AtomicServiceStatus::kRunning, "")
          .value()
          .accepted);
  EXPECT_TRUE(
      other->RecordAtomicServiceStart("r2", "run", std::nullopt, AtomicServiceStatus::kRunning, "")
          .value()
          .accepted);

  ASSERT_TRUE(this->orch_->ScheduleAutoPurge(Inv("a")).ok());
  EXPECT_EQ(this->orch_->AutoPurge(0).value(), Ids({"a"}));
  EXPECT_EQ(other->GetStatusRecord(Inv("a")).value().status, S::kRegistered);
  ASSERT_TRUE(other->Purge().ok());
  EXPECT_EQ(this->orch_->ActiveAtomicServiceExecutions().value().size(), 1u);
}

TYPED_TEST(OrchestratorDurable, DataSurvivesReopeningTheStore) {
  this->Register("b", "t");
  this->Register("a", "t");
  this->Move("a", S::kPending, "r1");
  ASSERT_TRUE(this->orch_->IndexArguments(Inv("a"), {{"k", "v"}}).ok());
  ASSERT_TRUE(this->orch_->IncrementRetries(Inv("a")).ok());
  ASSERT_TRUE(this->orch_->WaitingForResults(Inv("a"), {Inv("b")}).ok());
  ASSERT_TRUE(
      this->orch_->RegisterHeartbeats({"r1"}, true, std::vector<std::string>{"q:1", "", "x"}).ok());
  ASSERT_TRUE(
      this->orch_
          ->RecordAtomicServiceStart("r1", "run-1", std::nullopt, AtomicServiceStatus::kRunning, "")
          .ok());
  this->orch_.reset();

  this->orch_ = this->Open();
  ASSERT_NE(this->orch_, nullptr);
  EXPECT_EQ(this->orch_->GetStatusRecord(Inv("a")).value(),
            (StatusRecord{S::kPending, "r1", kStart}));
  EXPECT_EQ(this->orch_->GetTaskInvocations(TaskId("t")).value(), Ids({"b", "a"}));
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("t"), {{"k", "v"}}, {}).value(), Ids({"a"}));
  EXPECT_EQ(this->orch_->GetRetries(Inv("a")).value(), 1);
  EXPECT_EQ(this->orch_->GetBlockingInvocations(5).value(), Ids({"b"}));
  auto runners = this->orch_->ActiveRunners(kSecond, std::nullopt).value();
  ASSERT_EQ(runners.size(), 1u);
  EXPECT_EQ(runners[0].consumed_queues, (std::vector<std::string>{"q:1", "", "x"}));
  EXPECT_TRUE(runners[0].can_run_atomic_service);
  EXPECT_FALSE(
      this->orch_
          ->RecordAtomicServiceStart("r2", "run-2", std::nullopt, AtomicServiceStatus::kRunning, "")
          .value()
          .accepted);
}

TYPED_TEST(OrchestratorCompliance, ContestedWritesFromManyHandlesStayConsistent) {
  // Each thread uses its own handle; one contested CAS chain per invocation:
  // REGISTERED -> PENDING is won once, and only the winner may run it.
  constexpr int kThreads = 8;
  constexpr int kInvocations = 10;
  std::vector<std::unique_ptr<Orchestrator>> handles;
  for (int t = 0; t < kThreads; ++t) {
    if constexpr (std::is_same_v<TypeParam, testing::MemBackend>) {
      handles.push_back(nullptr);  // memory:// handles do not share state; share ours
    } else {
      handles.push_back(this->Open());
    }
  }
  for (int i = 0; i < kInvocations; ++i) this->Register("c-" + std::to_string(i));
  std::atomic<int> wins{0}, runs{0}, retries_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Orchestrator* orch = handles[t] ? handles[t].get() : this->orch_.get();
    threads.emplace_back([&, orch, t] {
      const std::string runner = "runner-" + std::to_string(t);
      for (int i = 0; i < kInvocations; ++i) {
        const InvocationId id("c-" + std::to_string(i));
        if (orch->TransitionStatus(id, S::kPending, runner).ok()) ++wins;
        if (orch->TransitionStatus(id, S::kRunning, runner).ok()) ++runs;
        if (orch->IncrementRetries(id).ok()) ++retries_seen;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wins.load(), kInvocations);
  EXPECT_EQ(runs.load(), kInvocations);
  EXPECT_EQ(retries_seen.load(), kThreads * kInvocations);
  EXPECT_EQ(this->orch_->CountInvocations(std::nullopt, {S::kRunning}).value(), kInvocations);
  for (int i = 0; i < kInvocations; ++i) {
    EXPECT_EQ(this->orch_->GetRetries(InvocationId("c-" + std::to_string(i))).value(), kThreads);
  }
}

// Forks `n` children that each run `child(index)` on a fresh handle of the same
// store and exit with its result; returns how many exited 0.
template <typename Backend, typename Child>
int CountForkedSuccesses(const Backend& backend, std::shared_ptr<Clock> clock, int n, Child child) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      auto opened = OpenOrchestrator(backend.Config(clock));
      _exit(opened.ok() ? child(*opened.value(), i) : 2);
    }
    pids.push_back(pid);
  }
  int successes = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status));
    if (WIFEXITED(status)) {
      EXPECT_NE(WEXITSTATUS(status), 2) << "child failed to open or to talk to the store";
      if (WEXITSTATUS(status) == 0) ++successes;
    }
  }
  return successes;
}

TYPED_TEST(OrchestratorDurable, ContestedWritesFromManyProcessesHaveOneWinner) {
  constexpr int kProcesses = 6;
  this->Register("p");
  const int wins =
      CountForkedSuccesses(this->backend_, this->clock_, kProcesses, [](Orchestrator& o, int i) {
        auto r = o.TransitionStatus(InvocationId("p"), S::kPending, "proc-" + std::to_string(i));
        if (r.ok()) return 0;
        return r.status().code() == ErrorCode::kIllegalTransition ? 1 : 2;
      });
  EXPECT_EQ(wins, 1);
  EXPECT_EQ(this->StatusOf("p"), S::kPending);

  const int accepted =
      CountForkedSuccesses(this->backend_, this->clock_, kProcesses, [](Orchestrator& o, int i) {
        auto r = o.RecordAtomicServiceStart("proc-" + std::to_string(i), "run-" + std::to_string(i),
                                            std::nullopt, AtomicServiceStatus::kRunning, "");
        if (!r.ok()) return 2;
        return r.value().accepted ? 0 : 1;
      });
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(this->orch_->ActiveAtomicServiceExecutions().value().size(), 1u);
}

TEST(SqliteOrchestrator, UnusableStoreIsAClearConfigError) {
  testing::SqliteBackend backend;
  ASSERT_TRUE(OpenOrchestrator(backend.Config()).ok());  // creates the schema, version 1
  // A schema version this build does not know is refused, never used.
  auto db = sqlite::Database::Open(sqlite::SqliteOptions{backend.Path()});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE(db.value()
                  ->Write([](sqlite::Conn& c) {
                    return c.Exec(
                        "UPDATE pynenc_cpp_schema SET version = 99"
                        " WHERE component = 'orchestrator'");
                  })
                  .ok());
  auto newer = OpenOrchestrator(backend.Config(nullptr));
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(newer.status().message().find("orchestrator"), std::string::npos);

  const std::string dir = backend.Path() + ".d";
  std::filesystem::create_directory(dir);
  auto on_dir = OpenOrchestrator(BackendConfig{"sqlite://" + dir, "app", nullptr});
  ASSERT_FALSE(on_dir.ok());
  EXPECT_EQ(on_dir.status().code(), ErrorCode::kBadConfig);
}

// ---- Redis: server restart and an unreachable server ------------------------

BackendConfig RedisConfig(int port, std::shared_ptr<Clock> clock = nullptr) {
  return BackendConfig{
      "redis://127.0.0.1:" + std::to_string(port) + "/0?connect_timeout_ms=500&io_timeout_ms=2000",
      "restart-app", std::move(clock)};
}

TEST(RedisOrchestrator, DataSurvivesAServerRestartWithAppendOnly) {
  testing::RedisServer server(/*appendonly=*/true);
  auto clock = std::make_shared<ManualClock>(kStart);
  auto opened = OpenOrchestrator(RedisConfig(server.port(), clock));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Orchestrator& orch = *opened.value();
  ASSERT_TRUE(orch.RegisterInvocations({NewInvocation{Inv("a"), TaskId("t"), CallId("t:a")},
                                        NewInvocation{Inv("b"), TaskId("t"), CallId("t:b")}},
                                       std::nullopt)
                  .ok());
  ASSERT_TRUE(orch.TransitionStatus(Inv("a"), S::kPending, std::string("r1")).ok());
  ASSERT_TRUE(orch.IndexArguments(Inv("a"), {{"k", "v"}}).ok());
  ASSERT_TRUE(orch.RegisterHeartbeats({"r1"}, true, std::vector<std::string>{"q"}).ok());

  server.Stop();
  server.Start();

  // The same handle reconnects; nothing acknowledged was lost.
  auto a = orch.GetStatusRecord(Inv("a"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a.value(), (StatusRecord{S::kPending, "r1", kStart}));
  EXPECT_EQ(orch.GetTaskInvocations(TaskId("t")).value(), Ids({"a", "b"}));
  EXPECT_EQ(orch.GetExistingInvocations(TaskId("t"), {{"k", "v"}}, {}).value(), Ids({"a"}));
  EXPECT_EQ(orch.ListInvocations(std::nullopt, {}, 10, 0).value(), Ids({"b", "a"}));
  EXPECT_EQ(orch.ActiveRunners(kSecond, std::nullopt).value().size(), 1u);
  ASSERT_TRUE(orch.TransitionStatus(Inv("a"), S::kRunning, std::string("r1")).ok());
}

TEST(RedisOrchestrator, ServerDownIsABackendFailureNamingHostAndPort) {
  testing::RedisServer server;
  auto opened = OpenOrchestrator(RedisConfig(server.port()));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Orchestrator& orch = *opened.value();
  ASSERT_TRUE(
      orch.RegisterInvocations({NewInvocation{Inv("a"), TaskId("t"), CallId("t:a")}}, std::nullopt)
          .ok());
  server.Stop();
  const std::string where = "127.0.0.1:" + std::to_string(server.port());

  auto read = orch.GetStatusRecord(Inv("a"));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(read.status().message().find(where), std::string::npos) << read.status().ToString();
  auto move = orch.TransitionStatus(Inv("a"), S::kPending, std::string("r1"));
  ASSERT_FALSE(move.ok());
  EXPECT_EQ(move.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(move.status().message().find(where), std::string::npos) << move.status().ToString();
  // Opening on a port nobody listens on fails the same way. (A second open of
  // the server above would join this process's client without a new PING.)
  const int closed = testing::RedisServer::FreePort();
  auto refused = OpenOrchestrator(RedisConfig(closed));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(refused.status().message().find("127.0.0.1:" + std::to_string(closed)),
            std::string::npos)
      << refused.status().ToString();

  server.Start();  // no appendonly: the data is gone, but the handle works again
  auto again =
      orch.RegisterInvocations({NewInvocation{Inv("a"), TaskId("t"), CallId("t:a")}}, std::nullopt);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(orch.TransitionStatus(Inv("a"), S::kPending, std::string("r1")).ok());
}

}  // namespace
}  // namespace pynenc_cpp
