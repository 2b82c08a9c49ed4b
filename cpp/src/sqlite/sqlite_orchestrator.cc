// SQLite orchestrator, part 1: schema, invocation rows, their indexes, queries,
// auto purge and the wait graph. Class and locking: sqlite_orchestrator_impl.h.
//
// Schema (component "orchestrator", version 1). Every table is keyed by app_id
// first, so apps sharing a file never see each other's rows. Every query is
// served by an index (checked with EXPLAIN QUERY PLAN): id lookups by the
// (app_id, id) key, task/call lists by (app_id, task_id|call_id, seq), counts
// and recovery by (app_id, status, status_us), pages by (app_id[, task_id],
// status_us, seq), auto purge by a partial index on purge_mark_us, the wait
// graph by both edge directions, the gate by (app_id, status, start_us).
//   orch_invocations  seq (rowid: registration order), app_id, id, task_id,
//                     call_id, status (pynenc's name), runner_id (owner),
//                     status_us, retries, purge_mark_us
//   orch_args         (app_id, invocation_id, key) -> value   argument index
//   orch_waits        (app_id, waiter, waited)                wait graph
//   orch_runners      (app_id, runner_id) -> heartbeat row
//   orch_executions   seq (rowid: insertion order), (app_id, run_id) unique
// Payloads (argument values, reasons) are opaque TEXT.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>

#include "sqlite/sqlite_orchestrator_impl.h"

namespace pynenc_cpp {
namespace sqlite_orchestrator {
namespace {

constexpr int kSchemaVersion = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE orch_invocations (
  seq INTEGER PRIMARY KEY,
  app_id TEXT NOT NULL,
  id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  call_id TEXT NOT NULL,
  status TEXT NOT NULL,
  runner_id TEXT,
  status_us INTEGER NOT NULL,
  retries INTEGER NOT NULL DEFAULT 0,
  purge_mark_us INTEGER,
  UNIQUE (app_id, id)
);
CREATE INDEX orch_invocations_task ON orch_invocations (app_id, task_id, seq);
CREATE INDEX orch_invocations_call ON orch_invocations (app_id, call_id, seq);
CREATE INDEX orch_invocations_status ON orch_invocations (app_id, status, status_us);
CREATE INDEX orch_invocations_purge ON orch_invocations (app_id, purge_mark_us, seq)
  WHERE purge_mark_us IS NOT NULL;
CREATE TABLE orch_args (
  app_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (app_id, invocation_id, key)
) WITHOUT ROWID;
CREATE INDEX orch_args_pair ON orch_args (app_id, key, value, invocation_id);
CREATE TABLE orch_waits (
  app_id TEXT NOT NULL,
  waiter TEXT NOT NULL,
  waited TEXT NOT NULL,
  PRIMARY KEY (app_id, waiter, waited)
) WITHOUT ROWID;
CREATE INDEX orch_waits_waited ON orch_waits (app_id, waited, waiter);
CREATE TABLE orch_runners (
  app_id TEXT NOT NULL,
  runner_id TEXT NOT NULL,
  creation_us INTEGER NOT NULL,
  last_heartbeat_us INTEGER NOT NULL,
  can_run_atomic_service INTEGER NOT NULL,
  consumed_queues TEXT NOT NULL,
  PRIMARY KEY (app_id, runner_id)
) WITHOUT ROWID;
CREATE INDEX orch_runners_heartbeat ON orch_runners (app_id, last_heartbeat_us);
CREATE TABLE orch_executions (
  seq INTEGER PRIMARY KEY,
  app_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  runner_id TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER,
  status TEXT NOT NULL,
  reason TEXT NOT NULL,
  UNIQUE (app_id, run_id)
);
CREATE INDEX orch_executions_start ON orch_executions (app_id, start_us, seq);
CREATE INDEX orch_executions_status ON orch_executions (app_id, status, start_us, seq);
)sql";

Status UnknownInvocation(const std::string& id) {
  return Status::NotFound("invocation '" + id + "' is not registered in the orchestrator");
}

// Statuses available for run, as an IN filter (blocking control).
std::string AvailableForRunFilter(const std::string& column) {
  std::vector<InvocationStatus> available;
  for (InvocationStatus s : AllStatuses()) {
    if (IsAvailableForRun(s)) available.push_back(s);
  }
  return StatusFilter(column, available);
}

// Appends to `sql` one EXISTS per pair of `key_args` (each a primary-key probe of
// orch_args for invocation i) and the pair to `params`, whose values bind from ?2.
void AddArgFilters(std::string& sql, std::vector<std::string>& params,
                   const std::map<std::string, std::string>& key_args) {
  for (const auto& [key, value] : key_args) {
    const std::string k = std::to_string(params.size() + 2);
    const std::string v = std::to_string(params.size() + 3);
    sql +=
        " AND EXISTS (SELECT 1 FROM orch_args a WHERE a.app_id = ?1 AND a.invocation_id = i.id"
        " AND a.key = ?" +
        k + " AND a.value = ?" + v + ")";
    params.push_back(key);
    params.push_back(value);
  }
}

// True if `id` has a row. REQUIRES: inside a transaction.
Result<bool> Exists(sqlite::Conn& conn, const std::string& app_id, const std::string& id) {
  SQ_PREPARE(q, conn, "SELECT 1 FROM orch_invocations WHERE app_id = ? AND id = ?");
  q.Bind(1, app_id).Bind(2, id);
  SQ_STEP(row, q);
  return row;
}

}  // namespace

std::string StatusFilter(const std::string& column, const std::vector<InvocationStatus>& statuses) {
  if (statuses.empty()) return "";
  std::string out = " AND " + column + " IN (";
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (i > 0) out += ",";
    out += "'" + std::string(StatusName(statuses[i])) + "'";
  }
  return out + ")";
}

