#include "pynenc_cpp/core/status.h"

#include <initializer_list>

namespace pynenc_cpp {
namespace {

using S = InvocationStatus;

constexpr std::uint32_t Mask(std::initializer_list<S> targets) {
  std::uint32_t m = 0;
  for (S s : targets) m |= 1u << static_cast<unsigned>(s);
  return m;
}

// Field order: allowed, final, available_for_run, requires, acquires, releases, overrides.
constexpr StatusDefinition kUnregistered{Mask({S::kRegistered})};

constexpr std::array<StatusDefinition, kStatusCount> kDefinitions = {{
    // kRegistered
    {Mask({S::kPending, S::kConcurrencyControlled, S::kConcurrencyControlledFinal}), false, true,
     false, false, true, false},
    // kConcurrencyControlled
    {Mask({S::kRerouted}), false, false, false, false, true, false},
    // kConcurrencyControlledFinal
    {0, true, false, false, false, true, false},
    // kRerouted
    {Mask({S::kPending, S::kConcurrencyControlled}), false, true, false, false, true, false},
    // kPending
    {Mask({S::kRunning, S::kKilled, S::kRerouted, S::kPendingRecovery}), false, false, true, true,
     false, false},
    // kPendingRecovery
    {Mask({S::kRerouted}), false, false, false, false, true, true},
    // kRunning
    {Mask({S::kPaused, S::kKilled, S::kRetry, S::kSuccess, S::kFailed, S::kRunningRecovery}), false,
     false, true, false, false, false},
    // kRunningRecovery
    {Mask({S::kRerouted}), false, false, false, false, true, true},
    // kPaused
    {Mask({S::kRunning, S::kKilled}), false, false, true, false, false, false},
    // kKilled
    {Mask({S::kRerouted}), false, false, false, false, true, false},
    // kSuccess
    {0, true, false, false, false, true, false},
    // kFailed
    {0, true, false, false, false, true, false},
    // kRetry
    {Mask({S::kPending}), false, true, false, false, true, false},
}};

constexpr std::array<std::string_view, kStatusCount> kNames = {
    "registered",
    "concurrency_controlled",
    "concurrency_controlled_final",
    "rerouted",
    "pending",
    "pending_recovery",
    "running",
    "running_recovery",
    "paused",
    "killed",
    "success",
    "failed",
    "retry",
};

std::string OwnerText(const std::optional<std::string>& owner) {
  return owner ? "'" + *owner + "'" : "None";
}

}  // namespace

const std::array<InvocationStatus, kStatusCount>& AllStatuses() {
  static const std::array<InvocationStatus, kStatusCount> all = [] {
    std::array<InvocationStatus, kStatusCount> a{};
    for (std::size_t i = 0; i < kStatusCount; ++i) a[i] = static_cast<InvocationStatus>(i);
    return a;
  }();
  return all;
}

std::string_view StatusName(InvocationStatus status) {
  return kNames[static_cast<std::size_t>(status)];
}

std::optional<InvocationStatus> ParseStatus(std::string_view name) {
  for (std::size_t i = 0; i < kStatusCount; ++i) {
    if (kNames[i] == name) return static_cast<InvocationStatus>(i);
  }
  return std::nullopt;
}

std::vector<InvocationStatus> StatusDefinition::Allowed() const {
  std::vector<InvocationStatus> out;
  for (InvocationStatus s : AllStatuses()) {
    if (Allows(s)) out.push_back(s);
  }
  return out;
}

const StatusDefinition& Definition(std::optional<InvocationStatus> status) {
  if (!status) return kUnregistered;
  return kDefinitions[static_cast<std::size_t>(*status)];
}

Status ValidateTransition(std::optional<InvocationStatus> from, InvocationStatus to) {
  const StatusDefinition& def = Definition(from);
  if (def.Allows(to)) return Status::Ok();
  std::string msg = "Invalid status transition from ";
  msg += from ? std::string(StatusName(*from)) : std::string("None");
  msg += " to ";
  msg += StatusName(to);
  msg += "; allowed: [";
  bool first = true;
  for (InvocationStatus s : def.Allowed()) {
    if (!first) msg += ", ";
    msg += StatusName(s);
    first = false;
  }
  msg += "]";
  return Status::IllegalTransition(std::move(msg),
                                   TransitionErrorInfo{from, to, def.Allowed(), {}, {}});
}

Status ValidateOwnership(const std::optional<StatusRecord>& current, InvocationStatus to,
                         const std::optional<std::string>& runner_id) {
  if (!current) return Status::Ok();
  const StatusDefinition& to_def = Definition(to);
  if (to_def.overrides_ownership) return Status::Ok();
  const StatusDefinition& cur_def = Definition(current->status);
  std::string reason;
  std::optional<std::string> attempted = runner_id;
  if (cur_def.requires_ownership && runner_id != current->runner_id) {
    reason = "Status requires ownership by runner:" + OwnerText(current->runner_id);
  } else if (to_def.acquires_ownership && (!runner_id || runner_id->empty())) {
    reason = "Status " + std::string(StatusName(to)) + " requires a runner_id to acquire ownership";
    attempted.reset();
  } else {
    return Status::Ok();
  }
  std::string msg = "Ownership violation on " + std::string(StatusName(current->status)) + " -> " +
                    std::string(StatusName(to)) + " by runner " + OwnerText(runner_id) + ": " +
                    reason;
  return Status::OwnershipViolation(
      std::move(msg), TransitionErrorInfo{current->status, to, {}, current->runner_id, attempted});
}

Status ValidateExpectedOwner(const StatusRecord& current, InvocationStatus to,
                             const std::optional<std::string>& runner_id,
                             const std::optional<std::string>& expected_owner) {
  if (current.runner_id == expected_owner) return Status::Ok();
  std::string msg = "Ownership violation on " + std::string(StatusName(current.status)) + " -> " +
                    std::string(StatusName(to)) + " by runner " + OwnerText(runner_id) +
                    ": owned by runner:" + OwnerText(current.runner_id) + ", not by runner:" +
                    OwnerText(expected_owner) + " as expected (it changed hands since)";
  return Status::OwnershipViolation(
      std::move(msg), TransitionErrorInfo{current.status, to, {}, current.runner_id, runner_id});
}

Result<StatusRecord> ApplyTransition(const std::optional<StatusRecord>& current,
                                     InvocationStatus to,
                                     const std::optional<std::string>& runner_id,
                                     TimestampUs now_us) {
  std::optional<InvocationStatus> from;
  if (current) from = current->status;
  if (Status s = ValidateTransition(from, to); !s.ok()) return s;
  if (Status s = ValidateOwnership(current, to, runner_id); !s.ok()) return s;
  const StatusDefinition& def = Definition(to);
  StatusRecord next{to, std::nullopt, now_us};
  if (def.releases_ownership) {
    next.runner_id.reset();
  } else if (def.acquires_ownership) {
    next.runner_id = runner_id;
  } else if (current) {
    next.runner_id = current->runner_id;
  }
  return next;
}

}  // namespace pynenc_cpp
