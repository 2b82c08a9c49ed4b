// Compliance suite of the TriggerStore port (OpenTriggerStore): every test runs
// on every backend (testing::AllBackends).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/trigger_store.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp {
namespace {

constexpr TimestampUs kStart = 1'700'000'000'000'000;  // 2023-11-14
constexpr TimestampUs kSec = 1'000'000;

template <typename B>
class TriggerStoreCompliance : public testing::BackendTest<B> {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kStart);
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  // A new store on this backend's storage (for SQLite: the same file).
  std::unique_ptr<TriggerStore> Open(const std::string& app_id = "compliance-app") {
    auto opened = OpenTriggerStore(this->backend_.Config(clock_, app_id));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }

  EventRow Event(const std::string& id, TimestampUs ts, const std::string& code = "code") {
    EventRow row;
    row.event_id = id;
    row.event_code = code;
    row.timestamp_us = ts;
    row.json = "{\"event_id\": \"" + id + "\"}";
    return row;
  }

  TriggerRunRow Run(const std::string& id, std::optional<TimestampUs> executed,
                    std::vector<std::string> event_ids = {}) {
    TriggerRunRow row;
    row.trigger_run_id = id;
    row.trigger_id = "trig";
    row.task_id_key = "tasks.x";
    row.logic = "and";
    row.executed_at_us = executed;
    row.json = "run:" + id;
    row.event_ids = std::move(event_ids);
    return row;
  }

  std::vector<std::string> EventJsons(const EventFilter& f, std::int64_t limit = 100,
                                      std::int64_t offset = 0) {
    auto r = store_->GetEvents(f, limit, offset);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    for (const auto& e : r.value()) out.push_back(e.json);
    return out;
  }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<TriggerStore> store_;
};

TYPED_TEST_SUITE(TriggerStoreCompliance, testing::AllBackends, testing::BackendNames);

// Reopening and cross-process cases, for backends that are durable and shared.
template <typename B>
class TriggerStoreDurable : public TriggerStoreCompliance<B> {};
TYPED_TEST_SUITE(TriggerStoreDurable, testing::DurableBackends, testing::BackendNames);

std::string J(const std::string& id) { return "{\"event_id\": \"" + id + "\"}"; }

// ---- Opening ---------------------------------------------------------------

TEST(TriggerStoreOpenTest, BadUriIsBadConfig) {
  auto opened = OpenTriggerStore(BackendConfig{"nope://x", "app", nullptr});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kBadConfig);
}

TEST(TriggerStoreOpenTest, ParseEventMarkerState) {
  EXPECT_EQ(ParseEventMarkerState("all").value(), EventMarkerState::kAll);
  EXPECT_EQ(ParseEventMarkerState("matched").value(), EventMarkerState::kMatched);
  EXPECT_EQ(ParseEventMarkerState("unmatched").value(), EventMarkerState::kUnmatched);
  EXPECT_EQ(ParseEventMarkerState("triggered").value(), EventMarkerState::kTriggered);
  EXPECT_EQ(ParseEventMarkerState("untriggered").value(), EventMarkerState::kUntriggered);
  auto bad = ParseEventMarkerState("bogus");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

// An SQLite file whose trigger schema has another version, or a path that is a
// directory, is refused with kBadConfig instead of being used.
TEST(TriggerStoreOpenTest, SqliteRefusesUnknownSchemaAndDirectories) {
  testing::SqliteBackend backend;
  ASSERT_TRUE(OpenTriggerStore(backend.Config()).ok());
  auto db = sqlite::OpenDatabase(backend.Config());
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.value()
                  ->Write([](sqlite::Conn& c) {
                    return c.Exec(
                        "UPDATE pynenc_cpp_schema SET version = 99 WHERE component = 'trigger'");
                  })
                  .ok());
  auto newer = OpenTriggerStore(backend.Config());
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(newer.status().message().find("trigger"), std::string::npos);

  const std::string dir = backend.Path() + ".d";
  std::filesystem::create_directory(dir);
  auto opened = OpenTriggerStore(BackendConfig{"sqlite://" + dir, "app", nullptr});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kBadConfig);
}

// ---- Conditions ------------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, ConditionsRoundTripInRegistrationOrder) {
  EXPECT_EQ(this->store_->GetCondition("c1").value(), std::nullopt);
  ASSERT_TRUE(this->store_->RegisterCondition("c2", "j2", "Cron").ok());
  ASSERT_TRUE(this->store_->RegisterCondition("c1", "j1", "Status").ok());
  ASSERT_TRUE(this->store_->RegisterCondition("c2", "j2b", "Cron").ok());  // replace keeps position
  EXPECT_EQ(this->store_->GetCondition("c2").value(), "j2b");
  EXPECT_EQ(this->store_->AllConditions().value(), (std::vector<std::string>{"j2b", "j1"}));
}

TYPED_TEST(TriggerStoreCompliance, SourceTaskConditionsFilterByContextTypeAndSkipUnknown) {
  ASSERT_TRUE(this->store_->RegisterCondition("s", "js", "Status").ok());
  ASSERT_TRUE(this->store_->RegisterCondition("r", "jr", "Result").ok());
  ASSERT_TRUE(this->store_->RegisterSourceTaskCondition("t", "s").ok());
  ASSERT_TRUE(this->store_->RegisterSourceTaskCondition("t", "r").ok());
  ASSERT_TRUE(this->store_->RegisterSourceTaskCondition("t", "s").ok());        // idempotent
  ASSERT_TRUE(this->store_->RegisterSourceTaskCondition("t", "missing").ok());  // not registered
  EXPECT_EQ(this->store_->ConditionsSourcedFromTask("t", std::nullopt).value(),
            (std::vector<std::string>{"js", "jr"}));
  EXPECT_EQ(this->store_->ConditionsSourcedFromTask("t", "Result").value(),
            (std::vector<std::string>{"jr"}));
  EXPECT_TRUE(this->store_->ConditionsSourcedFromTask("other", std::nullopt).value().empty());
}

