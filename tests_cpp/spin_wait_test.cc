// core/spin_wait.h: the spin budget, the gate, and SpinUntil's contract (true only
// when ready() said so; false only once the budget or the deadline passed, or at
// once when spinning is off, the gate is taken or the wait point is idle). No test
// times an upper bound: the machines are noisy.
#include "pynenc_cpp/core/spin_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace pynenc_cpp {
namespace {

using Clock = std::chrono::steady_clock;

class SpinWaitTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = SpinWaitUs(); }
  void TearDown() override { SetSpinWaitUs(saved_); }

 private:
  std::int64_t saved_ = 0;
};

TEST_F(SpinWaitTest, TheDefaultBudgetAndItsClamp) {
  EXPECT_EQ(kDefaultSpinWaitUs, 500);
  SetSpinWaitUs(-5);
  EXPECT_EQ(SpinWaitUs(), 0);
  SetSpinWaitUs(kMaxSpinWaitUs + 1);
  EXPECT_EQ(SpinWaitUs(), kMaxSpinWaitUs);
  SetSpinWaitUs(250);
  EXPECT_EQ(SpinWaitUs(), 250);
}

TEST_F(SpinWaitTest, AnEventAlreadyThereEndsTheSpinAtOnce) {
  SetSpinWaitUs(kMaxSpinWaitUs);
  SpinGate gate;
  int calls = 0;
  EXPECT_TRUE(SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(gate.TryEnter());  // left behind free
}

TEST_F(SpinWaitTest, AnEventFromAnotherThreadIsSeenOrTheBudgetRanOut) {
  SetSpinWaitUs(kMaxSpinWaitUs);
  for (int round = 0; round < 20; ++round) {
    SpinGate gate;
    std::atomic<bool> flag{false};
    std::thread setter([&] { flag.store(true); });
    const auto start = Clock::now();
    const bool seen =
        SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return flag.load(); });
    const auto spent = Clock::now() - start;
    setter.join();
    if (seen) {
      EXPECT_TRUE(flag.load());
    } else {  // only a thread start slower than the whole budget gets here
      EXPECT_GE(spent, std::chrono::microseconds(kMaxSpinWaitUs));
    }
  }
}

TEST_F(SpinWaitTest, NoEventSpinsTheBudgetOutThenReturnsFalse) {
  SetSpinWaitUs(2000);
  SpinGate gate;
  int calls = 0;
  const auto start = Clock::now();
  EXPECT_FALSE(SpinUntil(gate, start + std::chrono::hours(1), [&] { return ++calls < 0; }));
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(2000));
  EXPECT_GT(calls, 1);
}

TEST_F(SpinWaitTest, TheDeadlineEndsTheSpinBeforeTheBudget) {
  SetSpinWaitUs(kMaxSpinWaitUs);
  SpinGate gate;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::microseconds(300);
  EXPECT_FALSE(SpinUntil(gate, deadline, [] { return false; }));
  EXPECT_GE(Clock::now(), deadline);
}

TEST_F(SpinWaitTest, ABudgetOfZeroNeverAsks) {
  SetSpinWaitUs(0);
  SpinGate gate;
  int calls = 0;
  EXPECT_FALSE(SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 0);
}

TEST_F(SpinWaitTest, OneSpinnerAtATime) {
  SetSpinWaitUs(kMaxSpinWaitUs);
  SpinGate gate;
  ASSERT_TRUE(gate.TryEnter());  // another thread spins
  int calls = 0;
  EXPECT_FALSE(SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 0);
  gate.Leave();
  EXPECT_TRUE(SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return ++calls > 0; }));
}

TEST_F(SpinWaitTest, AnIdleWaitPointSleepsAtOnceUntilAnEventWokeIt) {
  SetSpinWaitUs(kMaxSpinWaitUs);
  SpinGate gate;
  gate.Settle(false);  // a wait timed out with nothing
  int calls = 0;
  EXPECT_FALSE(SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 0);
  gate.Settle(true);  // a sleeper was woken by its event
  EXPECT_TRUE(SpinUntil(gate, Clock::now() + std::chrono::hours(1), [&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace pynenc_cpp
