// Compliance suite of the StateBackend port, run against every backend of
// testing::AllBackends (a new backend is done when it passes unchanged).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/state_backend.h"
#include "redis/redis_client.h"

namespace pynenc_cpp {
namespace {

using S = InvocationStatus;

InvocationRecord Inv(const std::string& id, std::optional<std::string> parent = std::nullopt,
                     std::optional<std::string> event = std::nullopt,
                     std::optional<WorkflowRecord> workflow = std::nullopt) {
  InvocationRecord r;
  r.invocation_id = InvocationId(id);
  r.call_id = CallId("mod.task:args-" + id);
  r.task_id = TaskId("mod.task");
  r.arguments_id = "args-" + id;
  r.serialized_arguments = R"({"a": "1"})";
  if (parent) r.parent_invocation_id = InvocationId(*parent);
  r.parent_event_id = std::move(event);
  r.workflow = std::move(workflow);
  return r;
}

WorkflowRecord Wf(const std::string& id, const std::string& type,
                  std::optional<std::string> parent = std::nullopt) {
  WorkflowRecord w{WorkflowId(id), TaskId(type), std::nullopt};
  if (parent) w.parent_workflow_id = WorkflowId(*parent);
  return w;
}

HistoryRecord Hist(TimestampUs ts, S status, const std::string& json = "{}") {
  return HistoryRecord{InvocationId(), ts, status, json};
}

std::vector<std::string> Strs(const std::vector<InvocationId>& ids) {
  std::vector<std::string> out;
  for (const auto& id : ids) out.push_back(id.str());
  return out;
}

template <typename B>
constexpr bool kIsMem = std::is_same_v<B, testing::MemBackend>;

template <typename B>
class StateBackendCompliance : public testing::BackendTest<B> {
 protected:
  std::unique_ptr<StateBackend> Open(const std::string& app_id = "test-app") {
    auto opened = OpenStateBackend(this->backend_.Config(nullptr, app_id));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  // The config discovery gets: the storage's URI, no app.
  BackendConfig Storage() const { return this->backend_.Config(nullptr, ""); }
  void SetUp() override {
    sb_ = this->Open();
    ASSERT_NE(sb_, nullptr);
  }
  std::unique_ptr<StateBackend> sb_;
};

// Switched to testing::AllBackends / DurableBackends once every Redis component is merged.

TYPED_TEST_SUITE(StateBackendCompliance, testing::AllBackends, testing::BackendNames);

// Cross-process cases, for backends that are durable and shared.
template <typename B>
class StateBackendDurable : public StateBackendCompliance<B> {};
TYPED_TEST_SUITE(StateBackendDurable, testing::DurableBackends, testing::BackendNames);

TYPED_TEST(StateBackendCompliance, OpenRejectsBadUriAndEmptyAppId) {
  EXPECT_EQ(OpenStateBackend(BackendConfig{"nope", "a", nullptr}).status().code(),
            ErrorCode::kBadConfig);
  EXPECT_EQ(OpenStateBackend(this->Storage()).status().code(), ErrorCode::kBadConfig);
  EXPECT_EQ(DiscoverAppInfos(BackendConfig{"ftp://x", "", nullptr}).status().code(),
            ErrorCode::kBadConfig);
}

TYPED_TEST(StateBackendCompliance, UpsertThenGetRoundTripsEveryField) {
  InvocationRecord full = Inv("i1", "p", "ev", Wf("w", "mod.flow", "pw"));
  InvocationRecord bare = Inv("i2");
  bare.serialized_arguments = "{}";
  ASSERT_TRUE(this->sb_->UpsertInvocations({full, bare}).ok());
  EXPECT_EQ(this->sb_->GetInvocation(InvocationId("i1")).value(), full);
  EXPECT_EQ(this->sb_->GetInvocation(InvocationId("i2")).value(), bare);
}

TYPED_TEST(StateBackendCompliance, GetUnknownInvocationIsNotFound) {
  auto r = this->sb_->GetInvocation(InvocationId("missing"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
}

TYPED_TEST(StateBackendCompliance, UpsertReplacesAndMovesIndexes) {
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("a", "p1", "e1", Wf("w1", "t1"))}).ok());
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("b", "p1", "e1", Wf("w1", "t1"))}).ok());
  // Re-upsert "a" unchanged: keeps its place.
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("a", "p1", "e1", Wf("w1", "t1"))}).ok());
  EXPECT_EQ(Strs(this->sb_->ChildInvocations(InvocationId("p1")).value()),
            (std::vector<std::string>{"a", "b"}));
  // Move "a" to other parent/event/workflow.
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("a", "p2", "e2", Wf("w2", "t2"))}).ok());
  EXPECT_EQ(Strs(this->sb_->ChildInvocations(InvocationId("p1")).value()),
            (std::vector<std::string>{"b"}));
  EXPECT_EQ(Strs(this->sb_->ChildInvocations(InvocationId("p2")).value()),
            (std::vector<std::string>{"a"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsByParentEvent("e1").value()),
            (std::vector<std::string>{"b"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsByParentEvent("e2").value()),
            (std::vector<std::string>{"a"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow("w1", std::nullopt).value()),
            (std::vector<std::string>{"b"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow(std::nullopt, "t2").value()),
            (std::vector<std::string>{"a"}));
  // Drop the workflow entirely.
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("a")}).ok());
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow(std::nullopt, std::nullopt).value()),
            (std::vector<std::string>{"b"}));
  EXPECT_TRUE(this->sb_->ChildInvocations(InvocationId("p2")).value().empty());
}

