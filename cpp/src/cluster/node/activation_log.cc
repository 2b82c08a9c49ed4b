#include "cluster/node/activation_log.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace pynenc_cpp::cluster {

namespace {
std::int64_t ClockMs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}
}  // namespace

std::int64_t MonotonicNowMs() { return ClockMs(CLOCK_MONOTONIC); }
std::int64_t WallNowMs() { return ClockMs(CLOCK_REALTIME); }

Result<std::unique_ptr<ActivationLog>> ActivationLog::Open(const std::string& path, NodeId node) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::BadConfig("activation_log: cannot open " + path + ": " + std::strerror(errno));
  }
  return std::unique_ptr<ActivationLog>(new ActivationLog(fd, std::move(node)));
}

ActivationLog::~ActivationLog() { ::close(fd_); }

void ActivationLog::Write(std::string_view event, std::uint64_t epoch, std::int64_t mono_ms,
                          std::int64_t lease_until_mono_ms, std::string_view reason) {
  nlohmann::json j = {{"node", node_},
                      {"pid", static_cast<std::int64_t>(::getpid())},
                      {"event", std::string(event)},
                      {"epoch", epoch},
                      {"mono_ms", mono_ms},
                      {"wall_ms", WallNowMs()},
                      {"lease_until_mono_ms", lease_until_mono_ms},
                      {"reason", std::string(reason)}};
  // Replace invalid UTF-8 rather than throw (a reason is ours, but be safe).
  Append(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void ActivationLog::WriteInstance(std::string_view event, std::string_view label,
                                  std::uint32_t term, std::uint32_t seq, std::int64_t mono_ms,
                                  std::int64_t lease_until_mono_ms, std::string_view reason) {
  nlohmann::json j = {{"node", node_},
                      {"pid", static_cast<std::int64_t>(::getpid())},
                      {"event", std::string(event)},
                      {"epoch", 0},
                      {"mono_ms", mono_ms},
                      {"wall_ms", WallNowMs()},
                      {"lease_until_mono_ms", lease_until_mono_ms},
                      {"reason", std::string(reason)},
                      {"label", std::string(label)},
                      {"term", term},
                      {"seq", seq},
                      {"generation", (static_cast<std::uint64_t>(term) << 32) | seq}};
  // Labels are user strings: invalid UTF-8 is replaced, never thrown on.
  Append(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void ActivationLog::Append(std::string line) {
  line.push_back('\n');
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size()) && !warned_.exchange(true)) {
    std::fprintf(stderr, "pynenc-cpp cluster: activation log write failed: %s\n",
                 n < 0 ? std::strerror(errno) : "short write");
  }
}

}  // namespace pynenc_cpp::cluster
