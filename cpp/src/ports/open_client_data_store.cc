#include "mem/mem_client_data_store.h"

namespace pynenc_cpp {

Result<std::unique_ptr<ClientDataStore>> OpenClientDataStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemClientDataStore(config);
  return Status::BadConfig("backend URI '" + config.uri + "': the sqlite client data store is not built yet");
}

}  // namespace pynenc_cpp
