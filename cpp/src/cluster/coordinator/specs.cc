#include "pynenc_cpp/cluster/specs.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cluster/coordinator/spec_checks.h"

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

namespace spec_checks {

std::string Seconds(std::int64_t ms) {
  const bool negative = ms < 0;
  // Magnitude as unsigned: -INT64_MIN does not fit in int64.
  const std::uint64_t a =
      negative ? 0 - static_cast<std::uint64_t>(ms) : static_cast<std::uint64_t>(ms);
  std::string out = (negative ? "-" : "") + std::to_string(a / 1000);
  if (const std::uint64_t frac = a % 1000; frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

Status Name(std::string_view field, const std::string& value, std::size_t max) {
  if (value.empty()) {
    return Status::InvalidArgument(std::string(field) + " must be a non-empty str, got ''");
  }
  if (value.size() > max) {
    return Status::InvalidArgument(std::string(field) + " must be at most " + std::to_string(max) +
                                   " bytes, got " + std::to_string(value.size()));
  }
  return Status::Ok();
}

Status NonEmptyItems(std::string_view field, const std::vector<std::string>& items) {
  for (const std::string& item : items) {
    if (item.empty()) {
      return Status::InvalidArgument(std::string(field) + " must contain non-empty str, got ''");
    }
  }
  return Status::Ok();
}

Status DrainTimeout(std::string_view field, std::int64_t ms) {
  if (ms > 0 && ms <= kMaxDrainTimeoutMs) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " must be > 0 and <= " +
                                 Seconds(kMaxDrainTimeoutMs) + " (a day), got " + Seconds(ms));
}

}  // namespace spec_checks

namespace {

Status State(std::string_view field, const std::string& state) {
  if (state.size() <= kMaxStateBytes) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " must be at most " +
                                 std::to_string(kMaxStateBytes) + " bytes, got " +
                                 std::to_string(state.size()));
}

Status NoneOrNonEmpty(std::string_view field, const std::optional<std::string>& value) {
  if (!value || !value->empty()) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " must be None or a non-empty str, got ''");
}

// What actor and singleton specs share: their label, actor type and state.
Status Common(const std::string& label, const std::string& actor_type, std::string_view state_field,
              const std::string& state) {
  if (Status s = spec_checks::Name("label", label, kMaxLabelBytes); !s.ok()) return s;
  if (Status s = spec_checks::Name("actor_type", actor_type, kMaxActorTypeBytes); !s.ok()) {
    return s;
  }
  return State(state_field, state);
}

}  // namespace

Status ValidateCrashStrategy(const CrashStrategy& strategy) {
  if (strategy.kind == CrashStrategy::Kind::kWaitForReturn && strategy.wait_ms <= 0) {
    return Status::InvalidArgument("wait_for_return needs wait_s > 0, got " +
                                   spec_checks::Seconds(strategy.wait_ms));
  }
  return Status::Ok();
}

Status ValidatePlacementConstraints(const PlacementConstraints& c) {
  if (Status s = spec_checks::NonEmptyItems("required_classes", c.required_classes); !s.ok())
    return s;
  if (Status s = spec_checks::NonEmptyItems("anti_affinity_labels", c.anti_affinity_labels);
      !s.ok())
    return s;
  for (const auto& [key, value] : c.required_metadata) {
    if (key.empty()) {
      return Status::InvalidArgument("required_metadata must map non-empty str to str, got '': '" +
                                     value + "'");
    }
  }
  if (Status s = NoneOrNonEmpty("colocate_with", c.colocate_with); !s.ok()) return s;
  return NoneOrNonEmpty("required_node_id", c.required_node_id);
}

Status ValidateSingletonAnchor(const SingletonAnchor& anchor) {
  if (anchor.kind == SingletonAnchor::Kind::kLeader || !anchor.value.empty()) return Status::Ok();
  return Status::InvalidArgument("a " + std::string(AnchorName(anchor.kind)) +
                                 " anchor needs a non-empty value");
}

Status ValidateActorSpec(const ActorSpec& spec) {
  if (Status s = Common(spec.label, spec.actor_type, "initial_state", spec.initial_state);
      !s.ok()) {
    return s;
  }
  if (Status s = ValidateCrashStrategy(spec.crash_strategy); !s.ok()) return s;
  if (Status s = ValidatePlacementConstraints(spec.constraints); !s.ok()) return s;
  if (spec.strategy.kind == StrategyChoice::Kind::kPinned && spec.strategy.node.empty()) {
    return Status::InvalidArgument("a Pinned strategy needs a non-empty node_id");
  }
  const auto& c = spec.constraints;
  if ((c.colocate_with && *c.colocate_with == spec.label) ||
      std::find(c.anti_affinity_labels.begin(), c.anti_affinity_labels.end(), spec.label) !=
          c.anti_affinity_labels.end()) {
    return Status::InvalidArgument("constraints name the spec's own label '" + spec.label + "'");
  }
  return Status::Ok();
}

Status ValidateSingletonSpec(const SingletonSpec& spec) {
  if (Status s = Common(spec.label, spec.actor_type, "state", spec.state); !s.ok()) return s;
  if (Status s = ValidateSingletonAnchor(spec.anchor); !s.ok()) return s;
  return spec_checks::DrainTimeout("drain_timeout_s", spec.drain_timeout_ms);
}

}  // namespace pynenc_cpp::cluster
