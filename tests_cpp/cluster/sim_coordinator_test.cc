// Coordinator scenarios in the simulator: full NodeCores (membership, election,
// lease, supervisor, owner leases, hosts, the Coordinator on the master) on a
// SimWorld with one shared in-memory generation source. Every scenario ends
// with the safety checks: no two lifetimes of one label overlap, and
// generations strictly increase per label.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/placement.h"
#include "sim/coord_cluster.h"

namespace pynenc_cpp::cluster {
namespace {

using sim::CoordCluster;
using sim::CoordParams;
using sim::Lifetime;
using sim::SimNodeSpec;

SimNodeSpec Worker(std::string volume) {
  SimNodeSpec s;
  s.node_class = "worker";
  s.metadata = {{"volume", std::move(volume)}};
  s.actor_types = {"storage", "worker"};
  return s;
}

SimNodeSpec Edge() {
  SimNodeSpec s;
  s.node_class = "edge";
  s.actor_types = {"worker"};
  return s;
}

ActorSpec Storage(std::string label, std::string volume,
                  CrashStrategy crash = CrashStrategy::Redistribute()) {
  ActorSpec a;
  a.label = std::move(label);
  a.actor_type = "storage";
  a.initial_state = "root=/" + volume;
  a.crash_strategy = crash;
  a.constraints.required_classes = {"worker"};
  a.constraints.required_metadata = {{"volume", volume}};
  return a;
}

// The cluster's state, for failure messages.
std::string Dump(CoordCluster& c) {
  std::string out = "t=" + std::to_string(c.world().Now());
  for (int i = 0; i < c.size(); ++i) {
    out += "\n node " + std::to_string(i) + ": ";
    if (!c.up(i)) {
      out += "down";
      continue;
    }
    auto st = c.core(i).Status();
    out += std::string(SupervisorStateName(st.state)) + " quorum=" + (st.has_quorum ? "y" : "n") +
           " leader=" + (st.leader ? st.leader->substr(0, 3) : "-") + " instances:";
    for (const auto& inst : c.core(i).services().host().Instances()) {
      out += " " + inst.label + "@" + inst.generation.ToString() + "/" +
             std::string(coord_wire::InstancePhaseName(inst.phase));
    }
  }
  if (auto l = c.Leader()) {
    if (auto* co = c.core(*l).services().coordinator()) {
      for (const auto& s : co->Statuses()) {
        out += "\n " + s.label + ": " + std::string(SpecStateName(s.state)) + " on " +
               (s.node ? s.node->substr(0, 3) : "-") + " " + s.generation.ToString() + " " +
               s.reason;
      }
    }
  }
  return out;
}

void ExpectSafe(const CoordCluster& c) {
  std::string why;
  EXPECT_TRUE(c.NoOverlap(&why)) << why;
  EXPECT_TRUE(c.GenerationsIncrease(&why)) << why;
}

// Waits for a master whose Coordinator finished rebuilding.
int WaitLeader(CoordCluster& c, std::int64_t max_ms = 20'000) {
  EXPECT_TRUE(c.RunUntil(
      [&] {
        auto l = c.Leader();
        auto* co = l ? c.core(*l).services().coordinator() : nullptr;
        return co && co->phase() == Coordinator::Phase::kReady;
      },
      max_ms));
  return c.Leader().value_or(-1);
}

std::map<std::string, SpecStatus> StatusMap(CoordCluster& c, int via) {
  auto r = c.Statuses(via);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, SpecStatus> out;
  if (r.ok()) {
    for (auto& s : r.value()) out[s.label] = s;
  }
  return out;
}

TEST(SimCoordinator, PlacesActorsByConstraintsAndReportsImpossibleOnes) {
  CoordCluster c(11, {Edge(), Worker("photos"), Worker("docs"), Worker("photos")});
  c.StartAll();
  WaitLeader(c);
  // Submitted through a node that is not necessarily the leader (forwarded).
  ASSERT_TRUE(c.SubmitActor(2, Storage("storage/photos", "photos")).ok());
  ASSERT_TRUE(c.SubmitActor(1, Storage("storage/docs", "docs")).ok());
  ASSERT_TRUE(c.SubmitActor(0, Storage("storage/music", "music")).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"storage/photos", "storage/docs"}); }, 20'000));
  auto running = c.Running();
  const int photos = running["storage/photos"][0];
  EXPECT_TRUE(photos == 1 || photos == 3);
  EXPECT_EQ(running["storage/docs"], std::vector<int>{2});
  EXPECT_EQ(running.count("storage/music"), 0u);

