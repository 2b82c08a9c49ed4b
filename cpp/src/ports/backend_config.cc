#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

Result<ParsedBackendUri> ParseBackendUri(const std::string& uri) {
  const auto sep = uri.find("://");
  if (sep == std::string::npos) {
    return Status::BadConfig("backend URI '" + uri +
                             "' has no scheme; expected memory://, sqlite:///path or "
                             "redis://host:port/db");
  }
  const std::string scheme = uri.substr(0, sep);
  const std::string rest = uri.substr(sep + 3);
  if (scheme == "memory") {
    if (!rest.empty()) {
      return Status::BadConfig("backend URI '" + uri + "': memory:// takes no location");
    }
    return ParsedBackendUri{BackendKind::kMemory, ""};
  }
  if (scheme == "sqlite") {
    if (rest.empty()) return Status::BadConfig("backend URI '" + uri + "': sqlite:// needs a path");
    return ParsedBackendUri{BackendKind::kSqlite, rest};
  }
  if (scheme == "redis") {
    if (rest.empty()) {
      return Status::BadConfig("backend URI '" + uri + "': redis:// needs host:port");
    }
    return ParsedBackendUri{BackendKind::kRedis, rest};
  }
  return Status::BadConfig("backend URI '" + uri + "' has unknown scheme '" + scheme +
                           "'; expected memory, sqlite or redis");
}

Result<ParsedBackendUri> CheckBackendConfig(const BackendConfig& config) {
  if (config.app_id.empty()) return Status::BadConfig("app_id must not be empty");
  Result<ParsedBackendUri> parsed = ParseBackendUri(config.uri);
  if (!parsed.ok()) return parsed;
  return parsed;
}

}  // namespace pynenc_cpp
