// ParseRedisLocation: the location part of a redis://, unix:// or Sentinel URI
// into RedisOptions (redis_client.h says the forms). Kept apart from the
// connection pool: nothing here talks to a server.
#include <cstdlib>
#include <functional>
#include <string>

#include "pynenc_cpp/ports/backend_config.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

bool ParseInt(const std::string& text, long lo, long hi, long* out) {
  if (text.empty()) return false;
  char* tail = nullptr;
  const long v = std::strtol(text.c_str(), &tail, 10);
  if (*tail != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

namespace {

// %XX decoding (as redis-py's urllib unquote for user info and a socket path;
// with `plus_is_space`, as its parse_qs for query values); a '%' not followed by
// two hex digits is kept as it is.
std::string PercentDecode(const std::string& s, bool plus_is_space = false) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

using Shown = std::function<std::string(const std::string&)>;

// "host[:port]" or "[v6]" / "[v6]:port" into host and port (port kept when absent).
Status ParseHostPort(const std::string& text, const Shown& shown, std::string* host, int* port) {
  std::string hostport = text;
  std::string bracketed;
  if (!hostport.empty() && hostport[0] == '[') {
    const auto close = hostport.find(']');
    if (close == std::string::npos || close == 1) {
      return Status::BadConfig("redis URI host " + shown(hostport) +
                               " is not an IPv6 literal like [::1]");
    }
    bracketed = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);  // "" or ":port"
    if (!hostport.empty() && hostport[0] != ':') {
      return Status::BadConfig("redis URI: expected ':port' after the IPv6 literal");
    }
  }
  const auto colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    *host = bracketed.empty() ? hostport : bracketed;
    return Status::Ok();
  }
  *host = bracketed.empty() ? hostport.substr(0, colon) : bracketed;
  long v = 0;
  if (!ParseInt(hostport.substr(colon + 1), 1, 65535, &v)) {
    return Status::BadConfig("redis URI port " + shown(hostport.substr(colon + 1)) +
                             " is not a port number (1-65535)");
  }
  *port = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Result<RedisOptions> ParseRedisLocation(const std::string& location) {
  RedisOptions o;
  // Parts of a location with user info are never echoed in errors: a password
  // with an unencoded '/' or '?' would land in them.
  const bool secretive = location.find('@') != std::string::npos;
  const Shown shown = [secretive](const std::string& part) {
    return secretive ? std::string("(not shown: the URI has user info)") : "'" + part + "'";
  };
  std::string rest = location;
  const bool unix_socket = rest.rfind("unix://", 0) == 0;
  const bool sentinel = rest.rfind("sentinel://", 0) == 0;
  if (unix_socket) rest = rest.substr(7);
  if (sentinel) rest = rest.substr(11);
  // [[user]:password@] before the host: up to the last '@' before the first
  // '/', '?' or '#' (a password with those must be percent-encoded, as for
  // redis-py); user and password are percent-decoded.
  if (const auto stop = rest.find_first_of("/?#"), at = rest.rfind('@', stop);
      at != std::string::npos && (stop == std::string::npos || at < stop)) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    o.username = PercentDecode(userinfo.substr(0, colon));
    if (colon != std::string::npos) o.password = PercentDecode(userinfo.substr(colon + 1));
  }
  std::string query;
  if (auto q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string hostport = rest;
  std::string db_text;
  if (unix_socket) {
    // The whole path is the socket; the database comes from ?db=N.
    if (rest.empty() || rest[0] != '/') {
      return Status::BadConfig(
          "redis unix socket URI needs an absolute path: unix:///path/to.sock");
    }
    o.unix_path = PercentDecode(rest);
    if (o.unix_path.find('\0') != std::string::npos) {
      return Status::BadConfig("redis unix socket path has a NUL byte (%00)");
    }
    o.host.clear();
    o.port = 0;
    hostport.clear();
  } else if (sentinel) {
    // sentinel://h1[:p1][,h2[:p2]...]/master_name[/db]
    const auto slash = rest.find('/');
    hostport = rest.substr(0, slash);
    std::string path = slash == std::string::npos ? "" : rest.substr(slash + 1);
    const auto next = path.find('/');
    o.master_name = PercentDecode(path.substr(0, next));
    if (next != std::string::npos) db_text = path.substr(next + 1);
    if (o.master_name.empty()) {
      return Status::BadConfig(
          "redis Sentinel URI needs the master's name after the sentinels: "
          "redis+sentinel://host:26379[,host:26379...]/MASTER_NAME[/db]");
    }
    std::size_t from = 0;
    while (from <= hostport.size()) {
      std::size_t comma = hostport.find(',', from);
      if (comma == std::string::npos) comma = hostport.size();
      RedisOptions::HostPort hp;
      Status parsed = ParseHostPort(hostport.substr(from, comma - from), shown, &hp.host, &hp.port);
      if (!parsed.ok()) return parsed;
      if (hp.host.empty()) {
        return Status::BadConfig("redis Sentinel URI '" + RedactUri(location) +
                                 "' has an empty sentinel host");
      }
      o.sentinels.push_back(std::move(hp));
      from = comma + 1;
    }
    o.host.clear();
    o.port = 0;
    hostport.clear();
  } else if (auto slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    db_text = rest.substr(slash + 1);
  }
  if (!db_text.empty()) {
    long v = 0;
    if (!ParseInt(db_text, 0, 1'000'000, &v)) {
      return Status::BadConfig("redis URI database " + shown(db_text) + " is not a number");
    }
    o.db = static_cast<int>(v);
  }
  if (!unix_socket && !sentinel) {
    Status parsed = ParseHostPort(hostport, shown, &o.host, &o.port);
    if (!parsed.ok()) return parsed;
    if (o.host.empty()) {
      return Status::BadConfig("redis URI '" + RedactUri(location) + "' has no host");
    }
  }
  static const char* kKnown =
      "; known: db, connect_timeout_ms, io_timeout_ms, password, min_replicas, "
      "min_replicas_timeout_ms, and with Sentinel sentinel_username, sentinel_password";
  std::size_t start = 0;
  while (start < query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string key = pair.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    long v = 0;
    if (key == "connect_timeout_ms" || key == "io_timeout_ms" ||
        key == "min_replicas_timeout_ms") {
      if (!ParseInt(value, 1, 3'600'000, &v)) {
        return Status::BadConfig("redis option " + key + "=" + shown(value) +
                                 ": expected milliseconds between 1 and 3600000");
      }
      (key == "connect_timeout_ms" ? o.connect_timeout_ms
       : key == "io_timeout_ms"    ? o.io_timeout_ms
                                   : o.min_replicas_timeout_ms) = static_cast<int>(v);
    } else if (key == "min_replicas") {
      if (!ParseInt(value, 0, 1'000, &v)) {
        return Status::BadConfig("redis option min_replicas=" + shown(value) +
                                 ": expected a number of replicas from 0 to 1000");
      }
      o.min_replicas = static_cast<int>(v);
    } else if (key == "password") {
      o.password = PercentDecode(value, true);
    } else if (sentinel && key == "sentinel_password") {
      o.sentinel_password = PercentDecode(value, true);
    } else if (sentinel && key == "sentinel_username") {
      o.sentinel_username = PercentDecode(value, true);
    } else if (key == "db") {
      if (!ParseInt(value, 0, 1'000'000, &v)) {
        return Status::BadConfig("redis option db=" + shown(value) + " is not a number");
      }
      o.db = static_cast<int>(v);
    } else {
      return Status::BadConfig("unknown redis option " + shown(key) + kKnown);
    }
  }
  return o;
}


}  // namespace pynenc_cpp::redis
