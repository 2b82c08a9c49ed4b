// What a node runs for the Coordinator: instances of actor types (actors,
// singletons, agents), built by factories the node registers. An instance is
// handed its generation and runs only while its node holds the label's owner
// lease, sees quorum and has been stable for the stabilization window.
// docs/cluster/coordinator.md ("Hosting").
//
// Thread safety: an ActorInstance is only called from its node's callback
// thread, one call at a time (ClusterNode, node.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "pynenc_cpp/cluster/specs.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

// What a factory gets.
struct InstanceContext {
  NodeId node;
  std::string label;
  SpecKind kind = SpecKind::kActor;
  std::string actor_type;  // agents: the family scheme
  std::string state;       // the spec's initial state (empty for agents)
  Generation generation;   // stamp fenced writes with generation.Packed()
};

class ActorInstance {
 public:
  virtual ~ActorInstance() = default;
  // The node stops the instance: reason "stopped by the coordinator: ...",
  // "moving to <node>", "lease expired", "lost quorum" or "shutdown". The
  // instance's lifetime ends when this returns; keep it short (a stop that
  // outlasts the label's drain timeout lets its lease run out, and the storage
  // fence is then what protects the successor).
  virtual void Stop(std::string_view reason) = 0;
  // The label was granted again to this node under a higher generation (same
  // term, higher seq): use it for later fenced writes.
  virtual void OnGeneration(Generation /*generation*/) {}
  // A message sent to the label (ClusterNode::Ask); the result is the reply.
  // Default: kInvalidArgument "this actor takes no messages".
  virtual Result<std::string> OnMessage(const std::string& payload);
};

// Builds an instance; throwing (or returning nullptr) fails the spawn, which is
// acknowledged as failed and retried by the Coordinator later.
using ActorFactory = std::function<std::unique_ptr<ActorInstance>(const InstanceContext&)>;

}  // namespace pynenc_cpp::cluster