// ---- Triggers --------------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, TriggersRegisterGetAndLinkToConditions) {
  TriggerDefinitionRow t1{"t1", "tasks.a", {"c1", "c2", "c1"}, "and", "{\"p\": 1}"};
  TriggerDefinitionRow t2{"t2", "tasks.b", {"c1"}, "or", std::nullopt};
  ASSERT_TRUE(this->store_->RegisterTrigger(t1).ok());
  ASSERT_TRUE(this->store_->RegisterTrigger(t2).ok());
  auto got = this->store_->GetTrigger("t1").value();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->condition_ids, (std::vector<std::string>{"c1", "c2"}));  // duplicates dropped
  EXPECT_EQ(got->argument_provider_json, "{\"p\": 1}");
  EXPECT_EQ(this->store_->GetTrigger("nope").value(), std::nullopt);

  auto for_c1 = this->store_->TriggersForCondition("c1").value();
  ASSERT_EQ(for_c1.size(), 2u);
  EXPECT_EQ(for_c1[0].trigger_id, "t1");
  EXPECT_EQ(for_c1[1], t2);
  EXPECT_TRUE(this->store_->TriggersForCondition("c3").value().empty());

  // Re-registering with other conditions moves the links.
  ASSERT_TRUE(this->store_->RegisterTrigger({"t1", "tasks.a", {"c3"}, "and", std::nullopt}).ok());
  EXPECT_EQ(this->store_->TriggersForCondition("c2").value().size(), 0u);
  EXPECT_EQ(this->store_->TriggersForCondition("c3").value().size(), 1u);
  EXPECT_EQ(this->store_->TriggersForCondition("c1").value().size(), 1u);
}

TYPED_TEST(TriggerStoreCompliance, CleanTaskTriggersRemovesOnlyThatTask) {
  ASSERT_TRUE(this->store_->RegisterTrigger({"t1", "tasks.a", {"c1"}, "and", std::nullopt}).ok());
  ASSERT_TRUE(this->store_->RegisterTrigger({"t2", "tasks.a", {"c2"}, "and", std::nullopt}).ok());
  ASSERT_TRUE(this->store_->RegisterTrigger({"t3", "tasks.b", {"c1"}, "and", std::nullopt}).ok());
  EXPECT_EQ(this->store_->CleanTaskTriggers("tasks.a").value(), 2);
  EXPECT_EQ(this->store_->GetTrigger("t1").value(), std::nullopt);
  EXPECT_EQ(this->store_->GetTrigger("t2").value(), std::nullopt);
  auto for_c1 = this->store_->TriggersForCondition("c1").value();
  ASSERT_EQ(for_c1.size(), 1u);
  EXPECT_EQ(for_c1[0].trigger_id, "t3");
  EXPECT_EQ(this->store_->CleanTaskTriggers("tasks.none").value(), 0);
}

// ---- Valid conditions ------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, ValidConditionsRecordReplaceAndClear) {
  ASSERT_TRUE(this->store_->RecordValidConditions({{"v1", "a"}, {"v2", "b"}}).ok());
  ASSERT_TRUE(this->store_->RecordValidConditions({{"v1", "a2"}, {"v3", "c"}}).ok());
  EXPECT_EQ(this->store_->ValidConditions().value(),
            (std::vector<IdJson>{{"v1", "a2"}, {"v2", "b"}, {"v3", "c"}}));
  ASSERT_TRUE(this->store_->ClearValidConditions({"v2", "unknown"}).ok());
  EXPECT_EQ(this->store_->ValidConditions().value(),
            (std::vector<IdJson>{{"v1", "a2"}, {"v3", "c"}}));
  ASSERT_TRUE(this->store_->ClearValidConditions({}).ok());
  EXPECT_EQ(this->store_->ValidConditions().value().size(), 2u);
}

// ---- Pending reports -------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, PendingReportsNoteReplaceListAndClear) {
  EXPECT_TRUE(this->store_->PendingReports().value().empty());
  ASSERT_TRUE(this->store_->NotePendingReports({{"n2", "b"}, {"n1", "a"}}).ok());
  ASSERT_TRUE(this->store_->NotePendingReports({{"n2", "b2"}, {"n3", "c"}}).ok());
  EXPECT_EQ(this->store_->PendingReports().value(),
            (std::vector<IdJson>{{"n1", "a"}, {"n2", "b2"}, {"n3", "c"}}));
  ASSERT_TRUE(this->store_->ClearPendingReports({"n2", "unknown"}).ok());
  EXPECT_EQ(this->store_->PendingReports().value(),
            (std::vector<IdJson>{{"n1", "a"}, {"n3", "c"}}));
  ASSERT_TRUE(this->store_->ClearPendingReports({}).ok());
  ASSERT_TRUE(this->store_->NotePendingReports({}).ok());
  EXPECT_EQ(this->store_->PendingReports().value().size(), 2u);
  // Apart from the valid conditions: neither sees the other's rows.
  EXPECT_TRUE(this->store_->ValidConditions().value().empty());
  ASSERT_TRUE(this->store_->Purge().ok());
  EXPECT_TRUE(this->store_->PendingReports().value().empty());
}

// ---- Cron ------------------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, CronCompareAndSet) {
  EXPECT_EQ(this->store_->LastCronExecution("c").value(), std::nullopt);
  EXPECT_FALSE(this->store_->StoreLastCronExecution("c", 10, CronExpectation::Value(5)).value());
  EXPECT_TRUE(this->store_->StoreLastCronExecution("c", 10, CronExpectation::Absent()).value());
  EXPECT_FALSE(this->store_->StoreLastCronExecution("c", 20, CronExpectation::Absent()).value());
  EXPECT_FALSE(this->store_->StoreLastCronExecution("c", 20, CronExpectation::Value(9)).value());
  EXPECT_EQ(this->store_->LastCronExecution("c").value(), 10);
  EXPECT_TRUE(this->store_->StoreLastCronExecution("c", 20, CronExpectation::Value(10)).value());
  EXPECT_TRUE(this->store_->StoreLastCronExecution("c", 5, CronExpectation::Any()).value());
  EXPECT_EQ(this->store_->LastCronExecution("c").value(), 5);
}

TYPED_TEST(TriggerStoreCompliance, CronExecutionSurvivesConditionReRegistration) {
  ASSERT_TRUE(this->store_->RegisterCondition("c", "j", "Cron").ok());
  ASSERT_TRUE(this->store_->StoreLastCronExecution("c", 7, CronExpectation::Absent()).value());
  ASSERT_TRUE(this->store_->RegisterCondition("c", "j2", "Cron").ok());
  EXPECT_EQ(this->store_->LastCronExecution("c").value(), 7);
}

// Many threads race to move the same cron tick; exactly one wins each round.
TYPED_TEST(TriggerStoreCompliance, CronCompareAndSetRaceHasExactlyOneWinner) {
  constexpr int kThreads = 16;
  constexpr int kRounds = 50;
  std::optional<TimestampUs> previous;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> winners{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        CronExpectation expected =
            previous ? CronExpectation::Value(*previous) : CronExpectation::Absent();
        auto r = this->store_->StoreLastCronExecution("cron", round * 1000 + t, expected);
        ASSERT_TRUE(r.ok());
        if (r.value()) winners.fetch_add(1);
      });
    }
    go.store(true);
    for (auto& th : threads) th.join();
    ASSERT_EQ(winners.load(), 1) << "round " << round;
    previous = this->store_->LastCronExecution("cron").value();
    ASSERT_TRUE(previous.has_value());
    EXPECT_GE(*previous, round * 1000);
    EXPECT_LT(*previous, round * 1000 + kThreads);
  }
}

