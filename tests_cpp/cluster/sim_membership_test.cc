// Scenario tests of SWIM membership + epoch + elections on the simulator.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "pynenc_cpp/cluster/election.h"
#include "pynenc_cpp/cluster/membership.h"
#include "sim/sim_cluster.h"

namespace pynenc_cpp::cluster::sim {
namespace {

MembershipOptions Fast() {
  MembershipOptions o;
  o.cluster_name = "sim";
  o.heartbeat_ms = 100;
  o.suspect_timeout_ms = 500;
  return o;
}

// The leader each up node in `group` elects, if they all agree.
std::optional<NodeId> AgreedLeader(SimCluster& c, const std::vector<int>& group, const Election& e,
                                   int quorum, bool* agree) {
  std::optional<std::optional<NodeId>> first;
  *agree = true;
  for (int i : group) {
    Membership& m = c.node(i);
    ElectionInput in{"sim", m.Epoch(), m.LiveMembers(), quorum};
    auto got = e.Elect(in);
    if (first && *first != got) *agree = false;
    if (!first) first = got;
  }
  return first ? *first : std::nullopt;
}

TEST(SimMembership, FiveNodesConvergeWithAgreedEpochAndLeaders) {
  SimCluster c(42, 5, Fast());
  c.StartAll();
  ASSERT_TRUE(c.world().RunUntil([&] { return c.AllConverged(); }, 10'000));
  const std::vector<int> all = c.UpNodes();
  for (int i : all) {
    for (int j : all) {
      if (i != j) EXPECT_EQ(c.Count(i, MemberEventKind::kJoined, j), 1) << i << " about " << j;
    }
  }
  std::vector<std::unique_ptr<Election>> kinds;
  kinds.push_back(MakeOldestNodeElection());
  kinds.push_back(MakeHrwElection());
  kinds.push_back(MakeLowestAddressElection());
  kinds.push_back(MakeOldestNodeElection("odd"));
  for (const auto& e : kinds) {
    bool agree = false;
    auto leader = AgreedLeader(c, all, *e, 3, &agree);
    EXPECT_TRUE(agree) << e->Name();
    ASSERT_TRUE(leader.has_value()) << e->Name();
  }
  bool agree = false;
  EXPECT_EQ(AgreedLeader(c, all, *MakeOldestNodeElection(), 0, &agree), c.id(0));
  EXPECT_EQ(AgreedLeader(c, all, *MakeOldestNodeElection("odd"), 0, &agree), c.id(1));
  EXPECT_EQ(AgreedLeader(c, all, *MakeLowestAddressElection(), 0, &agree), c.id(0));
  // Stays converged with no suspicion over a long quiet run.
  c.world().RunFor(30'000);
  EXPECT_TRUE(c.AllConverged());
  for (const auto& ev : c.events()) EXPECT_EQ(ev.kind, MemberEventKind::kJoined);
}

}  // namespace
}  // namespace pynenc_cpp::cluster::sim
