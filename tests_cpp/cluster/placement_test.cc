// Placement unit tests: ChooseNode's constraint filters, the strategies
// (least loaded, seeded random, pinned), exclusion and the reason given when no
// node fits, over hand-built ClusterViews.
#include "pynenc_cpp/cluster/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pynenc_cpp::cluster {
namespace {

// A live node that registered "worker"; `running` labels placed on it.
NodeView Node(NodeId id, std::vector<std::string> running = {}, std::string node_class = "worker",
              std::map<std::string, std::string> metadata = {}) {
  NodeView n;
  n.id = std::move(id);
  n.address = "10.0.0.1:" + std::to_string(7000 + n.id.size());
  n.incarnation = 1;
  n.state = MemberState::kAlive;
  n.alive = true;
  n.node_class = std::move(node_class);
  n.metadata = std::move(metadata);
  n.actor_types = {"worker", "storage"};
  n.running = std::move(running);
  std::sort(n.running.begin(), n.running.end());
  return n;
}

ClusterView View(std::vector<NodeView> nodes) {
  ClusterView v;
  v.leader = nodes.empty() ? std::nullopt : std::optional<NodeId>(nodes.front().id);
  for (const auto& n : nodes) {
    ++v.total_count;
    if (n.alive) ++v.alive_count;
  }
  v.nodes = std::move(nodes);
  return v;
}

ActorSpec Spec(std::string label = "actor-x", std::string type = "worker") {
  ActorSpec s;
  s.label = std::move(label);
  s.actor_type = std::move(type);
  return s;
}

std::optional<NodeId> Choose(const ActorSpec& spec, const ClusterView& view,
                             const std::set<NodeId>& excluded = {}) {
  return ChooseNode(spec, view, *MakeLeastLoaded(), excluded).node;
}

// ---- constraint filters ----

TEST(Placement, RequiredClassesFilterNodes) {
  // The edge node is the least loaded, but the spec needs a worker.
  const auto view = View(
      {Node("node-a", {"p", "q"}), Node("node-b", {}, "edge"), Node("node-c", {"r"}, "worker")});
  auto spec = Spec();
  EXPECT_EQ(Choose(spec, view), "node-b");  // no constraint: least loaded
  spec.constraints.required_classes = {"worker"};
  EXPECT_EQ(Choose(spec, view), "node-c");
  spec.constraints.required_classes = {"edge", "gpu"};
  EXPECT_EQ(Choose(spec, view), "node-b");
  spec.constraints.required_classes = {"gpu"};
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("required_classes [gpu] ruled out 3 (node-a, node-b, node-c)"),
            std::string::npos)
      << r.reason;
}

TEST(Placement, RequiredMetadataNeedsEveryPair) {
  const auto view =
      View({Node("node-a", {}, "worker", {{"zone", "eu"}}),                   // lacks disk
            Node("node-b", {}, "worker", {{"zone", "us"}, {"disk", "ssd"}}),  // wrong zone
            Node("node-c", {"r", "s"}, "worker", {{"zone", "eu"}, {"disk", "ssd"}, {"x", "y"}})});
  auto spec = Spec();
  spec.constraints.required_metadata = {{"zone", "eu"}, {"disk", "ssd"}};
  EXPECT_EQ(Choose(spec, view), "node-c");
  spec.constraints.required_metadata = {{"zone", "eu"}};
  EXPECT_EQ(Choose(spec, view), "node-a");
  spec.constraints.required_metadata = {{"zone", ""}};  // an empty value must still match
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("required_metadata {zone=} ruled out 3"), std::string::npos) << r.reason;
}

TEST(Placement, AntiAffinityAvoidsNodesRunningTheLabels) {
  const auto view = View({Node("node-a", {"db-1"}), Node("node-b", {"cache"}),
                          Node("node-c", {"db-2", "other", "more"})});
  auto spec = Spec("db-3");
  spec.constraints.anti_affinity_labels = {"db-1", "db-2"};
  EXPECT_EQ(Choose(spec, view), "node-b");
  spec.constraints.anti_affinity_labels = {"db-1", "cache"};
  EXPECT_EQ(Choose(spec, view), "node-c");
  spec.constraints.anti_affinity_labels = {"db-1", "cache", "db-2"};
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("anti_affinity_labels [db-1, cache, db-2] ruled out 3"),
            std::string::npos)
      << r.reason;
  // A label no node runs rules nothing out.
  spec.constraints.anti_affinity_labels = {"nowhere"};
  EXPECT_EQ(Choose(spec, view), "node-a");
}

