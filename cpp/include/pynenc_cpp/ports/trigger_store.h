// TriggerStore port: the durable state of pynenc's trigger component.
//
// Maps pynenc's BaseTrigger (pynenc/trigger/base_trigger.py). The Python adapter
// serializes pynenc's objects exactly as pynenc's SQLiteTrigger does (condition,
// valid-condition, event and trigger-run JSON; trigger-definition columns) and
// passes the fields the engine must filter or sort on alongside the JSON:
//   _register_condition / get_condition / _get_all_conditions
//       -> RegisterCondition / GetCondition / AllConditions
//   _register_source_task_condition / get_conditions_sourced_from_task
//       -> RegisterSourceTaskCondition / ConditionsSourcedFromTask
//   register_trigger / _get_trigger / get_triggers_for_condition /
//   clean_task_trigger_definitions
//       -> RegisterTrigger / GetTrigger / TriggersForCondition / CleanTaskTriggers
//   record_valid_condition(s) / get_valid_conditions / clear_valid_conditions
//       -> RecordValidConditions / ValidConditions / ClearValidConditions
//   get_last_cron_execution / store_last_cron_execution
//       -> LastCronExecution / StoreLastCronExecution (compare-and-set)
//   claim_trigger_run -> ClaimTriggerRun
//   store_event / get_event / get_events / count_events /
//   get_event_markers_in_timerange / list_event_codes
//       -> StoreEvent / GetEvent / GetEvents / CountEvents / EventMarkers / EventCodes
//   link_trigger_run_to_events / get_invocations_triggered_by_event
//       -> LinkTriggerRunToEvents / InvocationsTriggeredByEvent
//   store_trigger_run / get_trigger_run / get_trigger_runs_for_event /
//   get_trigger_runs_for_invocation / get_trigger_runs_in_timerange (and the
//   overridable get_trigger_runs_sourced_by_invocation /
//   get_trigger_runs_for_valid_condition / get_referenced_atomic_service_run_ids)
//       -> StoreTriggerRun / GetTriggerRun / RunsForEvent / RunsForInvocation /
//          RunsInTimeRange / RunsSourcedByInvocation / RunsForValidCondition /
//          ReferencedAtomicServiceRunIds
//   _age_purge_events / _age_purge_trigger_runs / _cap_purge_events /
//   _cap_purge_trigger_runs / _cascade_delete_runs_for_events / _purge
//       -> AgePurgeEvents / AgePurgeTriggerRuns / CapPurgeEvents /
//          CapPurgeTriggerRuns / CascadeDeleteRunsForEvents / Purge
//
// Orderings (the same for every backend):
//   * conditions, valid conditions, source-task conditions and the triggers of a
//     condition come back in first-registration order;
//   * events from GetEvents newest first (timestamp descending, then event id
//     descending); event markers oldest first (timestamp, then event id);
//   * trigger runs ascending by their time: executed_at, else claimed_at (runs
//     with neither sort first), then run id.
// An event is "matched" when its writer said so (matched_condition_ids non-empty)
// and "triggered" when at least one invocation is linked to it.
//
// Thread safety: implementations are thread-safe. ClaimTriggerRun and
// StoreLastCronExecution are atomic: among concurrent callers exactly one wins.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

// A stored trigger definition (pynenc's TriggerDefinitionDTO, as SQLite stores it).
struct TriggerDefinitionRow {
  std::string trigger_id;
  std::string task_id_key;                 // TaskId.key of the task to run
  std::vector<std::string> condition_ids;  // order kept, duplicates dropped
  std::string logic;                       // CompositeLogic value ("and" / "or")
  std::optional<std::string> argument_provider_json;
  bool operator==(const TriggerDefinitionRow&) const = default;
};

// An id with its serialized payload.
struct IdJson {
  std::string id;
  std::string json;
  bool operator==(const IdJson&) const = default;
};

// What StoreLastCronExecution expects the stored value to be.
struct CronExpectation {
  enum class Kind { kAny, kAbsent, kValue };
  Kind kind = Kind::kAny;
  TimestampUs value = 0;                                          // only for kValue
  static CronExpectation Any() { return {Kind::kAny, 0}; }        // no check
  static CronExpectation Absent() { return {Kind::kAbsent, 0}; }  // never executed
  static CronExpectation Value(TimestampUs v) { return {Kind::kValue, v}; }
};

