// Orchestrator::WaitAnyFinal compliance, run on every backend (backend_fixture.h):
// returns at once when an id is already final, wakes when another thread
// finishes one, times out when none becomes final, treats unknown ids as not
// final and rejects an empty id list. No timing assertions: "wakes" is proven
// by a timeout far longer than the test could take otherwise.
#include <gtest/gtest.h>

#include <thread>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {

using S = InvocationStatus;
constexpr TimestampUs kMinute = 60'000'000;

template <typename B>
class OrchestratorWait : public testing::BackendTest<B> {
 protected:
  void SetUp() override {
    auto opened = OpenOrchestrator(this->backend_.Config(nullptr, "wait-app"));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    orch_ = std::move(opened).value();
  }
  void Register(const std::string& id) {
    auto r = orch_->RegisterInvocations(
        {NewInvocation{InvocationId(id), TaskId("mod.task"), CallId("mod.task:" + id)}}, "r");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Move(const std::string& id, S to) {
    auto r = orch_->TransitionStatus(InvocationId(id), to, "r");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::optional<InvocationId> Wait(std::initializer_list<const char*> names, TimestampUs timeout) {
    std::vector<InvocationId> ids;
    for (const char* n : names) ids.emplace_back(n);
    auto r = orch_->WaitAnyFinal(ids, timeout);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : std::nullopt;
  }

  std::unique_ptr<Orchestrator> orch_;
};
TYPED_TEST_SUITE(OrchestratorWait, testing::AllBackends, testing::BackendNames);

TYPED_TEST(OrchestratorWait, ReturnsTheFirstAlreadyFinalIdInInputOrder) {
  this->Register("a");
  this->Register("b");
  this->Register("c");
  for (const char* id : {"b", "c"}) {
    this->Move(id, S::kPending);
    this->Move(id, S::kRunning);
  }
  this->Move("b", S::kSuccess);
  this->Move("c", S::kFailed);
  // A timeout of a minute: returning at all proves it did not wait it out.
  EXPECT_EQ(this->Wait({"a", "c", "b"}, kMinute), InvocationId("c"));
  EXPECT_EQ(this->Wait({"b"}, 0), InvocationId("b"));
}

TYPED_TEST(OrchestratorWait, WakesWhenAnotherThreadFinishesOne) {
  this->Register("a");
  this->Register("b");
  this->Move("b", S::kPending);
  this->Move("b", S::kRunning);
  std::thread finisher([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    this->Move("b", S::kSuccess);
  });
  auto got = this->Wait({"a", "b"}, 10 * kMinute);
  finisher.join();
  EXPECT_EQ(got, InvocationId("b"));
}

// The spin before the sleep (core/spin_wait.h): a final status that comes at once is
// seen while spinning, one that comes later by the sleep; a wait that timed out idle
// (its wait point then sleeps at once) is still woken by the next final status.
TYPED_TEST(OrchestratorWait, WakesWhetherTheFinalStatusComesDuringTheSpinOrAfterAnIdleTimeout) {
  for (const char* id : {"soon", "late"}) {
    this->Register(id);
    this->Move(id, S::kPending);
    this->Move(id, S::kRunning);
  }
  std::thread at_once([this] { this->Move("soon", S::kSuccess); });
  EXPECT_EQ(this->Wait({"soon"}, 10 * kMinute), InvocationId("soon"));
  at_once.join();
  EXPECT_EQ(this->Wait({"late"}, 20'000), std::nullopt);  // timed out idle
  std::thread later([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    this->Move("late", S::kSuccess);
  });
  EXPECT_EQ(this->Wait({"late"}, 10 * kMinute), InvocationId("late"));
  later.join();
}

TYPED_TEST(OrchestratorWait, NonFinalTransitionsDoNotEndTheWait) {
  this->Register("a");
  this->Move("a", S::kPending);
  this->Move("a", S::kRunning);
  EXPECT_EQ(this->Wait({"a"}, 30'000), std::nullopt);
}

TYPED_TEST(OrchestratorWait, TimesOutWithNothingFinal) {
  this->Register("a");
  EXPECT_EQ(this->Wait({"a"}, 20'000), std::nullopt);
  EXPECT_EQ(this->Wait({"a"}, 0), std::nullopt);
  EXPECT_EQ(this->Wait({"a"}, -5), std::nullopt);
}

TYPED_TEST(OrchestratorWait, UnknownIdsCountAsNotFinal) {
  this->Register("a");
  this->Move("a", S::kPending);
  this->Move("a", S::kRunning);
  this->Move("a", S::kSuccess);
  EXPECT_EQ(this->Wait({"ghost"}, 20'000), std::nullopt);
  EXPECT_EQ(this->Wait({"ghost", "a"}, kMinute), InvocationId("a"));
}

TYPED_TEST(OrchestratorWait, WakesForAnIdRegisteredAfterTheWaitStarted) {
  std::thread late([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    this->Register("late");
    this->Move("late", S::kPending);
    this->Move("late", S::kRunning);
    this->Move("late", S::kFailed);
  });
  auto got = this->Wait({"late"}, 10 * kMinute);
  late.join();
  EXPECT_EQ(got, InvocationId("late"));
}

TYPED_TEST(OrchestratorWait, EmptyIdListIsInvalidArgument) {
  auto r = this->orch_->WaitAnyFinal({}, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pynenc_cpp
