// The simulator itself: clock, timers, delivery, faults, crash, pause.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/sim.h"

namespace pynenc_cpp::cluster::sim {
namespace {

struct Inbox {
  std::vector<std::string> got;
  std::vector<std::int64_t> at;
};

void Listen(SimWorld& w, Env& env, Inbox& box) {
  env.SetReceiver([&w, &box](const Address& from, std::uint8_t type, std::string payload) {
    box.got.push_back(from + "/" + std::to_string(type) + "/" + payload);
    box.at.push_back(w.Now());
  });
}

TEST(SimWorld, TimersFireInTimeThenInsertionOrder) {
  SimWorld w(1);
  Env& a = w.AddNode("a:1");
  std::vector<int> order;
  a.After(10, [&] { order.push_back(2); });
  a.After(5, [&] { order.push_back(1); });
  a.After(10, [&] { order.push_back(3); });
  auto cancelled = a.After(7, [&] { order.push_back(99); });
  a.Cancel(cancelled);
  w.RunFor(9);
  EXPECT_EQ(order, (std::vector<int>{1}));
  EXPECT_EQ(w.Now(), 9);
  EXPECT_EQ(a.NowMs(), 9);
  w.RunFor(1);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(SimWorld, DeliversWithinDelayBoundsAndFifoPerLink) {
  SimWorld w(2);
  w.SetFaults({.min_delay_ms = 3, .max_delay_ms = 9});
  Env& a = w.AddNode("a:1");
  Env& b = w.AddNode("b:1");
  Inbox box;
  Listen(w, b, box);
  for (int i = 0; i < 20; ++i) a.Send("b:1", 16, std::to_string(i));
  w.RunFor(100);
  ASSERT_EQ(box.got.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(box.got[i], "a:1/16/" + std::to_string(i));
    EXPECT_GE(box.at[i], 3);
    EXPECT_LE(box.at[i], 9);
  }
  EXPECT_EQ(w.Delivered(), 20u);
  EXPECT_EQ(w.Dropped(), 0u);
}

TEST(SimWorld, CutLinkDropsBothWaysAndHealRestores) {
  SimWorld w(3);
  Env& a = w.AddNode("a:1");
  Env& b = w.AddNode("b:1");
  Inbox ia, ib;
  Listen(w, a, ia);
  Listen(w, b, ib);
  w.CutLink("a:1", "b:1");
  a.Send("b:1", 16, "x");
  b.Send("a:1", 16, "y");
  w.RunFor(50);
  EXPECT_TRUE(ia.got.empty());
  EXPECT_TRUE(ib.got.empty());
  EXPECT_EQ(w.Dropped(), 2u);
  // A frame in flight when the link is cut is lost too.
  w.HealLink("a:1", "b:1");
  a.Send("b:1", 16, "z");
  w.Partition({{"a:1"}, {"b:1"}});
  w.RunFor(50);
  EXPECT_TRUE(ib.got.empty());
  w.HealAll();
  a.Send("b:1", 16, "w");
  w.RunFor(50);
  EXPECT_EQ(ib.got, (std::vector<std::string>{"a:1/16/w"}));
}

TEST(SimWorld, CrashDropsTimersAndFramesReviveIsFresh) {
  SimWorld w(4);
  Env& a = w.AddNode("a:1");
  Env& b = w.AddNode("b:1");
  Inbox ib;
  Listen(w, b, ib);
  int fired = 0;
  b.After(10, [&] { ++fired; });
  a.Send("b:1", 16, "lost");
  w.Crash("b:1");
  b.After(1, [&] { ++fired; });  // an inert env: ignored
  b.Send("a:1", 16, "never");
  w.RunFor(50);
  EXPECT_EQ(fired, 0);
  EXPECT_TRUE(ib.got.empty());
  Env& b2 = w.Revive("b:1");
  EXPECT_NE(&b, &b2);
  Inbox ib2;
  Listen(w, b2, ib2);
  a.Send("b:1", 16, "hello");
  w.RunFor(50);
  EXPECT_EQ(ib2.got, (std::vector<std::string>{"a:1/16/hello"}));
  EXPECT_TRUE(ib.got.empty());
}

TEST(SimWorld, PauseHoldsTimersAndFramesThenResumeRunsTimersFirst) {
  SimWorld w(5);
  Env& a = w.AddNode("a:1");
  Env& b = w.AddNode("b:1");
  std::vector<std::string> log;
  b.SetReceiver([&](const Address&, std::uint8_t, std::string p) { log.push_back("frame " + p); });
  b.After(10, [&] { log.push_back("t1"); });
  b.After(20, [&] { log.push_back("t2"); });
  auto t3 = b.After(30, [&] { log.push_back("t3"); });
  b.After(500, [&] { log.push_back("late"); });
  w.Pause("b:1");
  EXPECT_TRUE(w.Paused("b:1"));
  a.Send("b:1", 16, "1");
  b.Send("a:1", 16, "from paused");  // sends nothing
  w.RunFor(100);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(w.Now(), 100);
  b.Cancel(t3);
  w.Resume("b:1");
  EXPECT_EQ(log, (std::vector<std::string>{"t1", "t2", "frame 1"}));
  w.RunFor(500);
  EXPECT_EQ(log.back(), "late");
}

TEST(SimWorld, SameSeedSameTraceDifferentSeedDiffers) {
  auto run = [](std::uint64_t seed) {
    SimWorld w(seed);
    w.SetFaults(
        {.drop = 0.2, .duplicate = 0.2, .reorder = 0.3, .min_delay_ms = 1, .max_delay_ms = 20});
    Env& a = w.AddNode("a:1");
    Env& b = w.AddNode("b:1");
    b.SetReceiver([&](const Address&, std::uint8_t, std::string p) { b.Send("a:1", 17, p); });
    for (int i = 0; i < 200; ++i) a.Send("b:1", 16, std::to_string(a.Random() % 1000));
    w.RunFor(1000);
    return std::make_pair(w.TraceHash(), w.Delivered());
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7).first, run(8).first);
  auto r = run(7);
  EXPECT_GT(r.second, 100u);
}

TEST(SimWorld, RunUntilStopsWhenPredicateHolds) {
  SimWorld w(6);
  Env& a = w.AddNode("a:1");
  int n = 0;
  std::function<void()> tick = [&] {
    ++n;
    a.After(10, tick);
  };
  a.After(10, tick);
  EXPECT_TRUE(w.RunUntil([&] { return n >= 5; }, 1000));
  EXPECT_EQ(w.Now(), 50);
  EXPECT_FALSE(w.RunUntil([&] { return n >= 1000; }, 100));
  EXPECT_EQ(w.Now(), 150);
}

}  // namespace
}  // namespace pynenc_cpp::cluster::sim
