// The in-memory TriggerStore. Private to cpp/src/mem: its methods are split by
// concern over mem_trigger_store.cc (conditions, triggers, valid conditions,
// cron, claims, purge), mem_trigger_store_events.cc (events and links) and
// mem_trigger_store_runs.cc (trigger runs and retention).
//
// Thread safety: every public method takes mu_ for its whole duration, so each
// call is atomic with respect to every other call on the same object.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "mem/mem_trigger_store.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp {
namespace mem_trigger {

// Ids in first-insertion order without duplicates.
class OrderedIds {
 public:
  // False if already present.
  bool Insert(const std::string& id) {
    if (!present_.insert(id).second) return false;
    order_.push_back(id);
    return true;
  }
  void Erase(const std::string& id);
  bool empty() const { return order_.empty(); }
  const std::vector<std::string>& items() const { return order_; }

 private:
  std::vector<std::string> order_;
  std::unordered_set<std::string> present_;
};

// Sort key of a time-ordered record: (time, id). Records without a time use kNoTime.
using TimeKey = std::pair<TimestampUs, std::string>;
inline constexpr TimestampUs kNoTime = std::numeric_limits<TimestampUs>::min();

struct ConditionEntry {
  std::string json;
  std::string context_type;
  std::uint64_t seq = 0;  // registration order
};

struct ValidConditionEntry {
  std::string json;
  std::uint64_t seq = 0;
};

struct EventLink {
  std::string invocation_id;
  std::optional<std::string> trigger_run_id;
  TimestampUs linked_at_us = 0;
};

class MemTriggerStore final : public TriggerStore {
 public:
  explicit MemTriggerStore(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

  // Conditions, triggers, valid conditions, cron, claims (mem_trigger_store.cc).
  Status RegisterCondition(const std::string& condition_id, const std::string& json,
                           const std::string& context_type) override;
  Result<std::optional<std::string>> GetCondition(const std::string& condition_id) override;
  Result<std::vector<std::string>> AllConditions() override;
  Status RegisterSourceTaskCondition(const std::string& task_id_key,
                                     const std::string& condition_id) override;
  Result<std::vector<std::string>> ConditionsSourcedFromTask(
      const std::string& task_id_key, const std::optional<std::string>& context_type) override;
  Status RegisterTrigger(const TriggerDefinitionRow& trigger) override;
  Result<std::optional<TriggerDefinitionRow>> GetTrigger(const std::string& trigger_id) override;
  Result<std::vector<TriggerDefinitionRow>> TriggersForCondition(
      const std::string& condition_id) override;
  Result<std::int64_t> CleanTaskTriggers(const std::string& task_id_key) override;
  Status RecordValidConditions(const std::vector<IdJson>& valid_conditions) override;
  Result<std::vector<IdJson>> ValidConditions() override;
  Status ClearValidConditions(const std::vector<std::string>& valid_condition_ids) override;
  Status NotePendingReports(const std::vector<IdJson>& notes) override;
  Result<std::vector<IdJson>> PendingReports() override;
  Status ClearPendingReports(const std::vector<std::string>& note_ids) override;
  Result<bool> WaitValidConditions(std::string* cursor, TimestampUs timeout_us) override;
  Status NudgeValidConditionsWaiter(const std::string& cursor) override;
  Result<std::optional<TimestampUs>> LastCronExecution(const std::string& condition_id) override;
  Result<bool> StoreLastCronExecution(const std::string& condition_id, TimestampUs execution_us,
                                      CronExpectation expected) override;
  Result<bool> ClaimTriggerRun(const std::string& trigger_run_id,
                               std::int64_t expiration_seconds) override;
  Status Purge() override;

  // Events (mem_trigger_store_events.cc).
  Status StoreEvent(const EventRow& event) override;
  Result<std::optional<StoredEvent>> GetEvent(const std::string& event_id) override;
  Result<std::vector<StoredEvent>> GetEvents(const EventFilter& filter, std::int64_t limit,
                                             std::int64_t offset) override;
  Result<std::int64_t> CountEvents(const EventFilter& filter) override;
  Result<EventMarkerPage> EventMarkers(TimestampUs start_us, TimestampUs end_us,
                                       const std::optional<std::string>& event_code,
                                       EventMarkerState state, std::int64_t limit,
                                       std::int64_t offset) override;
  Result<std::vector<std::string>> EventCodes() override;
  Status LinkTriggerRunToEvents(const std::vector<std::string>& event_ids,
                                const std::string& invocation_id,
                                const std::string& trigger_run_id) override;
  Result<std::vector<std::string>> InvocationsTriggeredByEvent(
      const std::string& event_id) override;

  // Trigger runs and retention (mem_trigger_store_runs.cc).
  Status StoreTriggerRun(const TriggerRunRow& run) override;
  Result<std::optional<std::string>> GetTriggerRun(const std::string& trigger_run_id) override;
  Result<std::vector<std::string>> RunsForEvent(const std::string& event_id) override;
  Result<std::vector<std::string>> RunsForInvocation(const std::string& invocation_id) override;
  Result<std::vector<std::string>> RunsSourcedByInvocation(
      const std::string& invocation_id) override;
  Result<std::vector<std::string>> RunsForValidCondition(
      const std::string& valid_condition_id) override;
  Result<std::vector<std::string>> RunsInTimeRange(const TriggerRunFilter& filter) override;
  Result<std::vector<std::string>> ReferencedAtomicServiceRunIds() override;
  Result<std::vector<std::string>> AgePurgeEvents(TimestampUs threshold_us) override;
  Result<std::int64_t> AgePurgeTriggerRuns(TimestampUs threshold_us) override;
  Result<std::vector<std::string>> CapPurgeEvents(std::int64_t max_records) override;
  Result<std::int64_t> CapPurgeTriggerRuns(std::int64_t max_records) override;
  Result<std::int64_t> CascadeDeleteRunsForEvents(
      const std::vector<std::string>& event_ids) override;

 private:
  using IdIndex = std::unordered_map<std::string, std::unordered_set<std::string>>;

  // Every *Locked helper runs with mu_ held.
  void UnlinkTriggerLocked(const std::string& trigger_id) PYNENC_REQUIRES(mu_);
  bool IsTriggeredLocked(const std::string& event_id) const PYNENC_REQUIRES(mu_);
  bool EventMatchesLocked(const EventRow& row, const EventFilter& filter) const PYNENC_REQUIRES(mu_);
  // The narrowest time-ordered index that covers `filter`.
  const std::set<TimeKey>& EventCandidatesLocked(const EventFilter& filter) const PYNENC_REQUIRES(mu_);
  StoredEvent StoredEventLocked(const EventRow& row) const PYNENC_REQUIRES(mu_);
  void EraseEventLocked(const std::string& event_id) PYNENC_REQUIRES(mu_);
  void IndexRunLocked(const TriggerRunRow& run) PYNENC_REQUIRES(mu_);
  void EraseRunLocked(const std::string& trigger_run_id) PYNENC_REQUIRES(mu_);
  // JSON of the runs named by `index[key]`, in run order.
  std::vector<std::string> RunsFromIndexLocked(const IdIndex& index, const std::string& key) const PYNENC_REQUIRES(mu_);

  const std::shared_ptr<Clock> clock_;
  mutable Mutex mu_;
  std::uint64_t next_seq_ PYNENC_GUARDED_BY(mu_) = 0;

  // Conditions and triggers.
  std::unordered_map<std::string, ConditionEntry> conditions_ PYNENC_GUARDED_BY(mu_);
  // seq -> condition id
  std::map<std::uint64_t, std::string> condition_order_ PYNENC_GUARDED_BY(mu_);
  // task key -> ids
  std::unordered_map<std::string, OrderedIds> source_task_conditions_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<std::string, TriggerDefinitionRow> triggers_ PYNENC_GUARDED_BY(mu_);
  // condition -> trigger ids
  std::unordered_map<std::string, OrderedIds> condition_triggers_ PYNENC_GUARDED_BY(mu_);

  // Valid conditions, in recording order.
  std::unordered_map<std::string, ValidConditionEntry> valid_conditions_ PYNENC_GUARDED_BY(mu_);
  std::map<std::uint64_t, std::string> valid_order_ PYNENC_GUARDED_BY(mu_);
  std::map<std::string, std::string> pending_reports_ PYNENC_GUARDED_BY(mu_);  // id -> json
  // Bumped (under mu_) by each RecordValidConditions and nudge, with a
  // notification of wake_cv_: what WaitValidConditions' cursor holds.
  std::uint64_t valid_recorded_ PYNENC_GUARDED_BY(mu_) = 0;
  std::condition_variable wake_cv_;

  // Cron last executions and trigger-run claims (claim expirations).
  std::unordered_map<std::string, TimestampUs> cron_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<std::string, TimestampUs> claims_ PYNENC_GUARDED_BY(mu_);
  std::uint64_t claims_since_sweep_ PYNENC_GUARDED_BY(mu_) = 0;

  // Events and their indexes (TimeKey = (timestamp, event id)).
  std::unordered_map<std::string, EventRow> events_ PYNENC_GUARDED_BY(mu_);
  std::set<TimeKey> events_by_time_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::set<TimeKey>> events_by_code_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::set<TimeKey>> events_by_emitter_ PYNENC_GUARDED_BY(mu_);
  // event id -> links
  std::unordered_map<std::string, std::vector<EventLink>> links_ PYNENC_GUARDED_BY(mu_);

  // Trigger runs and their indexes (TimeKey = (run time or kNoTime, run id)).
  std::unordered_map<std::string, TriggerRunRow> runs_ PYNENC_GUARDED_BY(mu_);
  std::set<TimeKey> runs_by_time_ PYNENC_GUARDED_BY(mu_);
  IdIndex runs_by_event_ PYNENC_GUARDED_BY(mu_);
  IdIndex runs_by_invocation_ PYNENC_GUARDED_BY(mu_);
  IdIndex runs_by_source_ PYNENC_GUARDED_BY(mu_);
  IdIndex runs_by_valid_condition_ PYNENC_GUARDED_BY(mu_);
};

// The time a run sorts and ages by: executed_at, else claimed_at, else kNoTime.
inline TimestampUs RunTime(const TriggerRunRow& run) {
  if (run.executed_at_us) return *run.executed_at_us;
  if (run.claimed_at_us) return *run.claimed_at_us;
  return kNoTime;
}


}  // namespace mem_trigger
}  // namespace pynenc_cpp