  auto st = StatusMap(c, 3);
  EXPECT_EQ(st["storage/photos"].generation, (Generation{1, 0}));
  EXPECT_EQ(st["storage/music"].state, SpecState::kUnplaced);
  EXPECT_NE(st["storage/music"].reason.find("required_metadata {volume=music} ruled out 3"),
            std::string::npos)
      << st["storage/music"].reason;
  EXPECT_NE(st["storage/music"].reason.find("actor type 'storage' not registered on 1"),
            std::string::npos)
      << st["storage/music"].reason;

  // Every node's view says where each label runs; asks reach it from anywhere.
  c.world().RunFor(3'000);
  for (int i = 0; i < c.size(); ++i) {
    auto reply = c.Ask(i, "storage/docs", "ls /");
    ASSERT_TRUE(reply.ok()) << i << ": " << reply.status().ToString();
    EXPECT_EQ(reply.value(), "node2:storage/docs:ls /");
  }
  auto view = c.View(0);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.value().alive_count, 4);
  EXPECT_EQ(view.value().total_count, 4);
  ExpectSafe(c);
}

ActorSpec Pinned(std::string label, const NodeId& node, CrashStrategy crash) {
  ActorSpec a;
  a.label = std::move(label);
  a.actor_type = "worker";
  a.crash_strategy = crash;
  a.constraints.required_node_id = node;
  return a;
}

SpecStatus StatusOf(CoordCluster& c, const std::string& label) {
  auto l = c.Leader();
  if (!l) return {};
  for (auto& s : c.core(*l).services().coordinator()->Statuses()) {
    if (s.label == label) return s;
  }
  return {};
}

TEST(SimCoordinator, CrashStrategiesRedistributeWaitAndAbandon) {
  CoordCluster c(12, {Edge(), Worker("photos"), Worker("photos"), Worker("docs"), Worker("docs")});
  c.StartAll();
  const int leader = WaitLeader(c);
  ASSERT_EQ(leader, 0);  // same start time: the smallest id is the oldest
  ASSERT_TRUE(c.SubmitActor(0, Storage("r/photos", "photos")).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"r/photos"}); }, 20'000));
  ASSERT_TRUE(c.SubmitActor(0, Storage("w/docs", "docs", CrashStrategy::WaitForReturn(3'000))).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"w/docs"}); }, 20'000));
  ASSERT_TRUE(c.SubmitActor(0, Storage("a/docs", "docs", CrashStrategy::Abandon())).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"a/docs"}); }, 20'000));
  auto running = c.Running();
  ASSERT_EQ(running["r/photos"], std::vector<int>{1});  // least loaded, ties by id
  ASSERT_EQ(running["w/docs"], std::vector<int>{3});
  ASSERT_EQ(running["a/docs"], std::vector<int>{4});  // node 3 already runs one

  // Redistribute: the other photos worker takes over under a higher term.
  c.Crash(1);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"r/photos"}); }, 20'000));
  EXPECT_EQ(c.Running()["r/photos"], std::vector<int>{2});
  EXPECT_EQ(StatusOf(c, "r/photos").generation, (Generation{2, 0}));

  // WaitForReturn: the same node id coming back (a restarted process) gets it
  // again, under the next seq of the same term; nothing runs meanwhile.
  c.Crash(3);
  ASSERT_TRUE(c.RunUntil(
      [&] { return StatusOf(c, "w/docs").state == SpecState::kWaitingForReturn; }, 10'000));
  EXPECT_EQ(c.Running().count("w/docs"), 0u);
  c.world().RunFor(500);
  c.Restart(3);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"w/docs"}); }, 20'000));
  EXPECT_EQ(c.Running()["w/docs"], std::vector<int>{3});
  EXPECT_EQ(StatusOf(c, "w/docs").generation, (Generation{1, 1}));

  // Abandon: never placed again, even when the node returns.
  c.Crash(4);
  ASSERT_TRUE(c.RunUntil([&] { return StatusOf(c, "a/docs").state == SpecState::kUnplaced; },
                         10'000));
  EXPECT_NE(StatusOf(c, "a/docs").reason.find("abandoned"), std::string::npos);
  c.Restart(4);
  c.world().RunFor(5'000);
  EXPECT_EQ(c.Running().count("a/docs"), 0u);
  EXPECT_EQ(StatusOf(c, "a/docs").state, SpecState::kUnplaced);

  // WaitForReturn that times out redistributes.
  c.Crash(3);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"w/docs"}); }, 20'000));
  EXPECT_EQ(c.Running()["w/docs"], std::vector<int>{4});
  EXPECT_EQ(StatusOf(c, "w/docs").generation, (Generation{2, 0}));
  ExpectSafe(c);
}

