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

EventFilter MarkerFilter(TimestampUs start_us, TimestampUs end_us,
                         const std::optional<std::string>& event_code, EventMarkerState state) {
  EventFilter filter;
  filter.event_code = event_code;
  filter.start_us = start_us;
  filter.end_us = end_us;
  switch (state) {
    case EventMarkerState::kAll:
      break;
    case EventMarkerState::kMatched:
      filter.matched = true;
      break;
    case EventMarkerState::kUnmatched:
      filter.matched = false;
      break;
    case EventMarkerState::kTriggered:
      filter.triggered = true;
      break;
    case EventMarkerState::kUntriggered:
      filter.triggered = false;
      break;
  }
  return filter;
}

Status CheckPage(std::int64_t limit, std::int64_t offset) {
  if (limit < 0) return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(limit));
  if (offset < 0) {
    return Status::InvalidArgument("offset must be >= 0, got " + std::to_string(offset));
  }
  return Status::Ok();
}

}  // namespace pynenc_cpp
