// Factory of the SQLite state backend (concrete class: sqlite_state_backend_impl.h)
// and app-info discovery for an sqlite:// file. Schema: docs in kSchema
// (sqlite_state_backend.cc); every table is prefixed `state_` and keyed by app_id,
// so several apps share one file without seeing each other's records. App infos
// live in the file too (state_app_info), which is what DiscoverAppInfos reads.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/ports/state_backend.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Creates the state_backend schema (version 2) in `db` if missing, migrates a
// version-1 file, and returns a backend for `config.app_id`. kBadConfig if the
// file holds a newer schema version; kBackendFailure if the file cannot be
// written.
// Thread-safe: every call is one SQLite transaction on a pooled connection, and
// every read-modify-write (upsert, history replace) runs inside one BEGIN
// IMMEDIATE transaction, so it is atomic across threads and processes.
// The returned backend keeps `db` alive.
Result<std::unique_ptr<StateBackend>> NewSqliteStateBackend(std::shared_ptr<Database> db,
                                                            const BackendConfig& config);

// Every (app_id, app_info_json) stored in `db`, ascending by app id. Creates the
// schema if missing (then the answer is empty). Thread-safe.
Result<std::vector<std::pair<std::string, std::string>>> SqliteDiscoverAppInfos(
    const std::shared_ptr<Database>& db);

}  // namespace pynenc_cpp::sqlite
