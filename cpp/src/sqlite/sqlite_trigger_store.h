// Factory of the SQLite trigger store (the class lives in
// sqlite_trigger_store_impl.h, private to cpp/src/sqlite). The schema is
// described at the top of sqlite_trigger_store.cc.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/trigger_store.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp {
// Creates the trigger tables in `db` if missing (schema "trigger", version 1)
// and returns a store for `config.app_id`. kBadConfig if the file holds another
// schema version; kBackendFailure if the schema cannot be written.
// Thread-safe, and safe for several processes on one file: every call is one
// SQLite transaction. Time from ClockOrReal(config).
Result<std::unique_ptr<TriggerStore>> NewSqliteTriggerStore(std::shared_ptr<sqlite::Database> db,
                                                            const BackendConfig& config);
}  // namespace pynenc_cpp
