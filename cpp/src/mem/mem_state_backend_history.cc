// HistoryTable: every entry once, in a time-ordered map keyed by
// (timestamp, arrival sequence); per invocation, the keys of its entries.
#include <iterator>
#include <limits>
#include <utility>

#include "mem/mem_state_backend_tables.h"

namespace pynenc_cpp::mem {

void HistoryTable::Add(const InvocationId& id, TimestampUs timestamp_us, InvocationStatus status,
                       const std::string& history_json) {
  std::set<HistoryPosition>& positions = by_invocation_[id];
  // Same (id, timestamp, status) as an existing entry: replace its JSON.
  for (auto it = positions.lower_bound(HistoryPosition{timestamp_us, 0});
       it != positions.end() && it->timestamp_us == timestamp_us; ++it) {
    HistoryRecord& existing = by_time_.at(*it);
    if (existing.status == status) {
      existing.history_json = history_json;
      return;
    }
  }
  const HistoryPosition position{timestamp_us, next_sequence_++};
  by_time_.emplace(position, HistoryRecord{id, timestamp_us, status, history_json});
  positions.insert(position);
}

std::vector<HistoryRecord> HistoryTable::Get(const InvocationId& id) const {
  std::vector<HistoryRecord> out;
  auto it = by_invocation_.find(id);
  if (it == by_invocation_.end()) return out;
  out.reserve(it->second.size());
  for (const HistoryPosition& position : it->second) out.push_back(by_time_.at(position));
  return out;
}

HistoryPage HistoryTable::Range(TimestampUs start_us, TimestampUs end_us,
                                const std::optional<HistoryPosition>& after,
                                std::size_t limit) const {
  HistoryPage page;
  const HistoryPosition first{start_us, 0};
  auto it = (after && *after >= first) ? by_time_.upper_bound(*after) : by_time_.lower_bound(first);
  HistoryPosition last{};
  for (; it != by_time_.end() && it->first.timestamp_us <= end_us; ++it) {
    if (page.records.size() == limit) {
      page.next = last;  // at least one more entry is in range
      break;
    }
    page.records.push_back(it->second);
    last = it->first;
  }
  return page;
}

std::vector<InvocationId> HistoryTable::IdsInRange(TimestampUs start_us, TimestampUs end_us,
                                                   const std::optional<InvocationId>& after,
                                                   std::size_t limit) const {
  // Distinct ids in range, sorted; then the page after `after`. Linear in the
  // number of entries in range, like sqlite's DISTINCT ... ORDER BY scan.
  std::set<InvocationId> ids;
  for (auto it = by_time_.lower_bound(HistoryPosition{start_us, 0});
       it != by_time_.end() && it->first.timestamp_us <= end_us; ++it) {
    if (after && !(it->second.invocation_id > *after)) continue;
    ids.insert(it->second.invocation_id);
  }
  std::vector<InvocationId> out;
  for (auto it = ids.begin(); it != ids.end() && out.size() < limit; ++it) out.push_back(*it);
  return out;
}

void HistoryTable::Clear() {
  by_time_.clear();
  by_invocation_.clear();
}

}  // namespace pynenc_cpp::mem
