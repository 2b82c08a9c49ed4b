// Factory of the SQLite fenced store (concrete class in .cc). Schema (component
// "fenced_store", version 1): fenced_value (app_id, key, value NULL, generation
// INTEGER = packed), one row per key ever written or deleted. A NULL value is a
// tombstone left by Delete: the key reads as absent but keeps its generation.
// A write or delete is one IMMEDIATE transaction that reads the stored
// generation, compares and upserts.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/fenced_store.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Creates the schema on first use. Thread- and process-safe. kBadConfig when the
// file holds another version of the schema.
Result<std::unique_ptr<FencedStore>> NewSqliteFencedStore(std::shared_ptr<Database> db,
                                                          const BackendConfig& config);

}  // namespace pynenc_cpp::sqlite
