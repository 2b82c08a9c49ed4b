// Mastership scenarios in the simulator: NodeCore (membership + election +
// lease + supervisor) on a SimWorld. The central safety property checked at the
// end of every scenario: no two nodes ever hold overlapping leases, and work
// starts only under a valid lease.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cluster/node/node_core.h"
#include "sim/sim.h"

namespace pynenc_cpp::cluster {
namespace {

using sim::SimWorld;

struct Interval {
  std::int64_t from = 0, until = 0;  // [from, until)
};

struct WorkRun {
  int node = 0;
  std::int64_t start = 0;
  std::int64_t stop = -1;  // -1: still running
  std::uint64_t epoch = 0;
  std::int64_t lease_until = 0;
  std::string reason;
};

struct Params {
  int n = 3;
  int quorum = 2;
  std::int64_t heartbeat_ms = 100;
  std::int64_t suspect_timeout_ms = 500;
  std::int64_t stabilize_ms = 200;
  ElectionKind election = ElectionKind::kOldestNode;
};

// N NodeCores on one SimWorld. Node i listens at "10.0.1.<i+1>:7000", seeds are
// every node's address. The work callbacks report completion at once.
class MasterCluster {
 public:
  MasterCluster(std::uint64_t seed, Params p) : world_(seed), p_(p) {
    for (int i = 0; i < p.n; ++i) {
      addrs_.push_back("10.0.1." + std::to_string(i + 1) + ":7000");
      std::string id = "n" + std::to_string(i);
      id.resize(32, '0');
      ids_.push_back(id);
    }
    nodes_.resize(p.n);
    leases_.resize(p.n);
  }

  void StartAll() {
    for (int i = 0; i < p_.n; ++i) Boot(i);
  }

  void Boot(int i) {
    Node& n = nodes_[i];
    Env& env = world_.Revive(addrs_[i]);
    NodeCoreOptions o;
    o.membership.cluster_name = "sim";
    o.membership.self.id = ids_[i];
    o.membership.self.address = addrs_[i];
    o.membership.self.incarnation = n.incarnation + (n.booted ? 1 : 0);
    o.membership.self.started_at_ms = env.WallMs();
    o.membership.seeds = addrs_;
    o.membership.heartbeat_ms = p_.heartbeat_ms;
    o.membership.suspect_timeout_ms = p_.suspect_timeout_ms;
    o.quorum = p_.quorum;
    o.election = p_.election;
    o.stabilize_ms = p_.stabilize_ms;
    NodeCoreHooks h;
    h.start_work = [this, i, &env](const Activation& a) {
      EXPECT_LT(env.NowMs(), a.lease_until_mono_ms) << "work started without a valid lease";
      running_[i] = static_cast<int>(runs_.size());
      runs_.push_back({i, env.NowMs(), -1, a.epoch, a.lease_until_mono_ms, ""});
      log_.push_back(std::to_string(env.NowMs()) + " " + std::to_string(i) + " start " +
                     std::to_string(a.epoch));
      nodes_[i].core->WorkStarted();
    };
    h.stop_work = [this, i, &env](const Activation&, const std::string& reason) {
      auto it = running_.find(i);
      if (it != running_.end()) {
        runs_[it->second].stop = env.NowMs();
        runs_[it->second].reason = reason;
        running_.erase(it);
      }
      log_.push_back(std::to_string(env.NowMs()) + " " + std::to_string(i) + " stop " + reason);
      order_.push_back({i, "stop"});
      nodes_[i].core->WorkStopped();
    };
    h.incarnation = [this, i](std::uint64_t v) { nodes_[i].incarnation = v; };
    h.lease_extended = [this, i](std::int64_t now, std::int64_t until) {
      auto& v = leases_[i];
      if (!v.empty() && now < v.back().until) {
        v.back().until = std::max(v.back().until, until);
      } else {
        v.push_back({now, until});
      }
    };
    h.record = [this, i](const ActivationRecord& r) { records_.push_back({i, r}); };
    h.member_event = [this, i](const MemberEvent& e) {
      order_.push_back({i, std::string(MemberEventName(e.kind))});
    };
    n.incarnation = o.membership.self.incarnation;
    n.booted = true;
    n.core = std::make_unique<NodeCore>(env, o, std::move(h));
    n.core->Start();
  }

