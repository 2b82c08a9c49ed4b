// pynenc's running concurrency control as one step, on every backend:
// Orchestrator::GatedTransition (the check and the status change it guards, with
// the claimed invocation's argument index) and Lifecycle::GatedChange (that step
// with its history row and, when blocked, pynenc's deferral and reroute).
// The race cases open one handle per thread, as separate runners would.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend_fixture.h"
#include "lifecycle_fixture.h"
#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {

using namespace lifecycle_test;  // NOLINT: the Lifecycle fixtures and constants
using Args = std::map<std::string, std::string>;

const std::vector<S> kClaimBlocking{S::kPending, S::kRunning};
const std::vector<S> kStartBlocking{S::kRunning};

template <typename B>
class GatedTransition : public testing::BackendTest<B> {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kStart);
    orch_ = Open();
    ASSERT_NE(orch_, nullptr);
  }
  std::unique_ptr<Orchestrator> Open() {
    auto opened = OpenOrchestrator(this->backend_.Config(clock_, "gate-app"));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  void Register(const std::string& id, const std::string& task = "mod.keyed") {
    auto r = orch_->RegisterInvocations(
        {NewInvocation{InvocationId(id), TaskId(task), CallId(task + ":" + id)}}, std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // The claim of `id` (PENDING for `runner`) on key sku=`sku`, its args indexed.
  Result<Orchestrator::GateOutcome> Claim(const std::string& id, const std::string& sku,
                                          const std::string& runner = "r1",
                                          const std::string& task = "mod.keyed",
                                          Orchestrator* orch = nullptr) {
    return (orch ? orch : orch_.get())
        ->GatedTransition({InvocationId(id), TaskId(task), {{"sku", sku}}, kClaimBlocking,
                           {{"sku", sku}, {"n", id}}, S::kPending, runner});
  }
  S StatusOf(const std::string& id) {
    return orch_->GetStatusRecord(InvocationId(id)).value().status;
  }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<Orchestrator> orch_;
};
TYPED_TEST_SUITE(GatedTransition, testing::AllBackends, testing::BackendNames);

TYPED_TEST(GatedTransition, MovesWhenNoOtherInvocationHoldsTheKey) {
  this->Register("a");
  auto r = this->Claim("a", "1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r.value().blocker.has_value());
  EXPECT_EQ(r.value().record.status, S::kPending);
  EXPECT_EQ(r.value().record.runner_id, std::optional<std::string>("r1"));
  EXPECT_EQ(this->StatusOf("a"), S::kPending);
  // Its arguments were indexed in the same step.
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("mod.keyed"), {{"n", "a"}}, {}).value(),
            std::vector<InvocationId>{InvocationId("a")});
}

TYPED_TEST(GatedTransition, AnotherOfTheKeyInABlockingStatusBlocksAndNothingMoves) {
  for (const char* id : {"a", "b", "c", "d"}) this->Register(id);
  ASSERT_FALSE(this->Claim("a", "1").value().blocker);
  auto b = this->Claim("b", "1", "r2");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b.value().blocker, std::optional<InvocationId>(InvocationId("a")));
  EXPECT_EQ(b.value().record.status, S::kRegistered);  // the current record
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
  // The blocked one's arguments are indexed all the same.
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("mod.keyed"), {{"sku", "1"}}, {}).value(),
            (std::vector<InvocationId>{InvocationId("a"), InvocationId("b")}));
  // Another key, and the same key of another task, do not block.
  EXPECT_FALSE(this->Claim("c", "2").value().blocker);
  this->Register("e", "mod.other");
  EXPECT_FALSE(this->Claim("e", "1", "r1", "mod.other").value().blocker);
  // RUNNING blocks a claim too; a final status does not.
  ASSERT_TRUE(this->orch_->TransitionStatus(InvocationId("a"), S::kRunning, "r1").ok());
  EXPECT_EQ(this->Claim("d", "1").value().blocker, std::optional<InvocationId>(InvocationId("a")));
  ASSERT_TRUE(this->orch_->TransitionStatus(InvocationId("a"), S::kSuccess, "r1").ok());
  EXPECT_FALSE(this->Claim("d", "1").value().blocker);
  EXPECT_EQ(this->StatusOf("d"), S::kPending);
}

TYPED_TEST(GatedTransition, AStartIsBlockedOnlyByARunningOneAndNeverByItself) {
  for (const char* id : {"a", "b"}) this->Register(id);
  // Both PENDING (moved directly, as an ungated claim would).
  ASSERT_TRUE(this->orch_->IndexArguments(InvocationId("a"), {{"sku", "1"}}).ok());
  ASSERT_TRUE(this->orch_->IndexArguments(InvocationId("b"), {{"sku", "1"}}).ok());
  ASSERT_TRUE(this->orch_->TransitionStatus(InvocationId("a"), S::kPending, "r1").ok());
  ASSERT_TRUE(this->orch_->TransitionStatus(InvocationId("b"), S::kPending, "r2").ok());
  auto start = [&](const std::string& id, const std::string& runner) {
    return this->orch_->GatedTransition({InvocationId(id), TaskId("mod.keyed"), {{"sku", "1"}},
                                         kStartBlocking, {}, S::kRunning, runner});
  };
  auto a = start("a", "r1");  // b is only PENDING: not blocking a start
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a.value().blocker);
  EXPECT_EQ(this->StatusOf("a"), S::kRunning);
  auto b = start("b", "r2");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b.value().blocker, std::optional<InvocationId>(InvocationId("a")));
  EXPECT_EQ(this->StatusOf("b"), S::kPending);
}

