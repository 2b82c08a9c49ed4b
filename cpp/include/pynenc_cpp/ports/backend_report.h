// What a backend says about itself, for `pynenc-cpp doctor`: its version, the
// schema this build keeps in it, and the settings that decide whether work that
// was acknowledged survives a crash: an error for each one that loses it on an
// ordinary event, a warning for advice.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

struct BackendReport {
  std::string backend;  // "memory", "sqlite" or "redis"
  std::vector<std::pair<std::string, std::string>> facts;  // (name, value), in display order
  // Settings that lose acknowledged work on an ordinary event: a restart of the
  // server or of a process, an eviction, a disk that fails to persist.
  std::vector<std::string> errors;
  // Advice: work lost only if the machine itself crashes or loses power
  // (synchronous=NORMAL, appendfsync everysec), or a setting that cannot be checked.
  std::vector<std::string> warnings;
};

// Connects to the backend `config` names (never creates an SQLite file that is
// not there) and reads it. kBadConfig for a bad URI or a missing file,
// kBackendFailure / kConnectionLost when the server cannot be reached.
Result<BackendReport> DescribeBackend(const BackendConfig& config);

namespace sqlite {
Result<BackendReport> Describe(const BackendConfig& config);
}  // namespace sqlite

namespace redis {
Result<BackendReport> Describe(const BackendConfig& config);
}  // namespace redis

}  // namespace pynenc_cpp
