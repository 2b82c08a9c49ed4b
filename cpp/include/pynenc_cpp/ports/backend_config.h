// How a component finds its storage. One URI picks the backend:
//   memory://               process-local, in this component's own memory
//   sqlite:///abs/path.db   an SQLite file (issue 3)
//   redis://host:port/db    a Redis server (issue 3)
//   redis+sentinel://h1:26379[,h2:26379...]/master[/db]   the master that Sentinel names
// Each component of an app is opened with the same config; `app_id` namespaces
// the data so that several apps can share one file or server.
#pragma once

#include <memory>
#include <string>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp {

struct BackendConfig {
  std::string uri = "memory://";
  std::string app_id = "pynenc";
  std::shared_ptr<Clock> clock;  // null: Clock::Real()
};

enum class BackendKind { kMemory, kSqlite, kRedis };

struct ParsedBackendUri {
  BackendKind kind = BackendKind::kMemory;
  std::string location;  // path for sqlite, "host:port/db" for redis, empty for memory
};

// kBadConfig naming the URI (passwords redacted) and what is wrong with it.
Result<ParsedBackendUri> ParseBackendUri(const std::string& uri);

// `uri` fit for an error or a log line: the user info's password
// ("redis://user:pw@host" -> "redis://user:***@host"; "redis://name@host" ->
// "redis://***@host"), everything up to the last '@' when a raw '/', '?' or
// '#' comes before it, and the value of every password= query option are
// replaced by "***". Everything else is kept.
std::string RedactUri(const std::string& uri);

// kBadConfig for an unusable URI or an empty app id. Checks the syntax only;
// opening the storage reports the rest.
// Checks the URI and the app id; returns the parsed URI on success.
Result<ParsedBackendUri> CheckBackendConfig(const BackendConfig& config);

inline std::shared_ptr<Clock> ClockOrReal(const BackendConfig& config) {
  return config.clock ? config.clock : Clock::Real();
}

}  // namespace pynenc_cpp