// One event (pynenc's EventRecord) with its indexed columns.
struct EventRow {
  std::string event_id;
  std::string event_code;
  TimestampUs timestamp_us = 0;
  std::string json;  // EventRecord.to_json(app)
  bool matched = false;
  std::optional<std::string> emitted_by_invocation_id;
  std::optional<std::string> emitted_by_task_id;
  std::optional<std::string> emitted_by_runner_context_id;
  // Legacy seeding: links these invocations to the event (as SQLite does).
  std::vector<std::string> triggered_invocation_ids;
};

// A stored event: its JSON and the invocations linked to it, in link order.
struct StoredEvent {
  std::string json;
  std::vector<std::string> triggered_invocation_ids;
  bool operator==(const StoredEvent&) const = default;
};

// Filters of get_events / count_events; every set field must hold. Times inclusive.
struct EventFilter {
  std::optional<std::string> event_code;
  std::optional<TimestampUs> start_us;
  std::optional<TimestampUs> end_us;
  std::optional<bool> matched;
  std::optional<bool> triggered;
  std::optional<std::string> emitted_by_invocation_id;
  std::optional<std::string> emitted_by_task_id;
};

// Whether `row` passes every set field of `f`; `triggered()` says whether the event
// is linked to a trigger run (called only when `f` asks). Shared by the stores
// that filter events in C++ (memory, and Redis over a time window).
template <typename Triggered>
bool EventMatches(const EventRow& row, const EventFilter& f, Triggered&& triggered) {
  if (f.event_code && row.event_code != *f.event_code) return false;
  if (f.start_us && row.timestamp_us < *f.start_us) return false;
  if (f.end_us && row.timestamp_us > *f.end_us) return false;
  if (f.matched && row.matched != *f.matched) return false;
  if (f.emitted_by_invocation_id && row.emitted_by_invocation_id != f.emitted_by_invocation_id) {
    return false;
  }
  if (f.emitted_by_task_id && row.emitted_by_task_id != f.emitted_by_task_id) return false;
  if (f.triggered && triggered() != *f.triggered) return false;
  return true;
}

enum class EventMarkerState { kAll, kMatched, kUnmatched, kTriggered, kUntriggered };
// "all", "matched", "unmatched", "triggered", "untriggered"; kInvalidArgument otherwise.
Result<EventMarkerState> ParseEventMarkerState(const std::string& state);
// The filter of an event-marker window (EventMarkers): the code and the times
// given, and what `state` asks of matched / triggered.
EventFilter MarkerFilter(TimestampUs start_us, TimestampUs end_us,
                         const std::optional<std::string>& event_code, EventMarkerState state);
// A page's limit and offset: both >= 0 (kInvalidArgument naming the one that is not).
Status CheckPage(std::int64_t limit, std::int64_t offset);

struct EventMarker {
  std::string event_id;
  std::string event_code;
  TimestampUs timestamp_us = 0;
  bool matched = false;
  bool triggered = false;
  std::optional<std::string> emitted_by_invocation_id;
  std::optional<std::string> emitted_by_runner_context_id;
};

struct EventMarkerPage {
  std::vector<EventMarker> markers;
  std::int64_t total = 0;  // markers in the window before paging
  bool truncated = false;  // offset + markers.size() < total
};

// One trigger run (pynenc's TriggerRunRecord) with its indexed columns. The id
// lists are the relations the run is found by; the adapter passes the union of
// the record's flat lists and its participants' ids.
struct TriggerRunRow {
  std::string trigger_run_id;
  std::string trigger_id;
  std::string task_id_key;
  std::string logic;
  std::optional<TimestampUs> claimed_at_us;
  std::optional<TimestampUs> executed_at_us;
  std::optional<std::string> triggered_invocation_id;
  std::optional<std::string> atomic_service_run_id;
  std::string json;  // TriggerRunRecord.to_json()
  std::vector<std::string> event_ids;
  std::vector<std::string> source_invocation_ids;
  std::vector<std::string> valid_condition_ids;
};

// Filters of get_trigger_runs_in_timerange. A run's time is executed_at, else
// claimed_at; runs with neither never match. Times inclusive.
struct TriggerRunFilter {
  TimestampUs start_us = 0;
  TimestampUs end_us = 0;
  std::optional<std::string> event_code;  // run references a stored event of this code
  std::optional<std::string> task_id_key;
  std::optional<std::int64_t> limit;  // nullopt: no limit; must be >= 0
};

