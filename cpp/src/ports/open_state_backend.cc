#include "mem/mem_state_backend.h"

namespace pynenc_cpp {

Result<std::unique_ptr<StateBackend>> OpenStateBackend(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemStateBackend(config);
  return Status::BadConfig("backend URI '" + config.uri + "': the sqlite state backend is not built yet");
}

Result<std::vector<std::pair<std::string, std::string>>> DiscoverAppInfos(
    const BackendConfig& config) {
  // Discovery has no app of its own: only the URI matters.
  BackendConfig any_app = config;
  if (any_app.app_id.empty()) any_app.app_id = "discovery";
  Result<ParsedBackendUri> parsed = CheckBackendConfig(any_app);
  if (!parsed.ok()) return parsed.status();
  return MemDiscoverAppInfos();
}

}  // namespace pynenc_cpp
