#include "pynenc_cpp/cluster/specs.h"

#include <algorithm>

namespace pynenc_cpp::cluster {

std::string_view CrashStrategyName(CrashStrategy::Kind k) {
  switch (k) {
    case CrashStrategy::Kind::kRedistribute:
      return "redistribute";
    case CrashStrategy::Kind::kWaitForReturn:
      return "wait_for_return";
    case CrashStrategy::Kind::kAbandon:
      return "abandon";
  }
  return "unknown";
}

std::string_view StrategyName(StrategyChoice::Kind k) {
  switch (k) {
    case StrategyChoice::Kind::kDefault:
      return "default";
    case StrategyChoice::Kind::kLeastLoaded:
      return "least_loaded";
    case StrategyChoice::Kind::kRandom:
      return "random";
    case StrategyChoice::Kind::kPinned:
      return "pinned";
  }
  return "unknown";
}

std::string_view AnchorName(SingletonAnchor::Kind k) {
  switch (k) {
    case SingletonAnchor::Kind::kLeader:
      return "leader";
    case SingletonAnchor::Kind::kClass:
      return "class";
    case SingletonAnchor::Kind::kNode:
      return "node";
  }
  return "unknown";
}

std::string_view SpecKindName(SpecKind k) {
  switch (k) {
    case SpecKind::kActor:
      return "actor";
    case SpecKind::kSingleton:
      return "singleton";
    case SpecKind::kAgent:
      return "agent";
  }
  return "unknown";
}

std::string_view SpecStateName(SpecState s) {
  switch (s) {
    case SpecState::kPending:
      return "pending";
    case SpecState::kRunning:
      return "running";
    case SpecState::kWaitingForReturn:
      return "waiting_for_return";
    case SpecState::kUnplaced:
      return "unplaced";
  }
  return "unknown";
}

namespace {

Status CheckName(std::string_view field, const std::string& value, std::size_t max) {
  if (value.empty()) return Status::InvalidArgument(std::string(field) + ": must not be empty");
  if (value.size() > max) {
    return Status::InvalidArgument(std::string(field) + ": " + std::to_string(value.size()) +
                                   " bytes, at most " + std::to_string(max));
  }
  return Status::Ok();
}

Status CheckCommon(const std::string& label, const std::string& actor_type,
                   const std::string& state, std::string_view state_field) {
  if (auto s = CheckName("label", label, kMaxLabelBytes); !s.ok()) return s;
  if (auto s = CheckName("actor_type", actor_type, kMaxActorTypeBytes); !s.ok()) return s;
  if (state.size() > kMaxStateBytes) {
    return Status::InvalidArgument(std::string(state_field) + ": " + std::to_string(state.size()) +
                                   " bytes, at most " + std::to_string(kMaxStateBytes));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateActorSpec(const ActorSpec& spec) {
  if (auto s = CheckCommon(spec.label, spec.actor_type, spec.initial_state, "initial_state");
      !s.ok()) {
    return s;
  }
  if (spec.crash_strategy.kind == CrashStrategy::Kind::kWaitForReturn &&
      spec.crash_strategy.wait_ms <= 0) {
    return Status::InvalidArgument("crash_strategy: WaitForReturn needs a duration > 0 (got " +
                                   std::to_string(spec.crash_strategy.wait_ms) + " ms)");
  }
  if (spec.strategy.kind == StrategyChoice::Kind::kPinned && spec.strategy.node.empty()) {
    return Status::InvalidArgument("strategy: Pinned needs a node id");
  }
  const auto& c = spec.constraints;
  if (c.colocate_with && *c.colocate_with == spec.label) {
    return Status::InvalidArgument("constraints.colocate_with: names the spec's own label '" +
                                   spec.label + "'");
  }
  if (std::find(c.anti_affinity_labels.begin(), c.anti_affinity_labels.end(), spec.label) !=
      c.anti_affinity_labels.end()) {
    return Status::InvalidArgument("constraints.anti_affinity_labels: names the spec's own label '" +
                                   spec.label + "'");
  }
  if (c.required_node_id && c.required_node_id->empty()) {
    return Status::InvalidArgument("constraints.required_node_id: must not be empty");
  }
  return Status::Ok();
}

Status ValidateSingletonSpec(const SingletonSpec& spec) {
  if (auto s = CheckCommon(spec.label, spec.actor_type, spec.state, "state"); !s.ok()) return s;
  if (spec.anchor.kind != SingletonAnchor::Kind::kLeader && spec.anchor.value.empty()) {
    return Status::InvalidArgument("anchor: " + std::string(AnchorName(spec.anchor.kind)) +
                                   " anchor needs a value");
  }
  if (spec.drain_timeout_ms <= 0 || spec.drain_timeout_ms > kMaxDrainTimeoutMs) {
    return Status::InvalidArgument("drain_timeout_ms: must be > 0 and <= " +
                                   std::to_string(kMaxDrainTimeoutMs) + " (got " +
                                   std::to_string(spec.drain_timeout_ms) + ")");
  }
  return Status::Ok();
}

}  // namespace pynenc_cpp::cluster