// ---- Claims ----------------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, ClaimExpiresWithTheClock) {
  EXPECT_TRUE(this->store_->ClaimTriggerRun("r", 60).value());
  EXPECT_FALSE(this->store_->ClaimTriggerRun("r", 60).value());
  EXPECT_TRUE(this->store_->ClaimTriggerRun("other", 60).value());
  this->clock_->Advance(59 * kSec);
  EXPECT_FALSE(this->store_->ClaimTriggerRun("r", 60).value());
  this->clock_->Advance(1 * kSec);  // expiration == now: expired
  EXPECT_TRUE(this->store_->ClaimTriggerRun("r", 10).value());
  EXPECT_FALSE(this->store_->ClaimTriggerRun("r", 10).value());
}

TYPED_TEST(TriggerStoreCompliance, ClaimRejectsBadExpiration) {
  auto r = this->store_->ClaimTriggerRun("r", -1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(this->store_->ClaimTriggerRun("r", 0).value());
  EXPECT_TRUE(this->store_->ClaimTriggerRun("r", 0).value());  // zero-length claim expires at once
}

TYPED_TEST(TriggerStoreCompliance, ManyClaimsSweepExpiredEntries) {
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(this->store_->ClaimTriggerRun("run-" + std::to_string(i), 1).value());
    if (i % 500 == 0) this->clock_->Advance(2 * kSec);
  }
  EXPECT_FALSE(this->store_->ClaimTriggerRun("run-2999", 1).value());
  this->clock_->Advance(2 * kSec);
  EXPECT_TRUE(this->store_->ClaimTriggerRun("run-2999", 1).value());
}

TYPED_TEST(TriggerStoreCompliance, RacingClaimsHaveExactlyOneWinnerUntilExpiry) {
  constexpr int kThreads = 16;
  for (int phase = 0; phase < 2; ++phase) {
    std::atomic<int> winners{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        while (!go.load()) std::this_thread::yield();
        for (int k = 0; k < 20; ++k) {
          auto r = this->store_->ClaimTriggerRun("shared", 30);
          ASSERT_TRUE(r.ok());
          if (r.value()) winners.fetch_add(1);
        }
      });
    }
    go.store(true);
    for (auto& th : threads) th.join();
    EXPECT_EQ(winners.load(), 1) << "phase " << phase;
    this->clock_->Advance(31 * kSec);  // the claim expires: the next phase has one new winner
  }
}

// ---- Events ----------------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, EventRoundTripAndLinks) {
  EXPECT_EQ(this->store_->GetEvent("e").value(), std::nullopt);
  EventRow row = this->Event("e", kStart);
  row.triggered_invocation_ids = {"i1", "i1", "i2"};
  ASSERT_TRUE(this->store_->StoreEvent(row).ok());
  auto got = this->store_->GetEvent("e").value();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->json, J("e"));
  EXPECT_EQ(got->triggered_invocation_ids, (std::vector<std::string>{"i1", "i2"}));

  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"e", "not-stored"}, "i3", "run").ok());
  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"e"}, "i1", "run").ok());  // once per pair
  EXPECT_EQ(this->store_->InvocationsTriggeredByEvent("e").value(),
            (std::vector<std::string>{"i1", "i2", "i3"}));
  EXPECT_EQ(this->store_->InvocationsTriggeredByEvent("not-stored").value(),
            (std::vector<std::string>{"i3"}));
  // Re-storing the event keeps its links.
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("e", kStart)).ok());
  EXPECT_EQ(this->store_->GetEvent("e").value()->triggered_invocation_ids.size(), 3u);
  EXPECT_TRUE(this->store_->InvocationsTriggeredByEvent("unknown").value().empty());
}

TYPED_TEST(TriggerStoreCompliance, GetEventsFiltersOrdersAndPages) {
  EventRow a = this->Event("a", kStart + 1 * kSec, "x");
  a.matched = true;
  a.emitted_by_invocation_id = "inv-1";
  a.emitted_by_task_id = "tasks.t";
  EventRow b = this->Event("b", kStart + 2 * kSec, "y");
  EventRow c = this->Event("c", kStart + 3 * kSec, "x");
  c.emitted_by_invocation_id = "inv-1";
  EventRow d = this->Event("d", kStart + 3 * kSec, "x");  // same time as c: id breaks the tie
  for (const auto& e : {a, b, c, d}) ASSERT_TRUE(this->store_->StoreEvent(e).ok());
  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"b"}, "inv-9", "r").ok());

  EXPECT_EQ(this->EventJsons({}), (std::vector<std::string>{J("d"), J("c"), J("b"), J("a")}));
  EventFilter code_x;
  code_x.event_code = "x";
  EXPECT_EQ(this->EventJsons(code_x), (std::vector<std::string>{J("d"), J("c"), J("a")}));
  EventFilter window;
  window.start_us = kStart + 2 * kSec;
  window.end_us = kStart + 2 * kSec;
  EXPECT_EQ(this->EventJsons(window), (std::vector<std::string>{J("b")}));
  EventFilter from;
  from.start_us = kStart + 2 * kSec;
  EXPECT_EQ(this->store_->CountEvents(from).value(), 3);
  EventFilter until;
  until.end_us = kStart + 2 * kSec;
  EXPECT_EQ(this->EventJsons(until), (std::vector<std::string>{J("b"), J("a")}));
  EventFilter matched;
  matched.matched = true;
  EXPECT_EQ(this->EventJsons(matched), (std::vector<std::string>{J("a")}));
  matched.matched = false;
  EXPECT_EQ(this->store_->CountEvents(matched).value(), 3);
  EventFilter triggered;
  triggered.triggered = true;
  EXPECT_EQ(this->EventJsons(triggered), (std::vector<std::string>{J("b")}));
  triggered.triggered = false;
  EXPECT_EQ(this->store_->CountEvents(triggered).value(), 3);
  EventFilter emitter;
  emitter.emitted_by_invocation_id = "inv-1";
  EXPECT_EQ(this->EventJsons(emitter), (std::vector<std::string>{J("c"), J("a")}));
  emitter.event_code = "y";
  EXPECT_EQ(this->store_->CountEvents(emitter).value(), 0);
  EventFilter by_task;
  by_task.emitted_by_task_id = "tasks.t";
  EXPECT_EQ(this->EventJsons(by_task), (std::vector<std::string>{J("a")}));
  EventFilter unknown_code;
  unknown_code.event_code = "zzz";
  EXPECT_EQ(this->store_->CountEvents(unknown_code).value(), 0);

  EXPECT_EQ(this->EventJsons({}, 2, 1), (std::vector<std::string>{J("c"), J("b")}));
  EXPECT_EQ(this->EventJsons({}, 0, 0).size(), 0u);
  EXPECT_EQ(this->EventJsons({}, 10, 10).size(), 0u);
  EXPECT_EQ(this->store_->CountEvents({}).value(), 4);
  EXPECT_EQ(this->store_->GetEvents({}, -1, 0).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->store_->GetEvents({}, 1, -1).status().code(), ErrorCode::kInvalidArgument);
}

