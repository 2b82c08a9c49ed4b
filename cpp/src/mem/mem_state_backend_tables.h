// The two indexed tables of the in-memory state backend: invocations (with their
// parent / event / workflow indexes) and history (by invocation and by time).
//
// Thread safety: NOT thread-safe. REQUIRES for every method: the owning
// MemStateBackend's lock is held (shared for const methods, exclusive otherwise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "pynenc_cpp/ports/state_backend.h"

namespace pynenc_cpp::mem {

class InvocationTable {
 public:
  // Inserts or replaces; a replaced record keeps its first-upsert sequence.
  void Upsert(const InvocationRecord& record);
  // nullptr if absent. The pointer is valid until the next non-const call.
  const InvocationRecord* Find(const InvocationId& id) const;
  std::vector<InvocationId> Children(const InvocationId& parent) const;
  std::vector<InvocationId> ByParentEvent(const std::string& event_id) const;
  // Empty strings count as "no filter". Only invocations with a workflow match.
  std::vector<InvocationId> ByWorkflow(const std::optional<std::string>& workflow_id,
                                       const std::optional<std::string>& workflow_type) const;
  void Clear();

 private:
  struct Entry {
    std::uint64_t sequence = 0;
    InvocationRecord record;
  };
  // key -> (first-upsert sequence -> id): insertion-ordered, O(log n) removal.
  using Index = std::unordered_map<std::string, std::map<std::uint64_t, InvocationId>>;

  void AddToIndexes(const Entry& entry);
  void RemoveFromIndexes(const Entry& entry);
  static std::vector<InvocationId> Lookup(const Index& index, const std::string& key);

  std::unordered_map<InvocationId, Entry> by_id_;
  Index by_parent_;
  Index by_event_;
  Index by_workflow_id_;
  Index by_workflow_type_;
  std::map<std::uint64_t, InvocationId> in_any_workflow_;
  std::uint64_t next_sequence_ = 0;
};

class HistoryTable {
 public:
  // Adds one entry for `id`; an entry with equal (id, timestamp, status) has its
  // JSON replaced in place instead.
  void Add(const InvocationId& id, TimestampUs timestamp_us, InvocationStatus status,
           const std::string& history_json);
  std::vector<HistoryRecord> Get(const InvocationId& id) const;
  // REQUIRES: limit > 0.
  HistoryPage Range(TimestampUs start_us, TimestampUs end_us,
                    const std::optional<HistoryPosition>& after, std::size_t limit) const;
  // REQUIRES: limit > 0.
  std::vector<InvocationId> IdsInRange(TimestampUs start_us, TimestampUs end_us,
                                       const std::optional<InvocationId>& after,
                                       std::size_t limit) const;
  void Clear();

 private:
  std::map<HistoryPosition, HistoryRecord> by_time_;
  std::unordered_map<InvocationId, std::set<HistoryPosition>> by_invocation_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace pynenc_cpp::mem
