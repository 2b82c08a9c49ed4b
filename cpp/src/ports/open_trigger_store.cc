#include "pynenc_cpp/ports/trigger_store.h"

namespace pynenc_cpp {

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