  void Crash(int i) {
    world_.Crash(addrs_[i]);
    nodes_[i].core.reset();
    auto it = running_.find(i);
    if (it != running_.end()) {  // a crashed process's work dies with it
      runs_[it->second].stop = world_.Now();
      runs_[it->second].reason = "crash";
      running_.erase(it);
    }
  }

  // Graceful: Shutdown (stops the work at once here), then Leave (releases).
  void StopGracefully(int i) {
    nodes_[i].core->Shutdown();
    ASSERT_FALSE(nodes_[i].core->WorkActive());
    nodes_[i].core->Leave();
    auto& v = leases_[i];
    if (!v.empty() && v.back().until > world_.Now()) v.back().until = world_.Now();
  }

  // Indices of up nodes currently in kMaster.
  std::vector<int> Masters() const {
    std::vector<int> out;
    for (int i = 0; i < p_.n; ++i) {
      if (nodes_[i].core && nodes_[i].core->supervisor().state() == SupervisorState::kMaster) {
        out.push_back(i);
      }
    }
    return out;
  }
  bool OneMasterAmong(const std::vector<int>& group) const {
    int count = 0;
    for (int i : Masters()) {
      if (std::find(group.begin(), group.end(), i) == group.end()) return false;
      ++count;
    }
    return count == 1;
  }
  std::optional<int> RunUntilMaster(std::int64_t max_ms, std::optional<int> other_than = {}) {
    std::optional<int> found;
    world_.RunUntil(
        [&] {
          for (int m : Masters()) {
            if (m != other_than) {
              found = m;
              return true;
            }
          }
          return false;
        },
        max_ms);
    return found;
  }

  // No two nodes' lease intervals overlap (lease intervals of one node may).
  void ExpectNoOverlappingLeases() const {
    for (int a = 0; a < p_.n; ++a) {
      for (int b = a + 1; b < p_.n; ++b) {
        for (const auto& x : leases_[a]) {
          for (const auto& y : leases_[b]) {
            EXPECT_TRUE(x.until <= y.from || y.until <= x.from)
                << "node " << a << " [" << x.from << "," << x.until << ") overlaps node " << b
                << " [" << y.from << "," << y.until << ")";
          }
        }
      }
    }
  }
  // Work runs of different nodes never overlap while both hold their lease: a
  // run's effective end is min(stop, lease end) (a paused master holds no lease).
  void ExpectWorkRunsDisjoint() const {
    for (std::size_t a = 0; a < runs_.size(); ++a) {
      for (std::size_t b = a + 1; b < runs_.size(); ++b) {
        const WorkRun& x = runs_[a];
        const WorkRun& y = runs_[b];
        if (x.node == y.node) continue;
        const std::int64_t x_end = LeasedEnd(x), y_end = LeasedEnd(y);
        EXPECT_TRUE(x_end <= y.start || y_end <= x.start)
            << "runs of " << x.node << " and " << y.node << " overlap";
      }
    }
  }
  // Last lease expiry of node i up to now.
  std::int64_t LeaseEnd(int i) const { return leases_[i].empty() ? 0 : leases_[i].back().until; }

  SimWorld& world() { return world_; }
  NodeCore& core(int i) { return *nodes_[i].core; }
  const Address& addr(int i) const { return addrs_[i]; }
  const std::vector<WorkRun>& runs() const { return runs_; }
  const std::vector<std::string>& log() const { return log_; }
  std::vector<std::pair<int, std::string>>& order() { return order_; }
  const std::vector<std::pair<int, ActivationRecord>>& records() const { return records_; }

