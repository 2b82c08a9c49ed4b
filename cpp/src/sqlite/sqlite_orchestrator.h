// Factory of the SQLite orchestrator (the concrete class is internal:
// sqlite_orchestrator_impl.h, shared only by the sqlite_orchestrator*.cc files).
// Schema and concurrency: docs comment at the top of sqlite_orchestrator.cc.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/orchestrator.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp {

// Opens the orchestrator of `config.app_id` on `db`, creating its tables on
// first use (schema "orchestrator" version 1). kBadConfig if the file holds
// another schema version; kBackendFailure if SQLite fails.
// Thread-safe and multi-process safe: every method is one SQLite transaction.
Result<std::unique_ptr<Orchestrator>> NewSqliteOrchestrator(std::shared_ptr<sqlite::Database> db,
                                                            const BackendConfig& config);

}  // namespace pynenc_cpp
