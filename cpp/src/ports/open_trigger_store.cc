#include "mem/mem_trigger_store.h"

namespace pynenc_cpp {

Result<std::unique_ptr<TriggerStore>> OpenTriggerStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemTriggerStore(config);
  return Status::BadConfig("backend URI '" + config.uri + "': the sqlite trigger store is not built yet");
}

Result<EventMarkerState> ParseEventMarkerState(const std::string& state) {
  if (state == "all") return EventMarkerState::kAll;
  if (state == "matched") return EventMarkerState::kMatched;
  if (state == "unmatched") return EventMarkerState::kUnmatched;
  if (state == "triggered") return EventMarkerState::kTriggered;
  if (state == "untriggered") return EventMarkerState::kUntriggered;
  return Status::InvalidArgument("unknown event marker state '" + state +
                                 "'; expected one of all, matched, unmatched, triggered, "
                                 "untriggered");
}

}  // namespace pynenc_cpp
