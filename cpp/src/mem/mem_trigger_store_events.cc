// In-memory trigger store: events, their indexes and the event -> invocation links.
#include <algorithm>

#include "mem/mem_trigger_store_impl.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp {
namespace mem_trigger {
namespace {

void EraseFromIndex(std::unordered_map<std::string, std::set<TimeKey>>& index,
                    const std::string& key, const TimeKey& entry) {
  auto it = index.find(key);
  if (it == index.end()) return;
  it->second.erase(entry);
  if (it->second.empty()) index.erase(it);
}

const std::set<TimeKey>& EmptyTimeKeys() {
  static const std::set<TimeKey> empty;
  return empty;
}

}  // namespace

bool MemTriggerStore::IsTriggeredLocked(const std::string& event_id) const {
  auto it = links_.find(event_id);
  return it != links_.end() && !it->second.empty();
}

StoredEvent MemTriggerStore::StoredEventLocked(const EventRow& row) const {
  StoredEvent out{row.json, {}};
  if (auto it = links_.find(row.event_id); it != links_.end()) {
    for (const EventLink& link : it->second)
      out.triggered_invocation_ids.push_back(link.invocation_id);
  }
  return out;
}

void MemTriggerStore::EraseEventLocked(const std::string& event_id) {
  auto it = events_.find(event_id);
  if (it != events_.end()) {
    const EventRow& row = it->second;
    const TimeKey key{row.timestamp_us, row.event_id};
    events_by_time_.erase(key);
    EraseFromIndex(events_by_code_, row.event_code, key);
    if (row.emitted_by_invocation_id) {
      EraseFromIndex(events_by_emitter_, *row.emitted_by_invocation_id, key);
    }
    events_.erase(it);
  }
  links_.erase(event_id);
}

Status MemTriggerStore::StoreEvent(const EventRow& event) {
  EventRow row = event;
  row.triggered_invocation_ids.clear();  // links are the source of truth
  MutexLock lock(mu_);
  const TimestampUs now = clock_->NowMicros();
  // Replace the row (keeping links), then index the new one.
  if (auto it = events_.find(row.event_id); it != events_.end()) {
    const EventRow& old = it->second;
    const TimeKey old_key{old.timestamp_us, old.event_id};
    events_by_time_.erase(old_key);
    EraseFromIndex(events_by_code_, old.event_code, old_key);
    if (old.emitted_by_invocation_id) {
      EraseFromIndex(events_by_emitter_, *old.emitted_by_invocation_id, old_key);
    }
  }
  const TimeKey key{row.timestamp_us, row.event_id};
  events_by_time_.insert(key);
  events_by_code_[row.event_code].insert(key);
  if (row.emitted_by_invocation_id) events_by_emitter_[*row.emitted_by_invocation_id].insert(key);
  if (!event.triggered_invocation_ids.empty()) {
    std::vector<EventLink>& links = links_[row.event_id];
    for (const std::string& inv : event.triggered_invocation_ids) {
      bool known = std::any_of(links.begin(), links.end(),
                               [&](const EventLink& l) { return l.invocation_id == inv; });
      if (!known) links.push_back({inv, std::nullopt, now});
    }
  }
  events_[row.event_id] = std::move(row);
  return Status::Ok();
}

Result<std::optional<StoredEvent>> MemTriggerStore::GetEvent(const std::string& event_id) {
  MutexLock lock(mu_);
  auto it = events_.find(event_id);
  if (it == events_.end()) return std::optional<StoredEvent>();
  return std::optional<StoredEvent>(StoredEventLocked(it->second));
}

bool MemTriggerStore::EventMatchesLocked(const EventRow& row, const EventFilter& f) const {
  // Called by EventMatches only, with mu_ held here (the analysis cannot follow it
  // into the template), and only when the filter asks, after the cheaper checks.
  return EventMatches(row, f, [&]() PYNENC_NO_THREAD_SAFETY_ANALYSIS {
    return IsTriggeredLocked(row.event_id);
  });
}

const std::set<TimeKey>& MemTriggerStore::EventCandidatesLocked(const EventFilter& f) const {
  if (f.emitted_by_invocation_id) {
    auto it = events_by_emitter_.find(*f.emitted_by_invocation_id);
    return it == events_by_emitter_.end() ? EmptyTimeKeys() : it->second;
  }
  if (f.event_code) {
    auto it = events_by_code_.find(*f.event_code);
    return it == events_by_code_.end() ? EmptyTimeKeys() : it->second;
  }
  return events_by_time_;
}

Result<std::vector<StoredEvent>> MemTriggerStore::GetEvents(const EventFilter& filter,
                                                            std::int64_t limit,
                                                            std::int64_t offset) {
  if (Status s = CheckPage(limit, offset); !s.ok()) return s;
  MutexLock lock(mu_);
  std::vector<StoredEvent> out;
  const std::set<TimeKey>& candidates = EventCandidatesLocked(filter);
  // Newest first; the end bound lets the walk start at the window's newest entry.
  auto upper = candidates.end();
  if (filter.end_us && *filter.end_us < std::numeric_limits<TimestampUs>::max()) {
    upper = candidates.lower_bound({*filter.end_us + 1, std::string()});
  }
  auto it = std::make_reverse_iterator(upper);
  std::int64_t skipped = 0;
  for (; it != candidates.rend() && static_cast<std::int64_t>(out.size()) < limit; ++it) {
    if (filter.start_us && it->first < *filter.start_us) break;
    const EventRow& row = events_.at(it->second);
    if (!EventMatchesLocked(row, filter)) continue;
    if (skipped < offset) {
      ++skipped;
      continue;
    }
    out.push_back(StoredEventLocked(row));
  }
  return out;
}

Result<std::int64_t> MemTriggerStore::CountEvents(const EventFilter& filter) {
  MutexLock lock(mu_);
  std::int64_t count = 0;
  const std::set<TimeKey>& candidates = EventCandidatesLocked(filter);
  auto it = filter.start_us ? candidates.lower_bound({*filter.start_us, std::string()})
                            : candidates.begin();
  for (; it != candidates.end(); ++it) {
    if (filter.end_us && it->first > *filter.end_us) break;
    if (EventMatchesLocked(events_.at(it->second), filter)) ++count;
  }
  return count;
}

Result<EventMarkerPage> MemTriggerStore::EventMarkers(TimestampUs start_us, TimestampUs end_us,
                                                      const std::optional<std::string>& event_code,
                                                      EventMarkerState state, std::int64_t limit,
                                                      std::int64_t offset) {
  if (Status s = CheckPage(limit, offset); !s.ok()) return s;
  const EventFilter filter = MarkerFilter(start_us, end_us, event_code, state);
  MutexLock lock(mu_);
  EventMarkerPage page;
  const std::set<TimeKey>& candidates = EventCandidatesLocked(filter);
  for (auto it = candidates.lower_bound({start_us, std::string()}); it != candidates.end(); ++it) {
    if (it->first > end_us) break;
    const EventRow& row = events_.at(it->second);
    if (!EventMatchesLocked(row, filter)) continue;
    const std::int64_t index = page.total++;
    if (index < offset || index >= offset + limit) continue;
    page.markers.push_back({row.event_id, row.event_code, row.timestamp_us, row.matched,
                            IsTriggeredLocked(row.event_id), row.emitted_by_invocation_id,
                            row.emitted_by_runner_context_id});
  }
  page.truncated = offset + static_cast<std::int64_t>(page.markers.size()) < page.total;
  return page;
}

Result<std::vector<std::string>> MemTriggerStore::EventCodes() {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  out.reserve(events_by_code_.size());
  for (const auto& [code, keys] : events_by_code_) out.push_back(code);
  std::sort(out.begin(), out.end());
  return out;
}

Status MemTriggerStore::LinkTriggerRunToEvents(const std::vector<std::string>& event_ids,
                                               const std::string& invocation_id,
                                               const std::string& trigger_run_id) {
  MutexLock lock(mu_);
  const TimestampUs now = clock_->NowMicros();
  for (const std::string& event_id : event_ids) {
    std::vector<EventLink>& links = links_[event_id];
    bool known = std::any_of(links.begin(), links.end(),
                             [&](const EventLink& l) { return l.invocation_id == invocation_id; });
    if (!known) links.push_back({invocation_id, trigger_run_id, now});
  }
  return Status::Ok();
}

Result<std::vector<std::string>> MemTriggerStore::InvocationsTriggeredByEvent(
    const std::string& event_id) {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  if (auto it = links_.find(event_id); it != links_.end()) {
    for (const EventLink& link : it->second) out.push_back(link.invocation_id);
  }
  return out;
}

}  // namespace mem_trigger
}  // namespace pynenc_cpp
