// Placement: which node runs an actor. Constraints (specs.h) filter the nodes;
// a PlacementStrategy scores the eligible ones; the highest score wins, ties go
// to the smallest node id, so every run over the same view decides the same.
//
// Thread safety: strategies are immutable and const; ChooseNode is a pure function.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "pynenc_cpp/cluster/specs.h"

namespace pynenc_cpp::cluster {

class PlacementStrategy {
 public:
  virtual ~PlacementStrategy() = default;
  PlacementStrategy() = default;
  PlacementStrategy(const PlacementStrategy&) = delete;
  PlacementStrategy& operator=(const PlacementStrategy&) = delete;

  // The fitness of `node` (already eligible) for `spec` in `view`: higher is
  // better; <= 0 means "do not place here".
  virtual double Fitness(const NodeView& node, const ActorSpec& spec,
                         const ClusterView& view) const = 0;
  virtual std::string Name() const = 0;
};

// 1 / (1 + actors placed on the node).
std::unique_ptr<PlacementStrategy> MakeLeastLoaded();
// A score in (0, 1] from SHA-256(seed | label | node id): uniform over nodes,
// reproducible for the same seed whatever the order of calls.
std::unique_ptr<PlacementStrategy> MakeRandomPlacement(std::uint64_t seed);
// 2 for `node`, 1 for every other node (a soft preference; a hard pin is
// PlacementConstraints::required_node_id).
std::unique_ptr<PlacementStrategy> MakePinned(NodeId node);
// The strategy a choice names; kDefault gives nullptr (use the coordinator's).
std::unique_ptr<PlacementStrategy> MakeStrategy(const StrategyChoice& choice);

// The decision for one spec: a node, or why there is none.
struct PlacementResult {
  std::optional<NodeId> node;
  // Set when `node` is empty, e.g. "no eligible node for 'x': 3 live nodes;
  // required_classes [worker] ruled out 1 (a1b2c3d4)". Every filter that ruled
  // nodes out is named with the nodes it ruled out.
  std::string reason;
};

// Filters `view.nodes` (alive nodes that registered spec.actor_type, not in
// `excluded`) by every constraint, scores the rest with `strategy` and returns
// the best. `view.nodes[i].running` must list the labels placed on each node
// (anti-affinity and colocation read it; the spec's own label is ignored there).
PlacementResult ChooseNode(const ActorSpec& spec, const ClusterView& view,
                           const PlacementStrategy& strategy,
                           const std::set<NodeId>& excluded = {});

// True when `node` satisfies every constraint of `spec` in `view` (used to
// check placements, e.g. by tests after convergence).
bool SatisfiesConstraints(const ActorSpec& spec, const NodeView& node, const ClusterView& view);

}  // namespace pynenc_cpp::cluster