TYPED_TEST(StateBackendCompliance, ChildrenAndEventIndexesKeepInsertionOrder) {
  std::vector<InvocationRecord> batch;
  for (const char* id : {"z", "m", "a", "q"}) batch.push_back(Inv(id, "parent", "event"));
  batch.push_back(Inv("other", "other-parent"));
  ASSERT_TRUE(this->sb_->UpsertInvocations(batch).ok());
  EXPECT_EQ(Strs(this->sb_->ChildInvocations(InvocationId("parent")).value()),
            (std::vector<std::string>{"z", "m", "a", "q"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsByParentEvent("event").value()),
            (std::vector<std::string>{"z", "m", "a", "q"}));
  EXPECT_TRUE(this->sb_->ChildInvocations(InvocationId("nobody")).value().empty());
  EXPECT_TRUE(this->sb_->InvocationsByParentEvent("no-event").value().empty());
}

TYPED_TEST(StateBackendCompliance, InvocationIdsByWorkflowFilters) {
  ASSERT_TRUE(
      this->sb_
          ->UpsertInvocations({Inv("a", std::nullopt, std::nullopt, Wf("w1", "t1")),
                               Inv("b", std::nullopt, std::nullopt, Wf("w1", "t1")),
                               Inv("c", std::nullopt, std::nullopt, Wf("w2", "t1")),
                               Inv("d", std::nullopt, std::nullopt, Wf("w3", "t2")), Inv("plain")})
          .ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow("w1", std::nullopt).value()), (V{"a", "b"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow(std::nullopt, "t1").value()),
            (V{"a", "b", "c"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow("w2", "t1").value()), (V{"c"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow("w2", "t2").value()), V{});
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow(std::nullopt, std::nullopt).value()),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow("", "").value()), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow("nonexistent", std::nullopt).value()), V{});
}

TYPED_TEST(StateBackendCompliance, HistoryIsOrderedByTimestampThenArrival) {
  const InvocationId id("inv");
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(200, S::kRunning)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(100, S::kRegistered)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(300, S::kFailed)).ok());
  // Same timestamp, different statuses: arrival order.
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(150, S::kPending)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(150, S::kRerouted)).ok());
  auto history = this->sb_->GetHistory(id).value();
  std::vector<S> statuses;
  for (const auto& h : history) {
    statuses.push_back(h.status);
    EXPECT_EQ(h.invocation_id, id);
  }
  EXPECT_EQ(statuses,
            (std::vector<S>{S::kRegistered, S::kPending, S::kRerouted, S::kRunning, S::kFailed}));
}

TYPED_TEST(StateBackendCompliance, HistoryDuplicateKeyReplacesJson) {
  const InvocationId id("inv");
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(100, S::kRunning, "old")).ok());
  ASSERT_TRUE(this->sb_->AddHistories({id}, Hist(100, S::kRunning, "new")).ok());
  auto history = this->sb_->GetHistory(id).value();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].history_json, "new");
}

TYPED_TEST(StateBackendCompliance, AddHistoriesForManyInvocationsAndEmptyHistory) {
  ASSERT_TRUE(
      this->sb_->AddHistories({InvocationId("a"), InvocationId("b")}, Hist(5, S::kPending, "j"))
          .ok());
  EXPECT_EQ(this->sb_->GetHistory(InvocationId("a")).value().size(), 1u);
  auto b = this->sb_->GetHistory(InvocationId("b")).value();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].invocation_id.str(), "b");
  EXPECT_EQ(b[0].history_json, "j");
  EXPECT_TRUE(this->sb_->GetHistory(InvocationId("none")).value().empty());
  EXPECT_TRUE(this->sb_->AddHistories({}, Hist(5, S::kPending)).ok());
}

TYPED_TEST(StateBackendCompliance, HistoryInRangeIsInclusiveOrderedAndPaged) {
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("before")}, Hist(99, S::kRunning)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("x")}, Hist(130, S::kRunning)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("y")}, Hist(100, S::kRunning)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("x")}, Hist(200, S::kSuccess)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("z")}, Hist(130, S::kPending)).ok());
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("after")}, Hist(201, S::kRunning)).ok());

  auto all = this->sb_->HistoryInRange(100, 200, std::nullopt, 100).value();
  EXPECT_FALSE(all.next.has_value());
  std::vector<std::pair<std::string, TimestampUs>> seen;
  for (const auto& h : all.records) seen.emplace_back(h.invocation_id.str(), h.timestamp_us);
  const std::vector<std::pair<std::string, TimestampUs>> expected = {
      {"y", 100}, {"x", 130}, {"z", 130}, {"x", 200}};
  EXPECT_EQ(seen, expected);

  for (std::size_t limit : {1u, 2u, 3u, 4u}) {
    std::vector<std::pair<std::string, TimestampUs>> paged;
    std::optional<HistoryPosition> after;
    int pages = 0;
    while (true) {
      auto page = this->sb_->HistoryInRange(100, 200, after, limit).value();
      EXPECT_LE(page.records.size(), limit);
      for (const auto& h : page.records) paged.emplace_back(h.invocation_id.str(), h.timestamp_us);
      ++pages;
      if (!page.next) break;
      after = page.next;
    }
    EXPECT_EQ(paged, expected) << "limit " << limit;
    EXPECT_EQ(pages, static_cast<int>((expected.size() + limit - 1) / limit)) << "limit " << limit;
  }
  EXPECT_TRUE(this->sb_->HistoryInRange(300, 400, std::nullopt, 10).value().records.empty());
  EXPECT_TRUE(this->sb_->HistoryInRange(200, 100, std::nullopt, 10).value().records.empty());
  EXPECT_EQ(this->sb_->HistoryInRange(0, 1000, std::nullopt, 0).status().code(),
            ErrorCode::kInvalidArgument);
}

