// SQLite state backend: runner contexts, app info and workflows (runs, their
// sub-invocations and data). The schema and the rest of the backend:
// sqlite_state_backend.cc; the class: sqlite_state_backend_impl.h.
#include <cstdint>
#include <set>
#include <utility>

#include "sqlite/sqlite_state_backend_impl.h"

namespace pynenc_cpp::sqlite::state_impl {
namespace {

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

}  // namespace

// --- runner contexts ---
Status SqliteStateBackend::StoreRunnerContext(const RunnerContextRecord& r) {
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

Result<RunnerContextRecord> SqliteStateBackend::GetRunnerContext(const RunnerId& runner_id) {
  Result<std::vector<RunnerContextRecord>> found = GetRunnerContexts({runner_id});
  if (!found.ok()) return found.status();
  if (found.value().empty()) {
    return Status::NotFound("runner context not found: " + runner_id.str());
  }
  return std::move(found.value().front());
}

Result<std::vector<RunnerContextRecord>> SqliteStateBackend::GetRunnerContexts(
    const std::vector<RunnerId>& runner_ids) {
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

Result<std::vector<RunnerContextRecord>> SqliteStateBackend::MatchRunnerContexts(
    const std::string& partial_id) {
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
Status SqliteStateBackend::StoreAppInfo(const std::string& app_id,
                                        const std::string& app_info_json) {
  if (app_id.empty()) return Status::InvalidArgument("app info needs a non-empty app_id");
  return db_->Write([&](Conn& c) -> Status {
    SQ_PREPARE(q, c,
               "INSERT OR REPLACE INTO state_app_info (app_id, app_info_json) VALUES (?, ?)");
    return q.Bind(1, app_id).Bind(2, app_info_json).Run();
  });
}

Result<std::string> SqliteStateBackend::GetAppInfo() {
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
Status SqliteStateBackend::StoreWorkflowRun(const WorkflowRecord& run) {
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

Result<std::vector<TaskId>> SqliteStateBackend::WorkflowTypes() {
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

Result<std::vector<WorkflowRecord>> SqliteStateBackend::WorkflowRuns(
    const std::optional<TaskId>& workflow_type) {
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

Status SqliteStateBackend::StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                                      const InvocationId& sub_invocation) {
  return db_->Write([&](Conn& c) -> Status {
    SQ_PREPARE(q, c,
               "INSERT INTO state_workflow_sub_invocations (app_id, workflow_id, invocation_id) "
               "VALUES (?, ?, ?) ON CONFLICT DO NOTHING");
    return q.Bind(1, app_id_).Bind(2, workflow.str()).Bind(3, sub_invocation.str()).Run();
  });
}

Result<std::vector<InvocationId>> SqliteStateBackend::WorkflowSubInvocations(
    const WorkflowId& workflow) {
  return Ids(
      "SELECT invocation_id FROM state_workflow_sub_invocations WHERE app_id = ?1 AND "
      "workflow_id = ?2 ORDER BY seq",
      {workflow.str()});
}

Status SqliteStateBackend::SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                                           const std::string& value) {
  return db_->Write([&](Conn& c) -> Status {
    SQ_PREPARE(q, c,
               "INSERT OR REPLACE INTO state_workflow_data (app_id, workflow_id, key, value) "
               "VALUES (?, ?, ?, ?)");
    return q.Bind(1, app_id_).Bind(2, workflow.str()).Bind(3, key).Bind(4, value).Run();
  });
}

Result<std::string> SqliteStateBackend::GetWorkflowData(const WorkflowId& workflow,
                                                        const std::string& key) {
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

}  // namespace pynenc_cpp::sqlite::state_impl
