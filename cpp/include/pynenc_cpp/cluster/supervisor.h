// The master/standby supervisor: a pure state machine. It reads no clock and
// touches no environment: every input carries the time it happened at, and every
// decision comes back as a value (an Effect) for the caller to carry out. That
// keeps every transition unit-testable from a table (tests_cpp/cluster/
// supervisor_test.cc) and lets the same code run in the simulator and in
// production. The state machine and the lease protocol that feeds it are
// specified in docs/cluster/supervisor.md.
//
// States (SupervisorState, node.h):
//   kStandby    not elected (or elected without quorum); no work.
//   kActivating elected with quorum; waits until it has been elected
//               continuously for stabilize_ms AND holds a valid lease
//               (now < lease_until), then emits StartWork and becomes kMaster.
//   kMaster     the work runs here. Leaves on the first of: shutdown, lease
//               expired, lost quorum, not elected (that order of precedence
//               names the StopWork reason).
//   kStopping   StopWork was emitted; waits for WorkStopped, then kStandby. After
//               Shutdown the supervisor is terminal: it enters (or stays in)
//               kStopping and never activates again.
//
// Thread safety: not thread-safe; a plain object owned by one thread (the node's
// loop thread).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

struct SupervisorOptions {
  // How long a node must be elected (with quorum) without interruption before it
  // may start the work. Absorbs view flapping while membership converges.
  std::int64_t stabilize_ms = 500;
};

// ---- Inputs: one event plus the (monotonic) time it is processed at. ----
namespace supervisor_event {
struct Tick {};  // time passed (a WakeAt came due, or any other event of the node)
struct ViewChanged {
  bool self_elected = false;  // this node's election picks itself
  bool has_quorum = false;    // the live view holds at least `quorum` members
  std::uint64_t epoch = 0;
};
struct LeaseChanged {
  std::int64_t lease_until_ms = 0;  // this node's lease is valid while now < this
};
struct WorkStarted {};  // the start callback returned
struct WorkStopped {};  // the stop callback returned
struct Shutdown {};     // the node is leaving; terminal
}  // namespace supervisor_event

struct SupervisorInput {
  std::int64_t now_ms = 0;
  std::variant<supervisor_event::Tick, supervisor_event::ViewChanged,
               supervisor_event::LeaseChanged, supervisor_event::WorkStarted,
               supervisor_event::WorkStopped, supervisor_event::Shutdown>
      event;
};

// ---- Effects: what the caller must do, in order. ----
namespace supervisor_effect {
struct StartWork {
  std::uint64_t epoch = 0;
  std::int64_t lease_until_ms = 0;
};
struct StopWork {
  std::string reason;  // "shutdown" | "lease expired" | "lost quorum" | "not elected"
};
// Feed a Tick no later than `at_ms` (the caller keeps one timer: the latest
// WakeAt replaces earlier ones).
struct WakeAt {
  std::int64_t at_ms = 0;
};
struct Log {
  LogLevel level = LogLevel::kInfo;
  std::string message;
};
}  // namespace supervisor_effect

using SupervisorEffect = std::variant<supervisor_effect::StartWork, supervisor_effect::StopWork,
                                      supervisor_effect::WakeAt, supervisor_effect::Log>;

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options = {});

  // Applies one input and returns the effects it causes, in the order the caller
  // must carry them out. `now_ms` must not go backwards between calls (a smaller
  // value is treated as the last one seen). Never fails.
  std::vector<SupervisorEffect> Step(const SupervisorInput& input);

  SupervisorState state() const { return state_; }
  bool shut_down() const { return shutdown_; }
  // Elected with quorum in the last view.
  bool elected() const { return self_elected_ && has_quorum_; }
  bool has_quorum() const { return has_quorum_; }
  std::uint64_t epoch() const { return epoch_; }
  std::int64_t lease_until_ms() const { return lease_until_ms_; }
  // True between StartWork and WorkStopped (the work may be running).
  bool work_active() const { return work_active_; }

 private:
  void Evaluate(std::int64_t now, std::vector<SupervisorEffect>& out);
  void Enter(SupervisorState next, std::int64_t now, std::vector<SupervisorEffect>& out);

  SupervisorOptions options_;
  SupervisorState state_ = SupervisorState::kStandby;
  bool self_elected_ = false;
  bool has_quorum_ = false;
  std::uint64_t epoch_ = 0;
  std::int64_t lease_until_ms_ = 0;
  std::int64_t activating_since_ms_ = 0;
  std::int64_t last_now_ms_ = 0;
  bool work_active_ = false;
  bool shutdown_ = false;
};

}  // namespace pynenc_cpp::cluster
