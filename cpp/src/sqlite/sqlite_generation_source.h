// Factory of the SQLite generation source (concrete class in .cc). Schema
// (component "generation_source", version 1), rows keyed by app_id:
//   generation_owner (app_id, label, owner, generation INTEGER = packed)
//   generation_spec  (app_id, label, spec)
// Each claim is one IMMEDIATE transaction that reads, compares and writes, so
// threads and processes on the same file never both win.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/generation_source.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Creates the schema on first use. Thread- and process-safe; Shared() is true.
// kBadConfig when the file holds another version of the schema.
Result<std::unique_ptr<GenerationSource>> NewSqliteGenerationSource(std::shared_ptr<Database> db,
                                                                    const BackendConfig& config);

}  // namespace pynenc_cpp::sqlite
