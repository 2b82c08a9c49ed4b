#include "mem/mem_state_backend.h"
#include "sqlite/sqlite_db.h"
#include "sqlite/sqlite_state_backend.h"

namespace pynenc_cpp {

Result<std::unique_ptr<StateBackend>> OpenStateBackend(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemStateBackend(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    return Status::BadConfig("backend URI '" + config.uri +
                             "': the redis state backend is not built yet");
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteStateBackend(std::move(db).value(), config);
}

Result<std::vector<std::pair<std::string, std::string>>> DiscoverAppInfos(
    const BackendConfig& config) {
  // Discovery has no app of its own: only the URI matters.
  BackendConfig any_app = config;
  if (any_app.app_id.empty()) any_app.app_id = "discovery";
  Result<ParsedBackendUri> parsed = CheckBackendConfig(any_app);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return MemDiscoverAppInfos();
  // sqlite://: app infos live in the file, so discovery reads every app's row.
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(any_app);
  if (!db.ok()) return db.status();
  return sqlite::SqliteDiscoverAppInfos(db.value());
}

}  // namespace pynenc_cpp
