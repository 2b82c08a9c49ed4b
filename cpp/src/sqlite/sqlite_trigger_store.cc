// SQLite trigger store: schema, conditions, trigger definitions, valid
// conditions, cron last executions, trigger-run claims and the full purge.
// Events live in sqlite_trigger_store_events.cc, runs and retention in
// sqlite_trigger_store_runs.cc.
//
// Schema (version 2; version 1 had no trig_pending_reports). Every table is keyed by app_id first, so several apps
// share one file without seeing each other's rows. Orders that the port fixes as
// "first registration" use the table's INTEGER PRIMARY KEY `seq` (an upsert keeps
// it; a new row always gets a larger one). Payloads are opaque TEXT.
//   trig_conditions          (app_id, condition_id) -> json, context_type
//   trig_source_conditions   (app_id, task_id_key, condition_id)
//   trig_triggers            (app_id, trigger_id) -> task_id_key, logic, argument provider
//   trig_trigger_conditions  (app_id, trigger_id, pos) -> condition_id  [link order = seq]
//   trig_valid_conditions    (app_id, valid_condition_id) -> json
//   trig_pending_reports     (app_id, note_id) -> json: reports not made yet
//   trig_cron                (app_id, condition_id) -> last execution
//   trig_claims              (app_id, trigger_run_id) -> claim expiration
//   trig_events              (app_id, event_id) -> code, time, json, matched, emitters
//   trig_event_links         (app_id, event_id, invocation_id) -> trigger_run_id [order = seq]
//   trig_runs                (app_id, trigger_run_id) -> times, run_time_us, json, ...
//   trig_run_refs            (app_id, kind, ref_id, trigger_run_id): the relations a
//                            run is found by (events, source invocations, valid conditions)
// run_time_us = COALESCE(executed_at_us, claimed_at_us); NULL sorts first, as
// the port's "runs without a time sort first" requires.
#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_set>

#include "sqlite/sqlite_trigger_store_impl.h"

