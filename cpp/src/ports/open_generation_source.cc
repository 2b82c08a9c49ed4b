#include "mem/mem_generation_source.h"
#include "pynenc_cpp/ports/storage.h"
#include "redis/redis_generation_source.h"
#include "sqlite/sqlite_generation_source.h"

namespace pynenc_cpp {

Result<std::unique_ptr<GenerationSource>> OpenGenerationSource(const BackendConfig& config) {
  return OpenPort<GenerationSource>(config, NewMemGenerationSource, redis::NewRedisGenerationSource,
                                    sqlite::NewSqliteGenerationSource);
}

}  // namespace pynenc_cpp
