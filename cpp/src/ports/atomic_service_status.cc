// The orchestrator port's shared helpers (ports/orchestrator.h): atomic-service
// status names, the purge rules of their rows, and the argument checks every
// backend makes alike.
#include <array>
#include <unordered_set>

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

std::vector<bool> DroppedExecutions(const std::vector<FinishedExecution>& finished,
                                    const ExecutionPurgePolicy& policy, TimestampUs now_us) {
  const std::unordered_set<std::string_view> protected_ids(policy.protected_run_ids.begin(),
                                                           policy.protected_run_ids.end());
  std::vector<bool> dropped(finished.size(), false);
  std::int64_t left = static_cast<std::int64_t>(finished.size());
  if (policy.retention_us > 0) {
    const TimestampUs cutoff = now_us - policy.retention_us;
    for (std::size_t i = 0; i < finished.size(); ++i) {
      const FinishedExecution& f = finished[i];
      if (protected_ids.count(f.run_id) || !f.end_us || *f.end_us >= cutoff) continue;
      dropped[i] = true;
      --left;
    }
  }
  if (policy.max_records > 0) {
    std::int64_t excess = left - policy.max_records;
    for (std::size_t i = 0; i < finished.size() && excess > 0; ++i) {
      if (dropped[i] || protected_ids.count(finished[i].run_id)) continue;
      dropped[i] = true;
      --excess;
    }
  }
  return dropped;
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
