// Agent family unit tests: ValidateAgentFamily and the assignment grid's even
// distribution (DistributeEvenly), including a property test over seeded
// random grids.
#include "pynenc_cpp/cluster/agents.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/specs.h"  // kMaxActorTypeBytes

namespace pynenc_cpp::cluster {
namespace {

// ---- ValidateAgentFamily ----

AgentFamily Family() {
  AgentFamily f;
  f.scheme = "queue";
  f.agents = {"queue://a", "queue://b", "queue://c"};
  return f;
}

void ExpectInvalid(const AgentFamily& f, const std::string& needle) {
  const Status s = ValidateAgentFamily(f);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(AgentFamilyValidate, AcceptsWellFormedFamilies) {
  EXPECT_TRUE(ValidateAgentFamily(Family()).ok());
  auto f = Family();
  f.supported = std::vector<std::string>{"queue://b"};
  f.distribution = Distribution::kEvenlyByCapability;
  EXPECT_TRUE(ValidateAgentFamily(f).ok());
  f.supported = std::vector<std::string>{};  // supports none of them
  EXPECT_TRUE(ValidateAgentFamily(f).ok());
  f.agents.clear();
  EXPECT_TRUE(ValidateAgentFamily(f).ok());
  f = Family();
  f.drain_timeout_ms = 1;
  EXPECT_TRUE(ValidateAgentFamily(f).ok());
  EXPECT_EQ(DistributionName(Distribution::kEvenly), "evenly");
  EXPECT_EQ(DistributionName(Distribution::kEvenlyByCapability), "evenly_by_capability");
}

TEST(AgentFamilyValidate, RejectsBadSchemes) {
  auto f = Family();
  f.scheme = "";
  ExpectInvalid(f, "scheme must be a non-empty str, got ''");
  f.scheme = std::string(kMaxActorTypeBytes + 1, 'q');
  ExpectInvalid(f, "scheme must be at most 256 bytes, got 257");
  f.scheme = "a/b";
  ExpectInvalid(f, "scheme");
  f.scheme = "a:/b";
  ExpectInvalid(f, "scheme");
  f.scheme = "queue://";
  ExpectInvalid(f, "scheme");
}

TEST(AgentFamilyValidate, RejectsBadAgents) {
  auto f = Family();
  f.agents = {"queue://a", "topic://b"};
  ExpectInvalid(f, "topic://b");
  f.agents = {"queue:/a"};
  ExpectInvalid(f, "agents");
  f.agents = {"queue://"};  // no name after the prefix
  ExpectInvalid(f, "agents");
  f.agents = {"queue"};
  ExpectInvalid(f, "agents");
  f.agents = {"xqueue://a"};
  ExpectInvalid(f, "agents");
  f.agents = {"queue://a", "queue://b", "queue://a"};
  ExpectInvalid(f, "duplicate 'queue://a'");
  f.agents = {"queue://a", ""};
  ExpectInvalid(f, "agents must contain non-empty str, got ''");
  f = Family();
  f.supported = std::vector<std::string>{""};
  ExpectInvalid(f, "supported must contain non-empty str, got ''");
}

TEST(AgentFamilyValidate, RejectsBadSupported) {
  auto f = Family();
  f.supported = std::vector<std::string>{"queue://a", "queue://z"};
  ExpectInvalid(f, "supported: 'queue://z'");
  f.supported = std::vector<std::string>{"queue://a", "queue://a"};
  ExpectInvalid(f, "supported: duplicate");
}

TEST(AgentFamilyValidate, RejectsADrainOutOfRange) {
  auto f = Family();
  f.drain_timeout_ms = 0;
  ExpectInvalid(f, "drain_timeout_s must be > 0 and <= 86400 (a day), got 0");
  f.drain_timeout_ms = -5;
  ExpectInvalid(f, "got -0.005");
  f.drain_timeout_ms = kMaxDrainTimeoutMs + 1;
  ExpectInvalid(f, "got 86400.001");
}

// ---- DistributeEvenly ----

using Assignment = std::map<std::string, NodeId>;

GridNode Any(NodeId id) { return GridNode{std::move(id), std::nullopt}; }
GridNode Only(NodeId id, std::set<std::string> s) { return GridNode{std::move(id), std::move(s)}; }

std::vector<std::string> Agents(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    out.push_back("q://" + std::string(1, static_cast<char>('a' + i)));
  }
  return out;
}

std::map<NodeId, int> Loads(const Assignment& a, const std::vector<GridNode>& nodes) {
  std::map<NodeId, int> load;
  for (const auto& n : nodes) load[n.id] = 0;
  for (const auto& [agent, node] : a) ++load[node];
  return load;
}

int Spread(const std::map<NodeId, int>& load) {
  int lo = 1 << 30, hi = 0;
  for (const auto& [id, l] : load) {
    lo = std::min(lo, l);
    hi = std::max(hi, l);
  }
  return load.empty() ? 0 : hi - lo;
}

int Moves(const Assignment& before, const Assignment& after) {
  int moves = 0;
  for (const auto& [agent, node] : before) {
    auto it = after.find(agent);
    if (it != after.end() && it->second != node) ++moves;
  }
  return moves;
}

TEST(DistributeEvenly, BalancedAssignmentIsReturnedUnchanged) {
  const auto agents = Agents(5);
  const std::vector<GridNode> nodes = {Any("n1"), Any("n2")};
  // Not the order a fresh distribution would pick.
  const Assignment current = {
      {"q://a", "n2"}, {"q://b", "n2"}, {"q://c", "n1"}, {"q://d", "n2"}, {"q://e", "n1"}};
  EXPECT_EQ(DistributeEvenly(agents, nodes, current), current);
  // With capabilities that allow it, too.
  const std::vector<GridNode> capable = {Only("n1", {"q://c", "q://e", "q://a"}),
                                         Only("n2", {"q://a", "q://b", "q://d"})};
  EXPECT_EQ(DistributeEvenly(agents, capable, current), current);
}

TEST(DistributeEvenly, UnassignedAgentsGoLeastLoadedWithIdTieBreak) {
  const std::vector<GridNode> nodes = {Any("n3"), Any("n1"), Any("n2")};
  const Assignment expected = {
      {"q://a", "n1"}, {"q://b", "n2"}, {"q://c", "n3"}, {"q://d", "n1"}, {"q://e", "n2"}};
  EXPECT_EQ(DistributeEvenly(Agents(5), nodes, {}), expected);

  // n1 already runs two; the new ones fill n2 and n3 (n2 first).
  const Assignment current = {{"q://a", "n1"}, {"q://b", "n1"}};
  const Assignment expected2 = {
      {"q://a", "n1"}, {"q://b", "n1"}, {"q://c", "n2"}, {"q://d", "n3"}, {"q://e", "n2"}};
  EXPECT_EQ(DistributeEvenly(Agents(5), nodes, current), expected2);
}

TEST(DistributeEvenly, RespectsCapabilities) {
  const std::vector<GridNode> nodes = {Only("n1", {"q://a"}), Only("n2", {"q://b", "q://c"}),
                                       Any("n3"), Only("n4", {})};
  const auto out = DistributeEvenly(Agents(5), nodes, {});
  EXPECT_EQ(out.at("q://a"), "n1");  // least loaded of n1, n3: n1 (tie, smaller id)
  EXPECT_EQ(out.at("q://b"), "n2");
  // c first goes to n3 (0 < 1); d and e can only run on n3 (3 agents), so the
  // rebalancing moves c to n2.
  EXPECT_EQ(out.at("q://c"), "n2");
  EXPECT_EQ(out.at("q://d"), "n3");
  EXPECT_EQ(out.at("q://e"), "n3");
  EXPECT_EQ(Loads(out, nodes), (std::map<NodeId, int>{{"n1", 1}, {"n2", 2}, {"n3", 2}, {"n4", 0}}));
  for (const auto& [agent, node] : out) EXPECT_NE(node, "n4") << agent;
}

TEST(DistributeEvenly, AgentsWithoutCandidatesAreLeftOut) {
  const std::vector<GridNode> nodes = {Only("n1", {"q://a"}), Only("n2", {"q://b"})};
  const Assignment current = {{"q://c", "n1"}};  // n1 may not run c
  const auto out = DistributeEvenly(Agents(3), nodes, current);
  const Assignment expected = {{"q://a", "n1"}, {"q://b", "n2"}};
  EXPECT_EQ(out, expected);
  EXPECT_TRUE(DistributeEvenly(Agents(3), {}, current).empty());
}

TEST(DistributeEvenly, AgentOnANodeThatNoLongerSupportsItMoves) {
  const std::vector<GridNode> nodes = {Only("blue", {"q://a"}), Only("green", {"q://a", "q://b"})};
  const Assignment current = {{"q://a", "blue"}, {"q://b", "blue"}};
  const auto out = DistributeEvenly(Agents(2), nodes, current);
  EXPECT_EQ(out.at("q://a"), "blue");
  EXPECT_EQ(out.at("q://b"), "green");
}

TEST(DistributeEvenly, UnknownAgentsInCurrentAreIgnored) {
  const Assignment current = {{"q://a", "n1"}, {"q://zz", "n1"}, {"other://x", "n2"}};
  const auto out = DistributeEvenly(Agents(2), {Any("n1"), Any("n2")}, current);
  const Assignment expected = {{"q://a", "n1"}, {"q://b", "n2"}};
  EXPECT_EQ(out, expected);
}

TEST(DistributeEvenly, AddingANodeMovesTheMinimum) {
  const auto agents = Agents(6);
  const Assignment current = {{"q://a", "n1"}, {"q://b", "n2"}, {"q://c", "n1"},
                              {"q://d", "n2"}, {"q://e", "n1"}, {"q://f", "n2"}};
  const std::vector<GridNode> three = {Any("n1"), Any("n2"), Any("n3")};
  const auto out = DistributeEvenly(agents, three, current);
  EXPECT_EQ(Moves(current, out), 2);
  EXPECT_EQ(Loads(out, three), (std::map<NodeId, int>{{"n1", 2}, {"n2", 2}, {"n3", 2}}));

  // 7 agents, 4 + 3, a third node: 2 moves give 3/2/2.
  auto agents7 = Agents(7);
  auto current7 = current;
  current7["q://g"] = "n1";
  const auto out7 = DistributeEvenly(agents7, three, current7);
  EXPECT_EQ(Moves(current7, out7), 2);
  EXPECT_LE(Spread(Loads(out7, three)), 1);
  EXPECT_EQ(Loads(out7, three).at("n3"), 2);

  // 12 agents on 2 nodes, two nodes added: 6 moves give 3 each.
  const auto agents12 = Agents(12);
  Assignment current12;
  for (int i = 0; i < 12; ++i) current12[agents12[i]] = i % 2 ? "n2" : "n1";
  const std::vector<GridNode> four = {Any("n1"), Any("n2"), Any("n3"), Any("n4")};
  const auto out12 = DistributeEvenly(agents12, four, current12);
  EXPECT_EQ(Moves(current12, out12), 6);
  EXPECT_EQ(Spread(Loads(out12, four)), 0);
}

TEST(DistributeEvenly, MovesOnlyWhereCapabilitiesAllow) {
  // n3 may only run q://a and q://b: the spread cannot go below what that allows.
  const auto agents = Agents(6);
  Assignment current;
  for (const auto& a : agents) current[a] = "n1";
  const std::vector<GridNode> nodes = {Any("n1"), Only("n3", {"q://a", "q://b"})};
  const auto out = DistributeEvenly(agents, nodes, current);
  EXPECT_EQ(out.at("q://a"), "n3");
  EXPECT_EQ(out.at("q://b"), "n3");
  EXPECT_EQ(Moves(current, out), 2);
  EXPECT_EQ(Loads(out, nodes), (std::map<NodeId, int>{{"n1", 4}, {"n3", 2}}));
}

TEST(DistributeEvenly, NodesThatLeftLoseTheirAgents) {
  const auto agents = Agents(6);
  const Assignment current = {{"q://a", "n1"}, {"q://b", "n2"}, {"q://c", "gone"},
                              {"q://d", "n1"}, {"q://e", "n2"}, {"q://f", "gone"}};
  const std::vector<GridNode> nodes = {Any("n1"), Any("n2")};
  const auto out = DistributeEvenly(agents, nodes, current);
  ASSERT_EQ(out.size(), 6u);
  for (const auto& [agent, node] : out) EXPECT_NE(node, "gone") << agent;
  EXPECT_EQ(Moves(current, out), 2);  // only the two orphans
  EXPECT_EQ(out.at("q://c"), "n1");
  EXPECT_EQ(out.at("q://f"), "n2");
}

TEST(DistributeEvenly, IsDeterministicWhateverTheInputOrder) {
  std::mt19937_64 rng(7);
  auto agents = Agents(20);
  std::vector<GridNode> nodes = {Any("n1"), Only("n2", {"q://a", "q://c", "q://e", "q://g"}),
                                 Any("n3"), Any("n4")};
  const Assignment current = {{"q://a", "n1"}, {"q://b", "n1"}, {"q://c", "n1"},
                              {"q://d", "n1"}, {"q://e", "n3"}, {"q://k", "n9"}};
  const auto ref = DistributeEvenly(agents, nodes, current);
  EXPECT_EQ(DistributeEvenly(agents, nodes, current), ref);
  for (int i = 0; i < 20; ++i) {
    std::shuffle(agents.begin(), agents.end(), rng);
    std::shuffle(nodes.begin(), nodes.end(), rng);
    EXPECT_EQ(DistributeEvenly(agents, nodes, current), ref) << i;
  }
  // Duplicate agents in the input count once.
  auto twice = agents;
  twice.insert(twice.end(), agents.begin(), agents.end());
  EXPECT_EQ(DistributeEvenly(twice, nodes, current), ref);
}

// ---- property test ----

struct Grid {
  std::vector<std::string> agents;
  std::vector<GridNode> nodes;
  Assignment current;
  bool capabilities = false;
};

Grid RandomGrid(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Grid g;
  const int n_agents = pick(0, 40);
  for (int i = 0; i < n_agents; ++i) g.agents.push_back("q://agent-" + std::to_string(i));
  const int n_nodes = pick(1, 7);
  g.capabilities = pick(0, 1) == 1;
  for (int i = 0; i < n_nodes; ++i) {
    GridNode n{"node-" + std::to_string(i), std::nullopt};
    if (g.capabilities && pick(0, 2) > 0) {
      std::set<std::string> s;
      for (const auto& a : g.agents) {
        if (pick(0, 99) < 60) s.insert(a);
      }
      n.supported = std::move(s);
    }
    g.nodes.push_back(std::move(n));
  }
  for (const auto& a : g.agents) {
    const int r = pick(0, 9);
    if (r < 2) continue;  // unassigned
    // Mostly skewed towards the first nodes; sometimes a node that left.
    if (r == 2) {
      g.current[a] = "node-gone";
    } else {
      g.current[a] = "node-" + std::to_string(std::min(pick(0, n_nodes), pick(0, n_nodes)));
    }
  }
  if (pick(0, 4) == 0) g.current["q://not-an-agent"] = "node-0";
  std::shuffle(g.agents.begin(), g.agents.end(), rng);
  std::shuffle(g.nodes.begin(), g.nodes.end(), rng);
  return g;
}

bool Candidate(const Grid& g, const std::string& agent, const NodeId& node) {
  for (const auto& n : g.nodes) {
    if (n.id == node) return !n.supported || n.supported->count(agent) > 0;
  }
  return false;
}

// The fewest moves of placed agents that reach a spread <= 1 (no capabilities):
// targets floor/ceil of the average, the ceil ones on the most loaded nodes.
int MinimumMoves(const std::map<NodeId, int>& kept, int total) {
  std::vector<int> loads;
  for (const auto& [id, l] : kept) loads.push_back(l);
  std::sort(loads.rbegin(), loads.rend());
  const int n = static_cast<int>(loads.size());
  int moves = 0;
  for (int i = 0; i < n; ++i) {
    const int target = total / n + (i < total % n ? 1 : 0);
    moves += std::max(0, loads[i] - target);
  }
  return moves;
}

TEST(DistributeEvenly, PropertiesHoldOnRandomGrids) {
  int checked_balanced = 0, checked_keep = 0, checked_min = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    std::mt19937_64 rng(seed);
    const Grid g = RandomGrid(rng);
    const auto out = DistributeEvenly(g.agents, g.nodes, g.current);
    SCOPED_TRACE("seed " + std::to_string(seed));

    // Every agent with a candidate is assigned to a candidate; nothing else is.
    for (const auto& a : g.agents) {
      bool has = false;
      for (const auto& n : g.nodes) has = has || Candidate(g, a, n.id);
      auto it = out.find(a);
      if (!has) {
        EXPECT_EQ(it, out.end()) << a;
        continue;
      }
      ASSERT_NE(it, out.end()) << a;
      EXPECT_TRUE(Candidate(g, a, it->second)) << a << " on " << it->second;
    }
    for (const auto& [a, node] : out) {
      EXPECT_NE(std::find(g.agents.begin(), g.agents.end(), a), g.agents.end()) << a;
    }

    // No move would lower the spread by 2.
    const auto load = Loads(out, g.nodes);
    for (const auto& [a, from] : out) {
      for (const auto& n : g.nodes) {
        if (n.id == from || !Candidate(g, a, n.id)) continue;
        EXPECT_LT(load.at(from), load.at(n.id) + 2)
            << a << " could move " << from << " -> " << n.id;
      }
    }
    if (!g.capabilities) {
      EXPECT_LE(Spread(load), 1);
    }
    // A steady grid issues no commands: the output is a fixed point.
    EXPECT_EQ(DistributeEvenly(g.agents, g.nodes, out), out);

    // Agents on a candidate node (kept), and their nodes' loads.
    Assignment kept;
    std::map<NodeId, int> kept_load;
    for (const auto& n : g.nodes) kept_load[n.id] = 0;
    for (const auto& a : g.agents) {
      auto it = g.current.find(a);
      if (it != g.current.end() && Candidate(g, a, it->second)) {
        kept[a] = it->second;
        ++kept_load[it->second];
      }
    }

    // A balanced grid (everyone kept, nothing could move by 2) stays as it is.
    bool all_kept = true, balanced = true;
    for (const auto& a : g.agents) {
      bool has = false;
      for (const auto& n : g.nodes) has = has || Candidate(g, a, n.id);
      if (has && !kept.count(a)) all_kept = false;
    }
    for (const auto& [a, from] : kept) {
      for (const auto& n : g.nodes) {
        if (n.id != from && Candidate(g, a, n.id) && kept_load.at(from) >= kept_load.at(n.id) + 2) {
          balanced = false;
        }
      }
    }
    if (all_kept && balanced) {
      ++checked_balanced;
      EXPECT_EQ(out, kept);
    }

    if (!g.capabilities) {
      // Agents on a node no more than one above the least loaded keep it.
      int lo = 1 << 30;
      for (const auto& [id, l] : kept_load) lo = std::min(lo, l);
      for (const auto& [a, node] : kept) {
        if (kept_load.at(node) <= lo + 1) {
          ++checked_keep;
          EXPECT_EQ(out.at(a), node) << a;
        }
      }
      // And no more agents move than needed.
      const int total = static_cast<int>(out.size());
      std::map<NodeId, int> placed_kept = kept_load;
      // Unplaced agents fill the least loaded nodes first: they never need a
      // placed agent to move, so only the placed excess counts.
      const int min_moves = MinimumMoves(placed_kept, total);
      EXPECT_EQ(Moves(kept, out), min_moves);
      ++checked_min;
    }
  }
  // The generator exercises every branch.
  EXPECT_GT(checked_balanced, 10);
  EXPECT_GT(checked_keep, 100);
  EXPECT_GT(checked_min, 100);
}

}  // namespace
}  // namespace pynenc_cpp::cluster
