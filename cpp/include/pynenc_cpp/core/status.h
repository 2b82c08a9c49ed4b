// The invocation status machine of pynenc 0.4.0 (pynenc/invocation/status.py),
// reproduced exactly: the 13 statuses, the legal transitions from each (and from
// "no status yet"), and the ownership rules. tests_py/test_status_table.py checks
// this table against pynenc's own at test time.
//
// Ownership rules, as pynenc applies them to a transition current -> to by runner r:
//   * if `to` overrides ownership, no ownership check is made;
//   * else if `current` requires ownership, r must equal current's owner;
//   * else if `to` acquires ownership, r must be given (non-empty).
//   New owner: none if `to` releases ownership, r if it acquires, else unchanged.
//
// Thread safety: everything here is pure and stateless.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp {

enum class InvocationStatus : unsigned char {
  kRegistered = 0,
  kConcurrencyControlled,
  kConcurrencyControlledFinal,
  kRerouted,
  kPending,
  kPendingRecovery,
  kRunning,
  kRunningRecovery,
  kPaused,
  kKilled,
  kSuccess,
  kFailed,
  kRetry,
};

inline constexpr std::size_t kStatusCount = 13;

// Every status, in declaration order.
const std::array<InvocationStatus, kStatusCount>& AllStatuses();

// pynenc's string value ("registered", "pending", ...).
std::string_view StatusName(InvocationStatus status);
// Inverse of StatusName; nullopt for an unknown name.
std::optional<InvocationStatus> ParseStatus(std::string_view name);

struct StatusDefinition {
  std::uint32_t allowed_mask = 0;  // bit i set: transition to status i is legal
  bool is_final = false;
  bool available_for_run = false;
  bool requires_ownership = false;
  bool acquires_ownership = false;
  bool releases_ownership = false;
  bool overrides_ownership = false;

  bool Allows(InvocationStatus to) const {
    return (allowed_mask >> static_cast<unsigned>(to)) & 1u;
  }
  std::vector<InvocationStatus> Allowed() const;
};

// Definition of `status`; nullopt means "not registered yet" (pynenc's None key).
const StatusDefinition& Definition(std::optional<InvocationStatus> status);

inline bool IsFinal(InvocationStatus s) { return Definition(s).is_final; }
inline bool IsAvailableForRun(InvocationStatus s) { return Definition(s).available_for_run; }

// A status with its owner and the time it was set.
struct StatusRecord {
  InvocationStatus status = InvocationStatus::kRegistered;
  std::optional<std::string> runner_id;  // owner; nullopt when nobody owns it
  TimestampUs timestamp_us = 0;

  bool operator==(const StatusRecord&) const = default;
};

// kIllegalTransition if `from` may not move to `to`.
Status ValidateTransition(std::optional<InvocationStatus> from, InvocationStatus to);

// kOwnershipViolation if runner `runner_id` may not move `current` to `to`.
Status ValidateOwnership(const std::optional<StatusRecord>& current, InvocationStatus to,
                         const std::optional<std::string>& runner_id);

// kOwnershipViolation unless `current` is owned by `expected_owner` (nullopt: by no
// runner): the fence of a recovery, which names the owner it found dead, so that an
// invocation recovered and claimed again by a live runner since is left alone.
Status ValidateExpectedOwner(const StatusRecord& current, InvocationStatus to,
                             const std::optional<std::string>& runner_id,
                             const std::optional<std::string>& expected_owner);

// The full step: validates transition and ownership, then returns the new record
// stamped `now_us`. On failure returns the validation error and changes nothing.
Result<StatusRecord> ApplyTransition(const std::optional<StatusRecord>& current,
                                     InvocationStatus to,
                                     const std::optional<std::string>& runner_id,
                                     TimestampUs now_us);

}  // namespace pynenc_cpp
