// Default Orchestrator::WaitAnyFinal: polls FilterByStatus with a proportional backoff.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {

// Longer waits are clamped (no time_point overflow): ~31 years.
constexpr TimestampUs kMaxWaitUs = 1'000'000'000'000'000;

const std::vector<InvocationStatus>& FinalStatuses() {
  static const std::vector<InvocationStatus> kFinal = [] {
    std::vector<InvocationStatus> out;
    for (InvocationStatus s : AllStatuses()) {
      if (IsFinal(s)) out.push_back(s);
    }
    return out;
  }();
  return kFinal;
}

}  // namespace

Result<std::optional<InvocationId>> Orchestrator::WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                               TimestampUs timeout_us) {
  if (ids.empty()) return Status::InvalidArgument("WaitAnyFinal needs at least one invocation id");
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::microseconds(std::clamp<TimestampUs>(timeout_us, 0, kMaxWaitUs));
  // Proportional backoff: the pause is a quarter of the time waited so far, within
  // [100 us, 2 ms]. A result is seen at most ~25% (or 100 us) after it is final,
  // while a long wait costs at most 500 status reads per second.
  constexpr auto kMinPause = std::chrono::microseconds(100);
  constexpr auto kMaxPause = std::chrono::microseconds(2000);
  const auto start = Clock::now();
  while (true) {
    Result<std::vector<InvocationId>> final_ids = FilterByStatus(ids, FinalStatuses());
    if (!final_ids.ok()) return final_ids.status();
    if (!final_ids.value().empty()) return std::optional<InvocationId>(final_ids.value().front());
    const auto now = Clock::now();
    if (now >= deadline) return std::optional<InvocationId>();
    const Clock::duration pause =
        std::clamp<Clock::duration>((now - start) / 4, kMinPause, kMaxPause);
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
  }
}

}  // namespace pynenc_cpp
