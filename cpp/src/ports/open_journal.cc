#include "mem/mem_journal.h"
#include "redis/redis_journal.h"
#include "sqlite/sqlite_journal.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Journal>> OpenJournal(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemJournal(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return redis::NewRedisJournal(std::move(client).value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteJournal(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
