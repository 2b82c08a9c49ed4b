#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

std::string RedactUri(const std::string& uri) {
  std::string out = uri;
  // Every password=<value> of the query (first: a value may hold an '@').
  const auto q = out.find('?');
  if (q != std::string::npos) {
    std::size_t pos = q + 1;
    while (pos < out.size()) {
      std::size_t end = out.find('&', pos);
      if (end == std::string::npos) end = out.size();
      const auto eq = out.find('=', pos);
      // password=, sentinel_password=: every key that ends in "password".
      if (eq != std::string::npos && eq < end && eq - pos >= 8 &&
          out.compare(eq - 8, 8, "password") == 0) {
        out.replace(eq + 1, end - eq - 1, "***");
        end = eq + 4;
      }
      pos = end + 1;
    }
  }
  // The user info of a server URI (never a file path: sqlite:///tmp/a@b.db) ends
  // at the LAST '@': a password with a raw '/', '?', '#' or '@' (which should be
  // percent-encoded) is hidden too, at the cost of hiding more than the password
  // when another query value holds an '@'.
  const auto scheme_end = out.find("://");
  const bool file = out.rfind("sqlite:", 0) == 0 || out.rfind("memory:", 0) == 0;
  const std::size_t auth_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto at = out.rfind('@');
  if (!file && at != std::string::npos && at >= auth_start) {
    const auto colon = out.find(':', auth_start);
    const auto stop = out.find_first_of("/?#", auth_start);
    // Keep a user name only when it is plainly one (before any '/', '?', '#').
    const bool user = colon != std::string::npos && colon < at &&
                      (stop == std::string::npos || colon < stop);
    const std::size_t from = user ? colon + 1 : auth_start;
    out.replace(from, at - from, "***");
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
    // "redis://[userinfo@]unix:///path" is not a host: the socket form is its own scheme.
    const auto at = rest.rfind('@', rest.find_first_of("/?#"));
    if (rest.compare(at == std::string::npos ? 0 : at + 1, 7, "unix://") == 0) {
      return Status::BadConfig("backend URI '" + uri +
                               "' is not a host; a unix socket is unix:///path/to.sock");
    }
    return ParsedBackendUri{BackendKind::kRedis, rest};
  }
  if (scheme == "redis+sentinel" || scheme == "sentinel") {
    // Redis behind Sentinel: redis+sentinel://[[user]:pw@]h1:26379[,h2:26379...]/master[/db]
    if (rest.empty() || rest.find_first_not_of("/?#") == std::string::npos) {
      return Status::BadConfig("backend URI '" + uri + "': " + scheme +
                               ":// needs the sentinels and the master's name, as "
                               "redis+sentinel://host:26379[,host:26379...]/MASTER_NAME[/db]");
    }
    return ParsedBackendUri{BackendKind::kRedis, "sentinel://" + rest};
  }
  if (scheme == "unix") {  // a Redis unix socket, as redis-py: unix://[[user]:pw@]/path?db=N
    if (rest.empty()) {
      return Status::BadConfig("backend URI '" + uri + "': unix:// needs a socket path");
    }
    return ParsedBackendUri{BackendKind::kRedis, "unix://" + rest};
  }
  if (scheme == "rediss") {
    return Status::BadConfig(
        "backend URI '" + uri +
        "': rediss:// (Redis over TLS) is not supported by this build: the hiredis it links "
        "(Debian's 0.14) has no TLS. Reach the server through a local TLS tunnel (stunnel, "
        "spiped) with a redis:// or unix:// URI");
  }
  return Status::BadConfig("backend URI '" + uri + "' has unknown scheme '" + scheme +
                           "'; expected memory, sqlite, redis, unix or redis+sentinel");
}

Result<ParsedBackendUri> CheckBackendConfig(const BackendConfig& config) {
  if (config.app_id.empty()) return Status::BadConfig("app_id must not be empty");
  Result<ParsedBackendUri> parsed = ParseBackendUri(config.uri);
  if (!parsed.ok()) return parsed;
  return parsed;
}

}  // namespace pynenc_cpp
