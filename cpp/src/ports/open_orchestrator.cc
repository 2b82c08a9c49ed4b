#include "mem/mem_orchestrator.h"
#include "sqlite/sqlite_db.h"
#include "sqlite/sqlite_orchestrator.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Orchestrator>> OpenOrchestrator(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemOrchestrator(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    return Status::BadConfig("backend URI '" + config.uri +
                             "': the redis orchestrator is not built yet");
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return NewSqliteOrchestrator(db.value(), config);
}

}  // namespace pynenc_cpp
