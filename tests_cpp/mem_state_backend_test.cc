// Compliance suite of the StateBackend port, run against every backend URI in
// kStateBackendUris (a new backend is done when it passes unchanged).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "pynenc_cpp/ports/state_backend.h"

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

const char* const kStateBackendUris[] = {"memory://"};

class StateBackendTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::unique_ptr<StateBackend> Open(const std::string& app_id = "test-app") {
    auto opened = OpenStateBackend(BackendConfig{GetParam(), app_id, nullptr});
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return std::move(opened).value();
  }
  void SetUp() override { sb_ = Open(); }
  std::unique_ptr<StateBackend> sb_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StateBackendTest, ::testing::ValuesIn(kStateBackendUris));

TEST_P(StateBackendTest, OpenRejectsBadUriAndEmptyAppId) {
  EXPECT_EQ(OpenStateBackend(BackendConfig{"nope", "a", nullptr}).status().code(),
            ErrorCode::kBadConfig);
  EXPECT_EQ(OpenStateBackend(BackendConfig{GetParam(), "", nullptr}).status().code(),
            ErrorCode::kBadConfig);
  EXPECT_EQ(DiscoverAppInfos(BackendConfig{"ftp://x", "", nullptr}).status().code(),
            ErrorCode::kBadConfig);
}

TEST_P(StateBackendTest, UpsertThenGetRoundTripsEveryField) {
  InvocationRecord full = Inv("i1", "p", "ev", Wf("w", "mod.flow", "pw"));
  InvocationRecord bare = Inv("i2");
  bare.serialized_arguments = "{}";
  ASSERT_TRUE(sb_->UpsertInvocations({full, bare}).ok());
  EXPECT_EQ(sb_->GetInvocation(InvocationId("i1")).value(), full);
  EXPECT_EQ(sb_->GetInvocation(InvocationId("i2")).value(), bare);
}

TEST_P(StateBackendTest, GetUnknownInvocationIsNotFound) {
  auto r = sb_->GetInvocation(InvocationId("missing"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
}

TEST_P(StateBackendTest, UpsertReplacesAndMovesIndexes) {
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("a", "p1", "e1", Wf("w1", "t1"))}).ok());
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("b", "p1", "e1", Wf("w1", "t1"))}).ok());
  // Re-upsert "a" unchanged: keeps its place.
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("a", "p1", "e1", Wf("w1", "t1"))}).ok());
  EXPECT_EQ(Strs(sb_->ChildInvocations(InvocationId("p1")).value()),
            (std::vector<std::string>{"a", "b"}));
  // Move "a" to other parent/event/workflow.
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("a", "p2", "e2", Wf("w2", "t2"))}).ok());
  EXPECT_EQ(Strs(sb_->ChildInvocations(InvocationId("p1")).value()),
            (std::vector<std::string>{"b"}));
  EXPECT_EQ(Strs(sb_->ChildInvocations(InvocationId("p2")).value()),
            (std::vector<std::string>{"a"}));
  EXPECT_EQ(Strs(sb_->InvocationsByParentEvent("e1").value()), (std::vector<std::string>{"b"}));
  EXPECT_EQ(Strs(sb_->InvocationsByParentEvent("e2").value()), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow("w1", std::nullopt).value()),
            (std::vector<std::string>{"b"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow(std::nullopt, "t2").value()),
            (std::vector<std::string>{"a"}));
  // Drop the workflow entirely.
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("a")}).ok());
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow(std::nullopt, std::nullopt).value()),
            (std::vector<std::string>{"b"}));
  EXPECT_TRUE(sb_->ChildInvocations(InvocationId("p2")).value().empty());
}

TEST_P(StateBackendTest, ChildrenAndEventIndexesKeepInsertionOrder) {
  std::vector<InvocationRecord> batch;
  for (const char* id : {"z", "m", "a", "q"}) batch.push_back(Inv(id, "parent", "event"));
  batch.push_back(Inv("other", "other-parent"));
  ASSERT_TRUE(sb_->UpsertInvocations(batch).ok());
  EXPECT_EQ(Strs(sb_->ChildInvocations(InvocationId("parent")).value()),
            (std::vector<std::string>{"z", "m", "a", "q"}));
  EXPECT_EQ(Strs(sb_->InvocationsByParentEvent("event").value()),
            (std::vector<std::string>{"z", "m", "a", "q"}));
  EXPECT_TRUE(sb_->ChildInvocations(InvocationId("nobody")).value().empty());
  EXPECT_TRUE(sb_->InvocationsByParentEvent("no-event").value().empty());
}