TEST(SimCoordinator, GracefulLeaveMovesActorsWithoutOverlap) {
  CoordParams p;
  p.stop_ms = 150;  // a stop that takes time: the successor must wait for it
  CoordCluster c(13, {Edge(), Worker("x"), Worker("x"), Worker("x")}, p);
  c.StartAll();
  WaitLeader(c);
  std::vector<std::string> labels;
  for (int k = 0; k < 6; ++k) {
    labels.push_back("job/" + std::to_string(k));
    ASSERT_TRUE(c.SubmitActor(1, Storage(labels.back(), "x")).ok());
  }
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 20'000));
  std::map<int, int> per_node;
  for (const auto& [label, nodes] : c.Running()) ++per_node[nodes[0]];
  EXPECT_EQ(per_node, (std::map<int, int>{{1, 2}, {2, 2}, {3, 2}}));  // least loaded
  const std::int64_t left_at = c.world().Now();
  c.Leave(2);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 20'000));
  for (const auto& [label, nodes] : c.Running()) EXPECT_NE(nodes[0], 2) << label;
  int moved = 0;
  for (const auto& l : c.lifetimes()) {
    // Handed over before the node left: stopped by a drained move, not by the shutdown.
    if (l.node == 2) EXPECT_EQ(l.reason.rfind("moving to ", 0), 0u) << l.reason;
    if (l.node != 2 && l.start >= left_at) ++moved;
  }
  EXPECT_EQ(moved, 2);
  ExpectSafe(c);
}

TEST(SimCoordinator, LeaveWithoutHandOverStopsAtShutdown) {
  CoordCluster c(18, {Edge(), Worker("x"), Worker("x")});
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.SubmitActor(0, Pinned("p", c.id(1), CrashStrategy::Redistribute())).ok());
  ASSERT_TRUE(c.SubmitActor(0, Storage("free", "x")).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"p", "free"}); }, 20'000));
  c.Leave(1, /*hand_over=*/false);
  for (const auto& l : c.lifetimes()) {
    if (l.node == 1) EXPECT_EQ(l.reason, "shutdown");
  }
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"free"}); }, 20'000));
  EXPECT_EQ(StatusOf(c, "p").state, SpecState::kUnplaced);  // pinned to a node that left
  ExpectSafe(c);
}

