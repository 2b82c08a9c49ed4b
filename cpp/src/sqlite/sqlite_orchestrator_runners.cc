// SQLite orchestrator, part 2: runner heartbeats, the recovery queries and
// atomic-service execution rows. Schema: sqlite_orchestrator.cc.
#include <algorithm>

#include "ports/queue_codec.h"
#include "sqlite/sqlite_orchestrator_impl.h"

namespace pynenc_cpp::sqlite_orchestrator {
namespace {

constexpr const char* kExecutionColumns =
    "SELECT runner_id, run_id, start_us, end_us, status, reason FROM orch_executions";

Result<AtomicServiceExecution> ExecutionFromRow(const sqlite::Stmt& q) {
  const std::string name = q.Text(4);
  std::optional<AtomicServiceStatus> status = ParseAtomicServiceStatus(name);
  if (!status) {
    return Status::BackendFailure("orch_executions row has unknown status '" + name + "'");
  }
  return AtomicServiceExecution{q.Text(0), q.Text(1), q.Int(2), q.OptInt(3), *status, q.Text(5)};
}

// Collects every row of `q` as executions. REQUIRES: inside a transaction.
Status CollectExecutions(sqlite::Stmt& q, std::vector<AtomicServiceExecution>& out) {
  while (true) {
    SQ_STEP(row, q);
    if (!row) return Status::Ok();
    Result<AtomicServiceExecution> e = ExecutionFromRow(q);
    if (!e.ok()) return e.status();
    out.push_back(std::move(e).value());
  }
}

const std::string kRunning(AtomicServiceStatusName(AtomicServiceStatus::kRunning));

}  // namespace

Status SqliteOrchestrator::RegisterHeartbeats(
    const std::vector<std::string>& runner_ids, bool can_run_atomic_service,
    const std::optional<std::vector<std::string>>& consumed_queues) {
  if (Status s = CheckRunnerIds(runner_ids); !s.ok()) return s;
  if (runner_ids.empty()) return Status::Ok();
  const std::optional<std::string> queues =
      consumed_queues ? std::optional<std::string>(queue_codec::Encode(*consumed_queues))
                      : std::nullopt;
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    const TimestampUs now = clock_->NowMicros();
    // ?6 NULL: keep the stored queues (a new row gets none).
    SQ_PREPARE(
        q, conn,
        "INSERT INTO orch_runners (app_id, runner_id, creation_us, last_heartbeat_us,"
        " can_run_atomic_service, consumed_queues) VALUES (?1, ?2, ?3, ?3, ?4, coalesce(?5, ''))"
        " ON CONFLICT (app_id, runner_id) DO UPDATE SET last_heartbeat_us = "
        "excluded.last_heartbeat_us,"
        " can_run_atomic_service = excluded.can_run_atomic_service,"
        " consumed_queues = coalesce(?5, consumed_queues)");
    for (const std::string& id : runner_ids) {
      q.Reset();
      q.Bind(1, app_id_)
          .Bind(2, id)
          .Bind(3, now)
          .Bind(4, static_cast<std::int64_t>(can_run_atomic_service ? 1 : 0))
          .Bind(5, queues);
      SQ_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Status SqliteOrchestrator::DeregisterRunners(const std::vector<std::string>& runner_ids) {
  if (runner_ids.empty()) return Status::Ok();
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(q, conn, "DELETE FROM orch_runners WHERE app_id = ? AND runner_id = ?");
    for (const std::string& id : runner_ids) {
      q.Reset();
      q.Bind(1, app_id_).Bind(2, id);
      SQ_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Result<std::vector<RunnerInfo>> SqliteOrchestrator::ActiveRunners(
    TimestampUs timeout_us, std::optional<bool> can_run_atomic_service) {
  std::vector<RunnerInfo> out;
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    out.clear();  // the transaction may be retried
    const TimestampUs cutoff = clock_->NowMicros() - timeout_us;
    SQ_PREPARE(q, conn,
               "SELECT runner_id, creation_us, last_heartbeat_us, can_run_atomic_service,"
               " consumed_queues FROM orch_runners WHERE app_id = ?1 AND last_heartbeat_us >= ?2"
               " AND (?3 IS NULL OR can_run_atomic_service = ?3)"
               " ORDER BY creation_us, runner_id");
    q.Bind(1, app_id_).Bind(2, cutoff);
    if (can_run_atomic_service) {
      q.Bind(3, static_cast<std::int64_t>(*can_run_atomic_service ? 1 : 0));
    }
    while (true) {
      SQ_STEP(row, q);
      if (!row) return Status::Ok();
      Result<std::vector<std::string>> queues =
          queue_codec::Decode(q.Text(4), "orch_runners row has malformed consumed_queues");
      if (!queues.ok()) return queues.status();
      out.push_back(
          RunnerInfo{q.Text(0), q.Int(1), q.Int(2), q.Int(3) != 0, std::move(queues).value()});
    }
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<InvocationId>> SqliteOrchestrator::PendingForRecovery(
    TimestampUs max_pending_us) {
  const TimestampUs cutoff = clock_->NowMicros() - max_pending_us;
  return SelectIds(
      "SELECT id FROM orch_invocations WHERE app_id = ? AND status = 'pending'"
      " AND status_us <= ? ORDER BY seq",
      [&](sqlite::Stmt& q) { q.Bind(2, cutoff); });
}

// Invocations in `status` whose owner's last heartbeat is before the cutoff;
// an owner with no runner row counts as dead when ?4 is 1. Registration order.
constexpr const char* kOwnerDeadSql =
    "SELECT i.id FROM orch_invocations i LEFT JOIN orch_runners r"
    " ON r.app_id = i.app_id AND r.runner_id = i.runner_id"
    " WHERE i.app_id = ? AND i.status = ? AND i.runner_id IS NOT NULL AND i.runner_id <> ''"
    " AND ((r.runner_id IS NULL AND ? = 1) OR r.last_heartbeat_us < ?)"
    " ORDER BY i.seq";

Result<std::vector<InvocationId>> SqliteOrchestrator::RunningForRecovery(
    TimestampUs heartbeat_timeout_us) {
  const TimestampUs cutoff = clock_->NowMicros() - heartbeat_timeout_us;
  return SelectIds(kOwnerDeadSql, [&](sqlite::Stmt& q) {
    q.Bind(2, "running").Bind(3, std::int64_t{1}).Bind(4, cutoff);
  });
}

Result<std::vector<InvocationId>> SqliteOrchestrator::PendingOfDeadRunners(
    TimestampUs heartbeat_timeout_us) {
  const TimestampUs cutoff = clock_->NowMicros() - heartbeat_timeout_us;
  return SelectIds(kOwnerDeadSql, [&](sqlite::Stmt& q) {
    q.Bind(2, "pending").Bind(3, std::int64_t{0}).Bind(4, cutoff);
  });
}

Result<AtomicServiceStart> SqliteOrchestrator::RecordAtomicServiceStart(
    const std::string& runner_id, const std::string& run_id,
    std::optional<TimestampUs> started_at_us, AtomicServiceStatus status,
    const std::string& reason) {
  if (run_id.empty()) return Status::InvalidArgument("atomic_service_run_id must not be empty");
  AtomicServiceStart result;
  // The gate: reading the newest RUNNING row and inserting ours happen in one
  // BEGIN IMMEDIATE transaction, so of two racing processes exactly one sees
  // no prior RUNNING row.
  Status s = db_->Write([&](sqlite::Conn& conn) -> Status {
    const TimestampUs start = started_at_us.value_or(clock_->NowMicros());
    AtomicServiceExecution row{runner_id, run_id, start, std::nullopt, status, reason};
    if (status == AtomicServiceStatus::kRunning) {
      SQ_PREPARE(prior, conn,
                 "SELECT run_id, runner_id, start_us FROM orch_executions"
                 " WHERE app_id = ? AND status = ? ORDER BY start_us DESC, seq DESC LIMIT 1");
      prior.Bind(1, app_id_).Bind(2, kRunning);
      SQ_STEP(found, prior);
      if (found) {
        if (prior.Text(0) == run_id) {
          result = AtomicServiceStart{true, prior.Int(2)};
          return Status::Ok();
        }
        row.status = AtomicServiceStatus::kBlocked;
        if (row.reason.empty()) {
          row.reason = "prior_running:" + prior.Text(0) + " runner:" + prior.Text(1);
        }
      }
      prior.Reset();
    }
    if (row.status == AtomicServiceStatus::kBlocked) row.end_us = start;
    // REPLACE deletes a stored row with this run id and inserts a new rowid:
    // the new row is the newest insertion, as in the memory backend.
    SQ_PREPARE(put, conn,
               "INSERT OR REPLACE INTO orch_executions"
               " (app_id, run_id, runner_id, start_us, end_us, status, reason)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)");
    put.Bind(1, app_id_)
        .Bind(2, run_id)
        .Bind(3, runner_id)
        .Bind(4, start)
        .Bind(5, row.end_us)
        .Bind(6, AtomicServiceStatusName(row.status))
        .Bind(7, row.reason);
    SQ_RETURN_IF_ERROR(put.Run());
    result = AtomicServiceStart{row.status != AtomicServiceStatus::kBlocked, start};
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return result;
}

Status SqliteOrchestrator::FinalizeAtomicService(const std::string& runner_id,
                                                 const std::string& run_id, TimestampUs end_us,
                                                 AtomicServiceStatus status,
                                                 const std::string& reason) {
  if (Status s = CheckFinalize(status, run_id); !s.ok()) return s;
  return db_->Write([&](sqlite::Conn& conn) -> Status {
    SQ_PREPARE(get, conn, "SELECT status FROM orch_executions WHERE app_id = ? AND run_id = ?");
    get.Bind(1, app_id_).Bind(2, run_id);
    SQ_STEP(found, get);
    if (!found) {
      get.Reset();
      SQ_PREPARE(put, conn,
                 "INSERT INTO orch_executions"
                 " (app_id, run_id, runner_id, start_us, end_us, status, reason)"
                 " VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)");
      put.Bind(1, app_id_)
          .Bind(2, run_id)
          .Bind(3, runner_id)
          .Bind(4, end_us)
          .Bind(5, AtomicServiceStatusName(status))
          .Bind(6, reason);
      return put.Run();
    }
    const bool running = get.Text(0) == kRunning;
    get.Reset();
    if (!running) return Status::Ok();  // first finalisation wins
    SQ_PREPARE(upd, conn,
               "UPDATE orch_executions SET end_us = ?1, status = ?2,"
               " reason = CASE WHEN ?3 = '' THEN reason ELSE ?3 END"
               " WHERE app_id = ?4 AND run_id = ?5");
    upd.Bind(1, end_us)
        .Bind(2, AtomicServiceStatusName(status))
        .Bind(3, reason)
        .Bind(4, app_id_)
        .Bind(5, run_id);
    return upd.Run();
  });
}

Result<std::vector<AtomicServiceExecution>> SqliteOrchestrator::ActiveAtomicServiceExecutions() {
  std::vector<AtomicServiceExecution> out;
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    out.clear();  // the transaction may be retried
    SQ_PREPARE(q, conn,
               std::string(kExecutionColumns) +
                   " WHERE app_id = ? AND status = ? ORDER BY start_us DESC, seq DESC");
    q.Bind(1, app_id_).Bind(2, kRunning);
    return CollectExecutions(q, out);
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<AtomicServiceExecution>> SqliteOrchestrator::AtomicServiceExecutionsInRange(
    TimestampUs start_us, TimestampUs end_us, std::int64_t limit,
    const std::optional<std::string>& runner_id, TimestampUs min_duration_us) {
  std::vector<AtomicServiceExecution> out;
  if (limit <= 0) return out;  // SQLite reads a negative LIMIT as "no limit"
  Status s = db_->Read([&](sqlite::Conn& conn) -> Status {
    out.clear();  // the transaction may be retried
    SQ_PREPARE(q, conn,
               std::string(kExecutionColumns) +
                   " WHERE app_id = ?1 AND start_us <= ?3 AND coalesce(end_us, start_us) >= ?2"
                   " AND (?4 IS NULL OR runner_id = ?4)"
                   " AND (?5 <= 0 OR (end_us IS NOT NULL AND end_us - start_us >= ?5))"
                   " ORDER BY start_us DESC, seq DESC LIMIT ?6");
    q.Bind(1, app_id_)
        .Bind(2, start_us)
        .Bind(3, end_us)
        .Bind(4, runner_id)
        .Bind(5, min_duration_us)
        .Bind(6, limit);
    return CollectExecutions(q, out);
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::int64_t> SqliteOrchestrator::PurgeAtomicServiceExecutions(
    const ExecutionPurgePolicy& policy) {
  std::int64_t removed = 0;
  // Finished rows are read oldest first and the rules applied in C++ (the
  // protected list is arbitrary-length); all in one write transaction.
  Status s = db_->Write([&](sqlite::Conn& conn) -> Status {
    removed = 0;
    std::vector<std::int64_t> seqs;
    std::vector<std::string> run_ids;
    std::vector<std::optional<TimestampUs>> ends;
    {
      SQ_PREPARE(q, conn,
                 "SELECT seq, run_id, end_us FROM orch_executions WHERE app_id = ? AND status <> ?"
                 " ORDER BY start_us, seq");
      q.Bind(1, app_id_).Bind(2, kRunning);
      while (true) {
        SQ_STEP(row, q);
        if (!row) break;
        seqs.push_back(q.Int(0));
        run_ids.push_back(q.Text(1));
        ends.push_back(q.OptInt(2));
      }
    }
    std::vector<FinishedExecution> finished;  // oldest start first
    for (std::size_t i = 0; i < seqs.size(); ++i) finished.push_back({run_ids[i], ends[i]});
    const std::vector<bool> dropped = DroppedExecutions(finished, policy, clock_->NowMicros());
    SQ_PREPARE(del, conn, "DELETE FROM orch_executions WHERE seq = ?");
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      if (!dropped[i]) continue;
      del.Reset();
      del.Bind(1, seqs[i]);
      SQ_RETURN_IF_ERROR(del.Run());
      ++removed;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return removed;
}

}  // namespace pynenc_cpp::sqlite_orchestrator
