#include "mem/mem_orchestrator.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Orchestrator>> OpenOrchestrator(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  return NewMemOrchestrator(config);
}

}  // namespace pynenc_cpp
