#include "mem/mem_broker.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Broker>> OpenBroker(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemBroker(config);
  return Status::BadConfig("backend URI '" + config.uri + "': the sqlite broker is not built yet");
}

}  // namespace pynenc_cpp