TEST(Placement, ColocateWithOnlyTheAnchorsNode) {
  const auto view =
      View({Node("node-a"), Node("node-b"), Node("node-c", {"anchor", "x", "y", "z"})});
  auto spec = Spec("follower");
  spec.constraints.colocate_with = "anchor";
  EXPECT_EQ(Choose(spec, view), "node-c");  // the most loaded, but the only one allowed
  EXPECT_EQ(ChooseNode(spec, view, *MakePinned("node-a")).node, "node-c");

  spec.constraints.colocate_with = "nobody-runs-this";
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("colocate_with nobody-runs-this ruled out 3 (node-a, node-b, node-c)"),
            std::string::npos)
      << r.reason;
}

TEST(Placement, ColocateWithAnchorOnADeadNodeFindsNoNode) {
  auto dead = Node("node-c", {"anchor"});
  dead.alive = false;
  dead.state = MemberState::kDead;
  const auto view = View({Node("node-a"), Node("node-b"), dead});
  auto spec = Spec("follower");
  spec.constraints.colocate_with = "anchor";
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("2 live nodes"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("colocate_with anchor ruled out 2"), std::string::npos) << r.reason;
}

TEST(Placement, RequiredNodeIdIsAHardPin) {
  const auto view = View({Node("node-a"), Node("node-b", {"x", "y", "z"}), Node("node-c")});
  auto spec = Spec();
  spec.constraints.required_node_id = "node-b";
  EXPECT_EQ(Choose(spec, view), "node-b");
  EXPECT_EQ(ChooseNode(spec, view, *MakePinned("node-c")).node, "node-b");
  EXPECT_EQ(ChooseNode(spec, view, *MakeRandomPlacement(9)).node, "node-b");

  // Never relocated: with its node excluded there is no node at all.
  auto r = ChooseNode(spec, view, *MakeLeastLoaded(), {"node-b"});
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("required_node_id node-b ruled out 2 (node-a, node-c)"),
            std::string::npos)
      << r.reason;
}

TEST(Placement, RequiredNodeIdOnADeadNodeFindsNoNode) {
  auto dead = Node("node-b");
  dead.alive = false;
  dead.state = MemberState::kDead;
  const auto view = View({Node("node-a"), dead, Node("node-c")});
  auto spec = Spec();
  spec.constraints.required_node_id = "node-b";
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("2 live nodes"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("required_node_id node-b ruled out 2"), std::string::npos) << r.reason;

  // Unknown node id: the same.
  spec.constraints.required_node_id = "node-z";
  EXPECT_FALSE(Choose(spec, view).has_value());
}

TEST(Placement, DeadNodesAndNodesWithoutTheTypeAreNeverChosen) {
  auto dead = Node("node-a");  // smallest id, empty: the best by load
  dead.alive = false;
  dead.state = MemberState::kDead;
  auto left = Node("node-b");
  left.alive = false;
  left.state = MemberState::kLeft;
  auto no_type = Node("node-c");
  no_type.actor_types = {"storage"};
  const auto view = View({dead, left, no_type, Node("node-d", {"x", "y"})});
  const auto spec = Spec();
  EXPECT_EQ(Choose(spec, view), "node-d");
  EXPECT_EQ(ChooseNode(spec, view, *MakePinned("node-a")).node, "node-d");
  EXPECT_EQ(ChooseNode(spec, view, *MakePinned("node-c")).node, "node-d");
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(ChooseNode(spec, view, *MakeRandomPlacement(seed)).node, "node-d") << seed;
  }
  // A suspect node is live.
  auto suspect = Node("node-e");
  suspect.state = MemberState::kSuspect;
  auto view2 = View({dead, left, no_type, Node("node-d", {"x", "y"}), suspect});
  EXPECT_EQ(Choose(spec, view2), "node-e");
}