TYPED_TEST(TriggerStoreCompliance, RestoringAnEventMovesItInTheIndexes) {
  EventRow e = this->Event("e", kStart, "old");
  e.emitted_by_invocation_id = "inv";
  ASSERT_TRUE(this->store_->StoreEvent(e).ok());
  e.event_code = "new";
  e.emitted_by_invocation_id.reset();
  e.timestamp_us = kStart + 5 * kSec;
  ASSERT_TRUE(this->store_->StoreEvent(e).ok());
  EXPECT_EQ(this->store_->EventCodes().value(), (std::vector<std::string>{"new"}));
  EventFilter old_code;
  old_code.event_code = "old";
  EXPECT_EQ(this->store_->CountEvents(old_code).value(), 0);
  EventFilter emitter;
  emitter.emitted_by_invocation_id = "inv";
  EXPECT_EQ(this->store_->CountEvents(emitter).value(), 0);
  EventFilter late;
  late.start_us = kStart + 5 * kSec;
  EXPECT_EQ(this->store_->CountEvents(late).value(), 1);
}

TYPED_TEST(TriggerStoreCompliance, EventMarkersWindowStateAndPaging) {
  EventRow a = this->Event("a", kStart + 1, "x");
  a.matched = true;
  a.emitted_by_runner_context_id = "ctx";
  ASSERT_TRUE(this->store_->StoreEvent(a).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("b", kStart + 2, "y")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("c", kStart + 3, "x")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("outside", kStart + 100, "x")).ok());
  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"c"}, "inv", "r").ok());

  auto all =
      this->store_->EventMarkers(kStart, kStart + 3, std::nullopt, EventMarkerState::kAll, 10, 0)
          .value();
  ASSERT_EQ(all.markers.size(), 3u);
  EXPECT_EQ(all.total, 3);
  EXPECT_FALSE(all.truncated);
  EXPECT_EQ(all.markers[0].event_id, "a");  // oldest first
  EXPECT_TRUE(all.markers[0].matched);
  EXPECT_EQ(all.markers[0].emitted_by_runner_context_id, "ctx");
  EXPECT_TRUE(all.markers[2].triggered);

  auto page =
      this->store_->EventMarkers(kStart, kStart + 3, std::nullopt, EventMarkerState::kAll, 1, 1)
          .value();
  ASSERT_EQ(page.markers.size(), 1u);
  EXPECT_EQ(page.markers[0].event_id, "b");
  EXPECT_EQ(page.total, 3);
  EXPECT_TRUE(page.truncated);

  auto count_of = [&](std::optional<std::string> code, EventMarkerState state) {
    return this->store_->EventMarkers(kStart, kStart + 3, code, state, 10, 0).value().total;
  };
  EXPECT_EQ(count_of(std::nullopt, EventMarkerState::kMatched), 1);
  EXPECT_EQ(count_of(std::nullopt, EventMarkerState::kUnmatched), 2);
  EXPECT_EQ(count_of(std::nullopt, EventMarkerState::kTriggered), 1);
  EXPECT_EQ(count_of(std::nullopt, EventMarkerState::kUntriggered), 2);
  EXPECT_EQ(count_of("x", EventMarkerState::kAll), 2);
  EXPECT_EQ(
      this->store_->EventMarkers(0, 1, std::nullopt, EventMarkerState::kAll, -1, 0).status().code(),
      ErrorCode::kInvalidArgument);
}

TYPED_TEST(TriggerStoreCompliance, EventCodesAreDistinctAndSorted) {
  EXPECT_TRUE(this->store_->EventCodes().value().empty());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("1", kStart, "b")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("2", kStart, "a")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("3", kStart, "a")).ok());
  EXPECT_EQ(this->store_->EventCodes().value(), (std::vector<std::string>{"a", "b"}));
}

// ---- Trigger runs ----------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, TriggerRunsAndTheirIndexes) {
  EXPECT_EQ(this->store_->GetTriggerRun("r").value(), std::nullopt);
  TriggerRunRow r1 = this->Run("r1", kStart + 2, {"e1"});
  r1.triggered_invocation_id = "inv-1";
  r1.source_invocation_ids = {"src-A"};
  r1.valid_condition_ids = {"vc-1"};
  r1.atomic_service_run_id = "asr-2";
  TriggerRunRow r2 = this->Run("r2", kStart + 1, {"e1", "e2"});
  r2.triggered_invocation_id = "inv-2";
  r2.source_invocation_ids = {"src-A", "src-B"};
  r2.atomic_service_run_id = "asr-1";
  TriggerRunRow r3 = this->Run("r3", std::nullopt);
  r3.claimed_at_us = kStart + 3;
  r3.atomic_service_run_id = "asr-1";
  for (const auto& r : {r1, r2, r3}) ASSERT_TRUE(this->store_->StoreTriggerRun(r).ok());

  EXPECT_EQ(this->store_->GetTriggerRun("r1").value(), "run:r1");
  EXPECT_EQ(this->store_->RunsForEvent("e1").value(),
            (std::vector<std::string>{"run:r2", "run:r1"}));
  EXPECT_EQ(this->store_->RunsForEvent("e2").value(), (std::vector<std::string>{"run:r2"}));
  EXPECT_EQ(this->store_->RunsForInvocation("inv-1").value(), (std::vector<std::string>{"run:r1"}));
  EXPECT_EQ(this->store_->RunsSourcedByInvocation("src-A").value(),
            (std::vector<std::string>{"run:r2", "run:r1"}));
  EXPECT_TRUE(this->store_->RunsSourcedByInvocation("inv-1").value().empty());
  EXPECT_EQ(this->store_->RunsForValidCondition("vc-1").value(),
            (std::vector<std::string>{"run:r1"}));
  EXPECT_EQ(this->store_->ReferencedAtomicServiceRunIds().value(),
            (std::vector<std::string>{"asr-1", "asr-2"}));

  // Replacing a run replaces its indexes.
  TriggerRunRow r1b = this->Run("r1", kStart + 2, {"e3"});
  ASSERT_TRUE(this->store_->StoreTriggerRun(r1b).ok());
  EXPECT_EQ(this->store_->RunsForEvent("e1").value(), (std::vector<std::string>{"run:r2"}));
  EXPECT_TRUE(this->store_->RunsForInvocation("inv-1").value().empty());
  EXPECT_EQ(this->store_->RunsForEvent("e3").value(), (std::vector<std::string>{"run:r1"}));
}