TEST(SimCoordinator, NewLeaderRebuildsWithoutRestartingOrOrphaning) {
  CoordCluster c(14, {Edge(), Worker("x"), Worker("x"), Worker("x"), Edge()});
  c.StartAll();
  ASSERT_EQ(WaitLeader(c), 0);
  std::vector<std::string> labels;
  for (int k = 0; k < 6; ++k) {
    labels.push_back("job/" + std::to_string(k));
    ASSERT_TRUE(c.SubmitActor(3, Storage(labels.back(), "x")).ok());
  }
  // One actor on the leader itself (pinned), one that cannot be placed yet.
  ASSERT_TRUE(c.SubmitActor(3, Pinned("on/leader", c.id(0), CrashStrategy::Redistribute())).ok());
  ActorSpec later = Storage("later", "y");
  ASSERT_TRUE(c.SubmitActor(3, later).ok());
  labels.push_back("on/leader");
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 20'000));
  std::map<std::string, int> starts;
  for (const auto& l : labels) starts[l] = c.Starts(l);
  c.Crash(0);
  const int leader = WaitLeader(c);
  ASSERT_EQ(leader, 1);
  labels.pop_back();  // on/leader is pinned to the dead node
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 20'000));
  c.world().RunFor(5'000);
  // Nothing that ran on a surviving node was started again, and the new
  // leader, once converged, sends no command at all.
  for (const auto& l : labels) EXPECT_EQ(c.Starts(l), starts[l]) << l;
  const auto before = c.LeaderStats();
  c.world().RunFor(5'000);
  EXPECT_EQ(c.LeaderStats().spawns_sent, before.spawns_sent);
  EXPECT_EQ(c.LeaderStats().stops_sent, before.stops_sent);
  auto st = StatusMap(c, 2);
  EXPECT_EQ(st["on/leader"].state, SpecState::kUnplaced);
  EXPECT_NE(st["on/leader"].reason.find("required_node_id"), std::string::npos);
  EXPECT_EQ(st["later"].state, SpecState::kUnplaced);  // the spec survived the leader
  ExpectSafe(c);
}

SingletonSpec Singleton(std::string label, SingletonAnchor anchor, std::int64_t drain_ms = 2'000) {
  SingletonSpec s;
  s.label = std::move(label);
  s.actor_type = "worker";
  s.state = "boot";
  s.anchor = std::move(anchor);
  s.drain_timeout_ms = drain_ms;
  return s;
}

TEST(SimSingleton, AnchorsDecideTheOwnerAndFailoverMintsAHigherTerm) {
  CoordCluster c(21, {Edge(), Worker("x"), Worker("x"), Worker("x"), Worker("x")});
  c.StartAll();
  ASSERT_EQ(WaitLeader(c), 0);
  ASSERT_TRUE(c.SubmitSingleton(2, Singleton("catalog", SingletonAnchor::Leader())).ok());
  ASSERT_TRUE(c.SubmitSingleton(2, Singleton("oldest-worker", SingletonAnchor::Class("worker"))).ok());
  ASSERT_TRUE(c.SubmitSingleton(2, Singleton("on-3", SingletonAnchor::Node(c.id(3)))).ok());
  const std::vector<std::string> all = {"catalog", "oldest-worker", "on-3"};
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(all); }, 20'000));
  auto running = c.Running();
  EXPECT_EQ(running["catalog"], std::vector<int>{0});
  EXPECT_EQ(running["oldest-worker"], std::vector<int>{1});
  EXPECT_EQ(running["on-3"], std::vector<int>{3});
  EXPECT_EQ(StatusOf(c, "catalog").generation, (Generation{1, 0}));

  // The leader fails: the new leader owns "catalog" under a strictly higher term.
  c.Crash(0);
  ASSERT_EQ(WaitLeader(c), 1);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(all); }, 20'000));
  EXPECT_EQ(c.Running()["catalog"], std::vector<int>{1});
  EXPECT_EQ(StatusOf(c, "catalog").generation, (Generation{2, 0}));

  // The class anchor follows the oldest live worker; a restarted worker is younger.
  c.Crash(1);  // also the leader again
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(all); }, 30'000));
  EXPECT_EQ(c.Running()["oldest-worker"], std::vector<int>{2});
  EXPECT_EQ(c.Running()["catalog"], std::vector<int>{2});
  EXPECT_EQ(StatusOf(c, "oldest-worker").generation, (Generation{2, 0}));
  EXPECT_EQ(StatusOf(c, "catalog").generation, (Generation{3, 0}));
  c.Restart(1);
  c.world().RunFor(5'000);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(all); }, 20'000));
  EXPECT_EQ(c.Running()["oldest-worker"], std::vector<int>{2});

  // A node anchor has no owner while its node is down, and the same node
  // coming back is a re-grant: same term, next seq.
  c.Crash(3);
  ASSERT_TRUE(c.RunUntil([&] { return StatusOf(c, "on-3").state == SpecState::kUnplaced; },
                         10'000));
  EXPECT_NE(StatusOf(c, "on-3").reason.find("is not alive"), std::string::npos);
  c.Restart(3);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(all); }, 20'000));
  EXPECT_EQ(c.Running()["on-3"], std::vector<int>{3});
  EXPECT_EQ(StatusOf(c, "on-3").generation, (Generation{1, 1}));
  ExpectSafe(c);
}