class TriggerStore {
 public:
  TriggerStore() = default;
  TriggerStore(const TriggerStore&) = delete;
  TriggerStore& operator=(const TriggerStore&) = delete;
  virtual ~TriggerStore() = default;

  // ---- Conditions ----------------------------------------------------------
  // Stores (or replaces the JSON and context type of) a condition. `context_type`
  // is the name of the condition's context class ("StatusContext", ...), the key
  // ConditionsSourcedFromTask filters on. A recorded cron execution is kept.
  virtual Status RegisterCondition(const std::string& condition_id, const std::string& json,
                                   const std::string& context_type) = 0;
  // The condition's JSON; nullopt if it was never registered.
  virtual Result<std::optional<std::string>> GetCondition(const std::string& condition_id) = 0;
  // Every condition's JSON.
  virtual Result<std::vector<std::string>> AllConditions() = 0;
  // Records that `condition_id` watches task `task_id_key` (idempotent).
  virtual Status RegisterSourceTaskCondition(const std::string& task_id_key,
                                             const std::string& condition_id) = 0;
  // JSON of the registered conditions watching `task_id_key`, restricted to
  // `context_type` when given. Ids without a registered condition are skipped.
  virtual Result<std::vector<std::string>> ConditionsSourcedFromTask(
      const std::string& task_id_key, const std::optional<std::string>& context_type) = 0;

  // ---- Trigger definitions -------------------------------------------------
  // Stores or replaces a trigger and links it to each of its conditions.
  virtual Status RegisterTrigger(const TriggerDefinitionRow& trigger) = 0;
  virtual Result<std::optional<TriggerDefinitionRow>> GetTrigger(const std::string& trigger_id) = 0;
  // Stored triggers linked to `condition_id`.
  virtual Result<std::vector<TriggerDefinitionRow>> TriggersForCondition(
      const std::string& condition_id) = 0;
  // Removes every trigger of `task_id_key` and its condition links; returns how many.
  virtual Result<std::int64_t> CleanTaskTriggers(const std::string& task_id_key) = 0;

  // ---- Valid conditions ----------------------------------------------------
  // Stores or replaces each (valid_condition_id, json), all in one atomic step.
  virtual Status RecordValidConditions(const std::vector<IdJson>& valid_conditions) = 0;
  virtual Result<std::vector<IdJson>> ValidConditions() = 0;
  // Removes the named valid conditions; unknown ids are ignored.
  virtual Status ClearValidConditions(const std::vector<std::string>& valid_condition_ids) = 0;

  // ---- Pending reports -----------------------------------------------------
  // A status change whose trigger report is not made yet: noted (by id) before
  // the change, cleared once its report is made. A note left behind names a
  // report its process died before making, for another process to make it.
  // Stores or replaces each (note_id, json), all in one atomic step.
  virtual Status NotePendingReports(const std::vector<IdJson>& notes) = 0;
  // Every note, ordered by id.
  virtual Result<std::vector<IdJson>> PendingReports() = 0;
  // Removes the named notes; unknown ids are ignored.
  virtual Status ClearPendingReports(const std::vector<std::string>& note_ids) = 0;

  // ---- Wake-ups of the trigger loop ----------------------------------------
  // Blocks until valid conditions are recorded (RecordValidConditions, by any
  // process on the same store) after the previous call with this `cursor`
  // returned, or until `timeout_us` passes (<= 0: no wait). `cursor` is the
  // caller's own watch: start with "" (that call only arms the watch and
  // returns true at once, so the caller reads the valid conditions first) and
  // pass what each call leaves in it. A recording made while the caller is not
  // waiting is remembered for its next call, so none is missed between a read
  // and the wait after it. True when woken (a spurious wake is allowed: the
  // caller reads again), false when the timeout passed.
  virtual Result<bool> WaitValidConditions(std::string* cursor, TimestampUs timeout_us) = 0;
  // Ends the current (or next) wait of `cursor` early, as a wake-up would:
  // for a runner that stops. Other waiters may wake spuriously.
  virtual Status NudgeValidConditionsWaiter(const std::string& cursor) = 0;

  // ---- Cron and claims -----------------------------------------------------
  virtual Result<std::optional<TimestampUs>> LastCronExecution(const std::string& condition_id) = 0;
  // Compare-and-set: stores `execution_us` and returns true iff the current
  // value satisfies `expected`; otherwise changes nothing and returns false.
  virtual Result<bool> StoreLastCronExecution(const std::string& condition_id,
                                              TimestampUs execution_us,
                                              CronExpectation expected) = 0;
  // True, and claims `trigger_run_id` until now + expiration_seconds, unless an
  // unexpired claim exists (then false). Time from the config's Clock.
  virtual Result<bool> ClaimTriggerRun(const std::string& trigger_run_id,
                                       std::int64_t expiration_seconds) = 0;

