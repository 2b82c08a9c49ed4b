#include "mem/mem_fenced_store.h"
#include "redis/redis_fenced_store.h"
#include "sqlite/sqlite_fenced_store.h"

namespace pynenc_cpp {

Result<std::unique_ptr<FencedStore>> OpenFencedStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemFencedStore(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return redis::NewRedisFencedStore(std::move(client).value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteFencedStore(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
