// Factories of the SQLite broker and client data store (concrete classes in .cc).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/client_data_store.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Thread- and process-safe. A blocked Retrieve wakes at once for routes made in
// this process; routes from other processes are seen within kCrossProcessPollMs.
Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config);

// Thread- and process-safe.
Result<std::unique_ptr<ClientDataStore>> NewSqliteClientDataStore(std::shared_ptr<Database> db,
                                                                  const BackendConfig& config);

inline constexpr int kCrossProcessPollMs = 20;

}  // namespace pynenc_cpp::sqlite
