// SQLite state backend. Every method is one transaction on a pooled connection
// (Database::Read for queries, Database::Write for changes), so each call is
// atomic with respect to every other call from any thread or process. Orders the
// port promises ("first-upsert order", "arrival order") come from the rowid of
// the row that was first inserted: upserts update in place and keep it.
#include "sqlite/sqlite_state_backend.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

namespace pynenc_cpp::sqlite {
namespace {

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

#define SQ_RETURN_IF_ERROR(expr)           \
  do {                                     \
    ::pynenc_cpp::Status sq_status_ = (expr); \
    if (!sq_status_.ok()) return sq_status_;  \
  } while (false)

// Declares `Stmt& var` prepared from `sql` on `conn`, or returns the error.
#define SQ_PREPARE(var, conn, sql)             \
  Result<Stmt*> var##_or = (conn).Prepare(sql); \
  if (!var##_or.ok()) return var##_or.status(); \
  Stmt& var = *var##_or.value()

// Steps `q` to the end, calling `row(q)` for each row; stops at the first
// non-OK Status `row` returns.
template <typename F>
Status EachRow(Stmt& q, F&& row) {
  while (true) {
    Result<bool> has = q.Step();
    if (!has.ok()) return has.status();
    if (!has.value()) return Status::Ok();
    SQ_RETURN_IF_ERROR(row(q));
  }
}

std::int64_t ClampToInt64(std::uint64_t v) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::min(v, kMax));
}

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

// Columns: seq, invocation_id, timestamp_us, status, history_json.
Result<HistoryRecord> ReadHistory(const Stmt& q) {
  const std::string name = q.Text(3);
  std::optional<InvocationStatus> status = ParseStatus(name);
  if (!status) return Status::BackendFailure("state_history row has unknown status '" + name + "'");
  return HistoryRecord{InvocationId(q.Text(1)), q.Int(2), *status, q.Text(4)};
}

RunnerContextRecord ReadRunnerContext(const Stmt& q) {
  RunnerContextRecord r;
  r.runner_id = RunnerId(q.Text(0));
  r.runner_cls = q.Text(1);
  if (auto parent = q.OptText(2)) r.parent_runner_id = RunnerId(std::move(*parent));
  r.pid = q.Int(3);
  r.hostname = q.Text(4);
  r.thread_id = q.Int(5);
  return r;
}

constexpr const char* kRunnerContextColumns =
    "runner_id, runner_cls, parent_runner_id, pid, hostname, thread_id";

WorkflowRecord ReadWorkflowRun(const Stmt& q) {
  WorkflowRecord w{WorkflowId(q.Text(0)), TaskId(q.Text(1)), std::nullopt};
  if (auto parent = q.OptText(2)) w.parent_workflow_id = WorkflowId(std::move(*parent));
  return w;
}

class SqliteStateBackend final : public StateBackend {
 public:
  SqliteStateBackend(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  // --- invocations ---
  Status UpsertInvocations(const std::vector<InvocationRecord>& records) override {
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

  Result<InvocationRecord> GetInvocation(const InvocationId& id) override {
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

  Result<std::vector<InvocationId>> ChildInvocations(const InvocationId& parent) override {
    return Ids(
        "SELECT invocation_id FROM state_invocations WHERE app_id = ?1 AND "
        "parent_invocation_id = ?2 AND parent_invocation_id IS NOT NULL ORDER BY seq",
        {parent.str()});
  }

  Result<std::vector<InvocationId>> InvocationsByParentEvent(const std::string& event_id) override {
    return Ids(
        "SELECT invocation_id FROM state_invocations WHERE app_id = ?1 AND "
        "parent_event_id = ?2 AND parent_event_id IS NOT NULL ORDER BY seq",
        {event_id});
  }

  Result<std::vector<InvocationId>> InvocationIdsByWorkflow(
      const std::optional<std::string>& workflow_id,
      const std::optional<std::string>& workflow_type) override {
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

  // --- history ---
  Status AddHistories(const std::vector<InvocationId>& ids, const HistoryRecord& record) override {
    if (ids.empty()) return Status::Ok();
    const std::string status(StatusName(record.status));
    return db_->Write([&](Conn& c) -> Status {
      for (const InvocationId& id : ids) {
        SQ_PREPARE(q, c,
                   "INSERT INTO state_history (app_id, invocation_id, timestamp_us, status, "
                   "history_json) VALUES (?, ?, ?, ?, ?) "
                   "ON CONFLICT (app_id, invocation_id, timestamp_us, status) DO UPDATE SET "
                   "history_json = excluded.history_json");
        q.Bind(1, app_id_)
            .Bind(2, id.str())
            .Bind(3, std::int64_t{record.timestamp_us})
            .Bind(4, status)
            .Bind(5, record.history_json);
        SQ_RETURN_IF_ERROR(q.Run());
      }
      return Status::Ok();
    });
  }

  Result<std::vector<HistoryRecord>> GetHistory(const InvocationId& id) override {
    std::vector<HistoryRecord> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      SQ_PREPARE(q, c,
                 "SELECT seq, invocation_id, timestamp_us, status, history_json FROM state_history "
                 "WHERE app_id = ? AND invocation_id = ? ORDER BY timestamp_us, seq");
      q.Bind(1, app_id_).Bind(2, id.str());
      return EachRow(q, [&](const Stmt& row) -> Status {
        Result<HistoryRecord> h = ReadHistory(row);
        if (!h.ok()) return h.status();
        out.push_back(std::move(h).value());
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    return out;
  }

  Result<HistoryPage> HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                     std::optional<HistoryPosition> after,
                                     std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    // Rows strictly after (from_ts, from_seq) in (timestamp, seq) order; without
    // a cursor inside the range, every row at start_us qualifies.
    TimestampUs from_ts = start_us;
    std::int64_t from_seq = std::numeric_limits<std::int64_t>::min();
    if (after && *after >= HistoryPosition{start_us, 0}) {
      from_ts = after->timestamp_us;
      from_seq = ClampToInt64(after->sequence);
    }
    // One row more than a page tells whether another page exists.
    const std::int64_t fetch = ClampToInt64(limit) == std::numeric_limits<std::int64_t>::max()
                                   ? ClampToInt64(limit)
                                   : ClampToInt64(limit) + 1;
    HistoryPage page;
    Status s = db_->Read([&](Conn& c) -> Status {
      page = HistoryPage();
      SQ_PREPARE(q, c,
                 "SELECT seq, invocation_id, timestamp_us, status, history_json FROM state_history "
                 "WHERE app_id = ?1 AND timestamp_us >= ?2 AND timestamp_us <= ?3 "
                 "AND (timestamp_us > ?2 OR seq > ?4) ORDER BY timestamp_us, seq LIMIT ?5");
      q.Bind(1, app_id_)
          .Bind(2, std::int64_t{from_ts})
          .Bind(3, std::int64_t{end_us})
          .Bind(4, from_seq)
          .Bind(5, fetch);
      HistoryPosition last{};
      return EachRow(q, [&](const Stmt& row) -> Status {
        if (page.records.size() == limit) {
          page.next = last;
          return Status::Ok();
        }
        Result<HistoryRecord> h = ReadHistory(row);
        if (!h.ok()) return h.status();
        page.records.push_back(std::move(h).value());
        last = HistoryPosition{row.Int(2), static_cast<std::uint64_t>(row.Int(0))};
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    return page;
  }

  Result<std::vector<InvocationId>> InvocationsInRange(TimestampUs start_us, TimestampUs end_us,
                                                       const std::optional<InvocationId>& after,
                                                       std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    std::vector<InvocationId> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      const std::string sql =
          std::string("SELECT DISTINCT invocation_id FROM state_history WHERE app_id = ?1 AND "
                      "timestamp_us >= ?2 AND timestamp_us <= ?3") +
          (after ? " AND invocation_id > ?5" : "") + " ORDER BY invocation_id LIMIT ?4";
      SQ_PREPARE(q, c, sql);
      q.Bind(1, app_id_)
          .Bind(2, std::int64_t{start_us})
          .Bind(3, std::int64_t{end_us})
          .Bind(4, ClampToInt64(limit));
      if (after) q.Bind(5, after->str());
      return EachRow(q, [&](const Stmt& row) {
        out.emplace_back(row.Text(0));
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    return out;
  }

  // --- results and exceptions ---
  Status SetResult(const InvocationId& id, const std::string& serialized) override {
    return PutValue("state_results", id, serialized);
  }
  Result<std::string> GetResult(const InvocationId& id) override {
    return GetValue("state_results", id, "no result for invocation ");
  }
  Status SetException(const InvocationId& id, const std::string& serialized) override {
    return PutValue("state_exceptions", id, serialized);
  }
  Result<std::string> GetException(const InvocationId& id) override {
    return GetValue("state_exceptions", id, "no exception for invocation ");
  }

  // --- runner contexts ---
  Status StoreRunnerContext(const RunnerContextRecord& r) override {
    return db_->Write([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 "INSERT OR REPLACE INTO state_runner_contexts (app_id, runner_id, runner_cls, "
                 "parent_runner_id, pid, hostname, thread_id) VALUES (?, ?, ?, ?, ?, ?, ?)");
      q.Bind(1, app_id_)
          .Bind(2, r.runner_id.str())
          .Bind(3, r.runner_cls)
          .Bind(4, r.parent_runner_id ? std::optional(r.parent_runner_id->str()) : std::nullopt)
          .Bind(5, std::int64_t{r.pid})
          .Bind(6, r.hostname)
          .Bind(7, std::int64_t{r.thread_id});
      return q.Run();
    });
  }

  Result<RunnerContextRecord> GetRunnerContext(const RunnerId& runner_id) override {
    Result<std::vector<RunnerContextRecord>> found = GetRunnerContexts({runner_id});
    if (!found.ok()) return found.status();
    if (found.value().empty()) {
      return Status::NotFound("runner context not found: " + runner_id.str());
    }
    return std::move(found.value().front());
  }

  Result<std::vector<RunnerContextRecord>> GetRunnerContexts(
      const std::vector<RunnerId>& runner_ids) override {
    std::vector<RunnerContextRecord> out;
    if (runner_ids.empty()) return out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      std::set<RunnerId> seen;
      for (const RunnerId& id : runner_ids) {
        if (!seen.insert(id).second) continue;
        SQ_PREPARE(q, c,
                   std::string("SELECT ") + kRunnerContextColumns +
                       " FROM state_runner_contexts WHERE app_id = ? AND runner_id = ?");
        q.Bind(1, app_id_).Bind(2, id.str());
        SQ_RETURN_IF_ERROR(EachRow(q, [&](const Stmt& row) {
          out.push_back(ReadRunnerContext(row));
          return Status::Ok();
        }));
      }
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return out;
  }

  Result<std::vector<RunnerContextRecord>> MatchRunnerContexts(
      const std::string& partial_id) override {
    std::vector<RunnerContextRecord> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      // instr() is a case-sensitive substring test (LIKE is not, and needs escaping).
      SQ_PREPARE(q, c,
                 std::string("SELECT ") + kRunnerContextColumns +
                     " FROM state_runner_contexts WHERE app_id = ? AND instr(runner_id, ?) > 0 "
                     "ORDER BY runner_id");
      q.Bind(1, app_id_).Bind(2, partial_id);
      return EachRow(q, [&](const Stmt& row) {
        out.push_back(ReadRunnerContext(row));
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    return out;
  }

  // --- app info ---
  Status StoreAppInfo(const std::string& app_id, const std::string& app_info_json) override {
    if (app_id.empty()) return Status::InvalidArgument("app info needs a non-empty app_id");
    return db_->Write([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 "INSERT OR REPLACE INTO state_app_info (app_id, app_info_json) VALUES (?, ?)");
      return q.Bind(1, app_id).Bind(2, app_info_json).Run();
    });
  }

  Result<std::string> GetAppInfo() override {
    std::optional<std::string> found;
    Status s = db_->Read([&](Conn& c) -> Status {
      SQ_PREPARE(q, c, "SELECT app_info_json FROM state_app_info WHERE app_id = ?");
      q.Bind(1, app_id_);
      return EachRow(q, [&](const Stmt& row) {
        found = row.Text(0);
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    if (!found) return Status::NotFound("no app info for app_id " + app_id_);
    return std::move(*found);
  }

  // --- workflows ---
  Status StoreWorkflowRun(const WorkflowRecord& run) override {
    return db_->Write([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 "INSERT OR REPLACE INTO state_workflow_runs (app_id, workflow_id, workflow_type, "
                 "parent_workflow_id) VALUES (?, ?, ?, ?)");
      return q.Bind(1, app_id_)
          .Bind(2, run.workflow_id.str())
          .Bind(3, run.workflow_type.str())
          .Bind(4, run.parent_workflow_id ? std::optional(run.parent_workflow_id->str())
                                          : std::nullopt)
          .Run();
    });
  }

  Result<std::vector<TaskId>> WorkflowTypes() override {
    std::vector<TaskId> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      SQ_PREPARE(q, c,
                 "SELECT DISTINCT workflow_type FROM state_workflow_runs WHERE app_id = ? "
                 "ORDER BY workflow_type");
      q.Bind(1, app_id_);
      return EachRow(q, [&](const Stmt& row) {
        out.emplace_back(row.Text(0));
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    return out;
  }

  Result<std::vector<WorkflowRecord>> WorkflowRuns(
      const std::optional<TaskId>& workflow_type) override {
    std::vector<WorkflowRecord> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      const std::string sql =
          std::string(
              "SELECT workflow_id, workflow_type, parent_workflow_id FROM state_workflow_runs "
              "WHERE app_id = ?") +
          (workflow_type ? " AND workflow_type = ?" : "") + " ORDER BY workflow_id";
      SQ_PREPARE(q, c, sql);
      q.Bind(1, app_id_);
      if (workflow_type) q.Bind(2, workflow_type->str());
      return EachRow(q, [&](const Stmt& row) {
        out.push_back(ReadWorkflowRun(row));
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    return out;
  }

  Status StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                    const InvocationId& sub_invocation) override {
    return db_->Write([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 "INSERT INTO state_workflow_sub_invocations (app_id, workflow_id, invocation_id) "
                 "VALUES (?, ?, ?) ON CONFLICT DO NOTHING");
      return q.Bind(1, app_id_).Bind(2, workflow.str()).Bind(3, sub_invocation.str()).Run();
    });
  }

  Result<std::vector<InvocationId>> WorkflowSubInvocations(const WorkflowId& workflow) override {
    return Ids(
        "SELECT invocation_id FROM state_workflow_sub_invocations WHERE app_id = ?1 AND "
        "workflow_id = ?2 ORDER BY seq",
        {workflow.str()});
  }

  Status SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                         const std::string& value) override {
    return db_->Write([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 "INSERT OR REPLACE INTO state_workflow_data (app_id, workflow_id, key, value) "
                 "VALUES (?, ?, ?, ?)");
      return q.Bind(1, app_id_).Bind(2, workflow.str()).Bind(3, key).Bind(4, value).Run();
    });
  }

  Result<std::string> GetWorkflowData(const WorkflowId& workflow, const std::string& key) override {
    std::optional<std::string> found;
    Status s = db_->Read([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 "SELECT value FROM state_workflow_data WHERE app_id = ? AND workflow_id = ? AND "
                 "key = ?");
      q.Bind(1, app_id_).Bind(2, workflow.str()).Bind(3, key);
      return EachRow(q, [&](const Stmt& row) {
        found = row.Text(0);
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    if (!found) {
      return Status::NotFound("no workflow data '" + key + "' for workflow " + workflow.str());
    }
    return std::move(*found);
  }

  Status Purge() override {
    return db_->Write([&](Conn& c) -> Status {
      for (const char* table : kPurgedTables) {
        SQ_PREPARE(q, c, std::string("DELETE FROM ") + table + " WHERE app_id = ?");
        SQ_RETURN_IF_ERROR(q.Bind(1, app_id_).Run());
      }
      return Status::Ok();
    });
  }

 private:
  // Runs `sql` binding ?1 = app_id and ?2.. = `params`; collects column 0 as ids.
  Result<std::vector<InvocationId>> Ids(const std::string& sql,
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
  Status PutValue(const char* table, const InvocationId& id, const std::string& value) {
    return db_->Write([&](Conn& c) -> Status {
      SQ_PREPARE(q, c,
                 std::string("INSERT OR REPLACE INTO ") + table +
                     " (app_id, invocation_id, value) VALUES (?, ?, ?)");
      return q.Bind(1, app_id_).Bind(2, id.str()).Bind(3, value).Run();
    });
  }

  Result<std::string> GetValue(const char* table, const InvocationId& id,
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

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
};

}  // namespace

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
