// Redis state backend: see redis_state_backend.h for the key layout. This file
// holds the backend class (every read and write of the port), its factory and
// app-info discovery; the record packing and history positions are in
// redis_state_backend_codec.cc, the Lua scripts in redis_state_backend_scripts.cc
// (shared declarations: redis_state_backend_impl.h).
//
// Writes are unconditional upserts, so the "compare" of a compare-and-set is done
// by the server itself: each write script reads the stored index fields and moves
// the index entries in the same atomic script. Racing writers of one key are
// therefore serialized by Redis; the last script wins and leaves every index
// consistent with the record it wrote.
#include "redis/redis_state_backend.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "redis/redis_keys.h"
#include "redis/redis_state_backend_impl.h"

namespace pynenc_cpp::redis {
namespace {

using state_impl::AddHistoriesScript;
using state_impl::ByWorkflowScript;
using state_impl::DecodePos;
using state_impl::EncodeTs;
using state_impl::GetHistoryScript;
using state_impl::Hex16;
using state_impl::HistoryRangeScript;
using state_impl::IdsInRangeScript;
using state_impl::kPosLen;
using state_impl::PackHistoryValue;
using state_impl::PackRunner;
using state_impl::PackWorkflow;
using state_impl::RunsOfTypeScript;
using state_impl::StoreRunScript;
using state_impl::StoreSubScript;
using state_impl::UnpackHistory;
using state_impl::UnpackInvocation;
using state_impl::UnpackRunner;
using state_impl::UnpackWorkflow;
using state_impl::UpsertScript;

std::vector<InvocationId> ToIds(const Value& v) {
  std::vector<InvocationId> out;
  out.reserve(v.elements.size());
  for (const Value& e : v.elements) out.emplace_back(e.str);
  return out;
}

class RedisStateBackend final : public StateBackend {
 public:
  RedisStateBackend(std::shared_ptr<Client> client, const BackendConfig& config)
      : client_(std::move(client)),
        app_id_(config.app_id),
        p_(KeyPrefix(config.app_id, keys::kState)) {}

  // --- invocations ---
  Status UpsertInvocations(const std::vector<InvocationRecord>& records) override {
    if (records.empty()) return Status::Ok();
    std::vector<std::string> args;
    args.reserve(records.size() * 6);
    for (const InvocationRecord& r : records) {
      args.push_back(r.invocation_id.str());
      for (std::string& f : UpsertFields(r)) args.push_back(std::move(f));
    }
    return Checked(client_->Eval(UpsertScript(), {p_}, args)).status();
  }

  Result<InvocationRecord> GetInvocation(const InvocationId& id) override {
    Result<Value> v = Checked(client_->Command({"HGET", p_ + keys::kInv + id.str(), "rec"}));
    if (!v.ok()) return v.status();
    if (v.value().is_nil()) return Status::NotFound("invocation not found: " + id.str());
    std::optional<InvocationRecord> r = UnpackInvocation(v.value().str);
    if (!r) return Corrupt("invocation " + id.str());
    return *std::move(r);
  }

  Result<std::vector<InvocationId>> ChildInvocations(const InvocationId& parent) override {
    return IdList({"ZRANGE", p_ + keys::kIxParent + parent.str(), "0", "-1"});
  }

  Result<std::vector<InvocationId>> InvocationsByParentEvent(const std::string& event_id) override {
    return IdList({"ZRANGE", p_ + keys::kIxEvent + event_id, "0", "-1"});
  }

  Result<std::vector<InvocationId>> InvocationIdsByWorkflow(
      const std::optional<std::string>& workflow_id,
      const std::optional<std::string>& workflow_type) override {
    Result<Value> v = Checked(client_->Eval(
        ByWorkflowScript(), {p_}, {workflow_id.value_or(""), workflow_type.value_or("")}));
    if (!v.ok()) return v.status();
    return ToIds(v.value());
  }

  // --- history ---
  Status AddHistories(const std::vector<InvocationId>& ids, const HistoryRecord& record) override {
    if (ids.empty()) return Status::Ok();
    std::vector<std::string> args = {
        EncodeTs(record.timestamp_us),
        std::to_string(record.timestamp_us) + ":" + std::to_string(static_cast<int>(record.status)),
        PackHistoryValue(record)};
    for (const InvocationId& id : ids) args.push_back(id.str());
    return Checked(client_->Eval(AddHistoriesScript(), {p_}, args)).status();
  }

  Result<std::vector<HistoryRecord>> GetHistory(const InvocationId& id) override {
    Result<Value> v = Checked(client_->Eval(GetHistoryScript(), {p_}, {id.str()}));
    if (!v.ok()) return v.status();
    return Histories(v.value(), &id);
  }