TEST(Placement, ReasonNamesUnregisteredType) {
  auto dead = Node("node-d");
  dead.alive = false;
  const auto view = View({Node("node-a"), Node("node-b"), Node("node-c"), dead});
  auto spec = Spec("x", "gpu-model");
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("'x'"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("3 live nodes"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("actor type 'gpu-model' not registered on 3 (node-a, node-b, node-c)"),
            std::string::npos)
      << r.reason;

  // Partly registered: only the missing nodes are named.
  auto gpu = Node("node-b");
  gpu.actor_types = {"gpu-model"};
  auto view2 = View({Node("node-a"), gpu, Node("node-c")});
  spec.constraints.required_classes = {"edge"};
  r = ChooseNode(spec, view2, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("not registered on 2 (node-a, node-c)"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("required_classes [edge] ruled out 1 (node-b)"), std::string::npos)
      << r.reason;
}

TEST(Placement, ReasonNamesEveryFilterWithItsCounts) {
  // 4 live nodes; each filter rules out one of the nodes the previous ones kept.
  const auto view = View({
      Node("node-aaaaaaaaaaaa", {}, "edge"),                             // class
      Node("node-bbbbbbbbbbbb", {}, "worker", {{"zone", "us"}}),         // metadata
      Node("node-cccccccccccc", {"enemy"}, "worker", {{"zone", "eu"}}),  // anti-affinity
      Node("node-dddddddddddd", {}, "worker", {{"zone", "eu"}}),         // colocate
  });
  auto spec = Spec("me");
  spec.constraints.required_classes = {"worker"};
  spec.constraints.required_metadata = {{"zone", "eu"}};
  spec.constraints.anti_affinity_labels = {"enemy"};
  spec.constraints.colocate_with = "friend";
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("4 live nodes"), std::string::npos) << r.reason;
  // Node ids are shortened to their first 8 characters.
  EXPECT_NE(r.reason.find("required_classes [worker] ruled out 1 (node-aaa)"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("required_metadata {zone=eu} ruled out 1 (node-bbb)"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("anti_affinity_labels [enemy] ruled out 1 (node-ccc)"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("colocate_with friend ruled out 1 (node-ddd)"), std::string::npos)
      << r.reason;
  // A filter that ruled nothing out is not named.
  EXPECT_EQ(r.reason.find("required_node_id"), std::string::npos) << r.reason;
  EXPECT_EQ(r.reason.find("not registered"), std::string::npos) << r.reason;

  // A chosen node carries no reason.
  spec.constraints.colocate_with.reset();
  r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_EQ(r.node, "node-dddddddddddd");
  EXPECT_EQ(r.reason, "");
}

TEST(Placement, ReasonSingularForOneLiveNode) {
  const auto view = View({Node("node-a", {}, "edge")});
  auto spec = Spec();
  spec.constraints.required_classes = {"worker"};
  auto r = ChooseNode(spec, view, *MakeLeastLoaded());
  EXPECT_NE(r.reason.find("1 live node;"), std::string::npos) << r.reason;
}

TEST(Placement, SatisfiesConstraintsChecksEveryConstraint) {
  const auto view = View({Node("node-a", {"anchor"}, "worker", {{"zone", "eu"}}),
                          Node("node-b", {"enemy"}, "worker", {{"zone", "eu"}}),
                          Node("node-c", {}, "edge", {{"zone", "eu"}})});
  const auto& a = view.nodes[0];
  const auto& b = view.nodes[1];
  const auto& c = view.nodes[2];
  auto spec = Spec("me");
  EXPECT_TRUE(SatisfiesConstraints(spec, a, view));
  EXPECT_TRUE(SatisfiesConstraints(spec, c, view));

  spec.constraints.required_classes = {"worker"};
  EXPECT_TRUE(SatisfiesConstraints(spec, a, view));
  EXPECT_FALSE(SatisfiesConstraints(spec, c, view));

  spec.constraints.required_metadata = {{"zone", "eu"}};
  EXPECT_TRUE(SatisfiesConstraints(spec, a, view));
  spec.constraints.required_metadata = {{"zone", "us"}};
  EXPECT_FALSE(SatisfiesConstraints(spec, a, view));
  spec.constraints.required_metadata.clear();

  spec.constraints.anti_affinity_labels = {"enemy"};
  EXPECT_TRUE(SatisfiesConstraints(spec, a, view));
  EXPECT_FALSE(SatisfiesConstraints(spec, b, view));

  spec.constraints.colocate_with = "anchor";
  EXPECT_TRUE(SatisfiesConstraints(spec, a, view));
  spec.constraints.colocate_with = "enemy";
  spec.constraints.anti_affinity_labels.clear();
  EXPECT_FALSE(SatisfiesConstraints(spec, a, view));
  EXPECT_TRUE(SatisfiesConstraints(spec, b, view));
  spec.constraints.colocate_with.reset();

  spec.constraints.required_node_id = "node-a";
  EXPECT_TRUE(SatisfiesConstraints(spec, a, view));
  EXPECT_FALSE(SatisfiesConstraints(spec, b, view));
}

// ---- strategies ----

TEST(Placement, LeastLoadedPicksFewestRunning) {
  const auto view =
      View({Node("node-a", {"1", "2", "3"}), Node("node-b", {"4"}), Node("node-c", {"5", "6"})});
  EXPECT_EQ(Choose(Spec(), view), "node-b");
  auto ll = MakeLeastLoaded();
  EXPECT_EQ(ll->Name(), "least_loaded");
  EXPECT_DOUBLE_EQ(ll->Fitness(view.nodes[0], Spec(), view), 0.25);
  EXPECT_DOUBLE_EQ(ll->Fitness(view.nodes[1], Spec(), view), 0.5);
  EXPECT_DOUBLE_EQ(ll->Fitness(Node("empty"), Spec(), view), 1.0);
}

TEST(Placement, TiesGoToTheSmallestId) {
  auto view = View({Node("node-a", {"1"}), Node("node-b"), Node("node-c")});
  EXPECT_EQ(Choose(Spec(), view), "node-b");
  // Whatever the order of view.nodes.
  std::reverse(view.nodes.begin(), view.nodes.end());
  EXPECT_EQ(Choose(Spec(), view), "node-b");
  // Pinned to a node that is filtered out: every other node scores 1.
  auto spec = Spec();
  spec.constraints.required_classes = {"worker"};
  EXPECT_EQ(ChooseNode(spec, view, *MakePinned("node-zzz")).node, "node-a");
}

TEST(Placement, RandomIsReproducibleAndOrderIndependent) {
  auto view = View({Node("n1"), Node("n2"), Node("n3"), Node("n4")});
  auto reversed = view;
  std::reverse(reversed.nodes.begin(), reversed.nodes.end());
  auto s1 = MakeRandomPlacement(42);
  auto s1b = MakeRandomPlacement(42);
  EXPECT_EQ(s1->Name(), "random");
  for (int i = 0; i < 200; ++i) {
    const auto spec = Spec("label-" + std::to_string(i));
    const auto a = ChooseNode(spec, view, *s1).node;
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(ChooseNode(spec, view, *s1b).node, a) << i;
    EXPECT_EQ(ChooseNode(spec, reversed, *s1).node, a) << i;
    EXPECT_EQ(ChooseNode(spec, view, *s1).node, a) << i;  // again, same object
    const double f = s1->Fitness(view.nodes[0], spec, view);
    EXPECT_GT(f, 0.0);
    EXPECT_LE(f, 1.0);
  }
}

TEST(Placement, RandomDiffersAcrossSeeds) {
  const auto view = View({Node("n1"), Node("n2"), Node("n3")});
  auto s1 = MakeRandomPlacement(1);
  auto s2 = MakeRandomPlacement(2);
  int differ = 0;
  const int kLabels = 600;
  for (int i = 0; i < kLabels; ++i) {
    const auto spec = Spec("label-" + std::to_string(i));
    if (ChooseNode(spec, view, *s1).node != ChooseNode(spec, view, *s2).node) ++differ;
  }
  // Independent uniform choices over 3 nodes differ 2/3 of the time.
  EXPECT_GT(differ, kLabels / 2);
  EXPECT_LT(differ, kLabels * 5 / 6);
}

TEST(Placement, RandomSpreadsUniformly) {
  const auto view = View({Node("node-a"), Node("node-b"), Node("node-c")});
  for (std::uint64_t seed : {0ull, 7ull, 0xffffffffffffffffull}) {
    auto s = MakeRandomPlacement(seed);
    std::map<NodeId, int> count;
    for (int i = 0; i < 3000; ++i) {
      auto n = ChooseNode(Spec("actor-" + std::to_string(i)), view, *s).node;
      ASSERT_TRUE(n.has_value());
      ++count[*n];
    }
    ASSERT_EQ(count.size(), 3u) << seed;
    for (const auto& [id, c] : count) {
      EXPECT_GE(c, 750) << id << " seed " << seed;
      EXPECT_LE(c, 1250) << id << " seed " << seed;
    }
  }
}

TEST(Placement, PinnedPrefersItsNodeButFallsBack) {
  auto view = View({Node("node-a"), Node("node-b", {"1", "2", "3", "4"}), Node("node-c")});
  auto pinned = MakePinned("node-b");
  EXPECT_EQ(pinned->Name(), "pinned");
  EXPECT_EQ(ChooseNode(Spec(), view, *pinned).node, "node-b");  // despite its load
  EXPECT_DOUBLE_EQ(pinned->Fitness(view.nodes[1], Spec(), view), 2.0);
  EXPECT_DOUBLE_EQ(pinned->Fitness(view.nodes[0], Spec(), view), 1.0);

  // Excluded, dead, filtered out or unable to build the type: another node.
  EXPECT_EQ(ChooseNode(Spec(), view, *pinned, {"node-b"}).node, "node-a");
  EXPECT_EQ(ChooseNode(Spec(), view, *pinned, {"node-a", "node-b"}).node, "node-c");
  auto spec = Spec();
  spec.constraints.anti_affinity_labels = {"3"};
  EXPECT_EQ(ChooseNode(spec, view, *pinned).node, "node-a");
  view.nodes[1].actor_types = {"storage"};
  EXPECT_EQ(ChooseNode(Spec(), view, *pinned).node, "node-a");
  view.nodes[1].actor_types = {"worker"};
  view.nodes[1].alive = false;
  EXPECT_EQ(ChooseNode(Spec(), view, *pinned).node, "node-a");
}

TEST(Placement, ExcludedNodesAreNeverChosen) {
  const auto view = View({Node("node-a"), Node("node-b", {"1"}), Node("node-c", {"1", "2"})});
  EXPECT_EQ(Choose(Spec(), view), "node-a");
  EXPECT_EQ(Choose(Spec(), view, {"node-a"}), "node-b");
  EXPECT_EQ(Choose(Spec(), view, {"node-a", "node-b"}), "node-c");
  auto r = ChooseNode(Spec(), view, *MakeLeastLoaded(), {"node-a", "node-b", "node-c"});
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("0 live nodes"), std::string::npos) << r.reason;
  // Excluding an unknown node changes nothing.
  EXPECT_EQ(Choose(Spec(), view, {"node-z"}), "node-a");
}

class ZeroStrategy final : public PlacementStrategy {
 public:
  double Fitness(const NodeView& node, const ActorSpec&, const ClusterView&) const override {
    return node.id == "node-c" ? 0.5 : (node.id == "node-b" ? 0.0 : -1.0);
  }
  std::string Name() const override { return "zero"; }
};

TEST(Placement, NonPositiveFitnessIsNeverChosen) {
  const auto view = View({Node("node-a"), Node("node-b"), Node("node-c")});
  ZeroStrategy z;
  EXPECT_EQ(ChooseNode(Spec(), view, z).node, "node-c");
  auto r = ChooseNode(Spec(), view, z, {"node-c"});
  EXPECT_FALSE(r.node.has_value());
  EXPECT_NE(r.reason.find("strategy zero scored every remaining node <= 0"), std::string::npos)
      << r.reason;
}

TEST(Placement, MakeStrategyFollowsTheChoice) {
  EXPECT_EQ(MakeStrategy(StrategyChoice{}), nullptr);
  EXPECT_EQ(MakeStrategy({StrategyChoice::Kind::kLeastLoaded, 0, ""})->Name(), "least_loaded");
  auto pinned = MakeStrategy({StrategyChoice::Kind::kPinned, 0, "node-c"});
  ASSERT_NE(pinned, nullptr);
  EXPECT_EQ(pinned->Name(), "pinned");
  const auto view = View({Node("node-a"), Node("node-b"), Node("node-c", {"1"})});
  EXPECT_EQ(ChooseNode(Spec(), view, *pinned).node, "node-c");

  auto r5 = MakeStrategy({StrategyChoice::Kind::kRandom, 5, ""});
  ASSERT_NE(r5, nullptr);
  EXPECT_EQ(r5->Name(), "random");
  auto direct5 = MakeRandomPlacement(5);
  auto direct6 = MakeRandomPlacement(6);
  int differ6 = 0;
  for (int i = 0; i < 100; ++i) {
    const auto spec = Spec("l" + std::to_string(i));
    EXPECT_EQ(ChooseNode(spec, view, *r5).node, ChooseNode(spec, view, *direct5).node);
    if (ChooseNode(spec, view, *r5).node != ChooseNode(spec, view, *direct6).node) ++differ6;
  }
  EXPECT_GT(differ6, 0);  // the seed is carried over
}

}  // namespace
}  // namespace pynenc_cpp::cluster
