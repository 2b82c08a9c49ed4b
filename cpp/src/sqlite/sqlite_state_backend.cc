// SQLite state backend. Every method is one transaction on a pooled connection
// (Database::Read for queries, Database::Write for changes), so each call is
// atomic with respect to every other call from any thread or process. Orders the
// port promises ("first-upsert order", "arrival order") come from the rowid of
// the row that was first inserted: upserts update in place and keep it.
// This file: the schema, the factory and app-info discovery, invocations,
// results and exceptions, and the purge; history: sqlite_state_backend_history.cc;
// runner contexts, app info and workflows: sqlite_state_backend_workflows.cc.
#include "sqlite/sqlite_state_backend.h"

#include <cstdint>
#include <utility>

#include "sqlite/sqlite_state_backend_impl.h"

namespace pynenc_cpp::sqlite {
namespace {

using state_impl::EachRow;
using state_impl::SqliteStateBackend;

constexpr const char* kComponent = "state_backend";
constexpr int kSchemaVersion = 2;

// Rowid columns (`seq`) record first-insert / arrival order. Every index starts
// with app_id; an index's entries end with the rowid, so an equality lookup on
// its leading columns reads rows already in `seq` order.
constexpr const char* kSchema = R"sql(
CREATE TABLE state_invocations (
  seq INTEGER PRIMARY KEY,
  app_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  call_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  arguments_id TEXT NOT NULL,
  serialized_arguments TEXT NOT NULL,
  parent_invocation_id TEXT,
  parent_event_id TEXT,
  workflow_id TEXT,          -- NULL: the invocation has no workflow
  workflow_type TEXT,
  parent_workflow_id TEXT,
  UNIQUE (app_id, invocation_id));
CREATE INDEX state_invocations_parent ON state_invocations (app_id, parent_invocation_id)
  WHERE parent_invocation_id IS NOT NULL;
CREATE INDEX state_invocations_event ON state_invocations (app_id, parent_event_id)
  WHERE parent_event_id IS NOT NULL;
CREATE INDEX state_invocations_workflow ON state_invocations (app_id, workflow_id)
  WHERE workflow_id IS NOT NULL;
CREATE INDEX state_invocations_workflow_type ON state_invocations (app_id, workflow_type)
  WHERE workflow_id IS NOT NULL;
CREATE INDEX state_invocations_in_workflow ON state_invocations (app_id, seq)
  WHERE workflow_id IS NOT NULL;

CREATE TABLE state_history (
  seq INTEGER PRIMARY KEY,
  app_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  timestamp_us INTEGER NOT NULL,
  status TEXT NOT NULL,       -- pynenc's status value ("running", ...)
  history_json TEXT NOT NULL,
  UNIQUE (app_id, invocation_id, timestamp_us, status));
CREATE INDEX state_history_by_time ON state_history (app_id, timestamp_us);

CREATE TABLE state_results (
  app_id TEXT NOT NULL, invocation_id TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (app_id, invocation_id)) WITHOUT ROWID;
CREATE TABLE state_exceptions (
  app_id TEXT NOT NULL, invocation_id TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (app_id, invocation_id)) WITHOUT ROWID;

CREATE TABLE state_runner_contexts (
  app_id TEXT NOT NULL,
  runner_id TEXT NOT NULL,
  runner_cls TEXT NOT NULL,
  parent_runner_id TEXT,
  pid INTEGER NOT NULL,
  hostname TEXT NOT NULL,
  thread_id INTEGER NOT NULL,
  PRIMARY KEY (app_id, runner_id)) WITHOUT ROWID;

CREATE TABLE state_app_info (
  app_id TEXT PRIMARY KEY, app_info_json TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE state_workflow_runs (
  app_id TEXT NOT NULL,
  workflow_id TEXT NOT NULL,
  workflow_type TEXT NOT NULL,
  parent_workflow_id TEXT,
  PRIMARY KEY (app_id, workflow_id)) WITHOUT ROWID;
CREATE INDEX state_workflow_runs_type ON state_workflow_runs (app_id, workflow_type, workflow_id);

CREATE TABLE state_workflow_sub_invocations (
  seq INTEGER PRIMARY KEY,
  app_id TEXT NOT NULL,
  workflow_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  UNIQUE (app_id, workflow_id, invocation_id));
CREATE INDEX state_workflow_sub_invocations_order ON state_workflow_sub_invocations
  (app_id, workflow_id);

CREATE TABLE state_workflow_data (
  app_id TEXT NOT NULL, workflow_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (app_id, workflow_id, key)) WITHOUT ROWID;
)sql";

// Version 1 had state_history_by_invocation (app_id, invocation_id, timestamp_us):
// a prefix of the UNIQUE index's columns, so one more b-tree page written by every
// history row for no lookup the UNIQUE index does not serve (~12% of the WAL
// writes of a task).
const std::vector<sqlite::SchemaMigration> kMigrations = {
    {1, "DROP INDEX IF EXISTS state_history_by_invocation"},
};

// Tables Purge empties for one app (state_app_info is kept, see the port).
constexpr const char* kPurgedTables[] = {
    "state_invocations",   "state_history",       "state_results",
    "state_exceptions",    "state_runner_contexts", "state_workflow_runs",
    "state_workflow_sub_invocations", "state_workflow_data"};

constexpr const char* kInvocationColumns =
    "invocation_id, call_id, task_id, arguments_id, serialized_arguments, parent_invocation_id, "
    "parent_event_id, workflow_id, workflow_type, parent_workflow_id";

InvocationRecord ReadInvocation(const Stmt& q) {
  InvocationRecord r;
  r.invocation_id = InvocationId(q.Text(0));
  r.call_id = CallId(q.Text(1));
  r.task_id = TaskId(q.Text(2));
  r.arguments_id = q.Text(3);
  r.serialized_arguments = q.Text(4);
  if (auto parent = q.OptText(5)) r.parent_invocation_id = InvocationId(std::move(*parent));
  r.parent_event_id = q.OptText(6);
  if (auto workflow_id = q.OptText(7)) {
    WorkflowRecord w{WorkflowId(std::move(*workflow_id)), TaskId(q.Text(8)), std::nullopt};
    if (auto parent = q.OptText(9)) w.parent_workflow_id = WorkflowId(std::move(*parent));
    r.workflow = std::move(w);
  }
  return r;
}

}  // namespace

namespace state_impl {
// --- invocations ---
Status SqliteStateBackend::UpsertInvocations(const std::vector<InvocationRecord>& records) {
  if (records.empty()) return Status::Ok();
  return db_->Write([&](Conn& c) -> Status {
    for (const InvocationRecord& r : records) {
      SQ_PREPARE(q, c,
                 "INSERT INTO state_invocations (app_id, invocation_id, call_id, task_id, "
                 "arguments_id, serialized_arguments, parent_invocation_id, parent_event_id, "
                 "workflow_id, workflow_type, parent_workflow_id) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
                 "ON CONFLICT (app_id, invocation_id) DO UPDATE SET "
                 "call_id = excluded.call_id, task_id = excluded.task_id, "
                 "arguments_id = excluded.arguments_id, "
                 "serialized_arguments = excluded.serialized_arguments, "
                 "parent_invocation_id = excluded.parent_invocation_id, "
                 "parent_event_id = excluded.parent_event_id, "
                 "workflow_id = excluded.workflow_id, workflow_type = excluded.workflow_type, "
                 "parent_workflow_id = excluded.parent_workflow_id");
      q.Bind(1, app_id_)
          .Bind(2, r.invocation_id.str())
          .Bind(3, r.call_id.str())
          .Bind(4, r.task_id.str())
          .Bind(5, r.arguments_id)
          .Bind(6, r.serialized_arguments)
          .Bind(7, r.parent_invocation_id ? std::optional(r.parent_invocation_id->str())
                                          : std::nullopt)
          .Bind(8, r.parent_event_id);
      if (r.workflow) {
        q.Bind(9, r.workflow->workflow_id.str())
            .Bind(10, r.workflow->workflow_type.str())
            .Bind(11, r.workflow->parent_workflow_id
                          ? std::optional(r.workflow->parent_workflow_id->str())
                          : std::nullopt);
      } else {
        q.BindNull(9).BindNull(10).BindNull(11);
      }
      SQ_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Result<InvocationRecord> SqliteStateBackend::GetInvocation(const InvocationId& id) {
  std::optional<InvocationRecord> found;
  Status s = db_->Read([&](Conn& c) -> Status {
    SQ_PREPARE(q, c,
               std::string("SELECT ") + kInvocationColumns +
                   " FROM state_invocations WHERE app_id = ? AND invocation_id = ?");
    q.Bind(1, app_id_).Bind(2, id.str());
    return EachRow(q, [&](const Stmt& row) {
      found = ReadInvocation(row);
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  if (!found) return Status::NotFound("invocation not found: " + id.str());
  return std::move(*found);
}

Result<std::vector<InvocationId>> SqliteStateBackend::ChildInvocations(const InvocationId& parent) {
  return Ids(
      "SELECT invocation_id FROM state_invocations WHERE app_id = ?1 AND "
      "parent_invocation_id = ?2 AND parent_invocation_id IS NOT NULL ORDER BY seq",
      {parent.str()});
}

Result<std::vector<InvocationId>> SqliteStateBackend::InvocationsByParentEvent(
    const std::string& event_id) {
  return Ids(
      "SELECT invocation_id FROM state_invocations WHERE app_id = ?1 AND "
      "parent_event_id = ?2 AND parent_event_id IS NOT NULL ORDER BY seq",
      {event_id});
}

Result<std::vector<InvocationId>> SqliteStateBackend::InvocationIdsByWorkflow(
    const std::optional<std::string>& workflow_id,
    const std::optional<std::string>& workflow_type) {
  const bool by_id = workflow_id && !workflow_id->empty();
  const bool by_type = workflow_type && !workflow_type->empty();
  // One statement per filter combination, each served by its own index.
  const char* base = "SELECT invocation_id FROM state_invocations WHERE app_id = ?1 AND "
                     "workflow_id IS NOT NULL";
  if (by_id && by_type) {
    return Ids(std::string(base) + " AND workflow_id = ?2 AND workflow_type = ?3 ORDER BY seq",
               {*workflow_id, *workflow_type});
  }
  if (by_id) return Ids(std::string(base) + " AND workflow_id = ?2 ORDER BY seq", {*workflow_id});
  if (by_type) {
    return Ids(std::string(base) + " AND workflow_type = ?2 ORDER BY seq", {*workflow_type});
  }
  return Ids(std::string(base) + " ORDER BY seq", {});
}

// --- results and exceptions ---
Status SqliteStateBackend::SetResult(const InvocationId& id, const std::string& serialized) {
  return PutValue("state_results", id, serialized);
}

Result<std::string> SqliteStateBackend::GetResult(const InvocationId& id) {
  return GetValue("state_results", id, "no result for invocation ");
}

Status SqliteStateBackend::SetException(const InvocationId& id, const std::string& serialized) {
  return PutValue("state_exceptions", id, serialized);
}

Result<std::string> SqliteStateBackend::GetException(const InvocationId& id) {
  return GetValue("state_exceptions", id, "no exception for invocation ");
}

Status SqliteStateBackend::Purge() {
  return db_->Write([&](Conn& c) -> Status {
    for (const char* table : kPurgedTables) {
      SQ_PREPARE(q, c, std::string("DELETE FROM ") + table + " WHERE app_id = ?");
      SQ_RETURN_IF_ERROR(q.Bind(1, app_id_).Run());
    }
    return Status::Ok();
  });
}

// Runs `sql` binding ?1 = app_id and ?2.. = `params`; collects column 0 as ids.
Result<std::vector<InvocationId>> SqliteStateBackend::Ids(const std::string& sql,
                                                          const std::vector<std::string>& params) {
  std::vector<InvocationId> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();
    SQ_PREPARE(q, c, sql);
    q.Bind(1, app_id_);
    for (std::size_t i = 0; i < params.size(); ++i) q.Bind(static_cast<int>(i) + 2, params[i]);
    return EachRow(q, [&](const Stmt& row) {
      out.emplace_back(row.Text(0));
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return out;
}

// `table` is one of the (app_id, invocation_id, value) tables.
Status SqliteStateBackend::PutValue(const char* table, const InvocationId& id,
                                    const std::string& value) {
  return db_->Write([&](Conn& c) -> Status {
    SQ_PREPARE(q, c,
               std::string("INSERT OR REPLACE INTO ") + table +
                   " (app_id, invocation_id, value) VALUES (?, ?, ?)");
    return q.Bind(1, app_id_).Bind(2, id.str()).Bind(3, value).Run();
  });
}

Result<std::string> SqliteStateBackend::GetValue(const char* table, const InvocationId& id,
                                                 const std::string& missing) {
  std::optional<std::string> found;
  Status s = db_->Read([&](Conn& c) -> Status {
    SQ_PREPARE(q, c,
               std::string("SELECT value FROM ") + table +
                   " WHERE app_id = ? AND invocation_id = ?");
    q.Bind(1, app_id_).Bind(2, id.str());
    return EachRow(q, [&](const Stmt& row) {
      found = row.Text(0);
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  if (!found) return Status::NotFound(missing + id.str());
  return std::move(*found);
}

}  // namespace state_impl

Result<std::unique_ptr<StateBackend>> NewSqliteStateBackend(std::shared_ptr<Database> db,
                                                            const BackendConfig& config) {
  SQ_RETURN_IF_ERROR(db->EnsureSchema(kComponent, kSchemaVersion, kSchema, kMigrations));
  return std::unique_ptr<StateBackend>(
      std::make_unique<SqliteStateBackend>(std::move(db), config.app_id));
}

Result<std::vector<std::pair<std::string, std::string>>> SqliteDiscoverAppInfos(
    const std::shared_ptr<Database>& db) {
  SQ_RETURN_IF_ERROR(db->EnsureSchema(kComponent, kSchemaVersion, kSchema, kMigrations));
  std::vector<std::pair<std::string, std::string>> out;
  Status s = db->Read([&](Conn& c) -> Status {
    out.clear();
    SQ_PREPARE(q, c, "SELECT app_id, app_info_json FROM state_app_info ORDER BY app_id");
    return EachRow(q, [&](const Stmt& row) {
      out.emplace_back(row.Text(0), row.Text(1));
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace pynenc_cpp::sqlite