 private:
  struct Node {
    std::unique_ptr<NodeCore> core;
    std::uint64_t incarnation = 0;
    bool booted = false;
  };
  std::int64_t LeasedEnd(const WorkRun& r) const {
    std::int64_t end = r.stop < 0 ? world_.Now() : r.stop;
    for (const auto& l : leases_[r.node]) {
      if (l.from <= r.start && r.start < l.until) return std::min(end, l.until);
    }
    return r.start;  // not under any lease: already reported by start_work
  }

  SimWorld world_;
  Params p_;
  std::vector<Address> addrs_;
  std::vector<NodeId> ids_;
  std::vector<Node> nodes_;
  std::vector<std::vector<Interval>> leases_;
  std::vector<WorkRun> runs_;
  std::map<int, int> running_;
  std::vector<std::string> log_;
  std::vector<std::pair<int, std::string>> order_;  // (node, member event kind or "stop")
  std::vector<std::pair<int, ActivationRecord>> records_;
};

constexpr std::int64_t kConverge = 10'000;

TEST(SimMastership, ThreeNodesHaveExactlyOneMaster) {
  MasterCluster c(1, {});
  c.StartAll();
  auto m = c.RunUntilMaster(kConverge);
  ASSERT_TRUE(m.has_value());
  c.world().RunFor(20'000);
  EXPECT_EQ(c.Masters(), std::vector<int>{*m});
  ASSERT_EQ(c.runs().size(), 1u) << "the work started once and kept running";
  EXPECT_EQ(c.runs()[0].stop, -1);
  // Every node agrees on the leader.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.core(i).Status().leader, c.core(*m).Status().id);
  c.ExpectNoOverlappingLeases();
}

TEST(SimMastership, EachElectionKindGivesOneMaster) {
  for (ElectionKind kind :
       {ElectionKind::kOldestNode, ElectionKind::kHrw, ElectionKind::kLowestAddress}) {
    Params p;
    p.n = 5;
    p.quorum = 3;
    p.election = kind;
    MasterCluster c(7, p);
    c.StartAll();
    ASSERT_TRUE(c.RunUntilMaster(kConverge).has_value()) << int(kind);
    c.world().RunFor(5'000);
    EXPECT_EQ(c.Masters().size(), 1u) << int(kind);
    EXPECT_EQ(c.runs().size(), 1u) << int(kind);
    c.ExpectNoOverlappingLeases();
  }
}

TEST(SimMastership, CrashedMasterIsReplacedAfterItsLeaseRanOut) {
  MasterCluster c(2, {});
  c.StartAll();
  auto old = c.RunUntilMaster(kConverge);
  ASSERT_TRUE(old.has_value());
  c.world().RunFor(3'000);
  const std::int64_t crash_at = c.world().Now();
  c.Crash(*old);
  const std::int64_t old_lease_end = c.LeaseEnd(*old);
  EXPECT_GT(old_lease_end, crash_at);
  auto next = c.RunUntilMaster(10'000, old);
  ASSERT_TRUE(next.has_value());
  const WorkRun& run = c.runs().back();
  EXPECT_EQ(run.node, *next);
  EXPECT_GE(run.start, old_lease_end);
  // Failover bound: detection (<= heartbeat*2 + suspect timeout, generously 3
  // periods) + stabilize + one lease round.
  EXPECT_LE(run.start - crash_at, 3 * 100 + 500 + 200 + 2 * 100 + 100);
  c.world().RunFor(5'000);
  EXPECT_EQ(c.Masters(), std::vector<int>{*next});
  c.ExpectNoOverlappingLeases();
  c.ExpectWorkRunsDisjoint();
}

TEST(SimMastership, GracefulStopHandsOverWithoutWaitingForTheLease) {
  MasterCluster c(3, {});
  c.StartAll();
  auto old = c.RunUntilMaster(kConverge);
  ASSERT_TRUE(old.has_value());
  c.world().RunFor(2'000);
  const std::int64_t left_at = c.world().Now();
  c.StopGracefully(*old);
  auto next = c.RunUntilMaster(5'000, old);
  ASSERT_TRUE(next.has_value());
  const WorkRun& run = c.runs().back();
  EXPECT_EQ(run.node, *next);
  // Leaving + stabilize + a lease round, well under the 500 ms lease.
  EXPECT_LT(run.start - left_at, 200 + 200);
  c.ExpectNoOverlappingLeases();
  c.ExpectWorkRunsDisjoint();
}

void MinorityLosesMastership(int n, int quorum, std::uint64_t seed) {
  Params p;
  p.n = n;
  p.quorum = quorum;
  MasterCluster c(seed, p);
  c.StartAll();
  auto old = c.RunUntilMaster(kConverge);
  ASSERT_TRUE(old.has_value());
  c.world().RunFor(2'000);
  // The master and (for 5 nodes) one more node end up on the minority side.
  std::vector<int> minority{*old};
  if (n == 5) minority.push_back((*old + 1) % n);
  std::vector<int> majority;
  std::vector<Address> min_addrs, maj_addrs;
  for (int i = 0; i < n; ++i) {
    if (std::find(minority.begin(), minority.end(), i) != minority.end()) {
      min_addrs.push_back(c.addr(i));
    } else {
      majority.push_back(i);
      maj_addrs.push_back(c.addr(i));
    }
  }
  const std::size_t runs_before = c.runs().size();
  const std::int64_t cut_at = c.world().Now();
  c.world().Partition({min_addrs, maj_addrs});
  auto next = c.RunUntilMaster(10'000, old);
  ASSERT_TRUE(next.has_value());
  EXPECT_NE(std::find(majority.begin(), majority.end(), *next), majority.end());
  c.world().RunFor(20'000);
  EXPECT_TRUE(c.OneMasterAmong(majority));
  // The old master stopped (lease expired or lost quorum) and no minority node
  // started the work after the cut.
  EXPECT_GE(c.runs()[runs_before - 1].stop, 0);
  EXPECT_LE(c.runs()[runs_before - 1].stop, cut_at + 500 + 100);
  for (std::size_t r = runs_before; r < c.runs().size(); ++r) {
    EXPECT_EQ(std::find(minority.begin(), minority.end(), c.runs()[r].node), minority.end());
  }
  c.ExpectNoOverlappingLeases();
  c.ExpectWorkRunsDisjoint();
  // Healing: still one master, still no overlap.
  c.world().HealAll();
  c.world().RunFor(20'000);
  EXPECT_EQ(c.Masters().size(), 1u);
  c.ExpectNoOverlappingLeases();
  c.ExpectWorkRunsDisjoint();
}

TEST(SimMastership, MinorityPartitionLosesMastershipQuorum2Of3) {
  MinorityLosesMastership(3, 2, 4);
}
TEST(SimMastership, MinorityPartitionLosesMastershipQuorum3Of5) {
  MinorityLosesMastership(5, 3, 5);
}

TEST(SimMastership, PausedMasterStopsFirstThingOnWakeAndSuccessorWaitedForItsLease) {
  MasterCluster c(6, {});
  c.StartAll();
  auto old = c.RunUntilMaster(kConverge);
  ASSERT_TRUE(old.has_value());
  c.world().RunFor(2'000);
  const std::int64_t paused_at = c.world().Now();
  c.world().Pause(c.addr(*old));
  const std::int64_t old_lease_end = c.LeaseEnd(*old);
  ASSERT_GT(old_lease_end, paused_at);
  auto next = c.RunUntilMaster(10'000, old);
  ASSERT_TRUE(next.has_value());
  EXPECT_GE(c.runs().back().start, old_lease_end);
  c.world().RunFor(3'000);  // paused well past the suspect timeout
  // The old master's work still "runs" (it is frozen).
  const std::size_t old_run = c.runs().size() - 2;
  ASSERT_EQ(c.runs()[old_run].node, *old);
  ASSERT_EQ(c.runs()[old_run].stop, -1);
  c.order().clear();
  const std::size_t records_before = c.records().size();
  const std::int64_t resumed_at = c.world().Now();
  c.world().Resume(c.addr(*old));
  // Stopped at the wake-up instant, for the expired lease, before it processed
  // any membership event.
  EXPECT_EQ(c.runs()[old_run].stop, resumed_at);
  EXPECT_EQ(c.runs()[old_run].reason, "lease expired");
  ASSERT_GT(c.records().size(), records_before);
  EXPECT_EQ(c.records()[records_before].first, *old);
  EXPECT_EQ(c.records()[records_before].second.event, "lease_expired");
  EXPECT_EQ(c.records()[records_before].second.mono_ms, resumed_at);
  EXPECT_EQ(c.records()[records_before].second.lease_until_mono_ms, old_lease_end);
  // The first thing the woken node did was the stop: no membership event first.
  auto first = std::find_if(c.order().begin(), c.order().end(),
                            [&](const auto& e) { return e.first == *old; });
  ASSERT_NE(first, c.order().end());
  EXPECT_EQ(first->second, "stop");
  c.world().RunFor(20'000);
  // OldestNode: once it refuted its death, the woken node is the oldest again and
  // takes mastership back after the interim master stepped down.
  EXPECT_EQ(c.Masters(), std::vector<int>{*old});
  EXPECT_EQ(c.runs()[old_run + 1].reason, "not elected");
  c.ExpectNoOverlappingLeases();
  c.ExpectWorkRunsDisjoint();
}

// Crashes, restarts, pauses, partitions and message chaos; at the end no two
// leases overlapped and every start was under a valid lease.
void Chaos(std::uint64_t seed, std::vector<std::string>* activations, std::uint64_t* trace) {
  Params p;
  p.n = 5;
  p.quorum = 3;
  p.heartbeat_ms = 100;
  p.suspect_timeout_ms = 1'000;
  MasterCluster c(seed, p);
  c.world().SetFaults({0.10, 0.05, 0.2, 1, 20});
  c.StartAll();
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 30; ++round) {
    c.world().RunFor(1'000 + static_cast<std::int64_t>(rng() % 2'000));
    const int i = static_cast<int>(rng() % 5);
    switch (rng() % 5) {
      case 0:
        c.Crash(i);
        c.world().RunFor(static_cast<std::int64_t>(rng() % 3'000));
        c.Boot(i);
        break;
      case 1:
        c.world().Pause(c.addr(i));
        c.world().RunFor(static_cast<std::int64_t>(rng() % 4'000));
        c.world().Resume(c.addr(i));
        break;
      case 2: {
        const int j = static_cast<int>(rng() % 5);
        c.world().Partition({{c.addr(i), c.addr(j)},
                             {c.addr((i + 2) % 5), c.addr((i + 3) % 5), c.addr((i + 4) % 5)}});
        c.world().RunFor(static_cast<std::int64_t>(rng() % 4'000));
        c.world().HealAll();
        break;
      }
      default:
        break;
    }
  }
  c.world().SetFaults({});
  c.world().RunFor(20'000);
  EXPECT_EQ(c.Masters().size(), 1u) << "seed " << seed;
  c.ExpectNoOverlappingLeases();
  c.ExpectWorkRunsDisjoint();
  if (activations) *activations = c.log();
  if (trace) *trace = c.world().TraceHash();
}

TEST(SimMastership, NoOverlappingLeasesUnderChaos) {
  for (std::uint64_t seed : {11, 12, 13}) Chaos(seed, nullptr, nullptr);
}

TEST(SimMastership, SameSeedSameActivations) {
  std::vector<std::string> a, b, d;
  std::uint64_t ta = 0, tb = 0, td = 0;
  Chaos(21, &a, &ta);
  Chaos(21, &b, &tb);
  Chaos(22, &d, &td);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, td);
}

}  // namespace
}  // namespace pynenc_cpp::cluster
