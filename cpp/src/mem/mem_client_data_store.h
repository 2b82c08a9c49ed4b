// Factory of the in-memory client data store.
#pragma once

#include <memory>

#include "pynenc_cpp/ports/client_data_store.h"

namespace pynenc_cpp {
// Thread-safe.
std::unique_ptr<ClientDataStore> NewMemClientDataStore(const BackendConfig& config);
}  // namespace pynenc_cpp