  Result<HistoryPage> HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                     std::optional<HistoryPosition> after,
                                     std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    HistoryPage page;
    if (start_us > end_us) return page;
    // Lower bound: the later of (start, 0) and the position right after `after`.
    std::string min = "[" + EncodeTs(start_us);
    if (after && *after >= HistoryPosition{start_us, 0}) {
      if (after->timestamp_us > end_us) return page;
      min = "[" + EncodeTs(after->timestamp_us) + Hex16(after->sequence + 1);
    }
    const std::string max = "(" + EncodeTs(end_us) + "g";  // 'g' sorts after every hex digit
    Result<Value> v =
        Checked(client_->Eval(HistoryRangeScript(), {p_}, {min, max, std::to_string(limit + 1)}));
    if (!v.ok()) return v.status();
    Result<std::vector<HistoryRecord>> records = Histories(v.value(), nullptr);
    if (!records.ok()) return records.status();
    page.records = std::move(records).value();
    if (page.records.size() > limit) {
      page.records.resize(limit);
      page.next = DecodePos(v.value().elements[0].elements[limit - 1].str);
    }
    return page;
  }

  Result<std::vector<InvocationId>> InvocationsInRange(TimestampUs start_us, TimestampUs end_us,
                                                       const std::optional<InvocationId>& after,
                                                       std::size_t limit) override {
    if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
    if (start_us > end_us) return std::vector<InvocationId>();
    Result<Value> v = Checked(client_->Eval(
        IdsInRangeScript(), {p_}, {"[" + EncodeTs(start_us), "(" + EncodeTs(end_us) + "g"}));
    if (!v.ok()) return v.status();
    std::vector<std::string> ids;
    for (const Value& e : v.value().elements) {
      if (!after || e.str > after->str()) ids.push_back(e.str);
    }
    std::sort(ids.begin(), ids.end());
    if (ids.size() > limit) ids.resize(limit);
    std::vector<InvocationId> out;
    out.reserve(ids.size());
    for (std::string& id : ids) out.emplace_back(std::move(id));
    return out;
  }

  // --- results and exceptions ---
  Status SetResult(const InvocationId& id, const std::string& serialized) override {
    return Checked(client_->Command({"HSET", p_ + keys::kResults, id.str(), serialized})).status();
  }
  Result<std::string> GetResult(const InvocationId& id) override {
    return HashGet(p_ + keys::kResults, id.str(), "no result for invocation " + id.str());
  }
  Status SetException(const InvocationId& id, const std::string& serialized) override {
    return Checked(client_->Command({"HSET", p_ + keys::kExceptions, id.str(), serialized}))
        .status();
  }
  Result<std::string> GetException(const InvocationId& id) override {
    return HashGet(p_ + keys::kExceptions, id.str(), "no exception for invocation " + id.str());
  }

  // --- runner contexts ---
  Status StoreRunnerContext(const RunnerContextRecord& record) override {
    return Checked(client_->Command(
                       {"HSET", p_ + keys::kRunners, record.runner_id.str(), PackRunner(record)}))
        .status();
  }

  Result<RunnerContextRecord> GetRunnerContext(const RunnerId& runner_id) override {
    Result<std::string> packed = HashGet(p_ + keys::kRunners, runner_id.str(),
                                         "runner context not found: " + runner_id.str());
    if (!packed.ok()) return packed.status();
    std::optional<RunnerContextRecord> r = UnpackRunner(packed.value());
    if (!r) return Corrupt("runner context " + runner_id.str());
    return *std::move(r);
  }

  Result<std::vector<RunnerContextRecord>> GetRunnerContexts(
      const std::vector<RunnerId>& runner_ids) override {
    std::vector<RunnerContextRecord> out;
    std::vector<std::string> argv = {"HMGET", p_ + keys::kRunners};
    std::set<std::string> seen;
    for (const RunnerId& id : runner_ids) {
      if (seen.insert(id.str()).second) argv.push_back(id.str());
    }
    if (argv.size() == 2) return out;
    Result<Value> v = Checked(client_->Command(argv));
    if (!v.ok()) return v.status();
    for (const Value& e : v.value().elements) {
      if (e.is_nil()) continue;
      std::optional<RunnerContextRecord> r = UnpackRunner(e.str);
      if (!r) return Corrupt("runner context");
      out.push_back(*std::move(r));
    }
    return out;
  }