TEST_P(StateBackendTest, InvocationIdsByWorkflowFilters) {
  ASSERT_TRUE(
      sb_->UpsertInvocations({Inv("a", std::nullopt, std::nullopt, Wf("w1", "t1")),
                              Inv("b", std::nullopt, std::nullopt, Wf("w1", "t1")),
                              Inv("c", std::nullopt, std::nullopt, Wf("w2", "t1")),
                              Inv("d", std::nullopt, std::nullopt, Wf("w3", "t2")), Inv("plain")})
          .ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow("w1", std::nullopt).value()), (V{"a", "b"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow(std::nullopt, "t1").value()), (V{"a", "b", "c"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow("w2", "t1").value()), (V{"c"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow("w2", "t2").value()), V{});
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow(std::nullopt, std::nullopt).value()),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow("", "").value()), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(sb_->InvocationIdsByWorkflow("nonexistent", std::nullopt).value()), V{});
}

TEST_P(StateBackendTest, HistoryIsOrderedByTimestampThenArrival) {
  const InvocationId id("inv");
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(200, S::kRunning)).ok());
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(100, S::kRegistered)).ok());
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(300, S::kFailed)).ok());
  // Same timestamp, different statuses: arrival order.
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(150, S::kPending)).ok());
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(150, S::kRerouted)).ok());
  auto history = sb_->GetHistory(id).value();
  std::vector<S> statuses;
  for (const auto& h : history) {
    statuses.push_back(h.status);
    EXPECT_EQ(h.invocation_id, id);
  }
  EXPECT_EQ(statuses,
            (std::vector<S>{S::kRegistered, S::kPending, S::kRerouted, S::kRunning, S::kFailed}));
}

TEST_P(StateBackendTest, HistoryDuplicateKeyReplacesJson) {
  const InvocationId id("inv");
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(100, S::kRunning, "old")).ok());
  ASSERT_TRUE(sb_->AddHistories({id}, Hist(100, S::kRunning, "new")).ok());
  auto history = sb_->GetHistory(id).value();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].history_json, "new");
}

TEST_P(StateBackendTest, AddHistoriesForManyInvocationsAndEmptyHistory) {
  ASSERT_TRUE(
      sb_->AddHistories({InvocationId("a"), InvocationId("b")}, Hist(5, S::kPending, "j")).ok());
  EXPECT_EQ(sb_->GetHistory(InvocationId("a")).value().size(), 1u);
  auto b = sb_->GetHistory(InvocationId("b")).value();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].invocation_id.str(), "b");
  EXPECT_EQ(b[0].history_json, "j");
  EXPECT_TRUE(sb_->GetHistory(InvocationId("none")).value().empty());
  EXPECT_TRUE(sb_->AddHistories({}, Hist(5, S::kPending)).ok());
}

