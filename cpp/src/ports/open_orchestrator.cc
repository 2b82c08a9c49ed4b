#include "mem/mem_orchestrator.h"

namespace pynenc_cpp {

Result<std::unique_ptr<Orchestrator>> OpenOrchestrator(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemOrchestrator(config);
  return Status::BadConfig("backend URI '" + config.uri + "': the sqlite orchestrator is not built yet");
}

}  // namespace pynenc_cpp
