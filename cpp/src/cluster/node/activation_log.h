// The activation log: one JSON object per line, appended to
// ClusterOptions.activation_log, so fault tests (and operators) can prove from
// several processes' logs that two masters never overlapped:
//
//   {"node": "<id>", "pid": 1234, "event": "lease"|"start"|"stop"|"lease_expired"|"release",
//    "epoch": 123, "mono_ms": 5678, "wall_ms": 1767225600000,
//    "lease_until_mono_ms": 6678, "reason": "..."}
//
// Records about an instance the node hosts (host.h) add the label and its
// generation: event "instance_lease" (written before an owner-lease extension
// takes effect) | "instance_start" | "instance_stop" | "instance_failed" |
// "instance_lease_expired" | "instance_regrant", with "label", "term", "seq"
// and "generation" (packed, term << 32 | seq); "epoch" is 0 and
// "lease_until_mono_ms" is the instance's owner lease.
//
// mono_ms and lease_until_mono_ms are CLOCK_MONOTONIC milliseconds, the clock
// every process on one machine shares (and the one the lease is measured on);
// wall_ms is for humans. Each record is written with a single write(2) on an
// O_APPEND descriptor, so records from several threads or processes never
// interleave and a record that was written survives a SIGKILL right after.
// Semantics of each event: docs/cluster/supervisor.md ("Activation log").
//
// Thread safety: Write() is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

// CLOCK_MONOTONIC in milliseconds (what AsioEnv::NowMs() returns too).
std::int64_t MonotonicNowMs();
// CLOCK_REALTIME in milliseconds since the Unix epoch.
std::int64_t WallNowMs();

class ActivationLog {
 public:
  // Opens (creating if needed) `path` for appending. kBadConfig
  // "activation_log: cannot open <path>: <reason>" on failure.
  static Result<std::unique_ptr<ActivationLog>> Open(const std::string& path, NodeId node);
  ~ActivationLog();
  ActivationLog(const ActivationLog&) = delete;
  ActivationLog& operator=(const ActivationLog&) = delete;

  // Appends one record; wall_ms and pid are filled in here. Best effort: a
  // failed write is reported once to stderr and otherwise ignored (the node
  // keeps running).
  void Write(std::string_view event, std::uint64_t epoch, std::int64_t mono_ms,
             std::int64_t lease_until_mono_ms, std::string_view reason);
  // An instance record (see above).
  void WriteInstance(std::string_view event, std::string_view label, std::uint32_t term,
                     std::uint32_t seq, std::int64_t mono_ms, std::int64_t lease_until_mono_ms,
                     std::string_view reason);

 private:
  ActivationLog(int fd, NodeId node) : fd_(fd), node_(std::move(node)) {}
  void Append(std::string line);
  int fd_;
  NodeId node_;
  std::atomic<bool> warned_{false};
};

}  // namespace pynenc_cpp::cluster