  Result<std::vector<RunnerContextRecord>> MatchRunnerContexts(
      const std::string& partial_id) override {
    // Runner contexts are few (one per runner process/thread): read them all.
    Result<Value> v = Checked(client_->Command({"HGETALL", p_ + keys::kRunners}));
    if (!v.ok()) return v.status();
    std::map<std::string, RunnerContextRecord> matched;
    const auto& e = v.value().elements;
    for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
      if (e[i].str.find(partial_id) == std::string::npos) continue;
      std::optional<RunnerContextRecord> r = UnpackRunner(e[i + 1].str);
      if (!r) return Corrupt("runner context " + e[i].str);
      matched.emplace(e[i].str, *std::move(r));
    }
    std::vector<RunnerContextRecord> out;
    out.reserve(matched.size());
    for (auto& [id, r] : matched) out.push_back(std::move(r));
    return out;
  }

  // --- app info ---
  Status StoreAppInfo(const std::string& app_id, const std::string& app_info_json) override {
    if (app_id.empty()) return Status::InvalidArgument("app info needs a non-empty app_id");
    return Checked(client_->Command({"HSET", keys::kAppInfos, app_id, app_info_json})).status();
  }

  Result<std::string> GetAppInfo() override {
    return HashGet(keys::kAppInfos, app_id_, "no app info for app_id " + app_id_);
  }

  // --- workflows ---
  Status StoreWorkflowRun(const WorkflowRecord& run) override {
    return Checked(
               client_->Eval(StoreRunScript(), {p_},
                             {run.workflow_id.str(), run.workflow_type.str(), PackWorkflow(run)}))
        .status();
  }

  Result<std::vector<TaskId>> WorkflowTypes() override {
    Result<Value> v = Checked(client_->Command({"SMEMBERS", p_ + keys::kWftypes}));
    if (!v.ok()) return v.status();
    std::vector<std::string> types;
    for (const Value& e : v.value().elements) types.push_back(e.str);
    std::sort(types.begin(), types.end());
    std::vector<TaskId> out;
    for (std::string& t : types) out.emplace_back(std::move(t));
    return out;
  }

  Result<std::vector<WorkflowRecord>> WorkflowRuns(
      const std::optional<TaskId>& workflow_type) override {
    Result<Value> v = workflow_type
                          ? Checked(client_->Eval(RunsOfTypeScript(), {p_}, {workflow_type->str()}))
                          : Checked(client_->Command({"HVALS", p_ + keys::kWfruns}));
    if (!v.ok()) return v.status();
    std::vector<WorkflowRecord> out;
    for (const Value& e : v.value().elements) {
      if (e.is_nil()) continue;
      std::optional<WorkflowRecord> w = UnpackWorkflow(e.str);
      if (!w) return Corrupt("workflow run");
      out.push_back(*std::move(w));
    }
    std::sort(out.begin(), out.end(), [](const WorkflowRecord& a, const WorkflowRecord& b) {
      return a.workflow_id.str() < b.workflow_id.str();
    });
    return out;
  }

  Status StoreWorkflowSubInvocation(const WorkflowId& workflow,
                                    const InvocationId& sub_invocation) override {
    return Checked(client_->Eval(StoreSubScript(), {p_}, {workflow.str(), sub_invocation.str()}))
        .status();
  }

  Result<std::vector<InvocationId>> WorkflowSubInvocations(const WorkflowId& workflow) override {
    return IdList({"ZRANGE", p_ + keys::kWfsub + workflow.str(), "0", "-1"});
  }

  Status SetWorkflowData(const WorkflowId& workflow, const std::string& key,
                         const std::string& value) override {
    return Checked(client_->Command({"HSET", p_ + keys::kWfdata + workflow.str(), key, value}))
        .status();
  }

  Result<std::string> GetWorkflowData(const WorkflowId& workflow, const std::string& key) override {
    return HashGet(p_ + keys::kWfdata + workflow.str(), key,
                   "no workflow data '" + key + "' for workflow " + workflow.str());
  }

  // Unlinks the keys an earlier layout kept and this one does not (P hinv:<id>:
  // each invocation's history positions, which P hkey:<id> holds too), by one
  // SCAN of the app's history keys, then marks the app's layout (P layout = 2)
  // so that later opens skip the scan.
  Status DropRetiredKeys() {
    const std::string marker = p_ + keys::kLayout;
    Result<Value> seen = Checked(client_->Command({"GET", marker}));
    if (!seen.ok()) return seen.status();
    if (seen.value().type == Value::Type::kString && seen.value().str == kCurrentLayout) {
      return Status::Ok();
    }
    Status dropped = UnlinkMatching(MatchPrefix(p_ + keys::kHinv), {});
    if (!dropped.ok()) return dropped;
    return Checked(client_->Command({"SET", marker, kCurrentLayout})).status();
  }

