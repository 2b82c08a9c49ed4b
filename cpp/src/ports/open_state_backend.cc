#include "mem/mem_state_backend.h"
#include "redis/redis_client.h"
#include "redis/redis_state_backend.h"
#include "sqlite/sqlite_db.h"
#include "sqlite/sqlite_state_backend.h"

namespace pynenc_cpp {

Result<std::vector<std::pair<std::string, std::string>>> DiscoverAppInfos(
    const BackendConfig& config) {
  // Discovery has no app of its own: only the URI matters.
  BackendConfig any_app = config;
  if (any_app.app_id.empty()) any_app.app_id = "discovery";
  Result<ParsedBackendUri> parsed = CheckBackendConfig(any_app);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return MemDiscoverAppInfos();
  // redis://: one app-info hash per server, so discovery lists every app on it.
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(any_app);
    if (!client.ok()) return client.status();
    return redis::RedisDiscoverAppInfos(client.value());
  }
  // sqlite://: app infos live in the file, so discovery reads every app's row.
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(any_app);
  if (!db.ok()) return db.status();
  return sqlite::SqliteDiscoverAppInfos(db.value());
}

}  // namespace pynenc_cpp
