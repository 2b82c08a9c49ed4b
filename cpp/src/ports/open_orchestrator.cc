#include "mem/mem_orchestrator.h"
#include "redis/redis_client.h"
#include "redis/redis_orchestrator.h"
#include "sqlite/sqlite_db.h"
#include "sqlite/sqlite_orchestrator.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Orchestrator>> OpenOrchestrator(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemOrchestrator(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return NewRedisOrchestrator(client.value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return NewSqliteOrchestrator(db.value(), config);
}

}  // namespace pynenc_cpp