TEST(SimSingleton, GracefulMoveDrainsTheOldOwnerFirst) {
  CoordParams p;
  p.stop_ms = 400;  // the old instance takes a while to stop
  CoordCluster c(22, {Edge(), Worker("x"), Worker("x"), Worker("x")}, p);
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("s", SingletonAnchor::Class("worker"), 5'000)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 20'000));
  ASSERT_EQ(c.Running()["s"], std::vector<int>{1});
  // Node 1 stops offering the type: the anchor now picks node 2.
  c.core(1).Run([&] { c.core(1).services().host().SetActorTypes({"storage"}); });
  ASSERT_TRUE(c.RunUntil(
      [&] { return c.Converged({"s"}) && c.Running()["s"] == std::vector<int>{2}; }, 20'000));
  ASSERT_EQ(c.lifetimes().size(), 2u);
  const auto& old_one = c.lifetimes()[0];
  const auto& new_one = c.lifetimes()[1];
  EXPECT_EQ(old_one.reason, "moving to " + c.id(2).substr(0, 8));
  EXPECT_GE(new_one.start, old_one.stop);  // drained first
  EXPECT_EQ(new_one.generation, (Generation{2, 0}));
  ExpectSafe(c);
}

TEST(SimSingleton, LeaderCrashDuringAMove) {
  CoordParams p;
  p.stop_ms = 1'500;  // the drain is still running when the leader dies
  CoordCluster c(23, {Edge(), Edge(), Worker("x"), Worker("x"), Worker("x")}, p);
  c.StartAll();
  ASSERT_EQ(WaitLeader(c), 0);
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("s", SingletonAnchor::Class("worker"), 5'000)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 20'000));
  ASSERT_EQ(c.Running()["s"], std::vector<int>{2});
  c.core(2).Run([&] { c.core(2).services().host().SetActorTypes({"storage"}); });
  ASSERT_TRUE(c.RunUntil(
      [&] {
        auto i = c.core(2).services().host().Instances();
        return !i.empty() && i[0].phase == coord_wire::InstancePhase::kStopping;
      },
      10'000));
  c.Crash(0);  // mid-drain
  ASSERT_EQ(WaitLeader(c), 1);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 30'000));
  EXPECT_EQ(c.Running()["s"], std::vector<int>{3});
  EXPECT_EQ(c.Starts("s"), 2);  // the old one, then exactly one new one
  ExpectSafe(c);
}

TEST(SimSingleton, PartitionMinorityStopsMajorityTakesOverHealConverges) {
  CoordCluster c(24, {Edge(), Worker("x"), Worker("x"), Worker("x"), Worker("x")});
  c.StartAll();
  ASSERT_EQ(WaitLeader(c), 0);
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("s", SingletonAnchor::Class("worker"))).ok());
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("lead", SingletonAnchor::Leader())).ok());
  std::vector<std::string> labels = {"s", "lead"};
  for (int k = 0; k < 4; ++k) {
    labels.push_back("a" + std::to_string(k));
    ASSERT_TRUE(c.SubmitActor(0, Storage(labels.back(), "x")).ok());
  }
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 20'000));
  ASSERT_EQ(c.Running()["s"], std::vector<int>{1});
  c.world().Partition({{c.address(0), c.address(1)}, {c.address(2), c.address(3), c.address(4)}});
  // The minority (leader and the oldest worker) stops everything; the majority
  // elects a leader and runs everything on its side.
  ASSERT_TRUE(c.RunUntil(
      [&] {
        auto r = c.Running();
        for (const auto& l : labels) {
          if (r[l].size() != 1 || r[l][0] < 2) return false;
        }
        return true;
      },
      30'000));
  for (const auto& l : c.lifetimes()) {
    // Cut off from the quorum, a node's owner leases stop being renewed (and
    // run out first), or it notices it lost quorum; either way it stops.
    if (l.node == 0 || l.node == 1) {
      EXPECT_TRUE(l.reason == "lease expired" || l.reason == "lost quorum") << l.reason;
    }
  }
  c.world().HealAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 30'000)) << Dump(c);
  c.world().RunFor(5'000);
  ASSERT_TRUE(c.Converged(labels)) << Dump(c);
  ExpectSafe(c);
}

TEST(SimCoordinator, FailingFactoryIsRetriedUnderANewGenerationAndNothingLeaks) {
  CoordCluster c(15, {Edge(), Worker("x"), Worker("x")});
  c.StartAll();
  WaitLeader(c);
  c.FailFactory("flaky", 2);
  ASSERT_TRUE(c.SubmitActor(0, Pinned("flaky", c.id(1), CrashStrategy::Redistribute())).ok());
  ASSERT_TRUE(c.RunUntil(
      [&] { return StatusOf(c, "flaky").reason.find("factory failed") != std::string::npos; },
      10'000));
  EXPECT_EQ(StatusOf(c, "flaky").state, SpecState::kPending);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"flaky"}); }, 60'000)) << Dump(c);
  EXPECT_EQ(c.Starts("flaky"), 3);
  EXPECT_EQ(StatusOf(c, "flaky").generation, (Generation{1, 2}));  // one seq per attempt
  c.world().RunFor(2'000);
  auto leader = c.Leader();
  ASSERT_TRUE(leader);
  EXPECT_EQ(c.core(*leader).services().coordinator()->PendingCommands(), 0u);
  // Removing the spec stops the instance; nothing stays pending.
  ASSERT_TRUE(c.Remove(2, "flaky").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Running().count("flaky") == 0; }, 10'000));
  c.world().RunFor(2'000);
  EXPECT_EQ(c.core(*leader).services().coordinator()->PendingCommands(), 0u);
  EXPECT_EQ(c.Remove(2, "flaky").code(), ErrorCode::kNotFound);
  ExpectSafe(c);
}

TEST(SimCoordinator, SubmissionErrorsAreClear) {
  CoordCluster c(16, {Edge(), Worker("x"), Worker("x")});
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.SubmitActor(1, Storage("a", "x")).ok());
  EXPECT_TRUE(c.SubmitActor(2, Storage("a", "x")).ok());  // the same spec again: idempotent
  Status dup = c.SubmitActor(2, Storage("a", "y"));
  EXPECT_EQ(dup.code(), ErrorCode::kConflict);
  EXPECT_NE(dup.message().find("already used by a different actor"), std::string::npos);
  EXPECT_EQ(c.SubmitSingleton(1, Singleton("a", SingletonAnchor::Leader())).code(),
            ErrorCode::kConflict);
  ActorSpec bad = Storage("", "x");
  Status invalid = c.SubmitActor(1, bad);
  EXPECT_EQ(invalid.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(invalid.message().find("label"), std::string::npos);
  ActorSpec wait0 = Storage("w", "x", CrashStrategy::WaitForReturn(0));
  EXPECT_EQ(c.SubmitActor(1, wait0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.SubmitSingleton(1, Singleton("n", SingletonAnchor::Node(""))).code(),
            ErrorCode::kInvalidArgument);
}

TEST(SimCoordinator, NoLeaderMeansUnavailableNotAHang) {
  CoordCluster c(17, {Edge(), Worker("x"), Worker("x")});
  c.StartAll();
  WaitLeader(c);
  c.Crash(0);
  c.Crash(1);  // node 2 alone: no quorum, no leader
  c.world().RunFor(3'000);
  Status s = c.SubmitActor(2, Storage("a", "x"));
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.ToString();
  auto ask = c.Ask(2, "a", "hi");
  EXPECT_EQ(ask.status().code(), ErrorCode::kUnavailable);
}

AgentFamily Family(std::vector<std::string> agents,
                   std::optional<std::vector<std::string>> supported = std::nullopt,
                   Distribution d = Distribution::kEvenly) {
  AgentFamily f;
  f.scheme = "proj";
  f.agents = std::move(agents);
  f.supported = std::move(supported);
  f.distribution = d;
  f.drain_timeout_ms = 1'000;
  return f;
}

std::vector<std::string> Agents(int n) {
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k) out.push_back("proj://p" + std::to_string(k));
  return out;
}

SimNodeSpec AgentNode(std::vector<std::string> agents,
                      std::optional<std::vector<std::string>> supported = std::nullopt,
                      Distribution d = Distribution::kEvenly) {
  SimNodeSpec s = Worker("x");
  s.families = {Family(std::move(agents), std::move(supported), d)};
  return s;
}

std::map<int, int> Loads(CoordCluster& c) {
  std::map<int, int> out;
  for (const auto& [label, nodes] : c.Running()) {
    for (int n : nodes) ++out[n];
  }
  return out;
}

TEST(SimAgents, DistributeEvenlyKeepsASteadyGridStillAndRecoversFromNodeLoss) {
  const auto agents = Agents(7);
  CoordCluster c(31, {Edge(), AgentNode(agents), AgentNode(agents), AgentNode(agents)});
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(agents); }, 20'000)) << Dump(c);
  EXPECT_EQ(Loads(c), (std::map<int, int>{{1, 3}, {2, 2}, {3, 2}}));
  // A steady grid issues no commands.
  c.world().RunFor(2'000);
  const auto before = c.LeaderStats();
  const auto starts = c.lifetimes().size();
  c.world().RunFor(10'000);
  EXPECT_EQ(c.LeaderStats().spawns_sent, before.spawns_sent);
  EXPECT_EQ(c.LeaderStats().stops_sent, before.stops_sent);
  EXPECT_EQ(c.lifetimes().size(), starts);
  // Losing a node: its agents go to the others; every agent runs exactly once.
  c.Crash(1);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(agents); }, 20'000)) << Dump(c);
  auto loads = Loads(c);
  EXPECT_EQ(loads[2] + loads[3], 7);
  EXPECT_LE(std::abs(loads[2] - loads[3]), 1);
  ExpectSafe(c);
}

TEST(SimAgents, ANewNodeRebalancesWithMovesAndCapabilityFilters) {
  const auto agents = Agents(6);
  const std::vector<std::string> blue = {agents[0], agents[1], agents[2]};
  CoordCluster c(32, {Edge(), AgentNode(agents, std::nullopt, Distribution::kEvenlyByCapability),
                      AgentNode(agents, blue, Distribution::kEvenlyByCapability),
                      AgentNode(agents, std::nullopt, Distribution::kEvenlyByCapability)});
  c.StartAll();
  c.Crash(3);  // starts with two nodes up
  WaitLeader(c);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(agents); }, 20'000)) << Dump(c);
  for (const auto& [label, nodes] : c.Running()) {
    if (nodes[0] == 2) {
      EXPECT_TRUE(std::find(blue.begin(), blue.end(), label) != blue.end()) << label;
    }
  }
  c.Restart(3);
  ASSERT_TRUE(c.RunUntil(
      [&] {
        auto l = Loads(c);
        return c.Converged(agents) && l[1] == 2 && l[2] == 2 && l[3] == 2;
      },
      30'000))
      << Dump(c);
  for (const auto& [label, nodes] : c.Running()) {
    if (nodes[0] == 2) {
      EXPECT_TRUE(std::find(blue.begin(), blue.end(), label) != blue.end()) << label;
    }
  }
  ExpectSafe(c);
}

// The whole system under churn: crashes, restarts and graceful leaves of any
// node (the leader too) with quorum kept; afterwards every spec runs exactly
// once and no two lifetimes of one label ever overlapped.
TEST(SimChurn, SafeAndConvergedAfterChurn) {
  for (std::uint64_t seed : {41u, 42u, 43u}) {
    const auto agents = Agents(4);
    std::vector<SimNodeSpec> specs = {Edge(), AgentNode(agents), AgentNode(agents),
                                      AgentNode(agents), AgentNode(agents)};
    CoordCluster c(seed, specs);
    c.StartAll();
    WaitLeader(c);
    std::vector<std::string> labels = agents;
    for (int k = 0; k < 5; ++k) {
      labels.push_back("job/" + std::to_string(k));
      ASSERT_TRUE(c.SubmitActor(1, Storage(labels.back(), "x")).ok());
    }
    ASSERT_TRUE(c.SubmitSingleton(1, Singleton("single", SingletonAnchor::Leader())).ok());
    ASSERT_TRUE(c.SubmitSingleton(1, Singleton("oldest", SingletonAnchor::Class("worker"))).ok());
    labels.push_back("single");
    labels.push_back("oldest");
    std::mt19937_64 rng(seed);
    for (int step = 0; step < 25; ++step) {
      const int i = static_cast<int>(rng() % c.size());
      int down = 0;
      for (int k = 0; k < c.size(); ++k) down += c.up(k) ? 0 : 1;
      if (c.up(i) && down < 2) {
        if (rng() % 3 == 0) {
          c.Leave(i);
        } else {
          c.Crash(i);
        }
      } else if (!c.up(i)) {
        c.Restart(i);
      }
      c.world().RunFor(200 + static_cast<std::int64_t>(rng() % 2'500));
      std::string why;
      ASSERT_TRUE(c.NoOverlap(&why)) << "seed " << seed << " step " << step << ": " << why;
    }
    for (int i = 0; i < c.size(); ++i) {
      if (!c.up(i)) c.Restart(i);
    }
    // The edge node runs no agent and no "worker" job: everything else must converge.
    ASSERT_TRUE(c.RunUntil([&] { return c.Converged(labels); }, 60'000))
        << "seed " << seed << "\n"
        << Dump(c);
    ExpectSafe(c);
  }
}

// SIGSTOP in the simulator: the owner is paused past failover. Its successor
// starts only after the paused owner's lease ran out; woken, the old node stops
// its instance at once ("lease expired"), and a write stamped with the old
// generation is rejected by the fenced store.
TEST(SimSingleton, PausedOwnerIsFencedOnWakeUp) {
  CoordCluster c(25, {Edge(), Worker("x"), Worker("x"), Worker("x")});
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("s", SingletonAnchor::Class("worker"))).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 20'000));
  ASSERT_EQ(c.Running()["s"], std::vector<int>{1});
  const Generation old_gen = StatusOf(c, "s").generation;
  ASSERT_TRUE(c.fenced().Write("catalog", "v1", old_gen.Packed()).ok());
  c.Pause(1);
  ASSERT_TRUE(c.RunUntil(
      [&] {
        auto r = c.Running()["s"];
        return std::find(r.begin(), r.end(), 2) != r.end();
      },
      20'000))
      << Dump(c);
  const Generation new_gen = StatusOf(c, "s").generation;
  EXPECT_GT(new_gen, old_gen);
  EXPECT_EQ(new_gen.term, old_gen.term + 1);
  ASSERT_TRUE(c.fenced().Write("catalog", "v2", new_gen.Packed()).ok());
  const auto& lts = c.lifetimes();
  const Lifetime& first = lts[0];
  const Lifetime& second = lts.back();
  EXPECT_GE(second.start, first.lease_until) << "the successor started inside the old lease";
  c.Resume(1);
  c.world().RunFor(10);
  EXPECT_EQ(c.Running()["s"], std::vector<int>{2});
  EXPECT_EQ(lts[0].reason, "lease expired");
  // The stale owner's next write is rejected and changes nothing.
  Status stale = c.fenced().Write("catalog", "stale", old_gen.Packed());
  EXPECT_EQ(stale.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(c.fenced().Read("catalog").value()->value, "v2");
  std::string why;
  EXPECT_TRUE(c.NoOverlap(&why, /*authorized=*/true)) << why;
  EXPECT_TRUE(c.GenerationsIncrease(&why)) << why;
}

// A spawn of a running label on another node, under a newer generation from
// the source (what a stale or confused coordinator might send), cannot make two
// instances overlap: the newer generation stops the owner's renewals, the
// coordinator stops the stray, and whatever runs next starts after the old
// owner's lease ended. The system converges to exactly one instance.
TEST(SimSingleton, ARogueSpawnElsewhereNeverOverlapsTheOwner) {
  CoordCluster c(26, {Edge(), Worker("x"), Worker("x"), Worker("x")});
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("s", SingletonAnchor::Node(c.id(1)))).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 20'000));
  auto rogue = c.source().ClaimTerm("s", c.id(3));
  ASSERT_TRUE(rogue.ok());
  coord_wire::Command spawn;
  spawn.op = coord_wire::Command::Op::kSpawn;
  spawn.request_id = 999;
  spawn.label = "s";
  spawn.generation = rogue.value();
  spawn.kind = SpecKind::kSingleton;
  spawn.actor_type = "worker";
  c.core(3).Run([&] { c.core(3).services().host().OnCommand(c.address(0), spawn); });
  c.world().RunFor(5'000);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 20'000)) << Dump(c);
  const Lifetime& first = c.lifetimes()[0];
  for (std::size_t k = 1; k < c.lifetimes().size(); ++k) {
    const Lifetime& l = c.lifetimes()[k];
    EXPECT_GE(l.start, first.stop);
    if (l.node != first.node) EXPECT_GE(l.start, first.lease_until);  // another holder
  }
  EXPECT_GT(StatusOf(c, "s").generation, rogue.value());
  ExpectSafe(c);
}

// A drain that outlasts its timeout: the coordinator goes ahead, but the new
// owner still waits for the old owner's lease, which the old node stops
// renewing once the drain time is up.
TEST(SimSingleton, DrainTimeoutStillWaitsForTheOldLease) {
  CoordParams p;
  p.stop_ms = 3'000;
  CoordCluster c(27, {Edge(), Worker("x"), Worker("x")}, p);
  c.StartAll();
  WaitLeader(c);
  ASSERT_TRUE(c.SubmitSingleton(0, Singleton("s", SingletonAnchor::Class("worker"), 200)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged({"s"}); }, 20'000));
  c.core(1).Run([&] { c.core(1).services().host().SetActorTypes({"storage"}); });
  ASSERT_TRUE(c.RunUntil([&] { return c.lifetimes().size() == 2; }, 20'000)) << Dump(c);
  const Lifetime& first = c.lifetimes()[0];
  const Lifetime& second = c.lifetimes()[1];
  EXPECT_EQ(second.node, 2);
  EXPECT_GE(second.start, first.lease_until);
  EXPECT_LT(second.start, first.start + 3'000) << "waited for the whole stop";
  std::string why;
  EXPECT_TRUE(c.NoOverlap(&why, /*authorized=*/true)) << why;
}

TEST(SimCoordinator, SameSeedReplaysIdentically) {
  auto run = [](std::uint64_t seed) {
    CoordCluster c(seed, {Edge(), Worker("x"), Worker("x"), Worker("x")});
    c.StartAll();
    WaitLeader(c);
    for (int k = 0; k < 4; ++k) EXPECT_TRUE(c.SubmitActor(1, Storage("j" + std::to_string(k), "x")).ok());
    c.world().RunFor(3'000);
    c.Crash(2);
    c.world().RunFor(5'000);
    std::string trace = std::to_string(c.world().TraceHash());
    for (const auto& l : c.lifetimes()) {
      trace += "|" + l.label + "@" + std::to_string(l.node) + ":" + l.generation.ToString() + ":" +
               std::to_string(l.start) + "-" + std::to_string(l.stop);
    }
    return trace;
  };
  EXPECT_EQ(run(51), run(51));
  EXPECT_NE(run(51), run(52));
}

}  // namespace
}  // namespace pynenc_cpp::cluster
