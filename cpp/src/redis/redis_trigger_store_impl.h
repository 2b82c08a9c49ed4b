// The Redis TriggerStore. Private to cpp/src/redis: methods are split over
// redis_trigger_store.cc (plumbing, conditions, triggers, purge),
// redis_trigger_store_loop.cc (valid conditions, pending reports, cron, claims),
// redis_trigger_store_events.cc (events and links) and
// redis_trigger_store_runs.cc (trigger runs and retention).
//
// Key layout, P = KeyPrefix(app_id, "trigger") = "pynenc:{app}:trigger:":
//   P seq                 counter giving every "first registration" its order
//   P cond / P cond_ctx   hash condition id -> JSON / context type
//   P cond_order          zset condition id, score = seq
//   P src:<task>          zset condition id, score = seq (source-task conditions)
//   P trig                hash trigger id -> encoded TriggerDefinitionRow
//   P ttask:<task>        set of trigger ids of a task
//   P ctrig:<condition>   zset trigger id, score = seq (link order)
//   P vc / P vc_order     hash id -> JSON / zset id, score = seq
//   P cron                hash condition id -> last execution (decimal us)
//   P claim:<run id>      string: claim expiry (OrderKey), PX = expiry + slack
//   P ev                  hash event id -> encoded EventRow
//   P ev_time, P ev_code:<code>, P ev_emit:<invocation>
//                         lex zsets of OrderKey(timestamp) + event id
//   P ev_codes            hash code -> number of stored events
//   P links:<event>       zset invocation id, score = seq (link order)
//   P run                 hash run id -> encoded TriggerRunRow
//   P run_time            lex zset OrderKey(executed, else claimed, else min) + run id
//   P run_ev:<e>, P run_inv:<i>, P run_src:<i>, P run_vc:<v>   sets of run ids
//   P asr                 hash atomic_service_run_id -> number of runs naming it
//
// Writes: read the records a write replaces, compute every key change in C++,
// then one Lua script (kApply) checks that each read record is unchanged and
// applies all changes; on a conflict the write is recomputed (bounded). The
// cron compare-and-set is the same script with the caller's expectation as the
// guard; claims have their own script. Scripts build keys from P, which shares
// one cluster slot through the {app} hash tag.
//
// Thread safety: thread-safe; no mutable state besides the shared Client.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redis/redis_trigger_store.h"

namespace pynenc_cpp {
namespace redis_trigger {

// Order-preserving fixed-width (20 digit) text of an int64.
std::string OrderKey(std::int64_t v);
inline constexpr std::size_t kOrderKeyLen = 20;

// One guard of kApply: hash `key` field `field` must be absent (nullopt) or equal.
struct Guard {
  std::string key;
  std::string field;
  std::optional<std::string> value;
};

// A batch of guarded changes for kApply. Ops are raw Redis commands, plus
// ZADDSEQ key member (add with the next seq unless present) and
// HINCRDEL key field delta (increment; delete the field at <= 0).
struct Change {
  std::vector<Guard> guards;
  std::vector<std::vector<std::string>> ops;
  void Op(std::vector<std::string> op) { ops.push_back(std::move(op)); }
};

// Length-prefixed record codec.
class Writer {
 public:
  void Str(const std::string& s);
  void Opt(const std::optional<std::string>& s);
  void Int(std::int64_t v) { Str(std::to_string(v)); }
  void OptInt(const std::optional<std::int64_t>& v);
  void List(const std::vector<std::string>& v);
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool Str(std::string* s);
  bool Opt(std::optional<std::string>* s);
  bool Int(std::int64_t* v);
  bool OptInt(std::optional<std::int64_t>* v);
  bool List(std::vector<std::string>* v);
  bool Done() const { return pos_ == in_.size(); }

 private:
  const std::string& in_;
  std::size_t pos_ = 0;
};

std::string EncodeEvent(const EventRow& row);
bool DecodeEvent(const std::string& id, const std::string& blob, EventRow* row);
std::string EncodeRun(const TriggerRunRow& row);
bool DecodeRun(const std::string& blob, TriggerRunRow* row);

// The time a run sorts and ages by: executed_at, else claimed_at, else int64 min.
TimestampUs RunTime(const TriggerRunRow& run);

// kBackendFailure naming the stored record `what` that does not decode.
Status Corrupt(const std::string& what);

class RedisTriggerStore final : public TriggerStore {
 public:
  RedisTriggerStore(std::shared_ptr<redis::Client> client, std::shared_ptr<Clock> clock,
                    std::string prefix)
      : client_(std::move(client)), clock_(std::move(clock)), p_(std::move(prefix)) {}

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
  // One event of a window: its row and whether any invocation is linked.
  struct WindowEvent {
    EventRow row;
    bool triggered = false;
  };
  std::string K(const std::string& suffix) const { return p_ + suffix; }
  // A command whose error reply becomes kBackendFailure.
  Result<redis::Value> Cmd(const std::vector<std::string>& argv);
  // Runs kApply: true if every guard held (and the ops ran), false otherwise.
  Result<bool> Apply(const Change& change);
  // Recomputes and applies `build` until its guards hold (bounded); `build`
  // returns the change and fills its own outputs.
  Status ApplyWithRetry(const std::function<Result<Change>()>& build);
  // Values of `fields` in hash `key` (nullopt for absent), in one HMGET.
  Result<std::vector<std::optional<std::string>>> HMGet(const std::string& key,
                                                        const std::vector<std::string>& fields);
  // Members of a zset in score order.
  Result<std::vector<std::string>> ZMembers(const std::string& key);
  Result<std::vector<std::string>> SMembers(const std::string& key);

  // Events (redis_trigger_store_events.cc).
  std::string EventMember(const EventRow& row) const {
    return OrderKey(row.timestamp_us) + row.event_id;
  }
  void AddEventOps(const EventRow& row, const std::string& blob, Change* change) const;
  void RemoveEventOps(const EventRow& row, const std::string& blob, Change* change) const;
  // Events with start <= timestamp <= end of the narrowest index for `filter`,
  // oldest first, read in one script.
  Result<std::vector<WindowEvent>> EventWindow(const EventFilter& filter);
  static bool Matches(const WindowEvent& ev, const EventFilter& filter);
  Result<std::vector<std::vector<std::string>>> LinksOf(const std::vector<std::string>& event_ids);
  // Deletes the events whose ids are `ids` (in ev_time order) with their links.
  Status DeleteEvents(const std::vector<std::string>& ids);

  // Runs (redis_trigger_store_runs.cc).
  void AddRunOps(const TriggerRunRow& row, const std::string& blob, Change* change) const;
  void RemoveRunOps(const TriggerRunRow& row, const std::string& blob, Change* change) const;
  // JSON of the runs named by set `key`, in run order.
  Result<std::vector<std::string>> RunsFromSet(const std::string& key);
  // Deletes the named runs (those still stored); returns how many.
  Result<std::int64_t> DeleteRuns(const std::vector<std::string>& ids);

  const std::shared_ptr<redis::Client> client_;
  const std::shared_ptr<Clock> clock_;
  const std::string p_;
};

}  // namespace redis_trigger
}  // namespace pynenc_cpp
