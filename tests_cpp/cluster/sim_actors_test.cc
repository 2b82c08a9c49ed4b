// Actor messages to a singleton in the simulator: senders on several nodes
// send a steady stream to one label while its owner crashes, leaves or is
// partitioned away, over a lossy, duplicating, reordering network. The nodes'
// actor runtime is simulated through each node's Inbox (as the Python runtime
// uses it). Checked: every message sent is handled at least once (tell is
// at-least-once across failover), each instance handles each sender's
// messages in order and never twice, first handlings are in sending order,
// and a full buffer refuses a send instead of dropping anything silently.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "sim/coord_cluster.h"

namespace pynenc_cpp::cluster {
namespace {

using sim::CoordCluster;
using sim::CoordParams;
using sim::SimNodeSpec;

SimNodeSpec Node(std::string cls) {
  SimNodeSpec s;
  s.node_class = std::move(cls);
  s.actor_types = {"worker"};
  return s;
}

// What the simulated runtime saw.
struct Handled {
  int node = 0;
  Generation generation;
  int sender = 0;
  int index = 0;  // the sender's message number
};

class Runtime {
 public:
  explicit Runtime(CoordCluster& c) : c_(c) {
    c.SetRuntime([this](int node, const InboxItem& item) { Handle(node, item); });
  }
  void Handle(int node, const InboxItem& item) {
    switch (item.kind) {
      case InboxItem::Kind::kStart:
        running_[{node, item.label}] = item.generation;
        c_.AnswerStarted(node, item.label, item.generation);
        break;
      case InboxItem::Kind::kStop:
        running_.erase({node, item.label});
        c_.AnswerStopped(node, item.label, item.generation);
        break;
      case InboxItem::Kind::kLabel: {
        auto it = running_.find({node, item.label});
        if (it == running_.end()) {
          c_.Ack(node, item.token, LabelOutcome::kNotHere);
          break;
        }
        const auto dash = item.payload.find('-');
        handled.push_back({node, it->second, std::stoi(item.payload.substr(1, dash - 1)),
                           std::stoi(item.payload.substr(dash + 1))});
        if (hold) {  // a slow handler: answered later (Release)
          held_.push_back({node, item.token});
          break;
        }
        c_.Ack(node, item.token, LabelOutcome::kProcessed);
        break;
      }
      default:
        break;
    }
  }
  void Release() {
    hold = false;
    for (const auto& [node, token] : held_) c_.Ack(node, token, LabelOutcome::kProcessed);
    held_.clear();
  }
  std::vector<Handled> handled;
  bool hold = false;

