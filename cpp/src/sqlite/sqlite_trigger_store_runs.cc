// SQLite trigger store: trigger runs, their relation rows (trig_run_refs), and
// the retention primitives (age and capacity purges, cascades).
#include <set>

#include "sqlite/sqlite_trigger_store_impl.h"

namespace pynenc_cpp {
namespace sqlite_trigger {
namespace {

// The port's run order: run_time_us (NULL first), then id.
constexpr const char* kRunOrder = " ORDER BY r.run_time_us, r.trigger_run_id";

}  // namespace

Status SqliteTriggerStore::DeleteRunTx(Conn& c, const std::string& trigger_run_id,
                                       std::int64_t* deleted) {
  auto bind = [&](Stmt& s) { s.Bind(1, app_).Bind(2, trigger_run_id); };
  if (Status s =
          Exec(c, "DELETE FROM trig_run_refs WHERE app_id = ?1 AND trigger_run_id = ?2", bind);
      !s.ok()) {
    return s;
  }
  std::int64_t changes = 0;
  if (Status s = Exec(c, "DELETE FROM trig_runs WHERE app_id = ?1 AND trigger_run_id = ?2", bind,
                      &changes);
      !s.ok()) {
    return s;
  }
  if (deleted != nullptr) *deleted += changes;
  return Status::Ok();
}

Status SqliteTriggerStore::StoreTriggerRun(const TriggerRunRow& run) {
  return db_->Write([&](Conn& c) -> Status {
    if (Status s = DeleteRunTx(c, run.trigger_run_id, nullptr); !s.ok()) return s;
    std::optional<TimestampUs> run_time =
        run.executed_at_us ? run.executed_at_us : run.claimed_at_us;
    Status s =
        Exec(c,
             "INSERT INTO trig_runs (app_id, trigger_run_id, trigger_id, task_id_key, logic, "
             "claimed_at_us, executed_at_us, run_time_us, triggered_invocation_id, "
             "atomic_service_run_id, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
             [&](Stmt& s) {
               s.Bind(1, app_).Bind(2, run.trigger_run_id).Bind(3, run.trigger_id);
               s.Bind(4, run.task_id_key).Bind(5, run.logic).Bind(6, run.claimed_at_us);
               s.Bind(7, run.executed_at_us).Bind(8, run_time);
               s.Bind(9, run.triggered_invocation_id).Bind(10, run.atomic_service_run_id);
               s.Bind(11, run.json);
             });
    if (!s.ok()) return s;
    auto add_refs = [&](RunRef kind, const std::vector<std::string>& ids) -> Status {
      for (const std::string& id : ids) {
        Status r =
            Exec(c,
                 "INSERT OR IGNORE INTO trig_run_refs (app_id, kind, ref_id, trigger_run_id) "
                 "VALUES (?1, ?2, ?3, ?4)",
                 [&](Stmt& s) {
                   s.Bind(1, app_).Bind(2, static_cast<std::int64_t>(kind));
                   s.Bind(3, id).Bind(4, run.trigger_run_id);
                 });
        if (!r.ok()) return r;
      }
      return Status::Ok();
    };
    if (s = add_refs(kRefEvent, run.event_ids); !s.ok()) return s;
    if (s = add_refs(kRefSource, run.source_invocation_ids); !s.ok()) return s;
    return add_refs(kRefValidCondition, run.valid_condition_ids);
  });
}

Result<std::optional<std::string>> SqliteTriggerStore::GetTriggerRun(
    const std::string& trigger_run_id) {
  return ReadOne("SELECT json FROM trig_runs WHERE app_id = ?1 AND trigger_run_id = ?2",
                 trigger_run_id, [](Stmt& row) { return row.Text(0); });
}

Result<std::vector<std::string>> SqliteTriggerStore::RunsByRef(RunRef kind,
                                                               const std::string& ref_id) {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  // CROSS JOIN keeps trig_run_refs as the outer loop (a lookup by its primary
  // key); without statistics SQLite would otherwise walk every run of the app.
  Status s = db_->Read([&](Conn& c) {
    out = Texts(
        c,
        std::string("SELECT r.json FROM trig_run_refs x CROSS JOIN trig_runs r "
                    "ON r.app_id = x.app_id AND r.trigger_run_id = x.trigger_run_id "
                    "WHERE x.app_id = ?1 AND x.kind = ?2 AND x.ref_id = ?3") +
            kRunOrder,
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, static_cast<std::int64_t>(kind)).Bind(3, ref_id); });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<std::string>> SqliteTriggerStore::RunsForEvent(const std::string& event_id) {
  return RunsByRef(kRefEvent, event_id);
}

Result<std::vector<std::string>> SqliteTriggerStore::RunsForInvocation(
    const std::string& invocation_id) {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = Texts(c,
                std::string("SELECT r.json FROM trig_runs r "
                            "WHERE r.app_id = ?1 AND r.triggered_invocation_id = ?2") +
                    kRunOrder,
                [&](Stmt& s) { s.Bind(1, app_).Bind(2, invocation_id); });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<std::string>> SqliteTriggerStore::RunsSourcedByInvocation(
    const std::string& invocation_id) {
  return RunsByRef(kRefSource, invocation_id);
}

Result<std::vector<std::string>> SqliteTriggerStore::RunsForValidCondition(
    const std::string& valid_condition_id) {
  return RunsByRef(kRefValidCondition, valid_condition_id);
}

Result<std::vector<std::string>> SqliteTriggerStore::RunsInTimeRange(
    const TriggerRunFilter& filter) {
  if (filter.limit && *filter.limit < 0) {
    return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(*filter.limit));
  }
  // Runs without a time have run_time_us NULL and fail the range test.
  std::string sql =
      "SELECT r.json FROM trig_runs r WHERE r.app_id = ?1 AND r.run_time_us >= ?2 "
      "AND r.run_time_us <= ?3";
  if (filter.task_id_key) sql += " AND r.task_id_key = ?4";
  if (filter.event_code) {
    sql +=
        " AND EXISTS (SELECT 1 FROM trig_run_refs x JOIN trig_events e "
        "ON e.app_id = x.app_id AND e.event_id = x.ref_id WHERE x.app_id = r.app_id "
        "AND x.trigger_run_id = r.trigger_run_id AND x.kind = 0 AND e.event_code = ?5)";
  }
  sql += kRunOrder;
  if (filter.limit) sql += " LIMIT ?6";
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = Texts(c, sql, [&](Stmt& s) {
      s.Bind(1, app_).Bind(2, filter.start_us).Bind(3, filter.end_us);
      if (filter.task_id_key) s.Bind(4, *filter.task_id_key);
      if (filter.event_code) s.Bind(5, *filter.event_code);
      if (filter.limit) s.Bind(6, *filter.limit);
    });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<std::string>> SqliteTriggerStore::ReferencedAtomicServiceRunIds() {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = Texts(c,
                "SELECT DISTINCT atomic_service_run_id FROM trig_runs WHERE app_id = ?1 "
                "AND atomic_service_run_id IS NOT NULL AND atomic_service_run_id <> '' "
                "ORDER BY atomic_service_run_id",
                [&](Stmt& s) { s.Bind(1, app_); });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

// ---- Retention -------------------------------------------------------------

Result<std::vector<std::string>> SqliteTriggerStore::PurgeEvents(const char* select,
                                                                 std::int64_t bound) {
  Result<std::vector<std::string>> removed = std::vector<std::string>();
  Status s = db_->Write([&](Conn& c) -> Status {
    removed = Texts(c, select, [&](Stmt& s) { s.Bind(1, app_).Bind(2, bound); });
    if (!removed.ok()) return removed.status();
    for (const std::string& id : removed.value()) {
      if (Status d = DeleteEventTx(c, id); !d.ok()) return d;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return removed;
}

Result<std::int64_t> SqliteTriggerStore::PurgeRuns(const char* select, std::int64_t bound) {
  std::int64_t deleted = 0;
  Status s = db_->Write([&](Conn& c) -> Status {
    deleted = 0;
    Result<std::vector<std::string>> ids =
        Texts(c, select, [&](Stmt& s) { s.Bind(1, app_).Bind(2, bound); });
    if (!ids.ok()) return ids.status();
    for (const std::string& id : ids.value()) {
      if (Status d = DeleteRunTx(c, id, &deleted); !d.ok()) return d;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return deleted;
}

Result<std::vector<std::string>> SqliteTriggerStore::AgePurgeEvents(TimestampUs threshold_us) {
  return PurgeEvents(
      "SELECT event_id FROM trig_events WHERE app_id = ?1 AND timestamp_us < ?2 "
      "ORDER BY timestamp_us, event_id",
      threshold_us);
}

Result<std::int64_t> SqliteTriggerStore::AgePurgeTriggerRuns(TimestampUs threshold_us) {
  return PurgeRuns("SELECT trigger_run_id FROM trig_runs WHERE app_id = ?1 AND run_time_us < ?2",
                   threshold_us);
}

Result<std::vector<std::string>> SqliteTriggerStore::CapPurgeEvents(std::int64_t max_records) {
  if (max_records <= 0) return std::vector<std::string>();
  return PurgeEvents(
      "SELECT event_id FROM trig_events WHERE app_id = ?1 "
      "ORDER BY timestamp_us DESC, event_id DESC LIMIT -1 OFFSET ?2",
      max_records);
}

Result<std::int64_t> SqliteTriggerStore::CapPurgeTriggerRuns(std::int64_t max_records) {
  if (max_records <= 0) return std::int64_t{0};
  // DESC puts NULL run times last: runs without a time are the oldest.
  return PurgeRuns(
      "SELECT trigger_run_id FROM trig_runs WHERE app_id = ?1 "
      "ORDER BY run_time_us DESC, trigger_run_id DESC LIMIT -1 OFFSET ?2",
      max_records);
}

Result<std::int64_t> SqliteTriggerStore::CascadeDeleteRunsForEvents(
    const std::vector<std::string>& event_ids) {
  if (event_ids.empty()) return std::int64_t{0};
  std::int64_t deleted = 0;
  Status s = db_->Write([&](Conn& c) -> Status {
    deleted = 0;
    std::set<std::string> doomed;
    for (const std::string& event_id : event_ids) {
      Status q = ForEachRow(
          c,
          "SELECT trigger_run_id FROM trig_run_refs WHERE app_id = ?1 AND kind = 0 AND ref_id = ?2",
          [&](Stmt& s) { s.Bind(1, app_).Bind(2, event_id); },
          [&](Stmt& row) {
            doomed.insert(row.Text(0));
            return Status::Ok();
          });
      if (!q.ok()) return q;
    }
    for (const std::string& id : doomed) {
      if (Status d = DeleteRunTx(c, id, &deleted); !d.ok()) return d;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return deleted;
}

}  // namespace sqlite_trigger
}  // namespace pynenc_cpp
