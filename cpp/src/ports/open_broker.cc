#include "mem/mem_broker.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Broker>> OpenBroker(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  return NewMemBroker(config);
}

}  // namespace pynenc_cpp
