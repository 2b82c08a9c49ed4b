#include "mem/mem_broker.h"
#include "sqlite/sqlite_broker.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Broker>> OpenBroker(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemBroker(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    return Status::BadConfig("backend URI '" + config.uri + "': the redis broker is not built yet");
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteBroker(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