TYPED_TEST(TriggerStoreCompliance, TriggerRunsInTimeRange) {
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("e1", kStart, "code-a")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("e2", kStart, "code-b")).ok());
  TriggerRunRow r1 = this->Run("r1", kStart + 10, {"e1"});
  TriggerRunRow r2 = this->Run("r2", kStart + 20, {"e2"});
  r2.task_id_key = "tasks.y";
  TriggerRunRow r3 = this->Run("r3", std::nullopt);  // claimed only
  r3.claimed_at_us = kStart + 30;
  TriggerRunRow r4 = this->Run("r4", std::nullopt);  // no time: never in a window
  for (const auto& r : {r1, r2, r3, r4}) ASSERT_TRUE(this->store_->StoreTriggerRun(r).ok());

  auto in = [&](TriggerRunFilter f) { return this->store_->RunsInTimeRange(f).value(); };
  TriggerRunFilter all{
      std::numeric_limits<TimestampUs>::min(), std::numeric_limits<TimestampUs>::max(), {}, {}, {}};
  EXPECT_EQ(in(all), (std::vector<std::string>{"run:r1", "run:r2", "run:r3"}));
  EXPECT_EQ(in({kStart + 10, kStart + 20, {}, {}, {}}),
            (std::vector<std::string>{"run:r1", "run:r2"}));
  EXPECT_EQ(in({kStart, kStart + 100, "code-b", {}, {}}), (std::vector<std::string>{"run:r2"}));
  EXPECT_EQ(in({kStart, kStart + 100, {}, "tasks.y", {}}), (std::vector<std::string>{"run:r2"}));
  EXPECT_EQ(in({kStart, kStart + 100, {}, {}, 2}), (std::vector<std::string>{"run:r1", "run:r2"}));
  EXPECT_TRUE(in({kStart, kStart + 100, {}, {}, 0}).empty());
  EXPECT_EQ(this->store_->RunsInTimeRange({0, 1, {}, {}, -1}).status().code(),
            ErrorCode::kInvalidArgument);
}

// ---- Retention -------------------------------------------------------------

TYPED_TEST(TriggerStoreCompliance, AgePurgeEventsDropsOldEventsAndTheirLinks) {
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("old2", kStart - 2, "a")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("old1", kStart - 1, "b")).ok());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("edge", kStart, "c")).ok());
  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"old1"}, "inv", "r").ok());
  EXPECT_EQ(this->store_->AgePurgeEvents(kStart).value(),
            (std::vector<std::string>{"old2", "old1"}));
  EXPECT_EQ(this->store_->GetEvent("old1").value(), std::nullopt);
  EXPECT_TRUE(this->store_->InvocationsTriggeredByEvent("old1").value().empty());
  EXPECT_EQ(this->store_->EventCodes().value(), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(this->store_->AgePurgeEvents(kStart).value().empty());
}

TYPED_TEST(TriggerStoreCompliance, AgePurgeTriggerRunsUsesExecutedElseClaimed) {
  TriggerRunRow claimed_old = this->Run("claimed_old", std::nullopt);
  claimed_old.claimed_at_us = kStart - 10;
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("old", kStart - 1, {"e"})).ok());
  ASSERT_TRUE(this->store_->StoreTriggerRun(claimed_old).ok());
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("timeless", std::nullopt)).ok());
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("fresh", kStart)).ok());
  EXPECT_EQ(this->store_->AgePurgeTriggerRuns(kStart).value(), 2);
  EXPECT_EQ(this->store_->GetTriggerRun("old").value(), std::nullopt);
  EXPECT_EQ(this->store_->GetTriggerRun("claimed_old").value(), std::nullopt);
  EXPECT_TRUE(this->store_->GetTriggerRun("timeless").value().has_value());
  EXPECT_TRUE(this->store_->GetTriggerRun("fresh").value().has_value());
  EXPECT_TRUE(this->store_->RunsForEvent("e").value().empty());
}

TYPED_TEST(TriggerStoreCompliance, CapPurgeKeepsNewest) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(this->store_->StoreEvent(this->Event("e" + std::to_string(i), kStart + i)).ok());
    ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("r" + std::to_string(i), kStart + i)).ok());
  }
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("timeless", std::nullopt)).ok());
  EXPECT_TRUE(this->store_->CapPurgeEvents(0).value().empty());  // no cap
  EXPECT_TRUE(this->store_->CapPurgeEvents(10).value().empty());
  EXPECT_EQ(this->store_->CapPurgeEvents(2).value(), (std::vector<std::string>{"e1", "e0"}));
  EXPECT_EQ(this->store_->CountEvents({}).value(), 2);
  EXPECT_EQ(this->store_->CapPurgeTriggerRuns(0).value(), 0);
  EXPECT_EQ(this->store_->CapPurgeTriggerRuns(3).value(), 2);  // timeless and r0 go
  EXPECT_EQ(this->store_->GetTriggerRun("timeless").value(), std::nullopt);
  EXPECT_EQ(this->store_->GetTriggerRun("r0").value(), std::nullopt);
  EXPECT_TRUE(this->store_->GetTriggerRun("r1").value().has_value());
}

TYPED_TEST(TriggerStoreCompliance, CascadeDeletesRunsReferencingEvents) {
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("r1", kStart, {"e1"})).ok());
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("r2", kStart, {"e1", "e2"})).ok());
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("r3", kStart, {"e3"})).ok());
  EXPECT_EQ(this->store_->CascadeDeleteRunsForEvents({"e1", "e2", "e1"}).value(), 2);
  EXPECT_EQ(this->store_->GetTriggerRun("r2").value(), std::nullopt);
  EXPECT_TRUE(this->store_->GetTriggerRun("r3").value().has_value());
  EXPECT_EQ(this->store_->CascadeDeleteRunsForEvents({}).value(), 0);
}

