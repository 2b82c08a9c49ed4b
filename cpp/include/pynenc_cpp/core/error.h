// Error values for the engine. Engine code never throws across its public API:
// every fallible call returns a Status or a Result<T>. The Python bindings turn
// them into exceptions in one translator (bindings/errors.cc).
//
// Thread safety: Status and Result are value types; distinct objects may be used
// from different threads freely.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace pynenc_cpp {

enum class InvocationStatus : unsigned char;

enum class ErrorCode {
  kOk = 0,
  kNotFound,            // an invocation / key / record the caller named does not exist
  kIllegalTransition,   // the status machine forbids from -> to
  kOwnershipViolation,  // the status machine's ownership rules forbid the change
  kBackendFailure,      // the storage failed (I/O, server, corrupt data)
  kBadConfig,           // a configuration value is missing, malformed or unsupported
  kInvalidArgument,     // an argument is out of range or malformed
  kConflict,            // a compare-and-set lost: the stored value is not the expected one
  kStaleGeneration,     // a write or command carries a generation below the one already known
  kUnavailable,         // the cluster cannot serve the request now (no leader, no quorum, node gone)
  kTimeout,             // no answer within the caller's deadline
  kResourceExhausted,   // a bounded buffer or queue is full: nothing was queued
};

// Extra facts carried by kIllegalTransition and kOwnershipViolation so that the
// Python adapter can raise pynenc's own exception types with the same fields.
struct TransitionErrorInfo {
  std::optional<InvocationStatus> from;  // nullopt: the invocation had no status yet
  InvocationStatus to;
  std::vector<InvocationStatus> allowed;  // legal targets from `from`
  std::optional<std::string> current_owner;
  std::optional<std::string> attempted_owner;
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status NotFound(std::string msg) { return Status(ErrorCode::kNotFound, std::move(msg)); }
  static Status BackendFailure(std::string msg) {
    return Status(ErrorCode::kBackendFailure, std::move(msg));
  }
  // A kBackendFailure whose cause is the connection (refused, reset, timed
  // out, a server still loading its data): the server may come back, so the
  // caller may try again later. `maybe_applied`: the command was sent on the
  // lost connection, so it may or may not have been applied; false when it
  // never reached the server.
  static Status ConnectionLost(std::string msg, bool maybe_applied) {
    Status s(ErrorCode::kBackendFailure, std::move(msg));
    s.connection_lost_ = true;
    s.maybe_applied_ = maybe_applied;
    return s;
  }
  static Status BadConfig(std::string msg) { return Status(ErrorCode::kBadConfig, std::move(msg)); }
  static Status InvalidArgument(std::string msg) {
    return Status(ErrorCode::kInvalidArgument, std::move(msg));
  }
  static Status Conflict(std::string msg) { return Status(ErrorCode::kConflict, std::move(msg)); }
  static Status StaleGeneration(std::string msg) {
    return Status(ErrorCode::kStaleGeneration, std::move(msg));
  }
  static Status Unavailable(std::string msg) {
    return Status(ErrorCode::kUnavailable, std::move(msg));
  }
  static Status Timeout(std::string msg) { return Status(ErrorCode::kTimeout, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) {
    return Status(ErrorCode::kResourceExhausted, std::move(msg));
  }
  // Any code with a message (e.g. one decoded from the wire).
  static Status FromCode(ErrorCode code, std::string msg) {
    return code == ErrorCode::kOk ? Status() : Status(code, std::move(msg));
  }
  static Status IllegalTransition(std::string msg, TransitionErrorInfo info) {
    Status s(ErrorCode::kIllegalTransition, std::move(msg));
    s.transition_ = std::move(info);
    return s;
  }
  static Status OwnershipViolation(std::string msg, TransitionErrorInfo info) {
    Status s(ErrorCode::kOwnershipViolation, std::move(msg));
    s.transition_ = std::move(info);
    return s;
  }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Present only for kIllegalTransition and kOwnershipViolation.
  const std::optional<TransitionErrorInfo>& transition() const { return transition_; }
  // True for a kBackendFailure made by ConnectionLost.
  bool connection_lost() const { return connection_lost_; }
  // For ConnectionLost: whether the command may have been applied.
  bool maybe_applied() const { return maybe_applied_; }
  // "<code name>: <message>", for logs and test failure output.
  std::string ToString() const;

 private:
  Status(ErrorCode code, std::string msg) : code_(code), message_(std::move(msg)) {}
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::optional<TransitionErrorInfo> transition_;
  bool connection_lost_ = false;
  bool maybe_applied_ = false;
};

const char* ErrorCodeName(ErrorCode code);

// Either a value or a non-OK Status. REQUIRES for value(): ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}         // NOLINT(runtime/explicit)
  Result(Status status) : data_(std::move(status)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return std::holds_alternative<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T& value() & { return std::get<T>(data_); }
  // By value, so `for (auto& x : Call().value())` never reads a destroyed temporary.
  T value() && { return std::get<T>(std::move(data_)); }
  // OK status when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(data_); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace pynenc_cpp
