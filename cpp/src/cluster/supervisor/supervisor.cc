#include "pynenc_cpp/cluster/supervisor.h"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace pynenc_cpp::cluster {

std::string_view SupervisorStateName(SupervisorState s) {
  switch (s) {
    case SupervisorState::kStandby:
      return "standby";
    case SupervisorState::kActivating:
      return "activating";
    case SupervisorState::kMaster:
      return "master";
    case SupervisorState::kStopping:
      return "stopping";
  }
  return "unknown";
}

Supervisor::Supervisor(SupervisorOptions options) : options_(options) {
  options_.stabilize_ms = std::max<std::int64_t>(0, options_.stabilize_ms);
}

std::vector<SupervisorEffect> Supervisor::Step(const SupervisorInput& input) {
  const std::int64_t now = std::max(input.now_ms, last_now_ms_);
  last_now_ms_ = now;
  std::vector<SupervisorEffect> out;
  std::visit(
      [&](const auto& ev) {
        using E = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<E, supervisor_event::ViewChanged>) {
          self_elected_ = ev.self_elected;
          has_quorum_ = ev.has_quorum;
          epoch_ = ev.epoch;
        } else if constexpr (std::is_same_v<E, supervisor_event::LeaseChanged>) {
          lease_until_ms_ = ev.lease_until_ms;
        } else if constexpr (std::is_same_v<E, supervisor_event::WorkStopped>) {
          work_active_ = false;
          if (state_ == SupervisorState::kStopping && !shutdown_) {
            Enter(SupervisorState::kStandby, now, out);
          }
        } else if constexpr (std::is_same_v<E, supervisor_event::Shutdown>) {
          if (!shutdown_) {
            shutdown_ = true;
            if (state_ == SupervisorState::kMaster) {
              out.emplace_back(supervisor_effect::StopWork{"shutdown"});
            }
            Enter(SupervisorState::kStopping, now, out);
          }
        }
        // Tick and WorkStarted change nothing but the time.
      },
      input.event);
  Evaluate(now, out);
  return out;
}

void Supervisor::Enter(SupervisorState next, std::int64_t now, std::vector<SupervisorEffect>& out) {
  if (next == state_) return;
  std::string msg = "supervisor: ";
  msg += SupervisorStateName(state_);
  msg += " -> ";
  msg += SupervisorStateName(next);
  msg += " (epoch " + std::to_string(epoch_) + ")";
  out.emplace_back(supervisor_effect::Log{LogLevel::kInfo, std::move(msg)});
  state_ = next;
  if (next == SupervisorState::kActivating) activating_since_ms_ = now;
}

void Supervisor::Evaluate(std::int64_t now, std::vector<SupervisorEffect>& out) {
  // Each pass either changes state or returns, and the state graph visited here
  // (Standby -> Activating -> Master -> Stopping) has no cycle, so this ends.
  for (;;) {
    switch (state_) {
      case SupervisorState::kStandby:
        if (shutdown_ || !elected()) return;
        Enter(SupervisorState::kActivating, now, out);
        continue;
      case SupervisorState::kActivating: {
        if (!elected()) {
          Enter(SupervisorState::kStandby, now, out);
          return;
        }
        const std::int64_t stable_at = activating_since_ms_ + options_.stabilize_ms;
        if (now < stable_at) {
          out.emplace_back(supervisor_effect::WakeAt{stable_at});
          return;
        }
        if (now >= lease_until_ms_) return;  // stable; waits for a LeaseChanged
        out.emplace_back(supervisor_effect::StartWork{epoch_, lease_until_ms_});
        work_active_ = true;
        Enter(SupervisorState::kMaster, now, out);
        continue;
      }
      case SupervisorState::kMaster: {
        const char* reason = nullptr;
        if (now >= lease_until_ms_) {
          reason = "lease expired";
        } else if (!has_quorum_) {
          reason = "lost quorum";
        } else if (!self_elected_) {
          reason = "not elected";
        }
        if (reason == nullptr) {
          out.emplace_back(supervisor_effect::WakeAt{lease_until_ms_});
          return;
        }
        out.emplace_back(supervisor_effect::StopWork{reason});
        Enter(SupervisorState::kStopping, now, out);
        return;
      }
      case SupervisorState::kStopping:
        return;
    }
  }
}

}  // namespace pynenc_cpp::cluster