TYPED_TEST(TriggerStoreCompliance, PurgeDropsEverything) {
  ASSERT_TRUE(this->store_->RegisterCondition("c", "j", "Cron").ok());
  ASSERT_TRUE(this->store_->RegisterSourceTaskCondition("t", "c").ok());
  ASSERT_TRUE(this->store_->RegisterTrigger({"t1", "tasks.a", {"c"}, "and", std::nullopt}).ok());
  ASSERT_TRUE(this->store_->RecordValidConditions({{"v", "j"}}).ok());
  ASSERT_TRUE(this->store_->StoreLastCronExecution("c", 1, CronExpectation::Absent()).value());
  ASSERT_TRUE(this->store_->ClaimTriggerRun("r", 60).value());
  ASSERT_TRUE(this->store_->StoreEvent(this->Event("e", kStart)).ok());
  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"e"}, "i", "r").ok());
  ASSERT_TRUE(this->store_->StoreTriggerRun(this->Run("r", kStart, {"e"})).ok());

  ASSERT_TRUE(this->store_->Purge().ok());
  EXPECT_TRUE(this->store_->AllConditions().value().empty());
  EXPECT_TRUE(this->store_->ConditionsSourcedFromTask("t", std::nullopt).value().empty());
  EXPECT_EQ(this->store_->GetTrigger("t1").value(), std::nullopt);
  EXPECT_TRUE(this->store_->TriggersForCondition("c").value().empty());
  EXPECT_TRUE(this->store_->ValidConditions().value().empty());
  EXPECT_EQ(this->store_->LastCronExecution("c").value(), std::nullopt);
  EXPECT_TRUE(this->store_->ClaimTriggerRun("r", 60).value());
  EXPECT_EQ(this->store_->GetEvent("e").value(), std::nullopt);
  EXPECT_TRUE(this->store_->InvocationsTriggeredByEvent("e").value().empty());
  EXPECT_TRUE(this->store_->EventCodes().value().empty());
  EXPECT_EQ(this->store_->GetTriggerRun("r").value(), std::nullopt);
  EXPECT_TRUE(this->store_->RunsForEvent("e").value().empty());
}

// Writers and readers of every kind at once: no crash, consistent counts.
TYPED_TEST(TriggerStoreCompliance, ConcurrentMixedUseStaysConsistent) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        ASSERT_TRUE(
            this->store_->StoreEvent(this->Event("e" + id, kStart + i, "c" + std::to_string(t)))
                .ok());
        ASSERT_TRUE(
            this->store_->StoreTriggerRun(this->Run("r" + id, kStart + i, {"e" + id})).ok());
        ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"e" + id}, "i" + id, "r" + id).ok());
        ASSERT_TRUE(this->store_->RecordValidConditions({{"v" + id, "j"}}).ok());
        ASSERT_TRUE(this->store_->GetEvents({}, 5, 0).ok());
        ASSERT_TRUE(this->store_->CountEvents({}).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(this->store_->CountEvents({}).value(), kThreads * kPerThread);
  EventFilter triggered;
  triggered.triggered = true;
  EXPECT_EQ(this->store_->CountEvents(triggered).value(), kThreads * kPerThread);
  EXPECT_EQ(this->store_->ValidConditions().value().size(),
            static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(this->store_->EventCodes().value().size(), static_cast<std::size_t>(kThreads));
}

// ---- Storage: apps, reopening, processes -----------------------------------

// Two apps in one store location see none of each other's data, and purging one
// leaves the other intact.
TYPED_TEST(TriggerStoreCompliance, AppsSharingStorageAreIsolated) {
  std::unique_ptr<TriggerStore> other = this->Open("other-app");
  ASSERT_NE(other, nullptr);
  for (TriggerStore* store : {this->store_.get(), other.get()}) {
    ASSERT_TRUE(store->RegisterCondition("c", "j", "Cron").ok());
    ASSERT_TRUE(store->RegisterSourceTaskCondition("t", "c").ok());
    ASSERT_TRUE(store->RegisterTrigger({"t1", "tasks.a", {"c"}, "and", std::nullopt}).ok());
    ASSERT_TRUE(store->RecordValidConditions({{"v", "j"}}).ok());
    ASSERT_TRUE(store->StoreEvent(this->Event("e", kStart)).ok());
    ASSERT_TRUE(store->LinkTriggerRunToEvents({"e"}, "i", "r").ok());
    ASSERT_TRUE(store->StoreTriggerRun(this->Run("r", kStart, {"e"})).ok());
  }
  // Claims and cron ticks are per app: both apps win their own.
  EXPECT_TRUE(this->store_->ClaimTriggerRun("r", 60).value());
  EXPECT_TRUE(other->ClaimTriggerRun("r", 60).value());
  EXPECT_TRUE(this->store_->StoreLastCronExecution("c", 1, CronExpectation::Absent()).value());
  EXPECT_TRUE(other->StoreLastCronExecution("c", 2, CronExpectation::Absent()).value());
  EXPECT_EQ(this->store_->LastCronExecution("c").value(), 1);
  EXPECT_EQ(other->LastCronExecution("c").value(), 2);
  EXPECT_EQ(this->store_->AllConditions().value().size(), 1u);
  EXPECT_EQ(this->store_->TriggersForCondition("c").value().size(), 1u);
  EXPECT_EQ(this->store_->CountEvents({}).value(), 1);
  EXPECT_EQ(this->store_->InvocationsTriggeredByEvent("e").value().size(), 1u);
  EXPECT_EQ(this->store_->RunsForEvent("e").value().size(), 1u);

  ASSERT_TRUE(this->store_->Purge().ok());
  EXPECT_TRUE(this->store_->AllConditions().value().empty());
  EXPECT_EQ(other->AllConditions().value(), (std::vector<std::string>{"j"}));
  EXPECT_EQ(other->ConditionsSourcedFromTask("t", std::nullopt).value().size(), 1u);
  EXPECT_TRUE(other->GetTrigger("t1").value().has_value());
  EXPECT_EQ(other->ValidConditions().value().size(), 1u);
  EXPECT_EQ(other->LastCronExecution("c").value(), 2);
  EXPECT_FALSE(other->ClaimTriggerRun("r", 60).value());
  EXPECT_EQ(other->GetEvent("e").value()->triggered_invocation_ids,
            (std::vector<std::string>{"i"}));
  EXPECT_EQ(other->EventCodes().value(), (std::vector<std::string>{"code"}));
  EXPECT_EQ(other->GetTriggerRun("r").value(), "run:r");
  EXPECT_EQ(other->CapPurgeEvents(1).value().size(), 0u);
  EXPECT_EQ(this->store_->CountEvents({}).value(), 0);
}

// A durable backend keeps everything when the store is closed and reopened on
// the same location. (Memory is process-local: a new store starts empty.)
TYPED_TEST(TriggerStoreDurable, DataSurvivesReopening) {
  ASSERT_TRUE(this->store_->RegisterCondition("c", "j", "Cron").ok());
  ASSERT_TRUE(this->store_->RegisterSourceTaskCondition("t", "c").ok());
  ASSERT_TRUE(
      this->store_->RegisterTrigger({"t1", "tasks.a", {"c", "d"}, "or", "{\"p\": 1}"}).ok());
  ASSERT_TRUE(this->store_->RecordValidConditions({{"v", "vj"}}).ok());
  ASSERT_TRUE(this->store_->NotePendingReports({{"n", "nj"}}).ok());
  ASSERT_TRUE(this->store_->StoreLastCronExecution("c", 7, CronExpectation::Absent()).value());
  ASSERT_TRUE(this->store_->ClaimTriggerRun("r", 60).value());
  EventRow e = this->Event("e", kStart, "x");
  e.matched = true;
  e.emitted_by_invocation_id = "inv";
  ASSERT_TRUE(this->store_->StoreEvent(e).ok());
  ASSERT_TRUE(this->store_->LinkTriggerRunToEvents({"e"}, "i", "r").ok());
  TriggerRunRow r = this->Run("r", kStart, {"e"});
  r.source_invocation_ids = {"src"};
  r.atomic_service_run_id = "asr";
  ASSERT_TRUE(this->store_->StoreTriggerRun(r).ok());
  this->store_.reset();

  std::unique_ptr<TriggerStore> reopened = this->Open();
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->GetCondition("c").value(), "j");
  EXPECT_EQ(reopened->ConditionsSourcedFromTask("t", "Cron").value(),
            (std::vector<std::string>{"j"}));
  EXPECT_EQ(reopened->GetTrigger("t1").value(),
            (TriggerDefinitionRow{"t1", "tasks.a", {"c", "d"}, "or", "{\"p\": 1}"}));
  EXPECT_EQ(reopened->ValidConditions().value(), (std::vector<IdJson>{{"v", "vj"}}));
  EXPECT_EQ(reopened->PendingReports().value(), (std::vector<IdJson>{{"n", "nj"}}));
  EXPECT_EQ(reopened->LastCronExecution("c").value(), 7);
  EXPECT_FALSE(reopened->ClaimTriggerRun("r", 60).value());
  EXPECT_EQ(reopened->GetEvent("e").value(), (StoredEvent{J("e"), {"i"}}));
  EventFilter f;
  f.matched = true;
  f.emitted_by_invocation_id = "inv";
  EXPECT_EQ(reopened->CountEvents(f).value(), 1);
  EXPECT_EQ(reopened->RunsSourcedByInvocation("src").value(), (std::vector<std::string>{"run:r"}));
  EXPECT_EQ(reopened->ReferencedAtomicServiceRunIds().value(), (std::vector<std::string>{"asr"}));
}

