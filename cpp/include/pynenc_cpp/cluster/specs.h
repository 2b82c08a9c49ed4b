// What the Coordinator manages and what it reports: actor specs with placement
// constraints and a crash strategy, singleton specs with an anchor, the
// statuses of managed specs and the cluster view. docs/cluster/coordinator.md
// and docs/cluster/singletons.md specify their semantics.
//
// Thread safety: plain value types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp::cluster {

using pynenc_cpp::Generation;

// Limits every spec is checked against (ValidateActorSpec, ValidateSingletonSpec).
inline constexpr std::size_t kMaxLabelBytes = 1024;
inline constexpr std::size_t kMaxActorTypeBytes = 256;
inline constexpr std::size_t kMaxStateBytes = 128 * 1024;

// What the Coordinator does when the node running an actor fails or leaves.
struct CrashStrategy {
  enum class Kind : std::uint8_t {
    kRedistribute = 0,   // place it on another eligible node at once (the default)
    kWaitForReturn = 1,  // wait up to wait_ms for the same node id to come back, then redistribute
    kAbandon = 2,        // let it die with the node: it is never placed again
  };
  Kind kind = Kind::kRedistribute;
  std::int64_t wait_ms = 0;  // kWaitForReturn only; > 0

  static CrashStrategy Redistribute() { return {}; }
  static CrashStrategy WaitForReturn(std::int64_t ms) { return {Kind::kWaitForReturn, ms}; }
  static CrashStrategy Abandon() { return {Kind::kAbandon, 0}; }
  bool operator==(const CrashStrategy&) const = default;
};
std::string_view CrashStrategyName(CrashStrategy::Kind k);  // "redistribute", ...

// Hard filters on the nodes that may run an actor. Every one must hold.
struct PlacementConstraints {
  std::vector<std::string> required_classes;           // node_class in this list (empty: any)
  std::map<std::string, std::string> required_metadata;  // every pair present in node metadata
  std::vector<std::string> anti_affinity_labels;       // none of these actors placed on the node
  std::optional<std::string> colocate_with;            // only the node that runs this actor
  std::optional<NodeId> required_node_id;              // exactly this node; never relocated
  bool operator==(const PlacementConstraints&) const = default;
};

// Which PlacementStrategy (placement.h) scores the eligible nodes of one spec.
struct StrategyChoice {
  enum class Kind : std::uint8_t {
    kDefault = 0,      // the coordinator's default (ClusterOptions.placement)
    kLeastLoaded = 1,  // fewest actors placed
    kRandom = 2,       // seeded: the same seed, label and nodes give the same node
    kPinned = 3,       // prefer `node` when eligible (soft: any other eligible node otherwise)
  };
  Kind kind = Kind::kDefault;
  std::uint64_t seed = 0;  // kRandom
  NodeId node;             // kPinned
  bool operator==(const StrategyChoice&) const = default;
};
std::string_view StrategyName(StrategyChoice::Kind k);  // "default", "least_loaded", ...

struct ActorSpec {
  std::string label;          // unique cluster-wide (among actors, singletons and agents)
  std::string actor_type;     // a name nodes register a factory under
  std::string initial_state;  // bytes handed to the factory
  CrashStrategy crash_strategy;
  PlacementConstraints constraints;
  StrategyChoice strategy;
  bool operator==(const ActorSpec&) const = default;
};

// Which node owns a singleton.
struct SingletonAnchor {
  enum class Kind : std::uint8_t {
    kLeader = 0,  // the elected leader (the node running the Coordinator)
    kClass = 1,   // the oldest live node of class `value`
    kNode = 2,    // exactly node `value`; no owner while it is down
  };
  Kind kind = Kind::kLeader;
  std::string value;

