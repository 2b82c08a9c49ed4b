// Factory of the SQLite client data store (sqlite_client_data_store.cc).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/client_data_store.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

// Thread- and process-safe.
Result<std::unique_ptr<ClientDataStore>> NewSqliteClientDataStore(std::shared_ptr<Database> db,
                                                                  const BackendConfig& config);

}  // namespace pynenc_cpp::sqlite