namespace pynenc_cpp {
namespace sqlite_trigger {
namespace {

constexpr int kSchemaVersion = 2;
constexpr std::int64_t kMicrosPerSecond = 1'000'000;
// Expired claims are swept after this many claims, so the table stays bounded.
constexpr std::uint64_t kClaimSweepInterval = 1024;
// Longest claim accepted (about 300 years); keeps now + expiration in range.
constexpr std::int64_t kMaxExpirationSeconds = 10'000'000'000;

constexpr const char* kSchema = R"sql(
CREATE TABLE trig_conditions (
  seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, condition_id TEXT NOT NULL,
  json TEXT NOT NULL, context_type TEXT NOT NULL, UNIQUE (app_id, condition_id));
CREATE INDEX trig_conditions_order ON trig_conditions (app_id, seq);
CREATE TABLE trig_source_conditions (
  seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, task_id_key TEXT NOT NULL,
  condition_id TEXT NOT NULL, UNIQUE (app_id, task_id_key, condition_id));
CREATE TABLE trig_triggers (
  app_id TEXT NOT NULL, trigger_id TEXT NOT NULL, task_id_key TEXT NOT NULL,
  logic TEXT NOT NULL, argument_provider_json TEXT, PRIMARY KEY (app_id, trigger_id));
CREATE INDEX trig_triggers_task ON trig_triggers (app_id, task_id_key);
CREATE TABLE trig_trigger_conditions (
  seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, trigger_id TEXT NOT NULL,
  condition_id TEXT NOT NULL, pos INTEGER NOT NULL, UNIQUE (app_id, condition_id, trigger_id));
CREATE INDEX trig_trigger_conditions_trigger ON trig_trigger_conditions (app_id, trigger_id, pos);
CREATE TABLE trig_valid_conditions (
  seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, valid_condition_id TEXT NOT NULL,
  json TEXT NOT NULL, UNIQUE (app_id, valid_condition_id));
CREATE INDEX trig_valid_conditions_order ON trig_valid_conditions (app_id, seq);
CREATE TABLE trig_pending_reports (
  app_id TEXT NOT NULL, note_id TEXT NOT NULL, json TEXT NOT NULL,
  PRIMARY KEY (app_id, note_id)) WITHOUT ROWID;
CREATE TABLE trig_cron (
  app_id TEXT NOT NULL, condition_id TEXT NOT NULL, last_execution_us INTEGER NOT NULL,
  PRIMARY KEY (app_id, condition_id)) WITHOUT ROWID;
CREATE TABLE trig_claims (
  app_id TEXT NOT NULL, trigger_run_id TEXT NOT NULL, expires_us INTEGER NOT NULL,
  PRIMARY KEY (app_id, trigger_run_id)) WITHOUT ROWID;
CREATE INDEX trig_claims_expiry ON trig_claims (app_id, expires_us);
CREATE TABLE trig_events (
  app_id TEXT NOT NULL, event_id TEXT NOT NULL, event_code TEXT NOT NULL,
  timestamp_us INTEGER NOT NULL, json TEXT NOT NULL, matched INTEGER NOT NULL,
  emitted_by_invocation_id TEXT, emitted_by_task_id TEXT, emitted_by_runner_context_id TEXT,
  PRIMARY KEY (app_id, event_id));
CREATE INDEX trig_events_time ON trig_events (app_id, timestamp_us, event_id);
CREATE INDEX trig_events_code ON trig_events (app_id, event_code, timestamp_us, event_id);
CREATE INDEX trig_events_emitter
  ON trig_events (app_id, emitted_by_invocation_id, timestamp_us, event_id);
CREATE INDEX trig_events_task ON trig_events (app_id, emitted_by_task_id, timestamp_us, event_id);
CREATE TABLE trig_event_links (
  seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, event_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL, trigger_run_id TEXT, linked_at_us INTEGER NOT NULL,
  UNIQUE (app_id, event_id, invocation_id));
CREATE INDEX trig_event_links_order ON trig_event_links (app_id, event_id, seq);
CREATE TABLE trig_runs (
  app_id TEXT NOT NULL, trigger_run_id TEXT NOT NULL, trigger_id TEXT NOT NULL,
  task_id_key TEXT NOT NULL, logic TEXT NOT NULL, claimed_at_us INTEGER,
  executed_at_us INTEGER, run_time_us INTEGER, triggered_invocation_id TEXT,
  atomic_service_run_id TEXT, json TEXT NOT NULL, PRIMARY KEY (app_id, trigger_run_id));
CREATE INDEX trig_runs_time ON trig_runs (app_id, run_time_us, trigger_run_id);
CREATE INDEX trig_runs_invocation ON trig_runs (app_id, triggered_invocation_id);
CREATE INDEX trig_runs_asr ON trig_runs (app_id, atomic_service_run_id);
CREATE TABLE trig_run_refs (
  app_id TEXT NOT NULL, kind INTEGER NOT NULL, ref_id TEXT NOT NULL, trigger_run_id TEXT NOT NULL,
  PRIMARY KEY (app_id, kind, ref_id, trigger_run_id)) WITHOUT ROWID;
CREATE INDEX trig_run_refs_run ON trig_run_refs (app_id, trigger_run_id);
)sql";

// Version 1 -> 2: the pending reports (TriggerStore::NotePendingReports).
constexpr const char* kMigrationTo2 = R"sql(
CREATE TABLE trig_pending_reports (
  app_id TEXT NOT NULL, note_id TEXT NOT NULL, json TEXT NOT NULL,
  PRIMARY KEY (app_id, note_id)) WITHOUT ROWID;
)sql";

}  // namespace

// ---- Helpers ---------------------------------------------------------------

Status ForEachRow(Conn& conn, const std::string& sql, const Binder& bind, const RowReader& row) {
  Result<Stmt*> prepared = conn.Prepare(sql);
  if (!prepared.ok()) return prepared.status();
  Stmt& stmt = *prepared.value();
  if (bind) bind(stmt);
  while (true) {
    Result<bool> step = stmt.Step();
    if (!step.ok()) return step.status();
    if (!step.value()) return Status::Ok();
    if (Status s = row(stmt); !s.ok()) return s;
  }
}

Status Exec(Conn& conn, const std::string& sql, const Binder& bind, std::int64_t* changes) {
  Result<Stmt*> prepared = conn.Prepare(sql);
  if (!prepared.ok()) return prepared.status();
  if (bind) bind(*prepared.value());
  if (Status s = prepared.value()->Run(); !s.ok()) return s;
  if (changes != nullptr) *changes = conn.Changes();
  return Status::Ok();
}

