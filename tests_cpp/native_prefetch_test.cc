// Lifecycle::TakeAndClaim (a CppRunner's prefetch, cpp_runner_prefetch > 1):
// up to `max` ids taken and claimed in one operation, in queue order, on every
// backend over real components; one script on Redis and one write transaction
// on SQLite (on both, an id that cannot be claimed at once stays in the queue).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "lifecycle_fixture.h"

namespace pynenc_cpp {
namespace {

using namespace lifecycle_test;  // NOLINT: the suite's fixtures and constants

template <typename B>
class TakeAndClaim : public LifecycleCompliance<B> {};
TYPED_TEST_SUITE(TakeAndClaim, testing::AllBackends, testing::BackendNames);

template <typename B>
class TakeAndClaimRoundTrips : public LifecycleRoundTrips<B> {};
TYPED_TEST_SUITE(TakeAndClaimRoundTrips, ::testing::Types<testing::RedisBackend>,
                 testing::BackendNames);

std::vector<std::string> Ids(const std::vector<TakenClaim>& taken) {
  std::vector<std::string> out;
  for (const TakenClaim& t : taken) out.push_back(t.id.str());
  return out;
}

TYPED_TEST(TakeAndClaim, ClaimsUpToMaxInQueueOrderAndWritesTheirRows) {
  auto none = this->life_->TakeAndClaim("default", 4, kRunner);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none.value().empty());

  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(this->life_
                  ->RegisterAndRoute({this->New("a"), this->New("b"), this->New("c"),
                                      this->New("d"), this->New("e")},
                                     kRunner)
                  .ok());
  this->clock_->Advance(kSecond);
  auto zero = this->life_->TakeAndClaim("default", 0, kRunner);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero.value().empty()) << "max 0 takes nothing";

  auto first = this->life_->TakeAndClaim("default", 3, kRunner);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(Ids(first.value()), (std::vector<std::string>{"a", "b", "c"}));
  for (const TakenClaim& t : first.value()) {
    ASSERT_TRUE(t.claim_status.ok()) << t.claim_status.ToString();
    EXPECT_EQ(t.claim.kind, ClaimKind::kClaimed);
    EXPECT_EQ(t.claim.record.status, S::kPending);
    EXPECT_EQ(t.claim.record.runner_id, std::optional<std::string>("runner-1"));
    ASSERT_TRUE(t.claim.invocation.has_value());
    EXPECT_EQ(t.claim.invocation->task_id, TaskId("mod.task"));
    EXPECT_EQ(this->orch_->GetStatusRecord(t.id).value(), t.claim.record);
    EXPECT_EQ(this->HistoryOf(t.id.str()), (std::vector<S>{S::kRegistered, S::kPending}));
    const std::vector<HistoryRecord> rows = this->state_->GetHistory(t.id).value();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1].history_json,
              HistoryJson(t.id, t.claim.record, "runner-1", std::nullopt));
  }
  // A claimed invocation runs by its own RUNNING change, as pynenc's run makes it.
  auto running = this->life_->ChangeStatus(InvocationId("a"), S::kRunning, kRunner,
                                           TaskId("mod.task"), false);
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(this->StatusOf("a"), S::kRunning);

  // What is left, then nothing: every id is taken once.
  auto rest = this->life_->TakeAndClaim("default", 10, kRunner);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(Ids(rest.value()), (std::vector<std::string>{"d", "e"}));
  auto drained = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(drained.ok());
  EXPECT_FALSE(drained.value().has_value());
}

// The list ends at the first id that a claim does not move by itself: on Redis
// and SQLite it stays in the queue (the script claims before it takes; the
// transaction is made again without it); in memory it is taken and handed over
// last, with its claim's outcome, as a take hands it.
TYPED_TEST(TakeAndClaim, EndsAtAnIdThatNeedsItsOwnClaim) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(this->life_
                  ->RegisterAndRoute({this->New("a"), this->New("b", "mod.other"), this->New("c")},
                                     kRunner)
                  .ok());
  this->clock_->Advance(kSecond);
  auto got = this->life_->TakeAndClaim("default", 5, kRunner);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(this->StatusOf("a"), S::kPending);
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered) << "its running concurrency is not known";
  EXPECT_EQ(this->StatusOf("c"), S::kRegistered) << "not taken past the one that ended the list";
  if (std::string(TypeParam::kName) != "Mem") {
    EXPECT_EQ(Ids(got.value()), std::vector<std::string>{"a"});
    auto b = this->life_->TakeAndStart("default", 0, kRunner);
    ASSERT_TRUE(b.ok() && b.value().has_value());
    EXPECT_EQ(b.value()->id, InvocationId("b")) << "left at the head of its queue";
    EXPECT_EQ(b.value()->claim.kind, ClaimKind::kNeedsCheck);
  } else {
    EXPECT_EQ(Ids(got.value()), (std::vector<std::string>{"a", "b"}));
    ASSERT_TRUE(got.value()[1].claim_status.ok());
    EXPECT_EQ(got.value()[1].claim.kind, ClaimKind::kNeedsCheck);
    ASSERT_TRUE(got.value()[1].claim.invocation.has_value());
  }
  auto c = this->life_->TakeAndClaim("default", 5, kRunner);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Ids(c.value()), std::vector<std::string>{"c"});
  EXPECT_EQ(this->StatusOf("c"), S::kPending);
}

