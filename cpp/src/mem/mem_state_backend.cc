// In-memory state backend: the indexed tables of mem_state_backend_tables.h plus
// plain maps for the rest, all behind one reader/writer lock (queries share it,
// writes take it exclusively). App infos live in a process-wide registry with its
// own mutex; the two locks are never held together.
#include "mem/mem_state_backend.h"

#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "mem/mem_state_backend_tables.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp {
namespace {

struct AppInfoRegistry {
  Mutex mu;
  std::map<std::string, std::string> infos PYNENC_GUARDED_BY(mu);  // app_id -> AppInfo JSON
};

AppInfoRegistry& ProcessAppInfoRegistry() {
  static AppInfoRegistry* registry = new AppInfoRegistry();  // never destroyed: no exit races
  return *registry;
}

// Insertion-ordered set of ids.
struct OrderedIds {
  std::vector<InvocationId> order;
  std::unordered_set<InvocationId> members;
  void Add(const InvocationId& id) {
    if (members.insert(id).second) order.push_back(id);
  }
};

class MemStateBackend final : public StateBackend {
 public:
  explicit MemStateBackend(const BackendConfig& config) : app_id_(config.app_id) {}

  // --- invocations ---
  Status UpsertInvocations(const std::vector<InvocationRecord>& records) override {
    WriterLock lock(mu_);
    for (const InvocationRecord& record : records) invocations_.Upsert(record);
    return Status::Ok();
  }

  Result<InvocationRecord> GetInvocation(const InvocationId& id) override {
    ReaderLock lock(mu_);
    const InvocationRecord* record = invocations_.Find(id);
    if (record == nullptr) return Status::NotFound("invocation not found: " + id.str());
    return *record;
  }

  Result<std::vector<InvocationId>> ChildInvocations(const InvocationId& parent) override {
    ReaderLock lock(mu_);
    return invocations_.Children(parent);
  }

  Result<std::vector<InvocationId>> InvocationsByParentEvent(const std::string& event_id) override {
    ReaderLock lock(mu_);
    return invocations_.ByParentEvent(event_id);
  }

  Result<std::vector<InvocationId>> InvocationIdsByWorkflow(
      const std::optional<std::string>& workflow_id,
      const std::optional<std::string>& workflow_type) override {
    ReaderLock lock(mu_);
    return invocations_.ByWorkflow(workflow_id, workflow_type);
  }

  // --- history ---
  Status AddHistories(const std::vector<InvocationId>& ids, const HistoryRecord& record) override {
    WriterLock lock(mu_);
    for (const InvocationId& id : ids) {
      history_.Add(id, record.timestamp_us, record.status, record.history_json);
    }
    return Status::Ok();
  }

  Result<std::vector<HistoryRecord>> GetHistory(const InvocationId& id) override {
    ReaderLock lock(mu_);
    return history_.Get(id);
  }

  Result<HistoryPage> HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                     std::optional<HistoryPosition> after,
                                     std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    ReaderLock lock(mu_);
    return history_.Range(start_us, end_us, after, limit);
  }

  Result<std::vector<InvocationId>> InvocationsInRange(TimestampUs start_us, TimestampUs end_us,
                                                       const std::optional<InvocationId>& after,
                                                       std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    ReaderLock lock(mu_);
    return history_.IdsInRange(start_us, end_us, after, limit);
  }

  // --- results and exceptions ---
  Status SetResult(const InvocationId& id, const std::string& serialized) override {
    WriterLock lock(mu_);
    results_[id] = serialized;
    return Status::Ok();
  }

  Result<std::string> GetResult(const InvocationId& id) override {
    ReaderLock lock(mu_);
    auto it = results_.find(id);
    if (it == results_.end()) return Status::NotFound("no result for invocation " + id.str());
    return it->second;
  }

  Status SetException(const InvocationId& id, const std::string& serialized) override {
    WriterLock lock(mu_);
    exceptions_[id] = serialized;
    return Status::Ok();
  }

  Result<std::string> GetException(const InvocationId& id) override {
    ReaderLock lock(mu_);
    auto it = exceptions_.find(id);
    if (it == exceptions_.end()) return Status::NotFound("no exception for invocation " + id.str());
    return it->second;
  }

  // --- runner contexts ---
  Status StoreRunnerContext(const RunnerContextRecord& record) override {
    WriterLock lock(mu_);
    runner_contexts_[record.runner_id] = record;
    return Status::Ok();
  }

  Result<RunnerContextRecord> GetRunnerContext(const RunnerId& runner_id) override {
    ReaderLock lock(mu_);
    auto it = runner_contexts_.find(runner_id);
    if (it == runner_contexts_.end()) {
      return Status::NotFound("runner context not found: " + runner_id.str());
    }
    return it->second;
  }

  Result<std::vector<RunnerContextRecord>> GetRunnerContexts(
      const std::vector<RunnerId>& runner_ids) override {
    ReaderLock lock(mu_);
    std::vector<RunnerContextRecord> out;
    std::set<RunnerId> seen;
    for (const RunnerId& id : runner_ids) {
      auto it = runner_contexts_.find(id);
      if (it != runner_contexts_.end() && seen.insert(id).second) out.push_back(it->second);
    }
    return out;
  }

