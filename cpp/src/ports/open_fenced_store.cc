#include "mem/mem_fenced_store.h"
#include "pynenc_cpp/ports/storage.h"
#include "redis/redis_fenced_store.h"
#include "sqlite/sqlite_fenced_store.h"

namespace pynenc_cpp {

Result<std::unique_ptr<FencedStore>> OpenFencedStore(const BackendConfig& config) {
  return OpenPort<FencedStore>(config, NewMemFencedStore, redis::NewRedisFencedStore,
                               sqlite::NewSqliteFencedStore);
}

}  // namespace pynenc_cpp