template <typename B>
class TakeAndClaimTransactional : public LifecycleTransactional<B> {};
TYPED_TEST_SUITE(TakeAndClaimTransactional, ::testing::Types<testing::SqliteBackend>,
                 testing::BackendNames);

// A claim that fails (an id routed with no invocation behind it) ends the batch
// as one that needs its own claim does: the transaction is made again without
// it, so it stays queued for a take of its own, which reports the error.
TYPED_TEST(TakeAndClaimTransactional, AFailedClaimEndsTheBatchAndStaysQueued) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("a");
  ASSERT_TRUE(this->broker_->Route({InvocationId("ghost")}, "default", 0.0).ok());
  this->Register("b");
  auto got = this->life_->TakeAndClaim("default", 5, kRunner);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Ids(got.value()), std::vector<std::string>{"a"});
  EXPECT_EQ(this->StatusOf("a"), S::kPending);
  auto ghost = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(ghost.ok() && ghost.value().has_value());
  EXPECT_EQ(ghost.value()->id, InvocationId("ghost"));
  EXPECT_EQ(ghost.value()->claim_status.code(), ErrorCode::kNotFound);
  EXPECT_EQ(this->StatusOf("b"), S::kRegistered);
  EXPECT_EQ(this->Drain("default"), std::vector<std::string>{"b"});
}

// The ids of the broker's delivery rows (taken, not yet acknowledged), read
// with a connection of its own.
std::vector<std::string> DeliveryRows(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::vector<std::string> ids;
  sqlite3_stmt* q = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT invocation_id FROM broker_proc ORDER BY invocation_id",
                               -1, &q, nullptr),
            SQLITE_OK);
  while (sqlite3_step(q) == SQLITE_ROW) {
    ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  return ids;
}

// A prefetch rolled back (the queue's head needs its own claim) leaves the
// broker's memory of this thread's deliveries as it was: the next take still
// acknowledges the delivery made before it, and nothing the rolled-back takes
// delivered is acknowledged later in another thread's name.
TYPED_TEST(TakeAndClaimTransactional, ARolledBackPrefetchKeepsTheThreadsDeliveries) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  ASSERT_TRUE(
      this->life_->RegisterAndRoute({this->New("a"), this->New("b", "mod.other")}, kRunner).ok());
  auto a = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(a.ok() && a.value().has_value());
  EXPECT_EQ(DeliveryRows(this->backend_.Path()), std::vector<std::string>{"a"});
  auto none = this->life_->TakeAndClaim("default", 3, kRunner);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none.value().empty()) << "b needs its own claim: left queued";
  auto b = this->life_->TakeAndStart("default", 0, kRunner);  // acknowledges a
  ASSERT_TRUE(b.ok() && b.value().has_value());
  EXPECT_EQ(b.value()->id, InvocationId("b"));
  EXPECT_EQ(DeliveryRows(this->backend_.Path()), std::vector<std::string>{"b"});
  auto drained = this->life_->TakeAndStart("default", 0, kRunner);  // acknowledges b
  ASSERT_TRUE(drained.ok());
  EXPECT_FALSE(drained.value().has_value());
  EXPECT_TRUE(DeliveryRows(this->backend_.Path()).empty());
}

TYPED_TEST(TakeAndClaimRoundTrips, TakeAndClaimIsOneScript) {
  this->life_->SetTaskRunsFreely(TaskId("mod.task"));
  this->Register("warm");
  ASSERT_TRUE(this->life_->TakeAndClaim("default", 1, kRunner).ok());  // loads the script
  std::vector<NewRoutedInvocation> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(this->New("t" + std::to_string(i)));
  ASSERT_TRUE(this->life_->RegisterAndRoute(batch, kRunner).ok());
  const std::int64_t before = this->Scripts();
  auto got = this->life_->TakeAndClaim("default", 6, kRunner);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value().size(), 6u);
  EXPECT_EQ(this->Scripts() - before, 1) << "six takes and claims in one script";

  // An id whose history text needs JSON escapes ends the list, left in the queue
  // for a take of its own (whose claim script escapes it).
  const std::string odd = "q\"x\\y";
  ASSERT_TRUE(this->life_->RegisterAndRoute({this->New(odd), this->New("after")}, kRunner).ok());
  auto rest = this->life_->TakeAndClaim("default", 10, kRunner);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(Ids(rest.value()), (std::vector<std::string>{"t6", "t7"}));
  auto escaped = this->life_->TakeAndStart("default", 0, kRunner);
  ASSERT_TRUE(escaped.ok() && escaped.value().has_value());
  EXPECT_EQ(escaped.value()->id, InvocationId(odd));
  EXPECT_EQ(escaped.value()->claim.kind, ClaimKind::kStarted);
  auto after = this->life_->TakeAndClaim("default", 10, kRunner);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Ids(after.value()), std::vector<std::string>{"after"});
}

}  // namespace
}  // namespace pynenc_cpp
