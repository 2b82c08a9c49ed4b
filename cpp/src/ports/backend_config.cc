#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

std::string RedactUri(const std::string& uri) {
  std::string out = uri;
  const auto scheme_end = out.find("://");
  const std::size_t auth_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  std::size_t auth_end = out.find_first_of("/?#", auth_start);
  if (auth_end == std::string::npos) auth_end = out.size();
  const auto at = out.rfind('@', auth_end == 0 ? 0 : auth_end - 1);
  if (at != std::string::npos && at >= auth_start && at < auth_end) {
    const auto colon = out.find(':', auth_start);
    const std::size_t from = colon != std::string::npos && colon < at ? colon + 1 : auth_start;
    out.replace(from, at - from, "***");
  }
  // Every password=<value> of the query.
  const auto q = out.find('?');
  if (q != std::string::npos) {
    std::size_t pos = q + 1;
    while (pos < out.size()) {
      std::size_t end = out.find('&', pos);
      if (end == std::string::npos) end = out.size();
      const auto eq = out.find('=', pos);
      if (eq != std::string::npos && eq < end && out.compare(pos, eq - pos, "password") == 0) {
        out.replace(eq + 1, end - eq - 1, "***");
        end = eq + 4;
      }
      pos = end + 1;
    }
  }
  return out;
}

Result<ParsedBackendUri> ParseBackendUri(const std::string& raw_uri) {
  const std::string uri = RedactUri(raw_uri);  // for the messages below
  const auto sep = uri.find("://");
  if (sep == std::string::npos) {
    return Status::BadConfig("backend URI '" + uri +
                             "' has no scheme; expected memory://, sqlite:///path or "
                             "redis://host:port/db");
  }
  const std::string scheme = raw_uri.substr(0, sep);
  const std::string rest = raw_uri.substr(sep + 3);
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
