#include "mem/mem_client_data_store.h"

namespace pynenc_cpp {

Result<std::unique_ptr<ClientDataStore>> OpenClientDataStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  return NewMemClientDataStore(config);
}

}  // namespace pynenc_cpp
