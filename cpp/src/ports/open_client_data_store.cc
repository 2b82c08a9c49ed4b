#include "mem/mem_client_data_store.h"
#include "sqlite/sqlite_broker.h"

namespace pynenc_cpp {

Result<std::unique_ptr<ClientDataStore>> OpenClientDataStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemClientDataStore(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    return Status::BadConfig("backend URI '" + config.uri +
                             "': the redis client data store is not built yet");
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteClientDataStore(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
