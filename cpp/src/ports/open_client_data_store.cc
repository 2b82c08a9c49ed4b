#include "mem/mem_client_data_store.h"
#include "redis/redis_broker.h"
#include "sqlite/sqlite_broker.h"

namespace pynenc_cpp {

Result<std::unique_ptr<ClientDataStore>> OpenClientDataStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemClientDataStore(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return redis::NewRedisClientDataStore(std::move(client).value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteClientDataStore(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