// Forked processes race on one claim and one cron tick over the same file:
// exactly one process wins each.
TYPED_TEST(TriggerStoreDurable, ProcessesRacingClaimAndCronHaveOneWinner) {
  constexpr int kChildren = 4;
  constexpr int kAttempts = 25;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Exit code: bit 0 = some error, then claim wins * 2 + cron wins * 32.
      auto opened = OpenTriggerStore(this->backend_.Config(this->clock_));
      if (!opened.ok()) _exit(1);
      std::unique_ptr<TriggerStore> store = std::move(opened).value();
      int claims = 0, crons = 0;
      for (int k = 0; k < kAttempts; ++k) {
        auto claim = store->ClaimTriggerRun("shared", 60);
        auto cron = store->StoreLastCronExecution("cron", 1000 + i, CronExpectation::Absent());
        if (!claim.ok() || !cron.ok()) _exit(1);
        claims += claim.value() ? 1 : 0;
        crons += cron.value() ? 1 : 0;
      }
      _exit(std::min(claims, 15) * 2 + std::min(crons, 7) * 32);
    }
    children.push_back(pid);
  }
  int claims = 0, crons = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    ASSERT_EQ(code & 1, 0) << "child failed";
    claims += (code >> 1) & 15;
    crons += code >> 5;
  }
  EXPECT_EQ(claims, 1);
  EXPECT_EQ(crons, 1);
  EXPECT_FALSE(this->store_->ClaimTriggerRun("shared", 60).value());
  auto cron = this->store_->LastCronExecution("cron").value();
  ASSERT_TRUE(cron.has_value());
  EXPECT_GE(*cron, 1000);
  EXPECT_LT(*cron, 1000 + kChildren);
}