TEST_P(StateBackendTest, HistoryInRangeIsInclusiveOrderedAndPaged) {
  ASSERT_TRUE(sb_->AddHistories({InvocationId("before")}, Hist(99, S::kRunning)).ok());
  ASSERT_TRUE(sb_->AddHistories({InvocationId("x")}, Hist(130, S::kRunning)).ok());
  ASSERT_TRUE(sb_->AddHistories({InvocationId("y")}, Hist(100, S::kRunning)).ok());
  ASSERT_TRUE(sb_->AddHistories({InvocationId("x")}, Hist(200, S::kSuccess)).ok());
  ASSERT_TRUE(sb_->AddHistories({InvocationId("z")}, Hist(130, S::kPending)).ok());
  ASSERT_TRUE(sb_->AddHistories({InvocationId("after")}, Hist(201, S::kRunning)).ok());

  auto all = sb_->HistoryInRange(100, 200, std::nullopt, 100).value();
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
      auto page = sb_->HistoryInRange(100, 200, after, limit).value();
      EXPECT_LE(page.records.size(), limit);
      for (const auto& h : page.records) paged.emplace_back(h.invocation_id.str(), h.timestamp_us);
      ++pages;
      if (!page.next) break;
      after = page.next;
    }
    EXPECT_EQ(paged, expected) << "limit " << limit;
    EXPECT_EQ(pages, static_cast<int>((expected.size() + limit - 1) / limit)) << "limit " << limit;
  }
  EXPECT_TRUE(sb_->HistoryInRange(300, 400, std::nullopt, 10).value().records.empty());
  EXPECT_TRUE(sb_->HistoryInRange(200, 100, std::nullopt, 10).value().records.empty());
  EXPECT_EQ(sb_->HistoryInRange(0, 1000, std::nullopt, 0).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST_P(StateBackendTest, InvocationsInRangeAreDistinctSortedAndPaged) {
  for (const char* id : {"d", "b", "a", "c"}) {
    ASSERT_TRUE(sb_->AddHistories({InvocationId(id)}, Hist(10, S::kRunning)).ok());
    ASSERT_TRUE(sb_->AddHistories({InvocationId(id)}, Hist(20, S::kSuccess)).ok());
  }
  ASSERT_TRUE(sb_->AddHistories({InvocationId("outside")}, Hist(50, S::kRunning)).ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Strs(sb_->InvocationsInRange(0, 30, std::nullopt, 100).value()),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(sb_->InvocationsInRange(0, 30, std::nullopt, 3).value()), (V{"a", "b", "c"}));
  EXPECT_EQ(Strs(sb_->InvocationsInRange(0, 30, InvocationId("c"), 3).value()), (V{"d"}));
  EXPECT_EQ(Strs(sb_->InvocationsInRange(20, 20, std::nullopt, 100).value()),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(Strs(sb_->InvocationsInRange(21, 49, std::nullopt, 100).value()), V{});
  EXPECT_EQ(sb_->InvocationsInRange(0, 30, std::nullopt, 0).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST_P(StateBackendTest, ResultsAndExceptions) {
  const InvocationId id("inv");
  EXPECT_EQ(sb_->GetResult(id).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sb_->GetException(id).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(sb_->SetResult(id, "r1").ok());
  ASSERT_TRUE(sb_->SetResult(id, "r2").ok());
  EXPECT_EQ(sb_->GetResult(id).value(), "r2");
  EXPECT_EQ(sb_->GetException(id).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(sb_->SetException(id, "e1").ok());
  EXPECT_EQ(sb_->GetException(id).value(), "e1");
  std::string binary("a\0b", 3);
  ASSERT_TRUE(sb_->SetResult(InvocationId("bin"), binary).ok());
  EXPECT_EQ(sb_->GetResult(InvocationId("bin")).value(), binary);
}

RunnerContextRecord Ctx(const std::string& id, std::optional<std::string> parent = std::nullopt) {
  RunnerContextRecord r{RunnerId(id), "Runner", std::nullopt, 42, "host", 7};
  if (parent) r.parent_runner_id = RunnerId(*parent);
  return r;
}

TEST_P(StateBackendTest, RunnerContexts) {
  EXPECT_EQ(sb_->GetRunnerContext(RunnerId("r1")).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(sb_->StoreRunnerContext(Ctx("runner-alpha-1")).ok());
  ASSERT_TRUE(sb_->StoreRunnerContext(Ctx("runner-beta-2", "runner-alpha-1")).ok());
  ASSERT_TRUE(sb_->StoreRunnerContext(Ctx("runner-alpha-3")).ok());
  EXPECT_EQ(sb_->GetRunnerContext(RunnerId("runner-beta-2")).value(),
            Ctx("runner-beta-2", "runner-alpha-1"));
  RunnerContextRecord replaced = Ctx("runner-alpha-3");
  replaced.pid = 99;
  ASSERT_TRUE(sb_->StoreRunnerContext(replaced).ok());
  EXPECT_EQ(sb_->GetRunnerContext(RunnerId("runner-alpha-3")).value().pid, 99);

  auto many = sb_->GetRunnerContexts({RunnerId("runner-alpha-3"), RunnerId("unknown"),
                                      RunnerId("runner-alpha-1"), RunnerId("runner-alpha-3")})
                  .value();
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(many[0].runner_id.str(), "runner-alpha-3");
  EXPECT_EQ(many[1].runner_id.str(), "runner-alpha-1");
  EXPECT_TRUE(sb_->GetRunnerContexts({}).value().empty());

  auto alpha = sb_->MatchRunnerContexts("alpha").value();
  ASSERT_EQ(alpha.size(), 2u);
  EXPECT_EQ(alpha[0].runner_id.str(), "runner-alpha-1");
  EXPECT_EQ(alpha[1].runner_id.str(), "runner-alpha-3");
  EXPECT_EQ(sb_->MatchRunnerContexts("beta").value().size(), 1u);
  EXPECT_TRUE(sb_->MatchRunnerContexts("gamma").value().empty());
  EXPECT_TRUE(sb_->MatchRunnerContexts("ALPHA").value().empty());
  EXPECT_EQ(sb_->MatchRunnerContexts("").value().size(), 3u);
}

TEST_P(StateBackendTest, AppInfoIsPerAppAndDiscoverable) {
  auto other = Open("other-app-for-discovery");
  auto never = Open("never-registered-app");
  EXPECT_EQ(never->GetAppInfo().status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(sb_->StoreAppInfo("test-app", R"({"app_id": "test-app"})").ok());
  ASSERT_TRUE(other->StoreAppInfo("other-app-for-discovery", "info-2").ok());
  EXPECT_EQ(sb_->GetAppInfo().value(), R"({"app_id": "test-app"})");
  EXPECT_EQ(other->GetAppInfo().value(), "info-2");
  EXPECT_EQ(sb_->StoreAppInfo("", "x").code(), ErrorCode::kInvalidArgument);

  auto discovered = DiscoverAppInfos(BackendConfig{GetParam(), "", nullptr}).value();
  auto has = [&](const std::string& app, const std::string& info) {
    return std::find(discovered.begin(), discovered.end(), std::make_pair(app, info)) !=
           discovered.end();
  };
  EXPECT_TRUE(has("test-app", R"({"app_id": "test-app"})"));
  EXPECT_TRUE(has("other-app-for-discovery", "info-2"));
  EXPECT_TRUE(std::is_sorted(discovered.begin(), discovered.end()));
}

TEST_P(StateBackendTest, WorkflowRunsAndTypes) {
  ASSERT_TRUE(sb_->StoreWorkflowRun(Wf("w2", "t1")).ok());
  ASSERT_TRUE(sb_->StoreWorkflowRun(Wf("w1", "t1")).ok());
  ASSERT_TRUE(sb_->StoreWorkflowRun(Wf("w1", "t1")).ok());
  ASSERT_TRUE(sb_->StoreWorkflowRun(Wf("w3", "t2", "w1")).ok());
  EXPECT_EQ(sb_->WorkflowTypes().value(), (std::vector<TaskId>{TaskId("t1"), TaskId("t2")}));
  EXPECT_EQ(sb_->WorkflowRuns(std::nullopt).value(),
            (std::vector<WorkflowRecord>{Wf("w1", "t1"), Wf("w2", "t1"), Wf("w3", "t2", "w1")}));
  EXPECT_EQ(sb_->WorkflowRuns(TaskId("t1")).value(),
            (std::vector<WorkflowRecord>{Wf("w1", "t1"), Wf("w2", "t1")}));
  EXPECT_TRUE(sb_->WorkflowRuns(TaskId("unknown")).value().empty());
  // Re-storing a run under another type moves it.
  ASSERT_TRUE(sb_->StoreWorkflowRun(Wf("w3", "t3")).ok());
  EXPECT_EQ(sb_->WorkflowTypes().value(), (std::vector<TaskId>{TaskId("t1"), TaskId("t3")}));
  EXPECT_TRUE(sb_->WorkflowRuns(TaskId("t2")).value().empty());
}

TEST_P(StateBackendTest, WorkflowSubInvocationsAndData) {
  const WorkflowId wf("wf");
  ASSERT_TRUE(sb_->StoreWorkflowSubInvocation(wf, InvocationId("s2")).ok());
  ASSERT_TRUE(sb_->StoreWorkflowSubInvocation(wf, InvocationId("s1")).ok());
  ASSERT_TRUE(sb_->StoreWorkflowSubInvocation(wf, InvocationId("s2")).ok());
  EXPECT_EQ(Strs(sb_->WorkflowSubInvocations(wf).value()), (std::vector<std::string>{"s2", "s1"}));
  EXPECT_TRUE(sb_->WorkflowSubInvocations(WorkflowId("other")).value().empty());

  EXPECT_EQ(sb_->GetWorkflowData(wf, "k").status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(sb_->SetWorkflowData(wf, "k", "v1").ok());
  ASSERT_TRUE(sb_->SetWorkflowData(wf, "k", "v2").ok());
  EXPECT_EQ(sb_->GetWorkflowData(wf, "k").value(), "v2");
  EXPECT_EQ(sb_->GetWorkflowData(wf, "missing").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sb_->GetWorkflowData(WorkflowId("other"), "k").status().code(), ErrorCode::kNotFound);
}

TEST_P(StateBackendTest, PurgeClearsEverythingButAppInfo) {
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("a", "p", "e", Wf("w", "t"))}).ok());
  ASSERT_TRUE(sb_->AddHistories({InvocationId("a")}, Hist(1, S::kRegistered)).ok());
  ASSERT_TRUE(sb_->SetResult(InvocationId("a"), "r").ok());
  ASSERT_TRUE(sb_->SetException(InvocationId("a"), "e").ok());
  ASSERT_TRUE(sb_->StoreRunnerContext(Ctx("r")).ok());
  ASSERT_TRUE(sb_->StoreAppInfo("test-app", "info").ok());
  ASSERT_TRUE(sb_->StoreWorkflowRun(Wf("w", "t")).ok());
  ASSERT_TRUE(sb_->StoreWorkflowSubInvocation(WorkflowId("w"), InvocationId("a")).ok());
  ASSERT_TRUE(sb_->SetWorkflowData(WorkflowId("w"), "k", "v").ok());

  ASSERT_TRUE(sb_->Purge().ok());
  EXPECT_EQ(sb_->GetInvocation(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(sb_->ChildInvocations(InvocationId("p")).value().empty());
  EXPECT_TRUE(sb_->InvocationsByParentEvent("e").value().empty());
  EXPECT_TRUE(sb_->InvocationIdsByWorkflow("w", std::nullopt).value().empty());
  EXPECT_TRUE(sb_->GetHistory(InvocationId("a")).value().empty());
  EXPECT_TRUE(sb_->HistoryInRange(0, 10, std::nullopt, 10).value().records.empty());
  EXPECT_TRUE(sb_->InvocationsInRange(0, 10, std::nullopt, 10).value().empty());
  EXPECT_EQ(sb_->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sb_->GetException(InvocationId("a")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sb_->GetRunnerContext(RunnerId("r")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(sb_->WorkflowTypes().value().empty());
  EXPECT_TRUE(sb_->WorkflowRuns(std::nullopt).value().empty());
  EXPECT_TRUE(sb_->WorkflowSubInvocations(WorkflowId("w")).value().empty());
  EXPECT_EQ(sb_->GetWorkflowData(WorkflowId("w"), "k").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sb_->GetAppInfo().value(), "info");
  // Usable again after a purge.
  ASSERT_TRUE(sb_->UpsertInvocations({Inv("b", "p")}).ok());
  EXPECT_EQ(Strs(sb_->ChildInvocations(InvocationId("p")).value()), std::vector<std::string>{"b"});
}

TEST_P(StateBackendTest, InstancesDoNotShareData) {
  auto other = Open("test-app");
  ASSERT_TRUE(sb_->SetResult(InvocationId("a"), "r").ok());
  ASSERT_TRUE(other->Purge().ok());
  EXPECT_EQ(sb_->GetResult(InvocationId("a")).value(), "r");
  EXPECT_EQ(other->GetResult(InvocationId("a")).status().code(), ErrorCode::kNotFound);
}

TEST_P(StateBackendTest, ConcurrentWritersAndReaders) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::atomic<bool> stop{false};
  std::atomic<int> reader_errors{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto page = sb_->HistoryInRange(0, 1 << 30, std::nullopt, 50);
      auto kids = sb_->ChildInvocations(InvocationId("parent"));
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
        EXPECT_TRUE(sb_->UpsertInvocations({Inv(id, "parent")}).ok());
        // Timestamps deliberately out of order across threads.
        EXPECT_TRUE(
            sb_->AddHistories({InvocationId(id)}, Hist((kPerThread - i) * 10 + t, S::kRegistered))
                .ok());
        EXPECT_TRUE(sb_->AddHistories({InvocationId(id)}, Hist(100000 + i, S::kPending)).ok());
        EXPECT_TRUE(sb_->SetResult(InvocationId(id), id).ok());
        EXPECT_TRUE(sb_->StoreRunnerContext(Ctx("runner-" + std::to_string(t))).ok());
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_EQ(reader_errors.load(), 0);
  EXPECT_EQ(sb_->ChildInvocations(InvocationId("parent")).value().size(),
            static_cast<std::size_t>(kThreads * kPerThread));
  auto all = sb_->HistoryInRange(0, 1 << 30, std::nullopt, 100000).value();
  EXPECT_EQ(all.records.size(), static_cast<std::size_t>(2 * kThreads * kPerThread));
  EXPECT_EQ(sb_->InvocationsInRange(0, 1 << 30, std::nullopt, 100000).value().size(),
            static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(sb_->GetResult(InvocationId("t3-17")).value(), "t3-17");
  EXPECT_EQ(sb_->MatchRunnerContexts("runner-").value().size(), static_cast<std::size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) {
    auto h = sb_->GetHistory(InvocationId("t" + std::to_string(t) + "-0")).value();
    ASSERT_EQ(h.size(), 2u);
    EXPECT_EQ(h[0].status, S::kRegistered);
    EXPECT_EQ(h[1].status, S::kPending);
  }
}

}  // namespace
}  // namespace pynenc_cpp
