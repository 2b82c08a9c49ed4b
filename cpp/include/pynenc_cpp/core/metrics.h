// Process-wide task-engine metrics: lock-free counters and fixed-bucket
// histograms, incremented where the engine applies a change (each backend's
// status funnel, the binding boundary, the Redis client) and read as one
// snapshot (pynenc_cpp.metrics renders it in the Prometheus text format).
//
// Cost on the hot path: one relaxed atomic add per event (two more for a
// histogram observation: its bucket and its sum), and nothing at all while
// disabled (SetEnabled(false)).
//
// Counts are per process: a forked child starts from its parent's counts (as
// Prometheus counters of a new process would after a restart, they only rise).
//
// Thread safety: every function is safe from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "pynenc_cpp/core/status.h"

namespace pynenc_cpp::metrics {

// Upper bounds of the histogram buckets, microseconds (then +Inf).
inline constexpr std::array<std::int64_t, 16> kBucketBoundsUs = {
    100,     250,     500,       1'000,     2'500,     5'000,      10'000,     25'000,
    50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 10'000'000, 60'000'000};
inline constexpr std::size_t kBucketCount = kBucketBoundsUs.size() + 1;  // + Inf

struct HistogramSnapshot {
  std::array<std::uint64_t, kBucketCount> buckets{};  // per bucket, not cumulative
  std::uint64_t count = 0;
  std::int64_t sum_us = 0;
};

struct Snapshot {
  // Status changes applied, by the status entered (registrations included).
  std::array<std::uint64_t, kStatusCount> entered{};
  // Backend failures that reached a caller (Python or the runner), and of
  // those, the ones caused by a lost connection.
  std::uint64_t backend_errors = 0;
  std::uint64_t backend_errors_connection = 0;
  // Redis connections opened, and pooled connections dropped as broken (a
  // reconnect shows as one of each).
  std::uint64_t redis_connections_opened = 0;
  std::uint64_t redis_connections_lost = 0;
  // SQLite: pauses of a connection that found the file locked by another
  // writer (its busy handler), and the time they slept: lock contention.
  std::uint64_t sqlite_busy_waits = 0;
  std::int64_t sqlite_busy_wait_us = 0;
  // Routed -> PENDING (claimed) and RUNNING -> SUCCESS / FAILED / RETRY, from
  // the two status records' timestamps.
  HistogramSnapshot queue_wait;
  HistogramSnapshot run_time;
};

bool Enabled();
void SetEnabled(bool enabled);

// `count` invocations entered `status` with no previous record (registration).
void OnEntered(InvocationStatus status, std::uint64_t count = 1);
// One applied transition (`from` is the record it replaced).
void OnTransition(const StatusRecord& from, const StatusRecord& to);
void OnBackendError(bool connection_lost);
void OnRedisConnectionOpened();
void OnRedisConnectionLost();
// One pause of SQLite's busy handler, `slept_us` long.
void OnSqliteBusyWait(std::int64_t slept_us);

Snapshot Take();

}  // namespace pynenc_cpp::metrics