Result<InvocationStatus> StatusFromColumn(const sqlite::Stmt& stmt, int col) {
  const std::string name = stmt.Text(col);
  std::optional<InvocationStatus> status = ParseStatus(name);
  if (!status) return Status::BackendFailure("orchestrator row has unknown status '" + name + "'");
  return *status;
}

Status SqliteOrchestrator::Init() {
  return db_->EnsureSchema("orchestrator", kSchemaVersion, kSchema);
}

Result<std::vector<InvocationId>> SqliteOrchestrator::SelectIds(
    const std::string& sql, const std::function<void(sqlite::Stmt&)>& bind) {
  std::vector<InvocationId> out;
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    out.clear();  // the transaction may be retried
    SQ_PREPARE(q, conn, sql);
    q.Bind(1, app_id_);
    if (bind) bind(q);
    while (true) {
      SQ_STEP(row, q);
      if (!row) return Status::Ok();
      out.emplace_back(q.Text(0));
    }
  });
  if (!s.ok()) return s;
  return out;
}

Result<StatusRecord> SqliteOrchestrator::RegisterInvocations(
    const std::vector<NewInvocation>& invocations, const std::optional<std::string>& runner_id) {
  for (const NewInvocation& inv : invocations) {
    if (inv.id.empty()) return Status::InvalidArgument("invocation id must not be empty");
  }
  StatusRecord record{InvocationStatus::kRegistered, runner_id, 0};
  Status s = db_->Write([&](sqlite::Conn& conn) -> Status {
    record.timestamp_us = clock_->NowMicros();
    SQ_PREPARE(insert, conn,
               "INSERT OR IGNORE INTO orch_invocations"
               " (app_id, id, task_id, call_id, status, runner_id, status_us)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)");
    for (const NewInvocation& inv : invocations) {
      insert.Reset();
      insert.Bind(1, app_id_)
          .Bind(2, inv.id.str())
          .Bind(3, inv.task_id.str())
          .Bind(4, inv.call_id.str())
          .Bind(5, StatusName(record.status))
          .Bind(6, runner_id)
          .Bind(7, record.timestamp_us);
      SQ_RETURN_IF_ERROR(insert.Run());
      conn.CountRegistered(static_cast<std::uint64_t>(conn.Changes()));  // 0: known already
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return record;
}

Result<StatusRecord> SqliteOrchestrator::TransitionStatus(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id) {
  return Transition(id, to, runner_id, nullptr);
}

Result<StatusRecord> SqliteOrchestrator::TransitionStatusFromOwner(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
    const std::optional<std::string>& expected_owner) {
  return Transition(id, to, runner_id, &expected_owner);
}

Result<StatusRecord> SqliteOrchestrator::Transition(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
    const std::optional<std::string>* expected_owner) {
  StatusRecord next;
  Status s = db_->Write([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(get, conn,
               "SELECT status, runner_id, status_us FROM orch_invocations"
               " WHERE app_id = ? AND id = ?");
    get.Bind(1, app_id_).Bind(2, id.str());
    SQ_STEP(row, get);
    if (!row) return UnknownInvocation(id.str());
    Result<InvocationStatus> status = StatusFromColumn(get, 0);
    if (!status.ok()) return status.status();
    const StatusRecord current{status.value(), get.OptText(1), get.Int(2)};
    get.Reset();
    if (expected_owner != nullptr) {  // in the same write transaction as the update
      if (Status s = ValidateExpectedOwner(current, to, runner_id, *expected_owner); !s.ok()) {
        return s;
      }
    }
    Result<StatusRecord> applied = ApplyTransition(current, to, runner_id, clock_->NowMicros());
    if (!applied.ok()) return applied.status();
    next = applied.value();
    SQ_PREPARE(put, conn,
               "UPDATE orch_invocations SET status = ?, runner_id = ?, status_us = ?"
               " WHERE app_id = ? AND id = ?");
    put.Bind(1, StatusName(next.status))
        .Bind(2, next.runner_id)
        .Bind(3, next.timestamp_us)
        .Bind(4, app_id_)
        .Bind(5, id.str());
    if (IsFinal(next.status)) conn.Notify(sqlite::WakeBoard::kFinalSlot);  // wakes WaitAnyFinal
    SQ_RETURN_IF_ERROR(put.Run());
    conn.CountTransition(current, next);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return next;
}

Result<std::optional<InvocationId>> SqliteOrchestrator::WaitAnyFinal(
    const std::vector<InvocationId>& ids, TimestampUs timeout_us) {
  if (ids.empty()) return Status::InvalidArgument("WaitAnyFinal needs at least one invocation id");
  // Longer waits are clamped (no time_point overflow): ~31 years.
  constexpr TimestampUs kMaxWaitUs = 1'000'000'000'000'000;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(std::clamp<TimestampUs>(timeout_us, 0, kMaxWaitUs));
  static const std::vector<InvocationStatus> kFinal = [] {
    std::vector<InvocationStatus> out;
    for (InvocationStatus st : AllStatuses()) {
      if (IsFinal(st)) out.push_back(st);
    }
    return out;
  }();
  sqlite::WakeBoard& board = db_->wake();
  while (true) {
    // The slot first, then the statuses: a final status committed after the
    // read bumps the slot and the wait returns at once.
    const std::uint32_t seen = board.Seq(sqlite::WakeBoard::kFinalSlot);
    Result<std::vector<InvocationId>> final_ids = FilterByStatus(ids, kFinal);
    if (!final_ids.ok()) return final_ids.status();
    if (!final_ids.value().empty()) return std::optional<InvocationId>(final_ids.value().front());
    if (std::chrono::steady_clock::now() >= deadline) return std::optional<InvocationId>();
    board.Wait(sqlite::WakeBoard::kFinalSlot, seen, deadline);
  }
}

Result<StatusRecord> SqliteOrchestrator::GetStatusRecord(const InvocationId& id) {
  StatusRecord record;
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(get, conn,
               "SELECT status, runner_id, status_us FROM orch_invocations"
               " WHERE app_id = ? AND id = ?");
    get.Bind(1, app_id_).Bind(2, id.str());
    SQ_STEP(row, get);
    if (!row) return UnknownInvocation(id.str());
    Result<InvocationStatus> status = StatusFromColumn(get, 0);
    if (!status.ok()) return status.status();
    record = StatusRecord{status.value(), get.OptText(1), get.Int(2)};
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return record;
}

Result<std::vector<InvocationId>> SqliteOrchestrator::FilterByStatus(
    const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) {
  std::vector<InvocationId> out;
  if (statuses.empty() || ids.empty()) return out;  // an empty filter selects nothing here
  const std::string sql = "SELECT 1 FROM orch_invocations WHERE app_id = ? AND id = ?" +
                          StatusFilter("status", statuses);
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    out.clear();  // the transaction may be retried
    SQ_PREPARE(q, conn, sql);
    for (const InvocationId& id : ids) {
      q.Reset();
      q.Bind(1, app_id_).Bind(2, id.str());
      SQ_STEP(row, q);
      if (row) out.push_back(id);
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Status SqliteOrchestrator::IndexArguments(const InvocationId& id,
                                          const std::map<std::string, std::string>& args) {
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    Result<bool> known = Exists(conn, app_id_, id.str());
    if (!known.ok()) return known.status();
    if (!known.value()) return UnknownInvocation(id.str());
    SQ_PREPARE(put, conn,
               "INSERT OR REPLACE INTO orch_args (app_id, invocation_id, key, value)"
               " VALUES (?, ?, ?, ?)");
    for (const auto& [key, value] : args) {
      put.Reset();
      put.Bind(1, app_id_).Bind(2, id.str()).Bind(3, key).Bind(4, value);
      SQ_RETURN_IF_ERROR(put.Run());
    }
    return Status::Ok();
  });
}

Result<std::vector<InvocationId>> SqliteOrchestrator::GetExistingInvocations(
    const TaskId& task_id, const std::map<std::string, std::string>& key_args,
    const std::vector<InvocationStatus>& statuses) {
  // "+i.status" keeps the planner on the task index (a status matches far more rows).
  std::string sql = "SELECT i.id FROM orch_invocations i WHERE i.app_id = ?1 AND i.task_id = ?2" +
                    StatusFilter("+i.status", statuses);
  std::vector<std::string> params{task_id.str()};
  AddArgFilters(sql, params, key_args);
  sql += " ORDER BY i.seq";
  return SelectIds(sql, [&](sqlite::Stmt& q) {
    for (std::size_t i = 0; i < params.size(); ++i) q.Bind(static_cast<int>(i) + 2, params[i]);
  });
}

// One write transaction over the port's own steps (each joins it): the record is
// read and the transition checked first (an illegal one writes nothing), then the
// index, the look for a blocker, and the transition.
Result<Orchestrator::GateOutcome> SqliteOrchestrator::GatedTransition(const GateRequest& gate) {
  if (Status st = gate.Check(); !st.ok()) return st;
  GateOutcome out;
  Status s = db_->Write([&](sqlite::Conn&) -> Status {
    out = GateOutcome{};
    Result<StatusRecord> current = GetStatusRecord(gate.id);
    if (!current.ok()) return current.status();
    Result<StatusRecord> check =
        ApplyTransition(current.value(), gate.to, gate.runner_id, clock_->NowMicros());
    if (!check.ok()) return check.status();
    if (!gate.index_args.empty()) {
      if (Status st = IndexArguments(gate.id, gate.index_args); !st.ok()) return st;
    }
    // GetExistingInvocations' query, driven by the status index: the blocking
    // statuses hold few rows (claimed or running), the task may hold its history.
    std::string sql =
        "SELECT i.id FROM orch_invocations i INDEXED BY orch_invocations_status"
        " WHERE i.app_id = ?1 AND i.task_id = ?2 AND i.id != ?3" +
        StatusFilter("i.status", gate.blocking);
    std::vector<std::string> params{gate.task_id.str(), gate.id.str()};
    AddArgFilters(sql, params, gate.key_args);
    sql += " ORDER BY i.seq LIMIT 1";
    Result<std::vector<InvocationId>> found = SelectIds(sql, [&](sqlite::Stmt& q) {
      for (std::size_t i = 0; i < params.size(); ++i) q.Bind(static_cast<int>(i) + 2, params[i]);
    });
    if (!found.ok()) return found.status();
    if (!found.value().empty()) {
      out.blocker = found.value().front();
      out.record = current.value();
      return Status::Ok();
    }
    Result<StatusRecord> next = TransitionStatus(gate.id, gate.to, gate.runner_id);
    if (!next.ok()) return next.status();
    out.record = next.value();
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<InvocationId>> SqliteOrchestrator::GetTaskInvocations(const TaskId& task_id) {
  return SelectIds("SELECT id FROM orch_invocations WHERE app_id = ? AND task_id = ? ORDER BY seq",
                   [&](sqlite::Stmt& q) { q.Bind(2, task_id.str()); });
}

Result<std::vector<InvocationId>> SqliteOrchestrator::GetCallInvocations(const CallId& call_id) {
  return SelectIds("SELECT id FROM orch_invocations WHERE app_id = ? AND call_id = ? ORDER BY seq",
                   [&](sqlite::Stmt& q) { q.Bind(2, call_id.str()); });
}

Result<std::vector<InvocationId>> SqliteOrchestrator::ListInvocations(
    const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses,
    std::int64_t limit, std::int64_t offset) {
  if (limit < 0 || offset < 0) {
    return Status::InvalidArgument("limit and offset must be >= 0");
  }
  if (limit == 0) return std::vector<InvocationId>();
  // Limit and offset are bound, so paging reuses one cached statement.
  std::string sql = "SELECT id FROM orch_invocations WHERE app_id = ?1";
  if (task_id) sql += " AND task_id = ?4";
  sql += StatusFilter("status", statuses) + " ORDER BY status_us DESC, seq DESC LIMIT ?2 OFFSET ?3";
  return SelectIds(sql, [&](sqlite::Stmt& q) {
    q.Bind(2, limit).Bind(3, offset);
    if (task_id) q.Bind(4, task_id->str());
  });
}

Result<std::int64_t> SqliteOrchestrator::CountInvocations(
    const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses) {
  std::string sql = "SELECT count(*) FROM orch_invocations WHERE app_id = ?";
  if (task_id) sql += " AND task_id = ?";
  sql += StatusFilter("status", statuses);
  std::int64_t count = 0;
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(q, conn, sql);
    q.Bind(1, app_id_);
    if (task_id) q.Bind(2, task_id->str());
    SQ_STEP(row, q);
    count = row ? q.Int(0) : 0;
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return count;
}

Status SqliteOrchestrator::IncrementRetries(const InvocationId& id) {
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(q, conn,
               "UPDATE orch_invocations SET retries = retries + 1 WHERE app_id = ? AND id = ?");
    q.Bind(1, app_id_).Bind(2, id.str());
    SQ_RETURN_IF_ERROR(q.Run());
    return conn.Changes() == 0 ? UnknownInvocation(id.str()) : Status::Ok();
  });
}

Result<std::int64_t> SqliteOrchestrator::GetRetries(const InvocationId& id) {
  std::int64_t retries = 0;
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(q, conn, "SELECT retries FROM orch_invocations WHERE app_id = ? AND id = ?");
    q.Bind(1, app_id_).Bind(2, id.str());
    SQ_STEP(row, q);
    if (!row) return UnknownInvocation(id.str());
    retries = q.Int(0);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return retries;
}

Status SqliteOrchestrator::ScheduleAutoPurge(const InvocationId& id) {
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(q, conn,
               "UPDATE orch_invocations SET purge_mark_us = ? WHERE app_id = ? AND id = ?");
    q.Bind(1, clock_->NowMicros()).Bind(2, app_id_).Bind(3, id.str());
    SQ_RETURN_IF_ERROR(q.Run());
    return conn.Changes() == 0 ? UnknownInvocation(id.str()) : Status::Ok();
  });
}

Result<std::vector<InvocationId>> SqliteOrchestrator::AutoPurge(TimestampUs older_than_us) {
  std::vector<InvocationId> purged;
  Status s = db_->Write([&](sqlite::Conn& conn) -> Status {
    purged.clear();
    const TimestampUs cutoff = clock_->NowMicros() - older_than_us;
    {
      SQ_PREPARE(q, conn,
                 "SELECT id FROM orch_invocations WHERE app_id = ? AND purge_mark_us IS NOT NULL"
                 " AND purge_mark_us <= ? ORDER BY purge_mark_us, seq");
      q.Bind(1, app_id_).Bind(2, cutoff);
      while (true) {
        SQ_STEP(row, q);
        if (!row) break;
        purged.emplace_back(q.Text(0));
      }
    }
    for (const InvocationId& id : purged) SQ_RETURN_IF_ERROR(ForgetInTxn(conn, id.str()));
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return purged;
}

Status SqliteOrchestrator::ForgetInTxn(sqlite::Conn& conn, const std::string& id) {
  {
    SQ_PREPARE(args, conn, "DELETE FROM orch_args WHERE app_id = ? AND invocation_id = ?");
    args.Bind(1, app_id_).Bind(2, id);
    SQ_RETURN_IF_ERROR(args.Run());
  }
  SQ_RETURN_IF_ERROR(ReleaseInTxn(conn, id));
  SQ_PREPARE(row, conn, "DELETE FROM orch_invocations WHERE app_id = ? AND id = ?");
  row.Bind(1, app_id_).Bind(2, id);
  return row.Run();
}

Status SqliteOrchestrator::ReleaseInTxn(sqlite::Conn& conn, const std::string& id) {
  {
    SQ_PREPARE(in, conn, "DELETE FROM orch_waits WHERE app_id = ? AND waited = ?");
    in.Bind(1, app_id_).Bind(2, id);
    SQ_RETURN_IF_ERROR(in.Run());
  }
  SQ_PREPARE(out, conn, "DELETE FROM orch_waits WHERE app_id = ? AND waiter = ?");
  out.Bind(1, app_id_).Bind(2, id);
  return out.Run();
}

Status SqliteOrchestrator::WaitingForResults(const InvocationId& waiter,
                                             const std::vector<InvocationId>& waited) {
  if (waited.empty()) return Status::Ok();
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(q, conn,
               "INSERT OR IGNORE INTO orch_waits (app_id, waiter, waited) VALUES (?, ?, ?)");
    for (const InvocationId& w : waited) {
      q.Reset();
      q.Bind(1, app_id_).Bind(2, waiter.str()).Bind(3, w.str());
      SQ_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Status SqliteOrchestrator::ReleaseWaiters(const InvocationId& waited) {
  return db_->Write([&](sqlite::Conn& conn) { return ReleaseInTxn(conn, waited.str()); });
}

Result<std::vector<InvocationId>> SqliteOrchestrator::GetBlockingInvocations(
    std::int64_t max_count) {
  if (max_count < 0) return Status::InvalidArgument("max_num_invocations must be >= 0");
  if (max_count == 0) return std::vector<InvocationId>();
  // Driven by the wait graph (orch_waits_waited), one PK probe per candidate.
  const std::string sql =
      "SELECT i.id FROM (SELECT DISTINCT waited FROM orch_waits WHERE app_id = ?1) w"
      " JOIN orch_invocations i ON i.app_id = ?1 AND i.id = w.waited"
      " WHERE NOT EXISTS (SELECT 1 FROM orch_waits o WHERE o.app_id = ?1 AND o.waiter = i.id)" +
      AvailableForRunFilter("i.status") + " ORDER BY i.seq LIMIT ?2";
  return SelectIds(sql, [&](sqlite::Stmt& q) { q.Bind(2, max_count); });
}

Status SqliteOrchestrator::Purge() {
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    for (const char* table :
         {"orch_invocations", "orch_args", "orch_waits", "orch_runners", "orch_executions"}) {
      SQ_PREPARE(q, conn, std::string("DELETE FROM ") + table + " WHERE app_id = ?");
      q.Bind(1, app_id_);
      SQ_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

}  // namespace sqlite_orchestrator

Result<std::unique_ptr<Orchestrator>> NewSqliteOrchestrator(std::shared_ptr<sqlite::Database> db,
                                                            const BackendConfig& config) {
  auto orch = std::make_unique<sqlite_orchestrator::SqliteOrchestrator>(std::move(db), config);
  if (Status s = orch->Init(); !s.ok()) return s;
  return std::unique_ptr<Orchestrator>(std::move(orch));
}

}  // namespace pynenc_cpp
