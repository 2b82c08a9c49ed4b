#include "mem/mem_broker.h"
#include "redis/redis_broker.h"
#include "sqlite/sqlite_broker.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Broker>> OpenBroker(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemBroker(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return redis::NewRedisBroker(std::move(client).value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteBroker(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