Result<std::vector<std::string>> Texts(Conn& conn, const std::string& sql, const Binder& bind) {
  std::vector<std::string> out;
  Status s = ForEachRow(conn, sql, bind, [&](Stmt& row) {
    out.push_back(row.Text(0));
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

// ---- Conditions ------------------------------------------------------------

Status SqliteTriggerStore::RegisterCondition(const std::string& condition_id,
                                             const std::string& json,
                                             const std::string& context_type) {
  return db_->Write([&](Conn& c) {
    return Exec(c,
                "INSERT INTO trig_conditions (app_id, condition_id, json, context_type) "
                "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (app_id, condition_id) "
                "DO UPDATE SET json = excluded.json, context_type = excluded.context_type",
                [&](Stmt& s) {
                  s.Bind(1, app_).Bind(2, condition_id).Bind(3, json).Bind(4, context_type);
                });
  });
}

Result<std::optional<std::string>> SqliteTriggerStore::GetCondition(
    const std::string& condition_id) {
  return ReadOne("SELECT json FROM trig_conditions WHERE app_id = ?1 AND condition_id = ?2",
                 condition_id, [](Stmt& row) { return row.Text(0); });
}

Result<std::vector<std::string>> SqliteTriggerStore::AllConditions() {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = Texts(c, "SELECT json FROM trig_conditions WHERE app_id = ?1 ORDER BY seq",
                [&](Stmt& s) { s.Bind(1, app_); });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

Status SqliteTriggerStore::RegisterSourceTaskCondition(const std::string& task_id_key,
                                                       const std::string& condition_id) {
  return db_->Write([&](Conn& c) {
    return Exec(c,
                "INSERT OR IGNORE INTO trig_source_conditions (app_id, task_id_key, condition_id) "
                "VALUES (?1, ?2, ?3)",
                [&](Stmt& s) { s.Bind(1, app_).Bind(2, task_id_key).Bind(3, condition_id); });
  });
}

Result<std::vector<std::string>> SqliteTriggerStore::ConditionsSourcedFromTask(
    const std::string& task_id_key, const std::optional<std::string>& context_type) {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = Texts(c,
                "SELECT c.json FROM trig_source_conditions s JOIN trig_conditions c "
                "ON c.app_id = s.app_id AND c.condition_id = s.condition_id "
                "WHERE s.app_id = ?1 AND s.task_id_key = ?2 "
                "AND (?3 IS NULL OR c.context_type = ?3) ORDER BY s.seq",
                [&](Stmt& s) { s.Bind(1, app_).Bind(2, task_id_key).Bind(3, context_type); });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

// ---- Trigger definitions ---------------------------------------------------

Status SqliteTriggerStore::DeleteTriggerTx(Conn& c, const std::string& trigger_id) {
  auto bind = [&](Stmt& s) { s.Bind(1, app_).Bind(2, trigger_id); };
  if (Status s = Exec(
          c, "DELETE FROM trig_trigger_conditions WHERE app_id = ?1 AND trigger_id = ?2", bind);
      !s.ok()) {
    return s;
  }
  return Exec(c, "DELETE FROM trig_triggers WHERE app_id = ?1 AND trigger_id = ?2", bind);
}

Result<std::vector<std::string>> SqliteTriggerStore::TriggerConditionsTx(
    Conn& c, const std::string& trigger_id) {
  return Texts(c,
               "SELECT condition_id FROM trig_trigger_conditions "
               "WHERE app_id = ?1 AND trigger_id = ?2 ORDER BY pos",
               [&](Stmt& s) { s.Bind(1, app_).Bind(2, trigger_id); });
}

Status SqliteTriggerStore::RegisterTrigger(const TriggerDefinitionRow& trigger) {
  std::vector<std::string> conditions;
  std::unordered_set<std::string> seen;
  for (const std::string& id : trigger.condition_ids) {
    if (seen.insert(id).second) conditions.push_back(id);
  }
  return db_->Write([&](Conn& c) -> Status {
    if (Status s = DeleteTriggerTx(c, trigger.trigger_id); !s.ok()) return s;
    if (Status s = Exec(c,
                        "INSERT INTO trig_triggers (app_id, trigger_id, task_id_key, logic, "
                        "argument_provider_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                        [&](Stmt& s) {
                          s.Bind(1, app_).Bind(2, trigger.trigger_id).Bind(3, trigger.task_id_key);
                          s.Bind(4, trigger.logic).Bind(5, trigger.argument_provider_json);
                        });
        !s.ok()) {
      return s;
    }
    for (std::size_t pos = 0; pos < conditions.size(); ++pos) {
      Status s = Exec(c,
                      "INSERT INTO trig_trigger_conditions (app_id, trigger_id, condition_id, pos) "
                      "VALUES (?1, ?2, ?3, ?4)",
                      [&](Stmt& s) {
                        s.Bind(1, app_).Bind(2, trigger.trigger_id).Bind(3, conditions[pos]);
                        s.Bind(4, static_cast<std::int64_t>(pos));
                      });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

Result<std::optional<TriggerDefinitionRow>> SqliteTriggerStore::GetTrigger(
    const std::string& trigger_id) {
  std::optional<TriggerDefinitionRow> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.reset();  // a retried transaction starts clean
    Status q = ForEachRow(
        c,
        "SELECT task_id_key, logic, argument_provider_json FROM trig_triggers "
        "WHERE app_id = ?1 AND trigger_id = ?2",
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, trigger_id); },
        [&](Stmt& row) {
          out = TriggerDefinitionRow{trigger_id, row.Text(0), {}, row.Text(1), row.OptText(2)};
          return Status::Ok();
        });
    if (!q.ok() || !out) return q;
    Result<std::vector<std::string>> ids = TriggerConditionsTx(c, trigger_id);
    if (!ids.ok()) return ids.status();
    out->condition_ids = std::move(ids).value();
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<TriggerDefinitionRow>> SqliteTriggerStore::TriggersForCondition(
    const std::string& condition_id) {
  std::vector<TriggerDefinitionRow> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();  // a retried transaction starts clean
    Status q = ForEachRow(
        c,
        "SELECT t.trigger_id, t.task_id_key, t.logic, t.argument_provider_json "
        "FROM trig_trigger_conditions l JOIN trig_triggers t "
        "ON t.app_id = l.app_id AND t.trigger_id = l.trigger_id "
        "WHERE l.app_id = ?1 AND l.condition_id = ?2 ORDER BY l.seq",
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, condition_id); },
        [&](Stmt& row) {
          out.push_back({row.Text(0), row.Text(1), {}, row.Text(2), row.OptText(3)});
          return Status::Ok();
        });
    if (!q.ok()) return q;
    for (TriggerDefinitionRow& row : out) {
      Result<std::vector<std::string>> ids = TriggerConditionsTx(c, row.trigger_id);
      if (!ids.ok()) return ids.status();
      row.condition_ids = std::move(ids).value();
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::int64_t> SqliteTriggerStore::CleanTaskTriggers(const std::string& task_id_key) {
  std::int64_t removed = 0;
  Status s = db_->Write([&](Conn& c) -> Status {
    Result<std::vector<std::string>> ids =
        Texts(c, "SELECT trigger_id FROM trig_triggers WHERE app_id = ?1 AND task_id_key = ?2",
              [&](Stmt& s) { s.Bind(1, app_).Bind(2, task_id_key); });
    if (!ids.ok()) return ids.status();
    for (const std::string& id : ids.value()) {
      if (Status d = DeleteTriggerTx(c, id); !d.ok()) return d;
    }
    removed = static_cast<std::int64_t>(ids.value().size());
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return removed;
}

// ---- Valid conditions ------------------------------------------------------

Status SqliteTriggerStore::RecordValidConditions(const std::vector<IdJson>& valid_conditions) {
  if (valid_conditions.empty()) return Status::Ok();
  return db_->Write([&](Conn& c) -> Status {
    c.Notify(WakeBoard::kValidConditionsSlot);  // wakes WaitValidConditions, here or elsewhere
    for (const IdJson& vc : valid_conditions) {
      Status s = Exec(c,
                      "INSERT INTO trig_valid_conditions (app_id, valid_condition_id, json) "
                      "VALUES (?1, ?2, ?3) ON CONFLICT (app_id, valid_condition_id) "
                      "DO UPDATE SET json = excluded.json",
                      [&](Stmt& s) { s.Bind(1, app_).Bind(2, vc.id).Bind(3, vc.json); });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

Result<bool> SqliteTriggerStore::WaitValidConditions(std::string* cursor,
                                                     TimestampUs timeout_us) {
  WakeBoard& board = db_->wake();
  constexpr int kSlot = WakeBoard::kValidConditionsSlot;
  if (cursor->empty()) {
    *cursor = std::to_string(board.Seq(kSlot));
    return true;
  }
  // Longer waits are clamped (no time_point overflow): ~31 years.
  constexpr TimestampUs kMaxWaitUs = 1'000'000'000'000'000;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(std::clamp<TimestampUs>(timeout_us, 0, kMaxWaitUs));
  const std::string seen = *cursor;
  while (true) {
    const std::uint32_t now = board.Seq(kSlot);
    if (std::to_string(now) != seen) {
      *cursor = std::to_string(now);
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    board.Wait(kSlot, now, deadline);
  }
}

Status SqliteTriggerStore::NudgeValidConditionsWaiter(const std::string& cursor) {
  (void)cursor;  // the slot is shared: every waiter on this file wakes and reads again
  db_->wake().Wake(std::uint64_t{1} << WakeBoard::kValidConditionsSlot);
  return Status::Ok();
}

Result<std::vector<IdJson>> SqliteTriggerStore::ValidConditions() {
  std::vector<IdJson> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();  // a retried transaction starts clean
    return ForEachRow(
        c,
        "SELECT valid_condition_id, json FROM trig_valid_conditions WHERE app_id = ?1 ORDER BY seq",
        [&](Stmt& s) { s.Bind(1, app_); },
        [&](Stmt& row) {
          out.push_back({row.Text(0), row.Text(1)});
          return Status::Ok();
        });
  });
  if (!s.ok()) return s;
  return out;
}

Status SqliteTriggerStore::ClearValidConditions(
    const std::vector<std::string>& valid_condition_ids) {
  if (valid_condition_ids.empty()) return Status::Ok();
  return db_->Write([&](Conn& c) -> Status {
    for (const std::string& id : valid_condition_ids) {
      Status s =
          Exec(c, "DELETE FROM trig_valid_conditions WHERE app_id = ?1 AND valid_condition_id = ?2",
               [&](Stmt& s) { s.Bind(1, app_).Bind(2, id); });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

// ---- Pending reports -------------------------------------------------------

Status SqliteTriggerStore::NotePendingReports(const std::vector<IdJson>& notes) {
  if (notes.empty()) return Status::Ok();
  return db_->Write([&](Conn& c) -> Status {
    for (const IdJson& note : notes) {
      Status s = Exec(c,
                      "INSERT INTO trig_pending_reports (app_id, note_id, json) VALUES (?1, ?2, ?3) "
                      "ON CONFLICT (app_id, note_id) DO UPDATE SET json = excluded.json",
                      [&](Stmt& s) { s.Bind(1, app_).Bind(2, note.id).Bind(3, note.json); });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

Result<std::vector<IdJson>> SqliteTriggerStore::PendingReports() {
  std::vector<IdJson> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();  // a retried transaction starts clean
    return ForEachRow(
        c, "SELECT note_id, json FROM trig_pending_reports WHERE app_id = ?1 ORDER BY note_id",
        [&](Stmt& s) { s.Bind(1, app_); },
        [&](Stmt& row) {
          out.push_back({row.Text(0), row.Text(1)});
          return Status::Ok();
        });
  });
  if (!s.ok()) return s;
  return out;
}

Status SqliteTriggerStore::ClearPendingReports(const std::vector<std::string>& note_ids) {
  if (note_ids.empty()) return Status::Ok();
  return db_->Write([&](Conn& c) -> Status {
    for (const std::string& id : note_ids) {
      Status s = Exec(c, "DELETE FROM trig_pending_reports WHERE app_id = ?1 AND note_id = ?2",
                      [&](Stmt& s) { s.Bind(1, app_).Bind(2, id); });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

// ---- Cron and claims -------------------------------------------------------

Result<std::optional<TimestampUs>> SqliteTriggerStore::LastCronExecution(
    const std::string& condition_id) {
  return ReadOne("SELECT last_execution_us FROM trig_cron WHERE app_id = ?1 AND condition_id = ?2",
                 condition_id, [](Stmt& row) { return TimestampUs{row.Int(0)}; });
}

Result<bool> SqliteTriggerStore::StoreLastCronExecution(const std::string& condition_id,
                                                        TimestampUs execution_us,
                                                        CronExpectation expected) {
  bool stored = false;
  // Read, compare and write in one IMMEDIATE transaction: no other writer (thread
  // or process) can change the value between the check and the write.
  Status s = db_->Write([&](Conn& c) -> Status {
    stored = false;
    std::optional<TimestampUs> current;
    Status q = ForEachRow(
        c, "SELECT last_execution_us FROM trig_cron WHERE app_id = ?1 AND condition_id = ?2",
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, condition_id); },
        [&](Stmt& row) {
          current = row.Int(0);
          return Status::Ok();
        });
    if (!q.ok()) return q;
    switch (expected.kind) {
      case CronExpectation::Kind::kAny:
        break;
      case CronExpectation::Kind::kAbsent:
        if (current) return Status::Ok();
        break;
      case CronExpectation::Kind::kValue:
        if (!current || *current != expected.value) return Status::Ok();
        break;
    }
    stored = true;
    return Exec(
        c,
        "INSERT INTO trig_cron (app_id, condition_id, last_execution_us) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (app_id, condition_id) DO UPDATE SET last_execution_us = "
        "excluded.last_execution_us",
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, condition_id).Bind(3, execution_us); });
  });
  if (!s.ok()) return s;
  return stored;
}

Result<bool> SqliteTriggerStore::ClaimTriggerRun(const std::string& trigger_run_id,
                                                 std::int64_t expiration_seconds) {
  if (expiration_seconds < 0 || expiration_seconds > kMaxExpirationSeconds) {
    return Status::InvalidArgument("expiration_seconds must be in [0, 1e10], got " +
                                   std::to_string(expiration_seconds));
  }
  const bool sweep =
      claims_since_sweep_.fetch_add(1) % kClaimSweepInterval == kClaimSweepInterval - 1;
  bool claimed = false;
  Status s = db_->Write([&](Conn& c) -> Status {
    claimed = false;
    // The clock is read inside the transaction, so a writer that waited for the
    // lock judges expiry at the time it actually decides.
    const TimestampUs now = clock_->NowMicros();
    if (sweep) {
      Status d = Exec(c, "DELETE FROM trig_claims WHERE app_id = ?1 AND expires_us <= ?2",
                      [&](Stmt& s) { s.Bind(1, app_).Bind(2, now); });
      if (!d.ok()) return d;
    }
    bool held = false;
    Status q = ForEachRow(
        c, "SELECT expires_us FROM trig_claims WHERE app_id = ?1 AND trigger_run_id = ?2",
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, trigger_run_id); },
        [&](Stmt& row) {
          held = row.Int(0) > now;
          return Status::Ok();
        });
    if (!q.ok() || held) return q;
    claimed = true;
    return Exec(
        c,
        "INSERT INTO trig_claims (app_id, trigger_run_id, expires_us) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (app_id, trigger_run_id) DO UPDATE SET expires_us = excluded.expires_us",
        [&](Stmt& s) {
          s.Bind(1, app_).Bind(2, trigger_run_id);
          s.Bind(3, now + expiration_seconds * kMicrosPerSecond);
        });
  });
  if (!s.ok()) return s;
  return claimed;
}

Status SqliteTriggerStore::Purge() {
  return db_->Write([&](Conn& c) -> Status {
    for (const char* table :
         {"trig_conditions", "trig_source_conditions", "trig_triggers", "trig_trigger_conditions",
          "trig_valid_conditions", "trig_pending_reports", "trig_cron", "trig_claims", "trig_events", "trig_event_links",
          "trig_runs", "trig_run_refs"}) {
      Status s = Exec(c, std::string("DELETE FROM ") + table + " WHERE app_id = ?1",
                      [&](Stmt& s) { s.Bind(1, app_); });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

}  // namespace sqlite_trigger

Result<std::unique_ptr<TriggerStore>> NewSqliteTriggerStore(std::shared_ptr<sqlite::Database> db,
                                                            const BackendConfig& config) {
  if (Status s =
          db->EnsureSchema("trigger", sqlite_trigger::kSchemaVersion, sqlite_trigger::kSchema,
                           {{1, sqlite_trigger::kMigrationTo2}});
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<TriggerStore>(std::make_unique<sqlite_trigger::SqliteTriggerStore>(
      std::move(db), config.app_id, ClockOrReal(config)));
}

}  // namespace pynenc_cpp
