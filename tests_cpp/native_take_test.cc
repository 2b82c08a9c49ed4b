// Lifecycle::TakeAndStart (what CppRunner's workers call): the broker's retrieve,
// then ClaimAndStart of the id taken, on every backend over real components;
// one Lua script on Redis (with a reply lost with the connection read back) and
// one write transaction on SQLite.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lifecycle_fixture.h"
#include "pynenc_cpp/ports/storage.h"
#include "reply_dropping_proxy.h"

namespace pynenc_cpp {
namespace {

using namespace lifecycle_test;  // NOLINT: the suite's fixtures and constants

template <typename B>
class TakeAndStart : public LifecycleCompliance<B> {};
TYPED_TEST_SUITE(TakeAndStart, testing::AllBackends, testing::BackendNames);

template <typename B>
class TakeAndStartTransactional : public LifecycleTransactional<B> {};
TYPED_TEST_SUITE(TakeAndStartTransactional, ::testing::Types<testing::SqliteBackend>,
                 testing::BackendNames);

template <typename B>
class TakeAndStartRoundTrips : public LifecycleRoundTrips<B> {};
TYPED_TEST_SUITE(TakeAndStartRoundTrips, ::testing::Types<testing::RedisBackend>,
                 testing::BackendNames);

// TakeAndStart: the broker's retrieve, then ClaimAndStart of the id taken (one
// script on Redis): the same rows as the two calls, and every outcome of a claim.
TYPED_TEST(TakeAndStart, TakeAndStartTakesAndStartsWhatTheQueueHolds) {
  auto empty = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_FALSE(empty.value().has_value());

  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(
      this->life_
          ->RegisterAndRoute({this->New("a"), this->New("b", "mod.other"), this->New("c")}, kRunner)
          .ok());
  this->clock_->Advance(kSecond);
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a.value().has_value());
  EXPECT_EQ(a.value()->id, InvocationId("a"));
  ASSERT_TRUE(a.value()->claim_status.ok()) << a.value()->claim_status.ToString();
  const ClaimOutcome& started = a.value()->claim;
  EXPECT_EQ(started.kind, ClaimKind::kStarted);
  EXPECT_EQ(started.record.status, S::kRunning);
  EXPECT_EQ(started.record.runner_id, std::optional<std::string>("runner-1"));
  ASSERT_TRUE(started.invocation.has_value());
  EXPECT_EQ(started.invocation->task_id, TaskId("mod.task"));
  EXPECT_EQ(this->orch_->GetStatusRecord(InvocationId("a")).value(), started.record);
  const std::vector<HistoryRecord> rows = this->state_->GetHistory(InvocationId("a")).value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].status, S::kPending);
  EXPECT_EQ(rows[1].timestamp_us, kStart + kSecond);
  EXPECT_EQ(rows[2].timestamp_us, started.record.timestamp_us);
  EXPECT_LE(rows[1].timestamp_us, rows[2].timestamp_us);
  // The rows name the id taken, as the ports write them.
  EXPECT_EQ(rows[1].history_json,
            HistoryJson(InvocationId("a"), {S::kPending, "runner-1", kStart + kSecond}, "runner-1",
                        std::nullopt));
  EXPECT_EQ(rows[2].history_json,
            HistoryJson(InvocationId("a"), started.record, "runner-1", std::nullopt));

  // A task not known to run freely: taken, left untouched for the caller's check.
  auto b = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(b.ok() && b.value().has_value());
  EXPECT_EQ(b.value()->id, InvocationId("b"));
  ASSERT_TRUE(b.value()->claim_status.ok());
  EXPECT_EQ(b.value()->claim.kind, ClaimKind::kNeedsCheck);
  ASSERT_TRUE(b.value()->claim.invocation.has_value());
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
  EXPECT_EQ(this->HistoryOf("b"), std::vector<S>{S::kRegistered});

  // Started by another runner while still queued: taken, not available.
  const Actor other{std::string("runner-2"), "runner-2"};
  ASSERT_EQ(this->life_->ClaimAndStart(InvocationId("c"), other).value().kind, ClaimKind::kStarted);
  auto c = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(c.ok() && c.value().has_value());
  EXPECT_EQ(c.value()->id, InvocationId("c"));
  EXPECT_EQ(c.value()->claim.kind, ClaimKind::kNotAvailable);
  EXPECT_EQ(c.value()->claim.record.runner_id, std::optional<std::string>("runner-2"));
  EXPECT_EQ(this->HistoryOf("c"), (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  auto drained = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(drained.ok());
  EXPECT_FALSE(drained.value().has_value());
}

TYPED_TEST(TakeAndStart, TakeAndStartWaitsForWorkAndTakesEachIdOnce) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  std::thread router([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(this->life_->RegisterAndRoute({this->New("late")}, kRunner).ok());
  });
  auto late = this->life_->TakeAndStart("default", 10'000, kRunner);
  router.join();
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  ASSERT_TRUE(late.value().has_value()) << "the wait ends when an id arrives";
  EXPECT_EQ(late.value()->id, InvocationId("late"));
  EXPECT_EQ(late.value()->claim.kind, ClaimKind::kStarted);

  constexpr int kInvocations = 20;
  std::vector<NewRoutedInvocation> batch;
  for (int i = 0; i < kInvocations; ++i) batch.push_back(this->New("t" + std::to_string(i)));
  ASSERT_TRUE(this->life_->RegisterAndRoute(batch, kRunner).ok());
  std::mutex mu;
  std::vector<std::string> taken;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Actor me{"runner-" + std::to_string(t), "runner-" + std::to_string(t)};
      while (true) {
        auto r = this->life_->TakeAndStart("default", 0, me);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (!r.value()) return;
        if (r.value()->claim_status.ok() && r.value()->claim.kind == ClaimKind::kStarted &&
            this->orch_->GetStatusRecord(r.value()->id).value().runner_id == me.runner_id) {
          ++started;
        }
        std::lock_guard<std::mutex> lock(mu);
        taken.push_back(r.value()->id.str());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(started.load(), kInvocations);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(std::unique(taken.begin(), taken.end()), taken.end()) << "an id taken twice";
  EXPECT_EQ(taken.size(), static_cast<std::size_t>(kInvocations));
}

// SQLite: the take and the claim are one transaction; a claim that fails rolls
// the take back, and the two-step path then takes the id and reports the claim's
// own error (the id has left the queue).
TYPED_TEST(TakeAndStartTransactional, TakeAndStartReportsAFailedClaimAndTakesTheId) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(this->broker_->Route({InvocationId("ghost")}, "default", 0.0).ok());
  this->Register("a");
  auto ghost = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(ghost.ok()) << ghost.status().ToString();
  ASSERT_TRUE(ghost.value().has_value());
  EXPECT_EQ(ghost.value()->id, InvocationId("ghost"));
  EXPECT_EQ(ghost.value()->claim_status.code(), ErrorCode::kNotFound);
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(a.value()->id, InvocationId("a"));
  EXPECT_EQ(a.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_TRUE(this->Drain("default").empty());
}

// FinishThenTake: the finish, then, where the storage does both at once (SQLite:
// one write transaction; Redis: one pipeline), the next invocation taken and
// started for the taker; on memory the finish alone.
TYPED_TEST(TakeAndStart, FinishThenTakeFinishesAndTakesTheNextWhereTheStorageCan) {
  const bool takes = this->life_->TakesWithFinish();
  EXPECT_EQ(takes, std::string(TypeParam::kName) != "Mem");
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(
      this->life_->RegisterAndRoute({this->New("a"), this->New("b"), this->New("c")}, kRunner)
          .ok());
  this->clock_->Advance(kSecond);
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value()) << a.status().ToString();
  this->clock_->Advance(kSecond);

  FinishedAndTaken after_a = this->life_->FinishThenTake(
      InvocationId("a"), "1", true, kRunner, TaskId("mod.task"), true, "default", kRunner);
  ASSERT_TRUE(after_a.finish.ok()) << after_a.finish.status().ToString();
  EXPECT_EQ(after_a.finish.value().change.record.status, S::kSuccess);
  EXPECT_EQ(this->StatusOf("a"), S::kSuccess);
  if (!takes) {
    EXPECT_FALSE(after_a.next.has_value());
    return;
  }
  ASSERT_TRUE(after_a.next.has_value());
  EXPECT_EQ(after_a.next->id, InvocationId("b"));
  ASSERT_TRUE(after_a.next->claim_status.ok()) << after_a.next->claim_status.ToString();
  EXPECT_EQ(after_a.next->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(after_a.next->claim.record.runner_id, std::optional<std::string>("runner-1"));
  EXPECT_TRUE(after_a.next->backlog) << "c is still queued";
  EXPECT_EQ(this->StatusOf("b"), S::kRunning);
  EXPECT_EQ(this->HistoryOf("b"), (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  // A failure finishes the same way; c, the last one, leaves the queue empty.
  this->clock_->Advance(kSecond);
  FinishedAndTaken after_b = this->life_->FinishThenTake(
      InvocationId("b"), "{}", false, kRunner, TaskId("mod.task"), true, "default", kRunner);
  ASSERT_TRUE(after_b.finish.ok()) << after_b.finish.status().ToString();
  EXPECT_EQ(this->StatusOf("b"), S::kFailed);
  ASSERT_TRUE(after_b.next.has_value());
  EXPECT_EQ(after_b.next->id, InvocationId("c"));
  if (std::string(TypeParam::kName) == "Redis") {
    EXPECT_FALSE(after_b.next->backlog) << "Redis knows the queue is empty now";
  }

  // Nothing queued: the finish alone. A finish that is illegal (c not RUNNING
  // any more) fails as FinishSuccess would, and takes nothing.
  this->clock_->Advance(kSecond);
  FinishedAndTaken after_c = this->life_->FinishThenTake(
      InvocationId("c"), "3", true, kRunner, TaskId("mod.task"), true, "default", kRunner);
  ASSERT_TRUE(after_c.finish.ok()) << after_c.finish.status().ToString();
  EXPECT_FALSE(after_c.next.has_value());
  EXPECT_EQ(this->StatusOf("c"), S::kSuccess);
  FinishedAndTaken again = this->life_->FinishThenTake(
      InvocationId("c"), "3", true, kRunner, TaskId("mod.task"), true, "default", kRunner);
  EXPECT_FALSE(again.finish.ok());
  EXPECT_FALSE(again.next.has_value());
  EXPECT_EQ(this->StatusOf("c"), S::kSuccess);
}

TYPED_TEST(TakeAndStartRoundTrips, FinishThenTakeIsTheFinishAndTheTakeScripts) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("warm");
  this->Register("a");
  this->Register("b");
  ASSERT_TRUE(this->life_->TakeAndStart("default", 0, kRunner).ok());  // loads the take script
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  // Loads the finish script (NOSCRIPT inside the pipeline: run again on its own).
  FinishedAndTaken warm = this->life_->FinishThenTake(InvocationId("warm"), "0", true, kRunner,
                                                      TaskId("mod.task"), true, "default", kRunner);
  ASSERT_TRUE(warm.finish.ok()) << warm.finish.status().ToString();
  ASSERT_TRUE(warm.next.has_value());
  EXPECT_EQ(warm.next->id, InvocationId("b"));
  this->Register("c");
  // The server's read events: one per round trip (a pipeline arrives in one).
  auto stats = redis::OpenClient(this->backend_.Config(this->clock_)).value();
  auto reads = [&] {
    const std::string text = stats->Command({"INFO", "stats"}).value().str;
    const std::string key = "total_reads_processed:";
    const std::size_t at = text.find(key);
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
  };
  const std::int64_t before = this->Scripts();
  const std::int64_t reads_before = reads();
  FinishedAndTaken both = this->life_->FinishThenTake(InvocationId("a"), "1", true, kRunner,
                                                      TaskId("mod.task"), true, "default", kRunner);
  const std::int64_t reads_after = reads();
  ASSERT_TRUE(both.finish.ok()) << both.finish.status().ToString();
  ASSERT_TRUE(both.next.has_value());
  EXPECT_EQ(both.next->id, InvocationId("c"));
  EXPECT_EQ(this->Scripts() - before, 2) << "the finish's script and the take's, nothing else";
  // The second INFO is a read too.
  EXPECT_EQ(reads_after - reads_before, 2) << "one round trip for both scripts";
  EXPECT_EQ(this->StatusOf("a"), S::kSuccess);
  EXPECT_EQ(this->StatusOf("c"), S::kRunning);
}

TYPED_TEST(TakeAndStartRoundTrips, TakeAndStartIsOneRoundTrip) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("warm");
  ASSERT_TRUE(this->life_->TakeAndStart("default", 0, kRunner).ok());  // loads the script
  this->Register("a");
  const std::int64_t before = this->Scripts();
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(this->Scripts() - before, 1) << "pop, claim and RUNNING in one script";
  EXPECT_EQ(a.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(this->HistoryOf("a"), (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  // An id whose history text needs JSON escapes is claimed by the claim script.
  const std::string odd = "q\"x\\y\n\xc3\xa9";
  ASSERT_TRUE(this->life_->RegisterAndRoute({this->New(odd)}, kRunner).ok());
  auto escaped = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(escaped.ok() && escaped.value().has_value());
  EXPECT_EQ(escaped.value()->id, InvocationId(odd));
  ASSERT_TRUE(escaped.value()->claim_status.ok());
  EXPECT_EQ(escaped.value()->claim.kind, ClaimKind::kStarted);
  const std::vector<HistoryRecord> rows = this->state_->GetHistory(InvocationId(odd)).value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].history_json, HistoryJson(InvocationId(odd), escaped.value()->claim.record,
                                              "runner-1", std::nullopt));

  // A PENDING time before the current status's (the taker's clock behind, or an
  // id registered after the arguments were built): the take script writes
  // nothing; the claim script with fresh arguments, then the port path, claim it.
  this->clock_->Advance(kSecond);
  this->Register("early");
  this->clock_->Set(kStart);
  const std::int64_t at = this->Scripts();
  auto early = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(early.ok() && early.value().has_value());
  EXPECT_GT(this->Scripts() - at, 1) << "the port path's scripts follow the take";
  EXPECT_EQ(early.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(this->StatusOf("early"), S::kRunning);
  EXPECT_EQ(this->HistoryOf("early").size(), 3u);  // by time: the rows behind the clock first
}

// The Redis lost-reply tests: a real server behind a proxy that can drop a
// reply, and one Storage, so every port and the lifecycle share its pool, whose
// one connection the proxy serves.
class RedisTakeAndStart : public ::testing::Test {
 protected:
  void SetUp() override {
    const BackendConfig config{"redis://127.0.0.1:" + std::to_string(proxy_.port()) + "/0",
                               "lost-reply-app", clock_};
    auto storage = Storage::Open(config);
    ASSERT_TRUE(storage.ok()) << storage.status().ToString();
    storage_ = std::move(storage).value();
    auto opened = storage_->NewLifecycle(/*with_trigger=*/true, kNames);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    life_ = std::move(opened).value();
    life_->SetTaskRunsFreely(TaskId("mod.task"));
  }

  // A client of the server itself (not through the proxy).
  std::shared_ptr<redis::Client> Raw() {
    auto raw = redis::OpenClient(BackendConfig{
        "redis://127.0.0.1:" + std::to_string(server_.port()) + "/0", "lost-reply-app", clock_});
    EXPECT_TRUE(raw.ok()) << raw.status().ToString();
    return raw.ok() ? raw.value() : nullptr;
  }

  // Deliveries the broker keeps for redelivery (every consumer's processing
  // list), read straight from the server.
  std::int64_t ProcessingEntries() {
    auto raw = Raw();
    if (raw == nullptr) return -1;
    auto keys = raw->Command({"KEYS", "pynenc:{lost-reply-app}:broker:proc:*"});
    EXPECT_TRUE(keys.ok());
    if (!keys.ok()) return -1;
    std::int64_t n = 0;
    for (const redis::Value& k : keys.value().elements) {
      n += raw->Command({"LLEN", k.str}).value().integer;
    }
    return n;
  }

  testing::RedisServer server_;
  testing::ReplyDroppingProxy proxy_{server_.port()};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kStart);
  std::shared_ptr<Storage> storage_;
  std::unique_ptr<Lifecycle> life_;
};

// Redis: the reply of a TakeAndStart lost with the connection. What its script
// did is read back by the next TakeAndStart of the same thread: a claim it made
// is handed over (never redelivered, never left RUNNING with no one running it);
// an id it took without claiming is claimed then.
TEST_F(RedisTakeAndStart, AReplyLostWithTheConnectionIsReadBack) {
  auto state = storage_->state_backend().value();
  ASSERT_TRUE(
      life_->RegisterAndRoute({NewItem("a"), NewItem("b"), NewItem("c", "mod.other")}, kRunner)
          .ok());
  auto a = life_->TakeAndStart("default", 0, kRunner);  // loads the script
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(a.value()->claim.kind, ClaimKind::kStarted);
  // Claimed: RUNNING and owned, which pynenc's recovery covers; the broker
  // keeps no delivery of it to acknowledge or redeliver.
  EXPECT_EQ(ProcessingEntries(), 0);

  proxy_.DropNextReply();
  auto lost = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(lost.status().connection_lost()) << lost.status().ToString();
  auto b = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b.value().has_value());
  EXPECT_EQ(b.value()->id, InvocationId("b"));
  ASSERT_TRUE(b.value()->claim_status.ok()) << b.value()->claim_status.ToString();
  EXPECT_EQ(b.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(b.value()->claim.record.status, S::kRunning);
  EXPECT_EQ(b.value()->claim.record.runner_id, std::optional<std::string>("runner-1"));
  ASSERT_TRUE(b.value()->claim.invocation.has_value());
  EXPECT_EQ(b.value()->claim.invocation->task_id, TaskId("mod.task"));

  // c's task is not known to run freely: its lost attempt took it and claimed
  // nothing; read back, it is claimed now (the caller's check).
  proxy_.DropNextReply();
  ASSERT_FALSE(life_->TakeAndStart("default", 0, kRunner).ok());
  auto c = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(c.ok() && c.value().has_value()) << c.status().ToString();
  EXPECT_EQ(c.value()->id, InvocationId("c"));
  EXPECT_EQ(c.value()->claim.kind, ClaimKind::kNeedsCheck);
  EXPECT_EQ(ProcessingEntries(), 1) << "taken, not claimed: kept until acknowledged";

  // Nothing redelivered, nothing left; b's rows written once.
  auto after = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after.value().has_value());
  EXPECT_EQ(ProcessingEntries(), 0) << "c's delivery acknowledged by the next take";
  std::vector<S> rows;
  for (const HistoryRecord& h : state->GetHistory(InvocationId("b")).value()) {
    rows.push_back(h.status);
  }
  EXPECT_EQ(rows, (std::vector<S>{S::kRegistered, S::kPending, S::kRunning}));

  // A lost attempt on an empty queue took nothing: the next one goes on as usual.
  proxy_.DropNextReply();
  ASSERT_FALSE(life_->TakeAndStart("default", 0, kRunner).ok());
  auto none = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none.value().has_value());
}

// Redis: a take whose claim fails inside the script (here the invocation's
// record is not a hash: WRONGTYPE) after the pop: the id is kept in the
// processing list, to be redelivered, not lost with the script's error.
TEST_F(RedisTakeAndStart, AClaimThatFailsInTheScriptKeepsTheIdItPopped) {
  ASSERT_TRUE(life_->RegisterAndRoute({NewItem("a")}, kRunner).ok());
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  ASSERT_TRUE(raw->Command({"SET", "pynenc:{lost-reply-app}:orchestrator:inv:a", "broken"}).ok());
  auto taken = life_->TakeAndStart("default", 0, kRunner);
  EXPECT_FALSE(taken.ok() && taken.value().has_value() && taken.value()->claim_status.ok())
      << "a record that is not a hash cannot be claimed";
  const std::int64_t queued =
      raw->Command({"ZCARD", "pynenc:{lost-reply-app}:broker:q:default"}).value().integer;
  EXPECT_EQ(queued + ProcessingEntries(), 1) << "the id is still queued or kept for redelivery";
}

// Redis: the finish-and-take pipeline's replies lost with the connection. The
// finish ran (the caller sees the connection error, as for a lone finish); what
// the take claimed is handed over by the thread's next TakeAndStart, never left
// RUNNING with no one running it.
TEST_F(RedisTakeAndStart, AFinishAndTakeWhoseRepliesAreLostIsReadBack) {
  auto orchestrator = storage_->orchestrator().value();
  ASSERT_TRUE(life_->RegisterAndRoute({NewItem("a"), NewItem("b")}, kRunner).ok());
  auto a = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  clock_->Advance(kSecond);
  // Loads the finish script first, so the dropped reply is the pipeline's.
  // (An unknown id: the script writes nothing, the port path reports it.)
  EXPECT_FALSE(
      life_->FinishSuccess(InvocationId("unknown"), "0", kRunner, TaskId("mod.task"), true).ok());

  proxy_.DropNextReply();
  FinishedAndTaken lost = life_->FinishThenTake(InvocationId("a"), "1", true, kRunner,
                                               TaskId("mod.task"), true, "default", kRunner);
  ASSERT_FALSE(lost.finish.ok());
  EXPECT_TRUE(lost.finish.status().connection_lost()) << lost.finish.status().ToString();
  EXPECT_FALSE(lost.next.has_value());
  EXPECT_EQ(orchestrator->GetStatusRecord(InvocationId("a")).value().status, S::kSuccess);
  EXPECT_EQ(orchestrator->GetStatusRecord(InvocationId("b")).value().status, S::kRunning)
      << "the pipeline's take ran too";

  auto b = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b.value().has_value());
  EXPECT_EQ(b.value()->id, InvocationId("b"));
  ASSERT_TRUE(b.value()->claim_status.ok()) << b.value()->claim_status.ToString();
  EXPECT_EQ(b.value()->claim.kind, ClaimKind::kStarted);
  EXPECT_EQ(b.value()->claim.record.runner_id, std::optional<std::string>("runner-1"));
  auto after = life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after.value().has_value()) << "nothing redelivered";
}

}  // namespace
}  // namespace pynenc_cpp