 private:
  CoordCluster& c_;
  std::vector<std::pair<int, std::uint64_t>> held_;
  std::map<std::pair<int, std::string>, Generation> running_;
};

SingletonSpec Single(SingletonAnchor anchor) {
  SingletonSpec s;
  s.label = "counter";
  s.actor_type = "worker";
  s.anchor = std::move(anchor);
  return s;
}

// Sends one message from each sender every `step_ms` for `ms`; returns how many
// each sent (sender -> count).
void Stream(CoordCluster& c, const std::vector<int>& senders, std::map<int, int>& sent,
            std::int64_t ms, std::int64_t step_ms = 20) {
  for (std::int64_t t = 0; t < ms; t += step_ms) {
    for (int s : senders) {
      if (!c.up(s)) continue;
      const int k = sent[s] + 1;
      auto r = c.SendLabel(s, "counter", "s" + std::to_string(s) + "-" + std::to_string(k));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      sent[s] = k;
    }
    c.RunWithRuntime(step_ms);
  }
}

bool Drained(CoordCluster& c, const std::vector<int>& senders) {
  for (int s : senders) {
    if (c.up(s) && !c.core(s).services().mailer().Stats().buffered.empty()) return false;
  }
  return true;
}

void CheckDelivery(const Runtime& rt, const std::map<int, int>& sent) {
  // At least once, and first handlings in sending order.
  std::map<int, std::vector<int>> first;
  std::map<int, std::set<int>> seen;
  for (const auto& h : rt.handled) {
    if (seen[h.sender].insert(h.index).second) first[h.sender].push_back(h.index);
  }
  for (const auto& [sender, n] : sent) {
    EXPECT_EQ(static_cast<int>(seen[sender].size()), n) << "sender " << sender << " lost messages";
    EXPECT_TRUE(std::is_sorted(first[sender].begin(), first[sender].end())) << sender;
  }
  // Within one instance: each sender's messages in order, never twice.
  std::map<std::tuple<int, std::uint64_t, int>, int> last;
  for (const auto& h : rt.handled) {
    auto key = std::make_tuple(h.node, h.generation.Packed(), h.sender);
    auto it = last.find(key);
    if (it != last.end()) EXPECT_GT(h.index, it->second) << "node " << h.node;
    last[key] = h.index;
  }
}

TEST(SimActors, TellIsAtLeastOnceAndInOrderAcrossACrashedOwner) {
  CoordParams p;
  p.with_inbox = true;
  CoordCluster c(61, {Node("edge"), Node("worker"), Node("worker"), Node("worker")}, p);
  Runtime rt(c);
  c.StartAll();
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Leader().has_value(); }, 20'000));
  ASSERT_TRUE(c.SubmitSingleton(0, Single(SingletonAnchor::Class("worker"))).ok());
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Converged({"counter"}); }, 20'000));
  const int owner = c.Running()["counter"][0];
  ASSERT_EQ(owner, 1);
  std::map<int, int> sent;
  const std::vector<int> senders = {0, 2, 3};
  Stream(c, senders, sent, 1'000);
  c.Crash(owner);  // mid-stream: some messages in flight, some not acknowledged
  Stream(c, senders, sent, 3'000);
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return Drained(c, senders); }, 30'000));
  CheckDelivery(rt, sent);
  int after = 0;
  for (const auto& h : rt.handled) after += h.node != owner ? 1 : 0;
  EXPECT_GT(after, 0) << "the new owner handled nothing";
  std::string why;
  EXPECT_TRUE(c.NoOverlap(&why)) << why;
}

TEST(SimActors, LossyNetworkAndGracefulMoveKeepOrderAndLoseNothing) {
  CoordParams p;
  p.with_inbox = true;
  CoordCluster c(62, {Node("edge"), Node("worker"), Node("worker"), Node("worker"), Node("edge")},
                 p);
  Runtime rt(c);
  c.StartAll();
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Leader().has_value(); }, 20'000));
  ASSERT_TRUE(c.SubmitSingleton(0, Single(SingletonAnchor::Class("worker"))).ok());
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Converged({"counter"}); }, 20'000));
  c.world().SetFaults({0.05, 0.05, 0.05, 1, 10});
  std::map<int, int> sent;
  const std::vector<int> senders = {0, 3, 4};
  Stream(c, senders, sent, 1'500);
  c.Leave(1);  // the owner leaves gracefully: the singleton moves
  Stream(c, senders, sent, 1'500);
  c.Crash(2);  // and its next owner crashes
  Stream(c, senders, sent, 1'500);
  c.world().SetFaults({});
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return Drained(c, senders); }, 60'000));
  CheckDelivery(rt, sent);
  std::string why;
  EXPECT_TRUE(c.NoOverlap(&why)) << why;
}

TEST(SimActors, BufferWhileNoOwnerIsBoundedAndDeliveredInOrderLater) {
  CoordParams p;
  p.with_inbox = true;
  CoordCluster c(63, {Node("edge"), Node("worker"), Node("worker")}, p);
  Runtime rt(c);
  c.StartAll();
  c.Crash(2);
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Leader().has_value(); }, 20'000));
  // Anchored to a node that is down: no owner, messages wait.
  ASSERT_TRUE(c.SubmitSingleton(0, Single(SingletonAnchor::Node(c.id(2)))).ok());
  std::map<int, int> sent;
  for (int k = 1; k <= 1'000; ++k) {
    ASSERT_TRUE(c.SendLabel(1, "counter", "s1-" + std::to_string(k)).ok()) << k;
    sent[1] = k;
  }
  c.RunWithRuntime(500);
  auto over = c.SendLabel(1, "counter", "s1-1001");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("buffer for 'counter' is full (1000"), std::string::npos);
  const auto stats = c.core(1).services().mailer().Stats();
  EXPECT_EQ(stats.label_overflowed, 1u);
  EXPECT_EQ(stats.buffered.at("counter"), 1'000u);
  EXPECT_TRUE(rt.handled.empty());
  c.Restart(2);
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return Drained(c, {1}); }, 30'000));
  CheckDelivery(rt, sent);
  ASSERT_EQ(rt.handled.size(), 1'000u);  // no owner before: nothing handled twice
}


// A running instance re-granted under a higher seq (a new leader's re-grant) is
// the same instance: a message it was handed but had not answered yet is not
// handed to it again when the sender re-sends it.
TEST(SimActors, ARegrantDoesNotHandTheSameMessageTwice) {
  CoordParams p;
  p.with_inbox = true;
  CoordCluster c(64, {Node("edge"), Node("worker"), Node("worker")}, p);
  Runtime rt(c);
  c.StartAll();
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Leader().has_value(); }, 20'000));
  ASSERT_TRUE(c.SubmitSingleton(0, Single(SingletonAnchor::Node(c.id(1)))).ok());
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return c.Converged({"counter"}); }, 20'000));
  auto gen = c.core(1).services().host().ActiveGeneration("counter");
  ASSERT_TRUE(gen);
  rt.hold = true;
  ASSERT_TRUE(c.SendLabel(0, "counter", "s0-1").ok());
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return rt.handled.size() == 1; }, 5'000));

  coord_wire::Command regrant;
  regrant.op = coord_wire::Command::Op::kSpawn;
  regrant.request_id = 1'000'000;
  regrant.label = "counter";
  regrant.generation = Generation{gen->term, gen->seq + 1};
  regrant.kind = SpecKind::kSingleton;
  regrant.actor_type = "worker";
  c.core(1).services().host().OnCommand(c.address(0), regrant);
  ASSERT_EQ(c.core(1).services().host().ActiveGeneration("counter"), regrant.generation);
  // Past several re-send intervals: the sender re-sent the unanswered message.
  c.RunWithRuntime(7'000);
  EXPECT_GT(c.core(0).services().mailer().Stats().label_resent, 0u);
  EXPECT_EQ(rt.handled.size(), 1u) << "the re-granted instance was handed the message again";
  rt.Release();
  ASSERT_TRUE(c.RunUntilWithRuntime([&] { return Drained(c, {0}); }, 10'000));
  CheckDelivery(rt, {{0, 1}});
  EXPECT_EQ(rt.handled.size(), 1u);
}

}  // namespace
}  // namespace pynenc_cpp::cluster