// Threads on separate stores (separate connections) over the same storage race
// on claims: exactly one wins until the claim expires.
TYPED_TEST(TriggerStoreCompliance, ClaimRaceAcrossStoreObjectsHasOneWinner) {
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<TriggerStore>> stores;
  for (int t = 0; t < kThreads; ++t) stores.push_back(this->Open());
  if constexpr (std::is_same_v<TypeParam, testing::MemBackend>) {
    // Each memory store is its own world; share the one store instead.
    for (auto& s : stores) s.reset();
  }
  std::atomic<int> winners{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    TriggerStore* store = stores[t] ? stores[t].get() : this->store_.get();
    threads.emplace_back([&, store] {
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < 10; ++k) {
        auto r = store->ClaimTriggerRun("contested", 30);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (r.value()) winners.fetch_add(1);
      }
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
}

// ---- Redis: restarts and outages -------------------------------------------

BackendConfig RedisConfig(const testing::RedisServer& server, std::shared_ptr<Clock> clock) {
  return BackendConfig{"redis://127.0.0.1:" + std::to_string(server.port()) + "/0", "redis-app",
                       std::move(clock)};
}

// With appendonly, everything survives a server restart under a live store.
TEST(TriggerStoreRedisTest, DataSurvivesServerRestartWithAppendonly) {
  testing::RedisServer server(/*appendonly=*/true);
  auto clock = std::make_shared<ManualClock>(kStart);
  auto opened = OpenTriggerStore(RedisConfig(server, clock));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<TriggerStore> store = std::move(opened).value();
  ASSERT_TRUE(store->RegisterCondition("c", "j", "Cron").ok());
  ASSERT_TRUE(store->RegisterTrigger({"t1", "tasks.a", {"c"}, "and", std::nullopt}).ok());
  ASSERT_TRUE(store->StoreLastCronExecution("c", 7, CronExpectation::Absent()).value());
  ASSERT_TRUE(store->ClaimTriggerRun("r", 60).value());
  EventRow e;
  e.event_id = "e";
  e.event_code = "x";
  e.timestamp_us = kStart;
  e.json = J("e");
  ASSERT_TRUE(store->StoreEvent(e).ok());
  ASSERT_TRUE(store->LinkTriggerRunToEvents({"e"}, "i", "r").ok());

  server.Stop();
  server.Start();

  // The first call may need the client's reconnect; each call either succeeds
  // or reports a clear failure, and the data is all there.
  auto cond = store->GetCondition("c");
  if (!cond.ok()) cond = store->GetCondition("c");
  ASSERT_TRUE(cond.ok()) << cond.status().ToString();
  EXPECT_EQ(cond.value(), "j");
  EXPECT_EQ(store->TriggersForCondition("c").value().size(), 1u);
  EXPECT_EQ(store->LastCronExecution("c").value(), 7);
  EXPECT_FALSE(store->StoreLastCronExecution("c", 8, CronExpectation::Absent()).value());
  EXPECT_FALSE(store->ClaimTriggerRun("r", 60).value());
  EXPECT_EQ(store->GetEvent("e").value(), (StoredEvent{J("e"), {"i"}}));
  EXPECT_EQ(store->EventCodes().value(), (std::vector<std::string>{"x"}));
}

// A call while the server is down is kBackendFailure naming host:port; the
// same store works again once the server is back.
TEST(TriggerStoreRedisTest, ServerDownIsBackendFailureNamingHostPort) {
  testing::RedisServer server;
  auto clock = std::make_shared<ManualClock>(kStart);
  auto opened = OpenTriggerStore(RedisConfig(server, clock));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<TriggerStore> store = std::move(opened).value();
  ASSERT_TRUE(store->RegisterCondition("c", "j", "Cron").ok());

  server.Stop();
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  auto claim = store->ClaimTriggerRun("r", 60);
  ASSERT_FALSE(claim.ok());
  EXPECT_EQ(claim.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(claim.status().message().find(where), std::string::npos) << claim.status().ToString();
  auto write = store->RegisterCondition("d", "k", "Cron");
  ASSERT_FALSE(write.ok());
  EXPECT_EQ(write.code(), ErrorCode::kBackendFailure);
  EXPECT_NE(write.message().find(where), std::string::npos) << write.ToString();
  auto events = store->GetEvents({}, 10, 0);
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().code(), ErrorCode::kBackendFailure);

  server.Start();
  auto again = store->ClaimTriggerRun("r", 60);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again.value());
  EXPECT_TRUE(store->RegisterCondition("d", "k", "Cron").ok());
  EXPECT_EQ(store->GetCondition("d").value(), "k");
}

// Opening a store on a closed port is a clear kBackendFailure.
TEST(TriggerStoreRedisTest, OpeningAClosedPortFails) {
  int port = 0;
  {
    testing::RedisServer server;
    port = server.port();
  }
  auto opened = OpenTriggerStore(BackendConfig{
      "redis://127.0.0.1:" + std::to_string(port) + "/0?connect_timeout_ms=300", "app", nullptr});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(opened.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
}

// ---- Wake-ups of the trigger loop ------------------------------------------

constexpr TimestampUs kShortWaitUs = 20'000;
constexpr TimestampUs kLongWaitUs = 30 * kSec;  // ends early or the test fails

// The first wait arms the watch and returns at once; a recording made while
// nobody waits is remembered for the next wait, once; an empty recording wakes
// nobody.
TYPED_TEST(TriggerStoreCompliance, ValidConditionsWaitRemembersARecording) {
  TriggerStore& store = *this->store_;
  std::string cursor;
  ASSERT_TRUE(store.WaitValidConditions(&cursor, kLongWaitUs).value());
  EXPECT_FALSE(cursor.empty());
  EXPECT_FALSE(store.WaitValidConditions(&cursor, kShortWaitUs).value());
  ASSERT_TRUE(store.RecordValidConditions({{"v", "j"}}).ok());
  EXPECT_TRUE(store.WaitValidConditions(&cursor, kLongWaitUs).value());
  EXPECT_FALSE(store.WaitValidConditions(&cursor, kShortWaitUs).value());
  ASSERT_TRUE(store.RecordValidConditions({}).ok());
  EXPECT_FALSE(store.WaitValidConditions(&cursor, 0).value());
  // Clearing is not a recording.
  ASSERT_TRUE(store.ClearValidConditions({"v"}).ok());
  EXPECT_FALSE(store.WaitValidConditions(&cursor, kShortWaitUs).value());
}

// A waiter blocked in the wait is woken by a recording made meanwhile, and by a
// nudge (a stopping runner); two waiters are both woken by one recording.
TYPED_TEST(TriggerStoreCompliance, ValidConditionsWaitWakesEveryWaiter) {
  TriggerStore& store = *this->store_;
  std::string a, b;
  ASSERT_TRUE(store.WaitValidConditions(&a, 0).value());
  ASSERT_TRUE(store.WaitValidConditions(&b, 0).value());
  std::atomic<int> woken{0};
  std::thread other([&] {
    std::string cursor = b;
    if (store.WaitValidConditions(&cursor, kLongWaitUs).value()) ++woken;
  });
  std::thread recorder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(store.RecordValidConditions({{"v", "j"}}).ok());
  });
  if (store.WaitValidConditions(&a, kLongWaitUs).value()) ++woken;
  recorder.join();
  other.join();
  EXPECT_EQ(woken.load(), 2);

  std::thread nudger([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(store.NudgeValidConditionsWaiter(a).ok());
  });
  EXPECT_TRUE(store.WaitValidConditions(&a, kLongWaitUs).value());
  nudger.join();
  EXPECT_TRUE(store.NudgeValidConditionsWaiter("").ok());  // nobody armed: nothing to do
}

// Another store on the same location (another process, on a durable backend)
// wakes this one's waiter.
TYPED_TEST(TriggerStoreDurable, ValidConditionsWaitIsWokenByAnotherStore) {
  std::unique_ptr<TriggerStore> other = this->Open();
  ASSERT_NE(other, nullptr);
  std::string cursor;
  ASSERT_TRUE(this->store_->WaitValidConditions(&cursor, 0).value());
  std::thread recorder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(other->RecordValidConditions({{"v", "j"}}).ok());
  });
  EXPECT_TRUE(this->store_->WaitValidConditions(&cursor, kLongWaitUs).value());
  recorder.join();
  // Another app on the same location does not wake it.
  std::unique_ptr<TriggerStore> stranger = this->Open("other-app");
  ASSERT_NE(stranger, nullptr);
  ASSERT_TRUE(stranger->RecordValidConditions({{"v", "j"}}).ok());
  if (std::is_same_v<TypeParam, testing::RedisBackend>) {
    EXPECT_FALSE(this->store_->WaitValidConditions(&cursor, kShortWaitUs).value());
  }
}

}  // namespace
}  // namespace pynenc_cpp
