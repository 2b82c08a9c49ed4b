// The SQLite TriggerStore. Private to cpp/src/sqlite: its methods are split by
// concern over sqlite_trigger_store.cc (schema, conditions, triggers, valid
// conditions, cron, claims, purge), sqlite_trigger_store_events.cc (events and
// links) and sqlite_trigger_store_runs.cc (trigger runs and retention).
//
// Thread safety: thread-safe. Every public method runs in exactly one
// Database::Read or Database::Write transaction, so each call is atomic with
// respect to every other call on the same file, from any thread or process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sqlite/sqlite_trigger_store.h"

namespace pynenc_cpp {
namespace sqlite_trigger {

using sqlite::Conn;
using sqlite::Stmt;
using sqlite::WakeBoard;

// Binds a statement's parameters.
using Binder = std::function<void(Stmt&)>;
// Reads one result row; an error stops the walk and is returned.
using RowReader = std::function<Status(Stmt&)>;

// Prepares `sql`, binds it, and steps through every row calling `row`.
Status ForEachRow(Conn& conn, const std::string& sql, const Binder& bind, const RowReader& row);
// Prepares `sql`, binds it, and runs it to completion. `changes` (if given)
// receives the number of rows it changed.
Status Exec(Conn& conn, const std::string& sql, const Binder& bind,
            std::int64_t* changes = nullptr);
// Collects column 0 of every row as text.
Result<std::vector<std::string>> Texts(Conn& conn, const std::string& sql, const Binder& bind);


// Relation kinds of trig_run_refs.
enum RunRef : std::int64_t { kRefEvent = 0, kRefSource = 1, kRefValidCondition = 2 };

class SqliteTriggerStore final : public TriggerStore {
 public:
  SqliteTriggerStore(std::shared_ptr<sqlite::Database> db, std::string app_id,
                     std::shared_ptr<Clock> clock)
      : db_(std::move(db)), app_(std::move(app_id)), clock_(std::move(clock)) {}

  // Conditions, triggers, valid conditions, cron, claims (sqlite_trigger_store.cc).
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

  // Events (sqlite_trigger_store_events.cc).
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

  // Trigger runs and retention (sqlite_trigger_store_runs.cc).
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
  // REQUIRES (all *Tx helpers): called inside a transaction on `conn`.
  Status DeleteTriggerTx(Conn& conn, const std::string& trigger_id);
  Result<std::vector<std::string>> TriggerConditionsTx(Conn& conn, const std::string& trigger_id);
  // Deletes an event and its invocation links.
  Status DeleteEventTx(Conn& conn, const std::string& event_id);
  // Deletes a run and its relation rows; adds 1 to `*deleted` if it existed.
  Status DeleteRunTx(Conn& conn, const std::string& trigger_run_id, std::int64_t* deleted);
  Result<std::vector<std::string>> LinkedInvocationsTx(Conn& conn, const std::string& event_id);
  // In one transaction: the event ids `select` (?1 the app, ?2 `bound`) returns,
  // each deleted with DeleteEventTx; the ids deleted.
  Result<std::vector<std::string>> PurgeEvents(const char* select, std::int64_t bound);
  // PurgeEvents for trigger-run ids, each deleted with DeleteRunTx; how many were.
  Result<std::int64_t> PurgeRuns(const char* select, std::int64_t bound);
  // In one read transaction: `get` of the first row `select` (?1 the app, ?2
  // `key`) returns, or none.
  template <typename Get>
  auto ReadOne(const char* select, const std::string& key, Get get)
      -> Result<std::optional<decltype(get(std::declval<Stmt&>()))>> {
    std::optional<decltype(get(std::declval<Stmt&>()))> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.reset();  // a retried transaction starts clean
      return ForEachRow(
          c, select, [&](Stmt& q) { q.Bind(1, app_).Bind(2, key); },
          [&](Stmt& row) {
            if (!out) out = get(row);
            return Status::Ok();
          });
    });
    if (!s.ok()) return s;
    return out;
  }
  // JSON of the runs with a relation (`kind`, `ref_id`), in run order.
  Result<std::vector<std::string>> RunsByRef(RunRef kind, const std::string& ref_id);

  const std::shared_ptr<sqlite::Database> db_;
  const std::string app_;
  const std::shared_ptr<Clock> clock_;
  std::atomic<std::uint64_t> claims_since_sweep_{0};
};

}  // namespace sqlite_trigger
}  // namespace pynenc_cpp