  static SingletonAnchor Leader() { return {}; }
  static SingletonAnchor Class(std::string c) { return {Kind::kClass, std::move(c)}; }
  static SingletonAnchor Node(NodeId id) { return {Kind::kNode, std::move(id)}; }
  bool operator==(const SingletonAnchor&) const = default;
};
std::string_view AnchorName(SingletonAnchor::Kind k);  // "leader", "class", "node"

struct SingletonSpec {
  std::string label;
  std::string actor_type;
  std::string state;  // bytes handed to the factory
  SingletonAnchor anchor;
  // A graceful move stops the old owner, waits for it to stop (at most this
  // long), then starts the new owner.
  std::int64_t drain_timeout_ms = 5'000;
  bool operator==(const SingletonSpec&) const = default;
};

enum class SpecKind : std::uint8_t { kActor = 0, kSingleton = 1, kAgent = 2 };
std::string_view SpecKindName(SpecKind k);  // "actor", "singleton", "agent"

enum class SpecState : std::uint8_t {
  kPending = 0,           // being placed, started or moved (reason says which)
  kRunning = 1,           // its owner reported it active under the current generation
  kWaitingForReturn = 2,  // its node failed; WaitForReturn is waiting for that node id
  kUnplaced = 3,          // no eligible node, abandoned, or a bad spec (reason says which)
};
std::string_view SpecStateName(SpecState s);  // "pending", "running", ...

struct SpecStatus {
  std::string label;
  SpecKind kind = SpecKind::kActor;
  SpecState state = SpecState::kPending;
  std::optional<NodeId> node;  // current (or last) owner
  Generation generation;       // {0,0}: never placed
  std::string reason;          // why it is not running; empty when running
  bool operator==(const SpecStatus&) const = default;
};

// One node as the Coordinator sees it.
struct NodeView {
  NodeId id;
  Address address;
  std::uint64_t incarnation = 0;
  MemberState state = MemberState::kAlive;
  bool alive = false;  // live in the leader's view (Alive or Suspect)
  std::string node_class;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> actor_types;  // its spawn registry, as last reported
  std::vector<std::string> running;      // labels placed on it (sorted)
  bool operator==(const NodeView&) const = default;
};

struct ClusterView {
  std::optional<NodeId> leader;
  std::vector<NodeView> nodes;  // every known node, dead and left ones too, by id
  int alive_count = 0;
  int total_count = 0;
  bool operator==(const ClusterView&) const = default;
};

// Where a label runs, as a node's copy of the leader's directory says (every
// node keeps one; it lags the leader by a message).
struct LabelPlacement {
  std::string label;
  SpecKind kind = SpecKind::kActor;
  SpecState state = SpecState::kPending;
  std::optional<NodeId> node;
  Address address;  // the node's; empty when none
  Generation generation;
  std::string reason;
  bool operator==(const LabelPlacement&) const = default;
};

// The rules of a spec, kept here only: pynenc_cpp.cluster's dataclasses call
// them when they are made (after converting their fields), and the leader calls
// them on every spec it is sent. Each returns kInvalidArgument with the message
// the Python user sees, naming the field by its Python name ("wait_s",
// "drain_timeout_s": times shown in seconds).
//
// WaitForReturn without a positive wait.
Status ValidateCrashStrategy(const CrashStrategy& strategy);
// An empty class, anti-affinity label or metadata key; an empty (not absent)
// colocate_with or required_node_id.
Status ValidatePlacementConstraints(const PlacementConstraints& constraints);
// A Class/Node anchor without a value.
Status ValidateSingletonAnchor(const SingletonAnchor& anchor);
// Empty or oversized label / actor type, oversized state, the crash strategy's
// and constraints' rules, kPinned without a node, a constraint naming the
// spec's own label.
Status ValidateActorSpec(const ActorSpec& spec);
// Empty or oversized label / actor type, oversized state, the anchor's rule,
// drain_timeout_ms <= 0 or above kMaxDrainTimeoutMs.
Status ValidateSingletonSpec(const SingletonSpec& spec);

}  // namespace pynenc_cpp::cluster
