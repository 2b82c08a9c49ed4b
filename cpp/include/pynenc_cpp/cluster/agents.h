// Agent families (after Wolverine's IAgentFamily): a family names a set of
// agents by URI ("scheme://name"); each node says which of them it can run; the
// leader assigns every agent to exactly one node and keeps the grid even.
// Agents are managed like every other label: leased, generation-fenced, moved
// with a drain. docs/cluster/coordinator.md ("Agent families").
//
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

enum class Distribution : std::uint8_t {
  kEvenly = 0,              // any node that registered the family
  kEvenlyByCapability = 1,  // only nodes that list the agent as supported (blue/green)
};
std::string_view DistributionName(Distribution d);  // "evenly", "evenly_by_capability"

// A family as one node registers it.
struct AgentFamily {
  std::string scheme;               // agents' URIs start with "<scheme>://"
  std::vector<std::string> agents;  // every agent this node knows of
  // Agents this node can run; nullopt: every agent it knows of.
  std::optional<std::vector<std::string>> supported;
  Distribution distribution = Distribution::kEvenly;
  std::int64_t drain_timeout_ms = 5'000;  // a rebalancing move waits this long for the old owner
  bool operator==(const AgentFamily&) const = default;
};

// kInvalidArgument naming the problem: an empty or oversized scheme (at most
// kMaxActorTypeBytes) or one with ":/" in it, an agent URI not starting with
// "<scheme>://", a supported URI not among agents, duplicates, drain_timeout_ms
// <= 0 or above kMaxDrainTimeoutMs. Like the spec checks (specs.h), the rules
// pynenc_cpp.cluster.AgentFamily applies when it is made.
Status ValidateAgentFamily(const AgentFamily& family);

// One node of the grid: its id and the agents it may run (nullopt: any agent of
// the family).
struct GridNode {
  NodeId id;
  std::optional<std::set<std::string>> supported;
};

// The assignment grid's even distribution. `current` maps agents to the nodes
// running them (entries for unknown agents or for nodes not in `nodes` are
// ignored). Returns the target assignment of every agent that has a candidate
// node (a node of `nodes` that may run it):
//  1. an agent whose current node is still a candidate stays there;
//  2. every other agent goes to its least-loaded candidate (ties: smallest id),
//     agents taken in URI order;
//  3. while some agent could move from a node X to a candidate Y with
//     load(X) >= load(Y) + 2, the agent (smallest URI) from the most loaded such X
//     moves to the least loaded such Y.
// So a balanced grid returns `current` unchanged: a steady grid issues no
// commands. Deterministic: the same inputs give the same output.
std::map<std::string, NodeId> DistributeEvenly(const std::vector<std::string>& agents,
                                               const std::vector<GridNode>& nodes,
                                               const std::map<std::string, NodeId>& current);

}  // namespace pynenc_cpp::cluster