  Result<std::vector<RunnerContextRecord>> MatchRunnerContexts(
      const std::string& partial_id) override {
    ReaderLock lock(mu_);
    std::vector<RunnerContextRecord> out;
    for (const auto& [id, record] : runner_contexts_) {
      if (id.str().find(partial_id) != std::string::npos) out.push_back(record);
    }
    return out;
  }

  // --- app info ---
  Status StoreAppInfo(const std::string& app_id, const std::string& app_info_json) override {
    if (app_id.empty()) return Status::InvalidArgument("app info needs a non-empty app_id");
    AppInfoRegistry& registry = ProcessAppInfoRegistry();
    MutexLock lock(registry.mu);
    registry.infos[app_id] = app_info_json;
    return Status::Ok();
  }

  Result<std::string> GetAppInfo() override {
    AppInfoRegistry& registry = ProcessAppInfoRegistry();
    MutexLock lock(registry.mu);
    auto it = registry.infos.find(app_id_);
    if (it == registry.infos.end()) return Status::NotFound("no app info for app_id " + app_id_);
    return it->second;
  }

  // --- workflows ---
  Status StoreWorkflowRun(const WorkflowRecord& run) override {
    WriterLock lock(mu_);
    auto it = workflow_runs_.find(run.workflow_id);
    if (it != workflow_runs_.end()) {
      auto type_it = runs_by_type_.find(it->second.workflow_type);
      type_it->second.erase(run.workflow_id);
      if (type_it->second.empty()) runs_by_type_.erase(type_it);
    }
    workflow_runs_[run.workflow_id] = run;
    runs_by_type_[run.workflow_type].insert(run.workflow_id);
    return Status::Ok();
  }

  Result<std::vector<TaskId>> WorkflowTypes() override {
    ReaderLock lock(mu_);
    std::vector<TaskId> out;
    out.reserve(runs_by_type_.size());
    for (const auto& [type, runs] : runs_by_type_) out.push_back(type);
    return out;
  }

  Result<std::vector<WorkflowRecord>> WorkflowRuns(
      const std::optional<TaskId>& workflow_type) override {
    ReaderLock lock(mu_);
    std::vector<WorkflowRecord> out;
    if (!workflow_type) {
      out.reserve(workflow_runs_.size());
      for (const auto& [id, run] : workflow_runs_) out.push_back(run);
      return out;
    }
    auto it = runs_by_type_.find(*workflow_type);
    if (it == runs_by_type_.end()) return out;
    for (const WorkflowId& id : it->second) out.push_back(workflow_runs_.at(id));
    return out;
  }

  Status StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                    const InvocationId& sub_invocation) override {
    WriterLock lock(mu_);
    sub_invocations_[workflow].Add(sub_invocation);
    return Status::Ok();
  }

  Result<std::vector<InvocationId>> WorkflowSubInvocations(const WorkflowId& workflow) override {
    ReaderLock lock(mu_);
    auto it = sub_invocations_.find(workflow);
    if (it == sub_invocations_.end()) return std::vector<InvocationId>();
    return it->second.order;
  }

  Status SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                         const std::string& value) override {
    WriterLock lock(mu_);
    workflow_data_[workflow][key] = value;
    return Status::Ok();
  }

  Result<std::string> GetWorkflowData(const WorkflowId& workflow, const std::string& key) override {
    ReaderLock lock(mu_);
    auto it = workflow_data_.find(workflow);
    if (it != workflow_data_.end()) {
      auto value = it->second.find(key);
      if (value != it->second.end()) return value->second;
    }
    return Status::NotFound("no workflow data '" + key + "' for workflow " + workflow.str());
  }

  Status Purge() override {
    WriterLock lock(mu_);
    invocations_.Clear();
    history_.Clear();
    results_.clear();
    exceptions_.clear();
    runner_contexts_.clear();
    workflow_runs_.clear();
    runs_by_type_.clear();
    sub_invocations_.clear();
    workflow_data_.clear();
    return Status::Ok();
  }

 private:
  const std::string app_id_;
  SharedMutex mu_;
  mem::InvocationTable invocations_ PYNENC_GUARDED_BY(mu_);
  mem::HistoryTable history_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<InvocationId, std::string> results_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<InvocationId, std::string> exceptions_ PYNENC_GUARDED_BY(mu_);
  std::map<RunnerId, RunnerContextRecord> runner_contexts_ PYNENC_GUARDED_BY(mu_);
  std::map<WorkflowId, WorkflowRecord> workflow_runs_ PYNENC_GUARDED_BY(mu_);
  std::map<TaskId, std::set<WorkflowId>> runs_by_type_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<WorkflowId, OrderedIds> sub_invocations_ PYNENC_GUARDED_BY(mu_);
  std::unordered_map<WorkflowId, std::unordered_map<std::string, std::string>> workflow_data_
      PYNENC_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<StateBackend> NewMemStateBackend(const BackendConfig& config) {
  return std::make_unique<MemStateBackend>(config);
}

std::vector<std::pair<std::string, std::string>> MemDiscoverAppInfos() {
  AppInfoRegistry& registry = ProcessAppInfoRegistry();
  MutexLock lock(registry.mu);
  return {registry.infos.begin(), registry.infos.end()};
}

}  // namespace pynenc_cpp
