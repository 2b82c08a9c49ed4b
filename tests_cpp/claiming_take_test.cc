// A CppRunner worker's take in native mode (runner/claiming_take.h): HeldClaims,
// the prefetch after a take, the take-ahead armed on the worker thread and made by
// its finish (FinishArmed), on every backend over real components.
#include "pynenc_cpp/runner/claiming_take.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lifecycle_fixture.h"

namespace pynenc_cpp {
namespace {

using namespace lifecycle_test;  // NOLINT: the suite's fixtures and constants
using runner::ClaimingTake;
using runner::FinishArmed;
using runner::HeldClaims;
using runner::TakeArmedNext;
using runner::Taken;
using runner::TakePolicy;

TakenClaim Claim(const std::string& id) {
  TakenClaim t;
  t.id = InvocationId(id);
  return t;
}

std::vector<std::string> PopAll(HeldClaims& held) {
  std::vector<std::string> out;
  while (std::optional<TakenClaim> t = held.Pop()) out.push_back(t->id.str());
  return out;
}

TEST(HeldClaims, HandsOutInTheOrderTakenAndCountsBothKinds) {
  HeldClaims held;
  EXPECT_TRUE(held.empty());
  EXPECT_FALSE(held.Pop().has_value());
  ASSERT_TRUE(held.Begin());
  held.End(Claim("a"));  // a finish took one ahead
  ASSERT_TRUE(held.Begin());
  held.EndMany({Claim("b"), Claim("c")});  // a prefetch claimed two
  ASSERT_TRUE(held.Begin());
  held.End(std::nullopt);  // a finish that found nothing
  EXPECT_FALSE(held.empty());
  EXPECT_EQ(held.prefetched(), 2);
  EXPECT_EQ(PopAll(held), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(held.handed_out(), 1) << "only what a finish took ahead";
  EXPECT_TRUE(held.empty());
}

TEST(HeldClaims, CloseWaitsForWhatIsInFlightAndReturnsWhatIsHeld) {
  HeldClaims held;
  ASSERT_TRUE(held.Begin());
  held.End(Claim("a"));
  ASSERT_TRUE(held.Begin());  // a prefetch in flight
  std::atomic<bool> closed{false};
  std::vector<std::string> ids;
  std::thread closer([&] {
    ids = held.Close();
    closed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(closed.load()) << "Close returned while a prefetch was in flight";
  held.EndMany({Claim("b")});
  closer.join();
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(held.empty());
  EXPECT_FALSE(held.Begin()) << "nothing is taken ahead once closed";
  EXPECT_TRUE(held.Close().empty());
}

template <typename B>
class ClaimingTakeTest : public LifecycleCompliance<B> {
 protected:
  std::unique_ptr<ClaimingTake> Make(TakePolicy policy) {
    held_ = std::make_shared<HeldClaims>();
    return std::make_unique<ClaimingTake>(this->life_.get(), this->broker_.get(), held_, kRunner,
                                          policy);
  }
  void RouteAll(const std::vector<std::string>& ids, const std::string& task = "mod.task") {
    std::vector<NewRoutedInvocation> items;
    for (const std::string& id : ids) items.push_back(this->New(id, task));
    auto r = this->life_->RegisterAndRoute(items, kRunner);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    this->clock_->Advance(kSecond);
  }
  // The id of a take that must give one.
  std::string MustTake(ClaimingTake& take) {
    Result<std::optional<Taken>> r = take.Take("default", 0);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !r.value()) {
      ADD_FAILURE() << "the take found nothing";
      return "";
    }
    EXPECT_TRUE(r.value()->prefetch_error.ok()) << r.value()->prefetch_error.ToString();
    return r.value()->claim.id.str();
  }
  void Finish(const std::string& id, std::optional<runner::NextTake> next) {
    auto r = FinishArmed(*this->life_, InvocationId(id), "\"ok\"", true, kRunner,
                         TaskId("mod.task"), true, std::move(next));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  std::shared_ptr<HeldClaims> held_;
};
TYPED_TEST_SUITE(ClaimingTakeTest, testing::AllBackends, testing::BackendNames);

TYPED_TEST(ClaimingTakeTest, PrefetchesAfterAStartedTakeAndHandsTheHeldOnesOutFirst) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->RouteAll({"a", "b", "c", "d", "e"});
  auto take = this->Make(TakePolicy{3, false});
  EXPECT_EQ(this->MustTake(*take), "a");
  EXPECT_EQ(this->StatusOf("a"), S::kRunning) << "taken and started in one operation";
  EXPECT_EQ(this->StatusOf("b"), S::kPending) << "prefetched: claimed and held";
  EXPECT_EQ(this->StatusOf("c"), S::kPending);
  EXPECT_EQ(this->StatusOf("d"), S::kRegistered) << "prefetch - 1 more, no further";
  EXPECT_EQ(this->held_->prefetched(), 2);
  EXPECT_EQ(this->MustTake(*take), "b") << "what is held comes first";
  EXPECT_EQ(this->StatusOf("d"), S::kRegistered) << "no prefetch while something is held";
  EXPECT_EQ(this->MustTake(*take), "c");
  EXPECT_EQ(this->StatusOf("d"), S::kPending) << "the hold ran dry: prefetched after c";
  EXPECT_EQ(this->StatusOf("e"), S::kPending);
  EXPECT_EQ(this->MustTake(*take), "d");
  EXPECT_EQ(this->MustTake(*take), "e");
  Result<std::optional<Taken>> none = take->Take("default", 0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none.value().has_value());
  EXPECT_EQ(this->held_->prefetched(), 4);
}

TYPED_TEST(ClaimingTakeTest, NothingIsPrefetchedAfterATakeThatNeedsItsOwnClaim) {
  this->RouteAll({"a", "b", "c"});  // the task is not known to run freely
  auto take = this->Make(TakePolicy{4, false});
  Result<std::optional<Taken>> r = take->Take("default", 0);
  ASSERT_TRUE(r.ok() && r.value().has_value());
  EXPECT_EQ(r.value()->claim.id, InvocationId("a"));
  ASSERT_TRUE(r.value()->claim.claim_status.ok());
  EXPECT_EQ(r.value()->claim.claim.kind, ClaimKind::kNeedsCheck);
  EXPECT_TRUE(this->held_->empty());
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
  EXPECT_EQ(this->held_->prefetched(), 0);
}

TYPED_TEST(ClaimingTakeTest, WithoutPrefetchEachTakeIsOneId) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->RouteAll({"a", "b"});
  auto take = this->Make(TakePolicy{1, false});
  EXPECT_EQ(this->MustTake(*take), "a");
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
  EXPECT_FALSE(TakeArmedNext().has_value()) << "no take-ahead asked";
}

TYPED_TEST(ClaimingTakeTest, TheFinishOfATakeMadeAheadTakesTheNextOne) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->RouteAll({"a", "b"});
  auto take = this->Make(TakePolicy{1, true});
  EXPECT_EQ(this->MustTake(*take), "a");
  std::optional<runner::NextTake> armed = TakeArmedNext();
  EXPECT_FALSE(TakeArmedNext().has_value()) << "taken once";
  if (!this->life_->TakesWithFinish()) {
    EXPECT_FALSE(armed.has_value()) << "this storage makes no finish-and-take";
    this->Finish("a", std::move(armed));
    EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
    return;
  }
  ASSERT_TRUE(armed.has_value());
  this->Finish("a", std::move(armed));
  EXPECT_EQ(this->StatusOf("a"), S::kSuccess);
  EXPECT_EQ(this->StatusOf("b"), S::kRunning) << "taken and started with a's finish";
  EXPECT_EQ(this->MustTake(*take), "b") << "handed out from the hold";
  EXPECT_EQ(this->held_->handed_out(), 1);
}

TYPED_TEST(ClaimingTakeTest, AClosedHoldTakesNothingAhead) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->RouteAll({"a", "b", "c"});
  auto take = this->Make(TakePolicy{3, true});
  EXPECT_TRUE(this->held_->Close().empty());
  EXPECT_EQ(this->MustTake(*take), "a");
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered) << "no prefetch once closed";
  std::optional<runner::NextTake> armed = TakeArmedNext();
  this->Finish("a", std::move(armed));
  EXPECT_EQ(this->StatusOf("a"), S::kSuccess);
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered) << "no take-ahead once closed";
  EXPECT_TRUE(this->held_->empty());
}

TYPED_TEST(ClaimingTakeTest, ATakeDisarmsItsThreadFirst) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->RouteAll({"a"});
  auto take = this->Make(TakePolicy{1, true});
  EXPECT_EQ(this->MustTake(*take), "a");
  // A second take finds nothing: the take-ahead armed by the first is gone.
  Result<std::optional<Taken>> none = take->Take("default", 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
  EXPECT_FALSE(TakeArmedNext().has_value());
}

}  // namespace
}  // namespace pynenc_cpp