TYPED_TEST(StateBackendCompliance, InvocationsInRangeAreDistinctSortedAndPaged) {
  for (const char* id : {"d", "b", "a", "c"}) {
    ASSERT_TRUE(this->sb_->AddHistories({InvocationId(id)}, Hist(10, S::kRunning)).ok());
    ASSERT_TRUE(this->sb_->AddHistories({InvocationId(id)}, Hist(20, S::kSuccess)).ok());
  }
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("outside")}, Hist(50, S::kRunning)).ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Strs(this->sb_->InvocationsInRange(0, 30, std::nullopt, 100).value()),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsInRange(0, 30, std::nullopt, 3).value()),
            (V{"a", "b", "c"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsInRange(0, 30, InvocationId("c"), 3).value()), (V{"d"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsInRange(20, 20, std::nullopt, 100).value()),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(this->sb_->InvocationsInRange(21, 49, std::nullopt, 100).value()), V{});
  EXPECT_EQ(this->sb_->InvocationsInRange(0, 30, std::nullopt, 0).status().code(),
            ErrorCode::kInvalidArgument);
}

TYPED_TEST(StateBackendCompliance, ResultsAndExceptions) {
  const InvocationId id("inv");
  EXPECT_EQ(this->sb_->GetResult(id).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->sb_->GetException(id).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(this->sb_->SetResult(id, "r1").ok());
  ASSERT_TRUE(this->sb_->SetResult(id, "r2").ok());
  EXPECT_EQ(this->sb_->GetResult(id).value(), "r2");
  EXPECT_EQ(this->sb_->GetException(id).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(this->sb_->SetException(id, "e1").ok());
  EXPECT_EQ(this->sb_->GetException(id).value(), "e1");
  std::string binary("a\0b", 3);
  ASSERT_TRUE(this->sb_->SetResult(InvocationId("bin"), binary).ok());
  EXPECT_EQ(this->sb_->GetResult(InvocationId("bin")).value(), binary);
}

RunnerContextRecord Ctx(const std::string& id, std::optional<std::string> parent = std::nullopt) {
  RunnerContextRecord r{RunnerId(id), "Runner", std::nullopt, 42, "host", 7};
  if (parent) r.parent_runner_id = RunnerId(*parent);
  return r;
}

TYPED_TEST(StateBackendCompliance, RunnerContexts) {
  EXPECT_EQ(this->sb_->GetRunnerContext(RunnerId("r1")).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(this->sb_->StoreRunnerContext(Ctx("runner-alpha-1")).ok());
  ASSERT_TRUE(this->sb_->StoreRunnerContext(Ctx("runner-beta-2", "runner-alpha-1")).ok());
  ASSERT_TRUE(this->sb_->StoreRunnerContext(Ctx("runner-alpha-3")).ok());
  EXPECT_EQ(this->sb_->GetRunnerContext(RunnerId("runner-beta-2")).value(),
            Ctx("runner-beta-2", "runner-alpha-1"));
  RunnerContextRecord replaced = Ctx("runner-alpha-3");
  replaced.pid = 99;
  ASSERT_TRUE(this->sb_->StoreRunnerContext(replaced).ok());
  EXPECT_EQ(this->sb_->GetRunnerContext(RunnerId("runner-alpha-3")).value().pid, 99);

  auto many = this->sb_
                  ->GetRunnerContexts({RunnerId("runner-alpha-3"), RunnerId("unknown"),
                                       RunnerId("runner-alpha-1"), RunnerId("runner-alpha-3")})
                  .value();
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(many[0].runner_id.str(), "runner-alpha-3");
  EXPECT_EQ(many[1].runner_id.str(), "runner-alpha-1");
  EXPECT_TRUE(this->sb_->GetRunnerContexts({}).value().empty());

  auto alpha = this->sb_->MatchRunnerContexts("alpha").value();
  ASSERT_EQ(alpha.size(), 2u);
  EXPECT_EQ(alpha[0].runner_id.str(), "runner-alpha-1");
  EXPECT_EQ(alpha[1].runner_id.str(), "runner-alpha-3");
  EXPECT_EQ(this->sb_->MatchRunnerContexts("beta").value().size(), 1u);
  EXPECT_TRUE(this->sb_->MatchRunnerContexts("gamma").value().empty());
  EXPECT_TRUE(this->sb_->MatchRunnerContexts("ALPHA").value().empty());
  EXPECT_EQ(this->sb_->MatchRunnerContexts("").value().size(), 3u);
}

TYPED_TEST(StateBackendCompliance, AppInfoIsPerAppAndDiscoverable) {
  auto other = this->Open("other-app-for-discovery");
  auto never = this->Open("never-registered-app");
  EXPECT_EQ(never->GetAppInfo().status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(this->sb_->StoreAppInfo("test-app", R"({"app_id": "test-app"})").ok());
  ASSERT_TRUE(other->StoreAppInfo("other-app-for-discovery", "info-2").ok());
  EXPECT_EQ(this->sb_->GetAppInfo().value(), R"({"app_id": "test-app"})");
  EXPECT_EQ(other->GetAppInfo().value(), "info-2");
  EXPECT_EQ(this->sb_->StoreAppInfo("", "x").code(), ErrorCode::kInvalidArgument);

  auto discovered = DiscoverAppInfos(this->Storage()).value();
  auto has = [&](const std::string& app, const std::string& info) {
    return std::find(discovered.begin(), discovered.end(), std::make_pair(app, info)) !=
           discovered.end();
  };
  EXPECT_TRUE(has("test-app", R"({"app_id": "test-app"})"));
  EXPECT_TRUE(has("other-app-for-discovery", "info-2"));
  EXPECT_TRUE(std::is_sorted(discovered.begin(), discovered.end()));
}

TYPED_TEST(StateBackendCompliance, WorkflowRunsAndTypes) {
  ASSERT_TRUE(this->sb_->StoreWorkflowRun(Wf("w2", "t1")).ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowRun(Wf("w1", "t1")).ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowRun(Wf("w1", "t1")).ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowRun(Wf("w3", "t2", "w1")).ok());
  EXPECT_EQ(this->sb_->WorkflowTypes().value(), (std::vector<TaskId>{TaskId("t1"), TaskId("t2")}));
  EXPECT_EQ(this->sb_->WorkflowRuns(std::nullopt).value(),
            (std::vector<WorkflowRecord>{Wf("w1", "t1"), Wf("w2", "t1"), Wf("w3", "t2", "w1")}));
  EXPECT_EQ(this->sb_->WorkflowRuns(TaskId("t1")).value(),
            (std::vector<WorkflowRecord>{Wf("w1", "t1"), Wf("w2", "t1")}));
  EXPECT_TRUE(this->sb_->WorkflowRuns(TaskId("unknown")).value().empty());
  // Re-storing a run under another type moves it.
  ASSERT_TRUE(this->sb_->StoreWorkflowRun(Wf("w3", "t3")).ok());
  EXPECT_EQ(this->sb_->WorkflowTypes().value(), (std::vector<TaskId>{TaskId("t1"), TaskId("t3")}));
  EXPECT_TRUE(this->sb_->WorkflowRuns(TaskId("t2")).value().empty());
}

TYPED_TEST(StateBackendCompliance, WorkflowSubInvocationsAndData) {
  const WorkflowId wf("wf");
  ASSERT_TRUE(this->sb_->StoreWorkflowSubInvocation(wf, InvocationId("s2")).ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowSubInvocation(wf, InvocationId("s1")).ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowSubInvocation(wf, InvocationId("s2")).ok());
  EXPECT_EQ(Strs(this->sb_->WorkflowSubInvocations(wf).value()),
            (std::vector<std::string>{"s2", "s1"}));
  EXPECT_TRUE(this->sb_->WorkflowSubInvocations(WorkflowId("other")).value().empty());

  EXPECT_EQ(this->sb_->GetWorkflowData(wf, "k").status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(this->sb_->SetWorkflowData(wf, "k", "v1").ok());
  ASSERT_TRUE(this->sb_->SetWorkflowData(wf, "k", "v2").ok());
  EXPECT_EQ(this->sb_->GetWorkflowData(wf, "k").value(), "v2");
  EXPECT_EQ(this->sb_->GetWorkflowData(wf, "missing").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->sb_->GetWorkflowData(WorkflowId("other"), "k").status().code(),
            ErrorCode::kNotFound);
}

TYPED_TEST(StateBackendCompliance, PurgeClearsEverythingButAppInfo) {
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("a", "p", "e", Wf("w", "t"))}).ok());
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("a")}, Hist(1, S::kRegistered)).ok());
  ASSERT_TRUE(this->sb_->SetResult(InvocationId("a"), "r").ok());
  ASSERT_TRUE(this->sb_->SetException(InvocationId("a"), "e").ok());
  ASSERT_TRUE(this->sb_->StoreRunnerContext(Ctx("r")).ok());
  ASSERT_TRUE(this->sb_->StoreAppInfo("test-app", "info").ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowRun(Wf("w", "t")).ok());
  ASSERT_TRUE(this->sb_->StoreWorkflowSubInvocation(WorkflowId("w"), InvocationId("a")).ok());
  ASSERT_TRUE(this->sb_->SetWorkflowData(WorkflowId("w"), "k", "v").ok());

  ASSERT_TRUE(this->sb_->Purge().ok());
  EXPECT_EQ(this->sb_->GetInvocation(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(this->sb_->ChildInvocations(InvocationId("p")).value().empty());
  EXPECT_TRUE(this->sb_->InvocationsByParentEvent("e").value().empty());
  EXPECT_TRUE(this->sb_->InvocationIdsByWorkflow("w", std::nullopt).value().empty());
  EXPECT_TRUE(this->sb_->GetHistory(InvocationId("a")).value().empty());
  EXPECT_TRUE(this->sb_->HistoryInRange(0, 10, std::nullopt, 10).value().records.empty());
  EXPECT_TRUE(this->sb_->InvocationsInRange(0, 10, std::nullopt, 10).value().empty());
  EXPECT_EQ(this->sb_->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->sb_->GetException(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->sb_->GetRunnerContext(RunnerId("r")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(this->sb_->WorkflowTypes().value().empty());
  EXPECT_TRUE(this->sb_->WorkflowRuns(std::nullopt).value().empty());
  EXPECT_TRUE(this->sb_->WorkflowSubInvocations(WorkflowId("w")).value().empty());
  EXPECT_EQ(this->sb_->GetWorkflowData(WorkflowId("w"), "k").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->sb_->GetAppInfo().value(), "info");
  // Usable again after a purge.
  ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("b", "p")}).ok());
  EXPECT_EQ(Strs(this->sb_->ChildInvocations(InvocationId("p")).value()),
            std::vector<std::string>{"b"});
}

// memory:// instances are separate stores; sqlite:// instances of one app on one
// file are views of the same rows.
TYPED_TEST(StateBackendCompliance, InstancesShareDataExactlyWhenTheyShareStorage) {
  auto other = this->Open("test-app");
  ASSERT_TRUE(this->sb_->SetResult(InvocationId("a"), "r").ok());
  if constexpr (kIsMem<TypeParam>) {
    ASSERT_TRUE(other->Purge().ok());
    EXPECT_EQ(this->sb_->GetResult(InvocationId("a")).value(), "r");
    EXPECT_EQ(other->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  } else {
    EXPECT_EQ(other->GetResult(InvocationId("a")).value(), "r");
    ASSERT_TRUE(other->Purge().ok());
    EXPECT_EQ(this->sb_->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  }
}

TYPED_TEST(StateBackendCompliance, ConcurrentWritersAndReaders) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::atomic<bool> stop{false};
  std::atomic<int> reader_errors{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto page = this->sb_->HistoryInRange(0, 1 << 30, std::nullopt, 50);
      auto kids = this->sb_->ChildInvocations(InvocationId("parent"));
      if (!page.ok() || !kids.ok()) reader_errors.fetch_add(1);
      for (std::size_t i = 1; page.ok() && i < page.value().records.size(); ++i) {
        if (page.value().records[i].timestamp_us < page.value().records[i - 1].timestamp_us) {
          reader_errors.fetch_add(1);
        }
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(this->sb_->UpsertInvocations({Inv(id, "parent")}).ok());
        // Timestamps deliberately out of order across threads.
        EXPECT_TRUE(
            this->sb_
                ->AddHistories({InvocationId(id)}, Hist((kPerThread - i) * 10 + t, S::kRegistered))
                .ok());
        EXPECT_TRUE(
            this->sb_->AddHistories({InvocationId(id)}, Hist(100000 + i, S::kPending)).ok());
        EXPECT_TRUE(this->sb_->SetResult(InvocationId(id), id).ok());
        EXPECT_TRUE(this->sb_->StoreRunnerContext(Ctx("runner-" + std::to_string(t))).ok());
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_EQ(reader_errors.load(), 0);
  EXPECT_EQ(this->sb_->ChildInvocations(InvocationId("parent")).value().size(),
            static_cast<std::size_t>(kThreads * kPerThread));
  auto all = this->sb_->HistoryInRange(0, 1 << 30, std::nullopt, 100000).value();
  EXPECT_EQ(all.records.size(), static_cast<std::size_t>(2 * kThreads * kPerThread));
  EXPECT_EQ(this->sb_->InvocationsInRange(0, 1 << 30, std::nullopt, 100000).value().size(),
            static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(this->sb_->GetResult(InvocationId("t3-17")).value(), "t3-17");
  EXPECT_EQ(this->sb_->MatchRunnerContexts("runner-").value().size(),
            static_cast<std::size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) {
    auto h = this->sb_->GetHistory(InvocationId("t" + std::to_string(t) + "-0")).value();
    ASSERT_EQ(h.size(), 2u);
    EXPECT_EQ(h[0].status, S::kRegistered);
    EXPECT_EQ(h[1].status, S::kPending);
  }
}

// Writes one record of every kind for `sb`'s app, tagged with `tag`.
void FillEveryTable(StateBackend& sb, const std::string& app_id, const std::string& tag) {
  InvocationRecord inv = Inv("a", "p", "e", Wf("w", "t"));
  inv.serialized_arguments = tag;
  ASSERT_TRUE(sb.UpsertInvocations({inv, Inv("b", "p")}).ok());
  ASSERT_TRUE(sb.AddHistories({InvocationId("a")}, Hist(10, S::kRegistered, tag)).ok());
  ASSERT_TRUE(sb.SetResult(InvocationId("a"), tag).ok());
  ASSERT_TRUE(sb.SetException(InvocationId("a"), tag).ok());
  RunnerContextRecord ctx = Ctx("runner");
  ctx.hostname = tag;
  ASSERT_TRUE(sb.StoreRunnerContext(ctx).ok());
  ASSERT_TRUE(sb.StoreAppInfo(app_id, tag).ok());
  ASSERT_TRUE(sb.StoreWorkflowRun(Wf("w", "t-" + tag)).ok());
  ASSERT_TRUE(sb.StoreWorkflowSubInvocation(WorkflowId("w"), InvocationId(tag)).ok());
  ASSERT_TRUE(sb.SetWorkflowData(WorkflowId("w"), "k", tag).ok());
}

// Checks that `sb` sees exactly what FillEveryTable(sb, tag) wrote.
void ExpectEveryTable(StateBackend& sb, const std::string& tag) {
  EXPECT_EQ(sb.GetInvocation(InvocationId("a")).value().serialized_arguments, tag);
  EXPECT_EQ(Strs(sb.ChildInvocations(InvocationId("p")).value()),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Strs(sb.InvocationsByParentEvent("e").value()), std::vector<std::string>{"a"});
  EXPECT_EQ(Strs(sb.InvocationIdsByWorkflow("w", "t").value()), std::vector<std::string>{"a"});
  auto history = sb.GetHistory(InvocationId("a")).value();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].history_json, tag);
  EXPECT_EQ(sb.HistoryInRange(0, 100, std::nullopt, 10).value().records.size(), 1u);
  EXPECT_EQ(Strs(sb.InvocationsInRange(0, 100, std::nullopt, 10).value()),
            std::vector<std::string>{"a"});
  EXPECT_EQ(sb.GetResult(InvocationId("a")).value(), tag);
  EXPECT_EQ(sb.GetException(InvocationId("a")).value(), tag);
  EXPECT_EQ(sb.GetRunnerContext(RunnerId("runner")).value().hostname, tag);
  EXPECT_EQ(sb.MatchRunnerContexts("").value().size(), 1u);
  EXPECT_EQ(sb.GetAppInfo().value(), tag);
  EXPECT_EQ(sb.WorkflowTypes().value(), std::vector<TaskId>{TaskId("t-" + tag)});
  EXPECT_EQ(sb.WorkflowRuns(std::nullopt).value(),
            std::vector<WorkflowRecord>{Wf("w", "t-" + tag)});
  EXPECT_EQ(Strs(sb.WorkflowSubInvocations(WorkflowId("w")).value()),
            std::vector<std::string>{tag});
  EXPECT_EQ(sb.GetWorkflowData(WorkflowId("w"), "k").value(), tag);
}

TYPED_TEST(StateBackendCompliance, TwoAppsInOneStorageAreIsolated) {
  auto a = this->Open("isolated-app-a");
  auto b = this->Open("isolated-app-b");
  FillEveryTable(*a, "isolated-app-a", "A");
  FillEveryTable(*b, "isolated-app-b", "B");
  ExpectEveryTable(*a, "A");
  ExpectEveryTable(*b, "B");
  // Purging one app leaves the other untouched.
  ASSERT_TRUE(a->Purge().ok());
  EXPECT_EQ(a->GetInvocation(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(a->HistoryInRange(0, 100, std::nullopt, 10).value().records.empty());
  ExpectEveryTable(*b, "B");
  auto discovered = DiscoverAppInfos(this->Storage()).value();
  EXPECT_NE(std::find(discovered.begin(), discovered.end(),
                      std::make_pair(std::string("isolated-app-a"), std::string("A"))),
            discovered.end());
  EXPECT_NE(std::find(discovered.begin(), discovered.end(),
                      std::make_pair(std::string("isolated-app-b"), std::string("B"))),
            discovered.end());
}

// sqlite://: everything survives closing the component and opening it again,
// and orders continue where they stopped. memory://: a new instance is empty.
TYPED_TEST(StateBackendCompliance, ReopeningOnTheSameStorage) {
  FillEveryTable(*this->sb_, "test-app", "kept");
  ASSERT_TRUE(this->sb_->AddHistories({InvocationId("a")}, Hist(10, S::kPending, "p1")).ok());
  this->sb_.reset();
  this->sb_ = this->Open("test-app");
  ASSERT_NE(this->sb_, nullptr);
  if constexpr (kIsMem<TypeParam>) {
    EXPECT_EQ(this->sb_->GetInvocation(InvocationId("a")).status().code(), ErrorCode::kNotFound);
    EXPECT_TRUE(this->sb_->GetHistory(InvocationId("a")).value().empty());
  } else {
    EXPECT_EQ(this->sb_->GetInvocation(InvocationId("a")).value().serialized_arguments, "kept");
    EXPECT_EQ(this->sb_->GetAppInfo().value(), "kept");
    ASSERT_TRUE(this->sb_->UpsertInvocations({Inv("c", "p")}).ok());
    EXPECT_EQ(Strs(this->sb_->ChildInvocations(InvocationId("p")).value()),
              (std::vector<std::string>{"a", "b", "c"}));
    ASSERT_TRUE(this->sb_->AddHistories({InvocationId("a")}, Hist(10, S::kRunning, "r")).ok());
    std::vector<S> statuses;
    for (const auto& h : this->sb_->GetHistory(InvocationId("a")).value()) {
      statuses.push_back(h.status);
    }
    EXPECT_EQ(statuses, (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));
    ASSERT_TRUE(this->sb_->StoreWorkflowSubInvocation(WorkflowId("w"), InvocationId("s")).ok());
    EXPECT_EQ(Strs(this->sb_->WorkflowSubInvocations(WorkflowId("w")).value()),
              (std::vector<std::string>{"kept", "s"}));
  }
}

// Contested writes of one key from many threads: exactly one record survives,
// it is one of the written values, and every index agrees with it.
TYPED_TEST(StateBackendCompliance, ContestedWritesOfOneKeyLeaveExactlyOneWinner) {
  constexpr int kThreads = 6;
  constexpr int kRounds = 30;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string n = std::to_string(t);
      for (int i = 0; i < kRounds; ++i) {
        InvocationRecord r = Inv("same", "parent-" + n, "event-" + n, Wf("wf-" + n, "type-" + n));
        r.serialized_arguments = n;
        if (!this->sb_->UpsertInvocations({r}).ok()) failures.fetch_add(1);
        if (!this->sb_->AddHistories({InvocationId("same")}, Hist(7, S::kRunning, n)).ok()) {
          failures.fetch_add(1);
        }
        if (!this->sb_->StoreWorkflowSubInvocation(WorkflowId("w"), InvocationId("sub")).ok()) {
          failures.fetch_add(1);
        }
        if (!this->sb_->StoreWorkflowRun(Wf("run", "type-" + n)).ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  const InvocationRecord winner = this->sb_->GetInvocation(InvocationId("same")).value();
  const std::string n = winner.serialized_arguments;
  EXPECT_EQ(winner, [&] {
    InvocationRecord r = Inv("same", "parent-" + n, "event-" + n, Wf("wf-" + n, "type-" + n));
    r.serialized_arguments = n;
    return r;
  }());
  int parents_listing_it = 0;
  for (int t = 0; t < kThreads; ++t) {
    const std::string m = std::to_string(t);
    const auto kids = Strs(this->sb_->ChildInvocations(InvocationId("parent-" + m)).value());
    const auto by_event = Strs(this->sb_->InvocationsByParentEvent("event-" + m).value());
    const auto by_wf = Strs(this->sb_->InvocationIdsByWorkflow("wf-" + m, std::nullopt).value());
    const std::vector<std::string> expected =
        m == n ? std::vector<std::string>{"same"} : std::vector<std::string>{};
    EXPECT_EQ(kids, expected) << m;
    EXPECT_EQ(by_event, expected) << m;
    EXPECT_EQ(by_wf, expected) << m;
    parents_listing_it += static_cast<int>(kids.size());
  }
  EXPECT_EQ(parents_listing_it, 1);
  EXPECT_EQ(Strs(this->sb_->InvocationIdsByWorkflow(std::nullopt, std::nullopt).value()),
            std::vector<std::string>{"same"});

  const auto history = this->sb_->GetHistory(InvocationId("same")).value();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(this->sb_->HistoryInRange(0, 100, std::nullopt, 100).value().records.size(), 1u);
  EXPECT_EQ(Strs(this->sb_->WorkflowSubInvocations(WorkflowId("w")).value()),
            std::vector<std::string>{"sub"});
  EXPECT_EQ(this->sb_->WorkflowRuns(std::nullopt).value().size(), 1u);
  EXPECT_EQ(this->sb_->WorkflowTypes().value().size(), 1u);
}

// Processes sharing one file: each writes its own history and contests one
// invocation and one sub-invocation; nothing is lost and exactly one upsert wins.
// Only storage shared across processes can pass it (DurableBackends).
TYPED_TEST(StateBackendDurable, ContestedWritesFromSeveralProcesses) {
  constexpr int kChildren = 3;
  constexpr int kEach = 40;
  std::vector<pid_t> children;
  for (int k = 0; k < kChildren; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Reuses the parent's backend object: the Database must open fresh handles.
      int failures = 0;
      const std::string n = std::to_string(k);
      for (int i = 0; i < kEach; ++i) {
        failures += !this->sb_->UpsertInvocations({Inv("shared", "parent-" + n)}).ok();
        failures += !this->sb_
                         ->AddHistories({InvocationId("c" + n + "-" + std::to_string(i))},
                                        Hist(i, S::kRegistered))
                         .ok();
        failures +=
            !this->sb_->StoreWorkflowSubInvocation(WorkflowId("w"), InvocationId("sub")).ok();
      }
      _exit(failures == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(this->sb_->HistoryInRange(0, kEach, std::nullopt, 1000).value().records.size(),
            static_cast<std::size_t>(kChildren * kEach));
  EXPECT_EQ(Strs(this->sb_->WorkflowSubInvocations(WorkflowId("w")).value()),
            std::vector<std::string>{"sub"});
  const std::string parent =
      this->sb_->GetInvocation(InvocationId("shared")).value().parent_invocation_id->str();
  std::size_t listed = 0;
  for (int k = 0; k < kChildren; ++k) {
    const std::string p = "parent-" + std::to_string(k);
    auto kids = this->sb_->ChildInvocations(InvocationId(p)).value();
    EXPECT_EQ(kids.size(), p == parent ? 1u : 0u) << p;
    listed += kids.size();
  }
  EXPECT_EQ(listed, 1u);
}

// Paging through a time range while other threads write into it: every entry
// that existed before the first page is read exactly once, nothing is read
// twice, and the pages come in the total order.
TYPED_TEST(StateBackendCompliance, HistoryPagingUnderConcurrentWritesNeitherRepeatsNorSkips) {
  constexpr int kExisting = 300;
  for (int i = 0; i < kExisting; ++i) {
    ASSERT_TRUE(this->sb_
                    ->AddHistories({InvocationId("old-" + std::to_string(i))},
                                   Hist((i * 7) % 100, S::kRegistered))
                    .ok());
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 3000 && !stop.load(); ++i) {
        const std::string id = "new-" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(this->sb_->AddHistories({InvocationId(id)}, Hist(i % 100, S::kPending)).ok());
      }
    });
  }
  std::set<std::string> seen;
  int duplicates = 0;
  std::optional<HistoryPosition> after;
  std::optional<std::pair<TimestampUs, std::string>> previous;
  int out_of_order = 0;
  while (true) {
    auto page = this->sb_->HistoryInRange(0, 99, after, 7);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& h : page.value().records) {
      const std::string key = h.invocation_id.str() + "@" + std::to_string(h.timestamp_us);
      if (!seen.insert(key).second) ++duplicates;
      if (previous && h.timestamp_us < previous->first) ++out_of_order;
      previous.emplace(h.timestamp_us, key);
    }
    if (!page.value().next) break;
    after = page.value().next;
  }
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(out_of_order, 0);
  for (int i = 0; i < kExisting; ++i) {
    EXPECT_EQ(seen.count("old-" + std::to_string(i) + "@" + std::to_string((i * 7) % 100)), 1u)
        << i;
  }
}

// --- Redis only: durability and outages ------------------------------------

std::string RedisUri(const testing::RedisServer& server) {
  return "redis://127.0.0.1:" + std::to_string(server.port()) + "/0";
}

TEST(RedisStateBackend, DataSurvivesAServerRestartWithAppendOnly) {
  testing::RedisServer server(/*appendonly=*/true);
  const BackendConfig config{RedisUri(server), "restart-app", nullptr};
  {
    auto sb = OpenStateBackend(config);
    ASSERT_TRUE(sb.ok()) << sb.status().ToString();
    FillEveryTable(*sb.value(), "restart-app", "kept");
  }
  server.Stop();
  server.Start();
  auto sb = OpenStateBackend(config);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  ExpectEveryTable(*sb.value(), "kept");
  auto discovered = DiscoverAppInfos(BackendConfig{RedisUri(server), "", nullptr});
  ASSERT_TRUE(discovered.ok());
  EXPECT_EQ(discovered.value(),
            (std::vector<std::pair<std::string, std::string>>{{"restart-app", "kept"}}));
  // Orders continue after the restart.
  ASSERT_TRUE(sb.value()->UpsertInvocations({Inv("c", "p")}).ok());
  EXPECT_EQ(Strs(sb.value()->ChildInvocations(InvocationId("p")).value()),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST(RedisStateBackend, CallsWhileTheServerIsDownFailNamingItThenRecover) {
  testing::RedisServer server;
  const BackendConfig config{RedisUri(server) + "?connect_timeout_ms=300", "down-app", nullptr};
  auto opened = OpenStateBackend(config);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  StateBackend& sb = *opened.value();
  ASSERT_TRUE(sb.SetResult(InvocationId("a"), "r").ok());
  server.Stop(SIGKILL);
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  auto result = sb.GetResult(InvocationId("a"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(result.status().ToString().find(where), std::string::npos)
      << result.status().ToString();
  Status upsert = sb.UpsertInvocations({Inv("x")});
  EXPECT_EQ(upsert.code(), ErrorCode::kBackendFailure);
  EXPECT_NE(upsert.ToString().find(where), std::string::npos) << upsert.ToString();
  auto discovered =
      DiscoverAppInfos(BackendConfig{RedisUri(server) + "?connect_timeout_ms=300", "", nullptr});
  EXPECT_EQ(discovered.status().code(), ErrorCode::kBackendFailure);
  server.Start();
  // Not appendonly: the restarted server is empty, but the backend works again.
  ASSERT_TRUE(sb.UpsertInvocations({Inv("x", "p")}).ok());
  EXPECT_EQ(Strs(sb.ChildInvocations(InvocationId("p")).value()), std::vector<std::string>{"x"});
  EXPECT_EQ(sb.GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
}

// Purge and discovery touch only this app's state keys and the app-info hash:
// other components' and other apps' keys on the same server survive a purge.
TEST(RedisStateBackend, PurgeDeletesOnlyThisAppsStateKeys) {
  testing::RedisServer server;
  const std::string uri = RedisUri(server);
  auto sb = OpenStateBackend(BackendConfig{uri, "app*[x]", nullptr});
  auto other = OpenStateBackend(BackendConfig{uri, "app", nullptr});
  ASSERT_TRUE(sb.ok() && other.ok());
  FillEveryTable(*sb.value(), "app*[x]", "A");
  FillEveryTable(*other.value(), "app", "B");
  auto client = redis::OpenClient(BackendConfig{uri, "app", nullptr});
  ASSERT_TRUE(client.ok());
  const std::string foreign = redis::KeyPrefix("app*[x]", "broker") + "queue";
  ASSERT_TRUE(client.value()->Command({"SET", foreign, "1"}).ok());
  ASSERT_TRUE(sb.value()->Purge().ok());
  EXPECT_EQ(client.value()->Command({"GET", foreign}).value().str, "1");
  ExpectEveryTable(*other.value(), "B");
  EXPECT_EQ(sb.value()->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sb.value()->GetAppInfo().value(), "A");
}

}  // namespace
}  // namespace pynenc_cpp