  // SCAN over this app's state keys (never KEYS), deleted with UNLINK batch by
  // batch. The order counters and the layout mark are kept so orders stay
  // monotonic across purges.
  // Writes racing with a purge may survive it, as with any purge.
  Status Purge() override {
    return UnlinkMatching(MatchPrefix(p_), {p_ + keys::kSeq, p_ + keys::kHseq, p_ + keys::kLayout});
  }

 private:
  // Unlinks every key matching the SCAN pattern `match` but those in `keep`,
  // one SCAN batch at a time (never KEYS).
  Status UnlinkMatching(const std::string& match, const std::vector<std::string>& keep) {
    std::string cursor = "0";
    do {
      Result<Value> v =
          Checked(client_->Command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"}));
      if (!v.ok()) return v.status();
      if (v.value().elements.size() != 2) return Corrupt("SCAN reply");
      cursor = v.value().elements[0].str;
      std::vector<std::string> argv = {"UNLINK"};
      for (const Value& k : v.value().elements[1].elements) {
        if (std::find(keep.begin(), keep.end(), k.str) == keep.end()) argv.push_back(k.str);
      }
      if (argv.size() > 1) {
        Status s = Checked(client_->Command(argv)).status();
        if (!s.ok()) return s;
      }
    } while (cursor != "0");
    return Status::Ok();
  }

  // A Redis error reply becomes kBackendFailure with the server's message.
  Result<Value> Checked(Result<Value> v) const {
    if (!v.ok()) return v.status();
    if (v.value().is_error()) {
      return Status::BackendFailure("redis state backend at " + client_->Describe() + ": " +
                                    v.value().str);
    }
    return v;
  }

  Status Corrupt(const std::string& what) const {
    return Status::BackendFailure("redis state backend at " + client_->Describe() +
                                  ": malformed stored " + what);
  }

  Result<std::vector<InvocationId>> IdList(const std::vector<std::string>& argv) {
    Result<Value> v = Checked(client_->Command(argv));
    if (!v.ok()) return v.status();
    return ToIds(v.value());
  }

  Result<std::string> HashGet(const std::string& key, const std::string& field,
                              const std::string& not_found) {
    Result<Value> v = Checked(client_->Command({"HGET", key, field}));
    if (!v.ok()) return v.status();
    if (v.value().is_nil()) return Status::NotFound(not_found);
    return std::move(v).value().str;
  }

  // {members, values} -> records. A member is pos+id, or pos alone when `id` is given.
  Result<std::vector<HistoryRecord>> Histories(const Value& reply, const InvocationId* id) const {
    std::vector<HistoryRecord> out;
    if (reply.elements.size() != 2 ||
        reply.elements[0].elements.size() < reply.elements[1].elements.size()) {
      return Corrupt("history reply");
    }
    const auto& members = reply.elements[0].elements;
    const auto& values = reply.elements[1].elements;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::string& m = members[i].str;
      if (m.size() < kPosLen || values[i].is_nil()) return Corrupt("history entry");
      std::optional<HistoryRecord> r =
          UnpackHistory(m.substr(0, kPosLen), id ? id->str() : m.substr(kPosLen), values[i].str);
      if (!r) return Corrupt("history entry");
      out.push_back(*std::move(r));
    }
    return out;
  }

  const std::shared_ptr<Client> client_;
  const std::string app_id_;
  const std::string p_;
};

}  // namespace

Result<std::unique_ptr<StateBackend>> NewRedisStateBackend(std::shared_ptr<Client> client,
                                                           const BackendConfig& config) {
  if (config.app_id.empty()) return Status::BadConfig("the redis state backend needs an app_id");
  std::unique_ptr<RedisStateBackend> backend(new RedisStateBackend(std::move(client), config));
  // Best effort: nothing reads those keys, so a failure (the server unreachable
  // for a moment) only leaves them, and the mark, for the next open.
  (void)backend->DropRetiredKeys();
  return std::unique_ptr<StateBackend>(std::move(backend));
}

Result<std::vector<std::pair<std::string, std::string>>> RedisDiscoverAppInfos(
    const std::shared_ptr<Client>& client) {
  Result<Value> v = client->Command({"HGETALL", keys::kAppInfos});
  if (!v.ok()) return v.status();
  if (v.value().is_error()) {
    return Status::BackendFailure("redis app-info discovery at " + client->Describe() + ": " +
                                  v.value().str);
  }
  std::vector<std::pair<std::string, std::string>> out;
  const auto& e = v.value().elements;
  for (std::size_t i = 0; i + 1 < e.size(); i += 2) out.emplace_back(e[i].str, e[i + 1].str);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pynenc_cpp::redis
