#include "mem/mem_generation_source.h"
#include "redis/redis_generation_source.h"
#include "sqlite/sqlite_generation_source.h"

namespace pynenc_cpp {

Result<std::unique_ptr<GenerationSource>> OpenGenerationSource(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemGenerationSource(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return redis::NewRedisGenerationSource(std::move(client).value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return sqlite::NewSqliteGenerationSource(std::move(db).value(), config);
}

}  // namespace pynenc_cpp
