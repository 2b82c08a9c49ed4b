// Process-wide task-engine metrics (see metrics.h).
#include "pynenc_cpp/core/metrics.h"

#include <algorithm>

namespace pynenc_cpp::metrics {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

struct Histogram {
  std::array<std::atomic<std::uint64_t>, kBucketCount> buckets{};
  std::atomic<std::int64_t> sum_us{0};

  void Observe(std::int64_t us) {
    us = std::max<std::int64_t>(us, 0);  // timestamps from two hosts' clocks
    const auto it = std::lower_bound(kBucketBoundsUs.begin(), kBucketBoundsUs.end(), us);
    buckets[static_cast<std::size_t>(it - kBucketBoundsUs.begin())].fetch_add(1, kRelaxed);
    sum_us.fetch_add(us, kRelaxed);
  }
  // The count is the sum of the buckets read, so a snapshot taken while
  // another thread observes stays self-consistent (+Inf == count).
  HistogramSnapshot Take() const {
    HistogramSnapshot s;
    s.sum_us = sum_us.load(kRelaxed);
    for (std::size_t i = 0; i < kBucketCount; ++i) {
      s.buckets[i] = buckets[i].load(kRelaxed);
      s.count += s.buckets[i];
    }
    return s;
  }
};

struct Counters {
  std::atomic<bool> enabled{true};
  std::array<std::atomic<std::uint64_t>, kStatusCount> entered{};
  std::atomic<std::uint64_t> backend_errors_other{0};
  std::atomic<std::uint64_t> backend_errors_connection{0};
  std::atomic<std::uint64_t> redis_opened{0};
  std::atomic<std::uint64_t> redis_lost{0};
  std::atomic<std::uint64_t> sqlite_busy_waits{0};
  std::atomic<std::int64_t> sqlite_busy_wait_us{0};
  Histogram queue_wait;
  Histogram run_time;
};

Counters& Global() {
  static auto* counters = new Counters();  // leaked: threads may count during exit
  return *counters;
}

bool IsRunOutcome(InvocationStatus s) {
  return s == InvocationStatus::kSuccess || s == InvocationStatus::kFailed ||
         s == InvocationStatus::kRetry;
}

}  // namespace

bool Enabled() { return Global().enabled.load(kRelaxed); }
void SetEnabled(bool enabled) { Global().enabled.store(enabled, kRelaxed); }

void OnEntered(InvocationStatus status, std::uint64_t count) {
  Counters& c = Global();
  if (!c.enabled.load(kRelaxed) || count == 0) return;
  c.entered[static_cast<std::size_t>(status)].fetch_add(count, kRelaxed);
}

void OnTransition(const StatusRecord& from, const StatusRecord& to) {
  Counters& c = Global();
  if (!c.enabled.load(kRelaxed)) return;
  c.entered[static_cast<std::size_t>(to.status)].fetch_add(1, kRelaxed);
  if (to.status == InvocationStatus::kPending && from.status != InvocationStatus::kPending) {
    c.queue_wait.Observe(to.timestamp_us - from.timestamp_us);
  } else if (from.status == InvocationStatus::kRunning && IsRunOutcome(to.status)) {
    c.run_time.Observe(to.timestamp_us - from.timestamp_us);
  }
}

void OnBackendError(bool connection_lost) {
  Counters& c = Global();
  if (!c.enabled.load(kRelaxed)) return;
  (connection_lost ? c.backend_errors_connection : c.backend_errors_other).fetch_add(1, kRelaxed);
}

void OnRedisConnectionOpened() {
  Counters& c = Global();
  if (c.enabled.load(kRelaxed)) c.redis_opened.fetch_add(1, kRelaxed);
}

void OnRedisConnectionLost() {
  Counters& c = Global();
  if (c.enabled.load(kRelaxed)) c.redis_lost.fetch_add(1, kRelaxed);
}

void OnSqliteBusyWait(std::int64_t slept_us) {
  Counters& c = Global();
  if (!c.enabled.load(kRelaxed)) return;
  c.sqlite_busy_waits.fetch_add(1, kRelaxed);
  c.sqlite_busy_wait_us.fetch_add(std::max<std::int64_t>(slept_us, 0), kRelaxed);
}

Snapshot Take() {
  const Counters& c = Global();
  Snapshot s;
  for (std::size_t i = 0; i < kStatusCount; ++i) s.entered[i] = c.entered[i].load(kRelaxed);
  s.backend_errors_connection = c.backend_errors_connection.load(kRelaxed);
  s.backend_errors = s.backend_errors_connection + c.backend_errors_other.load(kRelaxed);
  s.redis_connections_opened = c.redis_opened.load(kRelaxed);
  s.redis_connections_lost = c.redis_lost.load(kRelaxed);
  s.sqlite_busy_waits = c.sqlite_busy_waits.load(kRelaxed);
  s.sqlite_busy_wait_us = c.sqlite_busy_wait_us.load(kRelaxed);
  s.queue_wait = c.queue_wait.Take();
  s.run_time = c.run_time.Take();
  return s;
}

}  // namespace pynenc_cpp::metrics
