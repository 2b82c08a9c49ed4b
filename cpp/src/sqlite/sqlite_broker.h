// Factories of the SQLite broker and client data store (concrete classes in .cc).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/client_data_store.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Thread- and process-safe. A blocked Retrieve wakes at once for a route made
// by any process (the database's WakeBoard, sqlite_wake.h); only where the board
// cannot be shared are other processes' routes seen by a kCrossProcessPollMs poll.
Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config);

// Thread- and process-safe.
Result<std::unique_ptr<ClientDataStore>> NewSqliteClientDataStore(std::shared_ptr<Database> db,
                                                                  const BackendConfig& config);

}  // namespace pynenc_cpp::sqlite
