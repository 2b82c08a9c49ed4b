// Factory of the SQLite journal (concrete class in .cc). Schema (component
// "journal", version 1), every table keyed by app_id:
//   journal_entity (app_id, entity, last_seq, fence INTEGER = packed generation)
//   journal_entry (app_id, entity, seq, generation, payload TEXT, binary-safe)
//   journal_snapshot (app_id, entity, seq, generation, state TEXT, binary-safe)
// Every call is one transaction; Append, Fence and SaveSnapshot are one
// IMMEDIATE transaction each that reads the entity row, compares, then writes.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/journal.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Creates the schema on first use. Thread- and process-safe. kBadConfig when the
// file holds another version of the schema.
Result<std::unique_ptr<Journal>> NewSqliteJournal(std::shared_ptr<Database> db,
                                                  const BackendConfig& config);

}  // namespace pynenc_cpp::sqlite