  // ---- Events --------------------------------------------------------------
  // Stores or replaces an event and links its seeded triggered invocations.
  // Links made earlier (LinkTriggerRunToEvents) are kept.
  virtual Status StoreEvent(const EventRow& event) = 0;
  virtual Result<std::optional<StoredEvent>> GetEvent(const std::string& event_id) = 0;
  // Filtered events, newest first, skipping `offset` and returning at most
  // `limit`. kInvalidArgument if limit or offset is negative.
  virtual Result<std::vector<StoredEvent>> GetEvents(const EventFilter& filter, std::int64_t limit,
                                                     std::int64_t offset) = 0;
  virtual Result<std::int64_t> CountEvents(const EventFilter& filter) = 0;
  // Markers of events with start_us <= timestamp <= end_us, oldest first.
  // kInvalidArgument if limit or offset is negative.
  virtual Result<EventMarkerPage> EventMarkers(TimestampUs start_us, TimestampUs end_us,
                                               const std::optional<std::string>& event_code,
                                               EventMarkerState state, std::int64_t limit,
                                               std::int64_t offset) = 0;
  // Distinct codes of the stored events, sorted.
  virtual Result<std::vector<std::string>> EventCodes() = 0;
  // Links `invocation_id` to each event id (stored or not), once per pair, all in
  // one atomic step; later links sort after earlier ones.
  virtual Status LinkTriggerRunToEvents(const std::vector<std::string>& event_ids,
                                        const std::string& invocation_id,
                                        const std::string& trigger_run_id) = 0;
  virtual Result<std::vector<std::string>> InvocationsTriggeredByEvent(
      const std::string& event_id) = 0;

  // ---- Trigger runs --------------------------------------------------------
  // Stores or replaces a run, replacing its relation indexes.
  virtual Status StoreTriggerRun(const TriggerRunRow& run) = 0;
  virtual Result<std::optional<std::string>> GetTriggerRun(const std::string& trigger_run_id) = 0;
  virtual Result<std::vector<std::string>> RunsForEvent(const std::string& event_id) = 0;
  virtual Result<std::vector<std::string>> RunsForInvocation(const std::string& invocation_id) = 0;
  virtual Result<std::vector<std::string>> RunsSourcedByInvocation(
      const std::string& invocation_id) = 0;
  virtual Result<std::vector<std::string>> RunsForValidCondition(
      const std::string& valid_condition_id) = 0;
  virtual Result<std::vector<std::string>> RunsInTimeRange(const TriggerRunFilter& filter) = 0;
  // Distinct atomic_service_run_id values of the stored runs, sorted.
  virtual Result<std::vector<std::string>> ReferencedAtomicServiceRunIds() = 0;

  // ---- Retention -----------------------------------------------------------
  // Deletes events with timestamp < threshold (and their links); returns their
  // ids, oldest first.
  virtual Result<std::vector<std::string>> AgePurgeEvents(TimestampUs threshold_us) = 0;
  // Deletes runs whose time (executed_at, else claimed_at) is < threshold.
  virtual Result<std::int64_t> AgePurgeTriggerRuns(TimestampUs threshold_us) = 0;
  // Keeps the `max_records` newest events (max_records <= 0: no cap); returns
  // the deleted ids, newest first.
  virtual Result<std::vector<std::string>> CapPurgeEvents(std::int64_t max_records) = 0;
  // Keeps the `max_records` newest runs (runs without a time are the oldest).
  virtual Result<std::int64_t> CapPurgeTriggerRuns(std::int64_t max_records) = 0;
  // Deletes the runs that reference any of `event_ids`; returns how many.
  virtual Result<std::int64_t> CascadeDeleteRunsForEvents(
      const std::vector<std::string>& event_ids) = 0;
  // Drops everything: conditions, triggers, valid conditions, cron times,
  // claims, events, links and runs.
  virtual Status Purge() = 0;
};

// Opens the trigger store named by `config.uri`. kBadConfig for an unusable URI.
Result<std::unique_ptr<TriggerStore>> OpenTriggerStore(const BackendConfig& config);

}  // namespace pynenc_cpp
