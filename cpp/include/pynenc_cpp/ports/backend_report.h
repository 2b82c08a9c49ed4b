// What a backend says about itself, for `pynenc-cpp doctor`: its version, the
// schema this build keeps in it, and the settings that decide whether work that
// was acknowledged survives a crash, with a warning for each one that does not.
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
  std::vector<std::string> warnings;  // settings that can lose acknowledged work
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
