#include "mem/mem_journal.h"
#include "pynenc_cpp/ports/storage.h"
#include "redis/redis_journal.h"
#include "sqlite/sqlite_journal.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Journal>> OpenJournal(const BackendConfig& config) {
  return OpenPort<Journal>(config, NewMemJournal, redis::NewRedisJournal, sqlite::NewSqliteJournal);
}

}  // namespace pynenc_cpp