TYPED_TEST(GatedTransition, ErrorsAreTheTransitionsAndWriteNothing) {
  this->Register("a");
  // REGISTERED -> RUNNING is illegal: refused before anything is written.
  auto r = this->orch_->GatedTransition({InvocationId("a"), TaskId("mod.keyed"), {{"sku", "1"}},
                                         kStartBlocking, {{"sku", "9"}}, S::kRunning, "r1"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIllegalTransition);
  EXPECT_TRUE(
      this->orch_->GetExistingInvocations(TaskId("mod.keyed"), {{"sku", "9"}}, {}).value().empty());
  // Owned by another runner.
  ASSERT_FALSE(this->Claim("a", "1", "r1").value().blocker);
  auto other = this->orch_->GatedTransition(
      {InvocationId("a"), TaskId("mod.keyed"), {{"sku", "1"}}, kStartBlocking, {}, S::kRunning,
       "r2"});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kOwnershipViolation);
  EXPECT_EQ(this->Claim("nope", "1").status().code(), ErrorCode::kNotFound);
  auto empty = this->orch_->GatedTransition(
      {InvocationId("a"), TaskId("mod.keyed"), {}, {}, {}, S::kRunning, "r1"});
  EXPECT_EQ(empty.status().code(), ErrorCode::kInvalidArgument);
}

