// The orchestrator port's shared helpers (ports/orchestrator.h): atomic-service
// status names, and the argument checks every backend makes alike.
#include <array>

#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {
constexpr std::array<std::string_view, 4> kAtomicServiceNames = {"running", "completed",
                                                                 "abandoned", "blocked"};
}  // namespace

std::string_view AtomicServiceStatusName(AtomicServiceStatus status) {
  return kAtomicServiceNames[static_cast<std::size_t>(status)];
}

std::optional<AtomicServiceStatus> ParseAtomicServiceStatus(std::string_view name) {
  for (std::size_t i = 0; i < kAtomicServiceNames.size(); ++i) {
    if (kAtomicServiceNames[i] == name) return static_cast<AtomicServiceStatus>(i);
  }
  return std::nullopt;
}

Status CheckFinalize(AtomicServiceStatus status, const std::string& run_id) {
  if (status == AtomicServiceStatus::kRunning) {
    return Status::InvalidArgument("finalize needs a terminal status, not 'running'");
  }
  if (run_id.empty()) return Status::InvalidArgument("atomic_service_run_id must not be empty");
  return Status::Ok();
}

Status CheckRunnerIds(const std::vector<std::string>& runner_ids) {
  for (const std::string& id : runner_ids) {
    if (id.empty()) return Status::InvalidArgument("runner id must not be empty");
  }
  return Status::Ok();
}

}  // namespace pynenc_cpp