// Many runners claim invocations of one key at once: at every instant at most one
// holds it (each winner releases it before the next can win), and every
// invocation is claimed once in the end.
TYPED_TEST(GatedTransition, RacingClaimsAdmitOneHolderPerKey) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 8;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) this->Register("i" + std::to_string(t * 100 + i));
  }
  std::vector<std::unique_ptr<Orchestrator>> handles;  // a handle per runner
  for (int t = 0; t < kThreads; ++t) {
    if constexpr (std::is_same_v<TypeParam, testing::MemBackend>) {
      handles.push_back(nullptr);  // memory:// handles do not share state; share ours
    } else {
      handles.push_back(this->Open());
    }
  }
  std::atomic<int> holders{0};
  std::atomic<int> max_holders{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Orchestrator* orch = handles[t] ? handles[t].get() : this->orch_.get();
    threads.emplace_back([&, orch, t] {
      const std::string runner = "r" + std::to_string(t);
      for (int i = 0; i < kPerThread;) {
        const std::string id = "i" + std::to_string(t * 100 + i);
        auto r = this->Claim(id, "k", runner, "mod.keyed", orch);
        if (!r.ok()) {
          ++errors;
          return;
        }
        if (r.value().blocker) {
          std::this_thread::yield();
          continue;
        }
        const int now = ++holders;
        int seen = max_holders.load();
        while (now > seen && !max_holders.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        --holders;  // released before the status leaves PENDING...
        auto done = orch->TransitionStatus(InvocationId(id), S::kRunning, runner);
        auto fin = orch->TransitionStatus(InvocationId(id), S::kSuccess, runner);
        if (!done.ok() || !fin.ok()) ++errors;
        ++i;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(max_holders.load(), 1);
  EXPECT_EQ(this->orch_->CountInvocations(TaskId("mod.keyed"), {S::kSuccess}).value(),
            kThreads * kPerThread);
}

// GatedChange: the gate, its history row, and the deferral in the same operation.
template <typename B>
class GatedChange : public LifecycleCompliance<B> {
 protected:
  Result<GatedChangeOutcome> Claim(const std::string& id, const std::optional<Deferral>& deferral,
                                   const Actor& actor = kRunner) {
    return this->life_->GatedChange(InvocationId(id), S::kPending, actor, TaskId("mod.task"),
                                    {{"sku", "1"}}, kClaimBlocking, {{"sku", "1"}}, deferral);
  }
};
TYPED_TEST_SUITE(GatedChange, testing::AllBackends, testing::BackendNames);

TYPED_TEST(GatedChange, APassWritesTheHistoryRow) {
  this->Register("a");
  auto r = this->Claim("a", std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r.value().change.has_value());
  EXPECT_FALSE(r.value().blocker);
  EXPECT_EQ(this->StatusOf("a"), S::kPending);
  EXPECT_EQ(this->HistoryOf("a"), (std::vector<S>{S::kRegistered, S::kPending}));
}

TYPED_TEST(GatedChange, ABlockedClaimIsDeferredAndReroutedInTheSameOperation) {
  for (const char* id : {"a", "b", "c"}) this->Register(id);
  this->Drain("default");
  ASSERT_FALSE(this->Claim("a", std::nullopt).value().blocker);
  const Actor other{std::string("runner-2"), "runner-2"};
  Deferral reroute{{S::kConcurrencyControlled, S::kRerouted}, std::make_pair("default", 0.0)};
  auto b = this->Claim("b", reroute, other);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b.value().blocker, std::optional<InvocationId>(InvocationId("a")));
  EXPECT_FALSE(b.value().change);
  ASSERT_EQ(b.value().deferred.size(), 2u);
  EXPECT_EQ(b.value().deferred[1].record.status, S::kRerouted);
  EXPECT_EQ(this->StatusOf("b"), S::kRerouted);
  EXPECT_EQ(this->HistoryOf("b"),
            (std::vector<S>{S::kRegistered, S::kConcurrencyControlled, S::kRerouted}));
  EXPECT_EQ(this->Drain("default"), std::vector<std::string>{"b"});
  // Without reroute: CONCURRENCY_CONTROLLED_FINAL, nothing routed.
  auto c = this->Claim("c", Deferral{{S::kConcurrencyControlledFinal}, std::nullopt}, other);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(this->StatusOf("c"), S::kConcurrencyControlledFinal);
  EXPECT_EQ(this->HistoryOf("c"), (std::vector<S>{S::kRegistered, S::kConcurrencyControlledFinal}));
  EXPECT_TRUE(this->Drain("default").empty());
}

TYPED_TEST(GatedChange, AFinalStatusIsNotGated) {
  this->Register("a");
  auto r = this->life_->GatedChange(InvocationId("a"), S::kSuccess, kRunner, TaskId("mod.task"),
                                    {}, kClaimBlocking, {}, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pynenc_cpp

namespace pynenc_cpp {
namespace {

// RegisterGuarded: pynenc's registration concurrency control as one step.
template <typename B>
class RegisterGuarded : public LifecycleCompliance<B> {
 protected:
  Result<Lifecycle::GuardedRegistration> Submit(const std::string& id, const std::string& sku,
                                                Lifecycle* life = nullptr) {
    return (life ? life : this->life_.get())
        ->RegisterGuarded(this->New(id), {{"sku", sku}}, {{"sku", sku}, {"n", id}}, kRunner);
  }
};
TYPED_TEST_SUITE(RegisterGuarded, testing::AllBackends, testing::BackendNames);

TYPED_TEST(RegisterGuarded, ACallWhileOneIsRegisteredFindsItAndWritesNothing) {
  auto a = this->Submit("a", "1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a.value().existing);
  EXPECT_EQ(a.value().registered.record.status, S::kRegistered);
  EXPECT_EQ(this->HistoryOf("a"), std::vector<S>{S::kRegistered});
  EXPECT_EQ(this->orch_->GetExistingInvocations(TaskId("mod.task"), {{"n", "a"}}, {}).value(),
            std::vector<InvocationId>{InvocationId("a")});  // indexed in the same step
  auto b = this->Submit("b", "1");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b.value().existing, std::optional<InvocationId>(InvocationId("a")));
  EXPECT_FALSE(this->orch_->GetStatusRecord(InvocationId("b")).ok());  // not registered
  EXPECT_FALSE(this->state_->GetInvocation(InvocationId("b")).ok());   // nor stored
  EXPECT_EQ(this->Drain("default"), std::vector<std::string>{"a"});    // nor routed
  // Another key registers; once "a" leaves REGISTERED, its key registers again.
  EXPECT_FALSE(this->Submit("c", "2").value().existing);
  ASSERT_TRUE(this->orch_->TransitionStatus(InvocationId("a"), S::kPending, "r1").ok());
  auto d = this->Submit("d", "1");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d.value().existing);
  EXPECT_EQ(this->StatusOf("d"), S::kRegistered);
}

// Clients racing to call one key: exactly one invocation is registered; every
// other call finds it.
TYPED_TEST(RegisterGuarded, RacingCallsRegisterOneInvocation) {
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<Lifecycle>> lives;  // a lifecycle per client
  for (int t = 0; t < kThreads; ++t) {
    if constexpr (std::is_same_v<TypeParam, testing::MemBackend>) {
      lives.push_back(nullptr);  // memory:// components do not share state; share ours
    } else {
      const BackendConfig config = this->backend_.Config(this->clock_);
      LifecycleParts parts{std::shared_ptr<Orchestrator>(OpenOrchestrator(config).value()),
                           std::shared_ptr<StateBackend>(OpenStateBackend(config).value()),
                           std::shared_ptr<Broker>(OpenBroker(config).value()),
                           std::shared_ptr<TriggerStore>(OpenTriggerStore(config).value())};
      lives.push_back(OpenLifecycle(parts, config, kNames).value());
    }
  }
  std::atomic<int> registered{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Lifecycle* life = lives[t] ? lives[t].get() : this->life_.get();
    threads.emplace_back([&, life, t] {
      for (int i = 0; i < 10; ++i) {
        auto r = this->Submit("c" + std::to_string(t) + "-" + std::to_string(i), "k", life);
        if (!r.ok()) {
          ++errors;
        } else if (!r.value().existing) {
          ++registered;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(registered.load(), 1);
  EXPECT_EQ(this->orch_->CountInvocations(TaskId("mod.task"), {}).value(), 1);
}

}  // namespace
}  // namespace pynenc_cpp
