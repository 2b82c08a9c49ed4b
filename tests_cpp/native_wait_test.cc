// Lifecycle::WaitAnyFinal (what a client reading invocation.result blocks in, in
// native mode): the orchestrator's wait and ReadFinal of the id it found, in one
// operation, on every backend over real components; on Redis the read costs no
// round trip of its own (the registration reads an id already final, the finish
// script's note carries the record and a small result). Also the note format the
// Redis scripts push (redis_orchestrator::ParseFinalNote).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lifecycle_fixture.h"
#include "redis/redis_final_wait.h"
#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp {
namespace {

using namespace lifecycle_test;  // NOLINT: the suite's fixtures and constants

template <typename B>
class WaitAnyFinalRead : public LifecycleCompliance<B> {
 protected:
  // Finishes `id` (RUNNING for kRunner) after 50 ms on another thread while this
  // one waits for it beside an id that never finishes.
  Result<std::optional<FinalWait>> WaitWhileFinishing(const std::string& id, bool success,
                                                      const std::string& payload,
                                                      std::size_t max_result_bytes) {
    std::thread finisher([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto done = success ? this->life_->FinishSuccess(InvocationId(id), payload, kRunner,
                                                       TaskId("mod.task"), true)
                          : this->life_->FinishFailure(InvocationId(id), payload, kRunner,
                                                       TaskId("mod.task"), true);
      EXPECT_TRUE(done.ok()) << done.status().ToString();
    });
    auto got = this->life_->WaitAnyFinal({InvocationId("never"), InvocationId(id)}, 5 * kSecond,
                                         max_result_bytes);
    finisher.join();
    return got;
  }
  StatusRecord RecordOf(const std::string& id) {
    return this->orch_->GetStatusRecord(InvocationId(id)).value();
  }
};
TYPED_TEST_SUITE(WaitAnyFinalRead, testing::AllBackends, testing::BackendNames);

template <typename B>
class WaitAnyFinalRoundTrips : public LifecycleRoundTrips<B> {};
TYPED_TEST_SUITE(WaitAnyFinalRoundTrips, ::testing::Types<testing::RedisBackend>,
                 testing::BackendNames);

// ReadFinalArmed reads what ReadFinalAhead reads, on every backend, and a wait for
// the id it read still comes back when the id finishes.
TYPED_TEST(WaitAnyFinalRead, AnArmedReadReadsAsReadFinalAhead) {
  this->Running("r");
  this->Running("s");
  ASSERT_TRUE(
      this->life_->FinishSuccess(InvocationId("s"), "2", kRunner, TaskId("mod.task"), true).ok());
  auto read = this->life_->ReadFinalArmed(InvocationId("r"), {InvocationId("s")}, 1024);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read.value().first.record, this->RecordOf("r"));
  EXPECT_TRUE(read.value().ahead.empty()) << "read ahead only when the first is final";
  auto got = this->WaitWhileFinishing("r", true, "3", 1024);
  ASSERT_TRUE(got.ok() && got.value()) << got.status().ToString();
  EXPECT_EQ(got.value()->id, InvocationId("r"));
  auto final_read = this->life_->ReadFinalArmed(InvocationId("r"), {InvocationId("s")}, 1024);
  ASSERT_TRUE(final_read.ok());
  EXPECT_EQ(final_read.value().first.result, std::optional<std::string>("3"));
  auto unknown = this->life_->ReadFinalArmed(InvocationId("nope"), {}, 1024);
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound) << unknown.status().ToString();
}

TYPED_TEST(WaitAnyFinalRead, RejectsNoIdsAndTimesOut) {
  auto none = this->life_->WaitAnyFinal({}, kSecond, 1024);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kInvalidArgument);

  this->Running("run");
  auto single_check = this->life_->WaitAnyFinal({InvocationId("run")}, 0, 1024);
  ASSERT_TRUE(single_check.ok()) << single_check.status().ToString();
  EXPECT_FALSE(single_check.value().has_value());
  auto timed_out = this->life_->WaitAnyFinal({InvocationId("run"), InvocationId("unknown")},
                                             100'000, 1024);  // 0.1 s
  ASSERT_TRUE(timed_out.ok()) << timed_out.status().ToString();
  EXPECT_FALSE(timed_out.value().has_value());
}

// An id final before the wait: returned at once with what ReadFinal reads.
TYPED_TEST(WaitAnyFinalRead, AnIdAlreadyFinalComesWithItsRecordAndResult) {
  this->Running("ok");
  ASSERT_TRUE(
      this->life_->FinishSuccess(InvocationId("ok"), "[1, 2]", kRunner, TaskId("mod.task"), true)
          .ok());
  this->Running("run");
  auto got = this->life_->WaitAnyFinal({InvocationId("run"), InvocationId("ok")}, 0, 1024);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got.value().has_value());
  EXPECT_EQ(got.value()->id, InvocationId("ok"));
  ASSERT_TRUE(got.value()->read.has_value());
  EXPECT_EQ(got.value()->read->record, this->RecordOf("ok"));
  EXPECT_EQ(got.value()->read->record.status, S::kSuccess);
  EXPECT_EQ(got.value()->read->result, std::optional<std::string>("[1, 2]"));

  // A result longer than the caller keeps: the record without it.
  auto short_read = this->life_->WaitAnyFinal({InvocationId("ok")}, 0, 5);
  ASSERT_TRUE(short_read.ok() && short_read.value() && short_read.value()->read);
  EXPECT_EQ(short_read.value()->read->record, this->RecordOf("ok"));
  EXPECT_EQ(short_read.value()->read->result, std::nullopt);
}

// A wait woken by the finish composite: the id, its record as stored, and the
// result (none for a failure: an exception is not a result).
TYPED_TEST(WaitAnyFinalRead, AWokenWaitComesWithTheFinishedRecordAndResult) {
  const std::string result = "\"" + std::string(100, 'r') + "\"";
  this->Running("w-ok");
  auto ok = this->WaitWhileFinishing("w-ok", true, result, 1024);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_TRUE(ok.value().has_value());
  EXPECT_EQ(ok.value()->id, InvocationId("w-ok"));
  ASSERT_TRUE(ok.value()->read.has_value());
  EXPECT_EQ(ok.value()->read->record, this->RecordOf("w-ok"));
  EXPECT_EQ(ok.value()->read->record.status, S::kSuccess);
  EXPECT_EQ(ok.value()->read->record.runner_id, std::nullopt);
  EXPECT_EQ(ok.value()->read->result, std::optional<std::string>(result));

  this->Running("w-short");
  auto short_read = this->WaitWhileFinishing("w-short", true, result, result.size() - 1);
  ASSERT_TRUE(short_read.ok() && short_read.value() && short_read.value()->read);
  EXPECT_EQ(short_read.value()->read->record, this->RecordOf("w-short"));
  EXPECT_EQ(short_read.value()->read->result, std::nullopt);

  this->Running("w-bad");
  auto bad = this->WaitWhileFinishing("w-bad", false, "{\"e\": 1}", 1024);
  ASSERT_TRUE(bad.ok() && bad.value() && bad.value()->read);
  EXPECT_EQ(bad.value()->id, InvocationId("w-bad"));
  EXPECT_EQ(bad.value()->read->record, this->RecordOf("w-bad"));
  EXPECT_EQ(bad.value()->read->record.status, S::kFailed);
  EXPECT_EQ(bad.value()->read->result, std::nullopt);
}

// Redis: the wait is one script (its registration) and the BLPOP; the record
// comes with either, never from a read of its own.
TYPED_TEST(WaitAnyFinalRoundTrips, TheReadCostsNoScriptOfItsOwn) {
  this->Running("warm");  // loads the scripts once
  ASSERT_TRUE(
      this->life_->FinishSuccess(InvocationId("warm"), "0", kRunner, TaskId("mod.task"), true)
          .ok());
  ASSERT_TRUE(this->life_->WaitAnyFinal({InvocationId("warm")}, 0, 1024).ok());

  std::int64_t before = this->Scripts();
  auto already = this->life_->WaitAnyFinal({InvocationId("warm")}, 0, 1024);
  ASSERT_TRUE(already.ok() && already.value() && already.value()->read);
  EXPECT_EQ(this->Scripts() - before, 1);
  EXPECT_EQ(already.value()->read->result, std::optional<std::string>("0"));

  this->Running("w");
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(
        this->life_->FinishSuccess(InvocationId("w"), "\"x\"", kRunner, TaskId("mod.task"), true)
            .ok());
  });
  before = this->Scripts();
  auto woken = this->life_->WaitAnyFinal({InvocationId("w")}, 5 * kSecond, 1024);
  const std::int64_t scripts = this->Scripts() - before;
  finisher.join();
  ASSERT_TRUE(woken.ok() && woken.value() && woken.value()->read);
  EXPECT_EQ(scripts, 2) << "the registration and the finish, no read";
  EXPECT_EQ(woken.value()->read->result, std::optional<std::string>("\"x\""));
}

// Redis: a read that armed the wait (ReadFinalArmed finding the id not final)
// spares the thread's next wait of that id its registration script: the wait
// blocks on the read's registration, whose note the finish pushed. A wait for
// other ids, a second wait, or a wait without a timeout registers as usual.
TYPED_TEST(WaitAnyFinalRoundTrips, AnArmedReadSparesTheWaitItsRegistration) {
  this->Running("warm");  // loads the scripts once
  ASSERT_TRUE(this->life_->ReadFinalArmed(InvocationId("warm"), {}, 1024).ok());
  ASSERT_TRUE(
      this->life_->FinishSuccess(InvocationId("warm"), "0", kRunner, TaskId("mod.task"), true)
          .ok());
  ASSERT_TRUE(this->life_->WaitAnyFinal({InvocationId("warm")}, 5 * kSecond, 1024).ok());
  ASSERT_TRUE(this->life_->WaitAnyFinal({InvocationId("warm")}, 0, 1024).ok());

  // Finished between the read and the wait: the note is there already.
  this->Running("a");
  auto read = this->life_->ReadFinalArmed(InvocationId("a"), {}, 1024);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read.value().first.record.status, S::kRunning);
  ASSERT_TRUE(
      this->life_->FinishSuccess(InvocationId("a"), "\"y\"", kRunner, TaskId("mod.task"), true)
          .ok());
  std::int64_t before = this->Scripts();
  auto a = this->life_->WaitAnyFinal({InvocationId("a")}, 5 * kSecond, 1024);
  ASSERT_TRUE(a.ok() && a.value() && a.value()->read) << a.status().ToString();
  EXPECT_EQ(this->Scripts() - before, 0) << "no registration: the read made it";
  EXPECT_EQ(a.value()->id, InvocationId("a"));
  EXPECT_EQ(a.value()->read->record, this->orch_->GetStatusRecord(InvocationId("a")).value());
  EXPECT_EQ(a.value()->read->result, std::optional<std::string>("\"y\""));

  // Finished while the wait blocks.
  this->Running("b");
  ASSERT_TRUE(this->life_->ReadFinalArmed(InvocationId("b"), {}, 1024).ok());
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(
        this->life_->FinishSuccess(InvocationId("b"), "1", kRunner, TaskId("mod.task"), true).ok());
  });
  before = this->Scripts();
  auto b = this->life_->WaitAnyFinal({InvocationId("b")}, 5 * kSecond, 1024);
  const std::int64_t scripts = this->Scripts() - before;
  finisher.join();
  ASSERT_TRUE(b.ok() && b.value() && b.value()->read) << b.status().ToString();
  EXPECT_EQ(scripts, 1) << "the finish only";
  EXPECT_EQ(b.value()->read->result, std::optional<std::string>("1"));

  // Armed for c, a wait for d (another id) registers; c's wait then still uses
  // the arm (and times out); c's next wait registers.
  this->Running("c");
  this->Running("d");
  ASSERT_TRUE(this->life_->ReadFinalArmed(InvocationId("c"), {}, 1024).ok());
  before = this->Scripts();
  auto d = this->life_->WaitAnyFinal({InvocationId("d")}, kSecond / 30, 1024);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d.value().has_value());
  EXPECT_EQ(this->Scripts() - before, 1) << "d's registration";
  for (const std::int64_t registrations : {0, 1}) {
    before = this->Scripts();
    auto c = this->life_->WaitAnyFinal({InvocationId("c")}, kSecond / 30, 1024);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_FALSE(c.value().has_value());
    EXPECT_EQ(this->Scripts() - before, registrations);
  }
  // An arm replaced by the next armed read is withdrawn: its registration goes.
  auto raw = redis::OpenClient(this->backend_.Config(this->clock_)).value();
  const std::string fw_d = redis::KeyPrefix("compliance-app", "orchestrator") + "fw:d";
  ASSERT_TRUE(raw->Command({"DEL", fw_d}).ok());
  ASSERT_TRUE(this->life_->ReadFinalArmed(InvocationId("d"), {}, 1024).ok());
  EXPECT_EQ(raw->Command({"SCARD", fw_d}).value().integer, 1);
  ASSERT_TRUE(this->life_->ReadFinalArmed(InvocationId("c"), {}, 1024).ok());
  EXPECT_EQ(raw->Command({"SCARD", fw_d}).value().integer, 0) << "d's arm withdrawn";
  // A final id is not armed: its read is all there is.
  auto done = this->life_->ReadFinalArmed(InvocationId("a"), {}, 1024);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.value().first.record.status, S::kSuccess);
  EXPECT_EQ(done.value().first.result, std::optional<std::string>("\"y\""));
}

// Redis: a note carries a result of at most 16 KiB; a longer one is read by the
// caller on its own (the record still comes with the note).
TYPED_TEST(WaitAnyFinalRoundTrips, ANoteLeavesALargeResultOut) {
  const std::string big = "\"" + std::string(20 * 1024, 'b') + "\"";
  this->Running("big");
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(
        this->life_->FinishSuccess(InvocationId("big"), big, kRunner, TaskId("mod.task"), true)
            .ok());
  });
  auto woken = this->life_->WaitAnyFinal({InvocationId("big")}, 5 * kSecond, 64 * 1024);
  finisher.join();
  ASSERT_TRUE(woken.ok() && woken.value() && woken.value()->read);
  EXPECT_EQ(woken.value()->read->record, this->orch_->GetStatusRecord(InvocationId("big")).value());
  EXPECT_EQ(woken.value()->read->result, std::nullopt);
  // Already final, the registration reads it (up to the caller's size).
  auto again = this->life_->WaitAnyFinal({InvocationId("big")}, 0, 64 * 1024);
  ASSERT_TRUE(again.ok() && again.value() && again.value()->read);
  EXPECT_EQ(again.value()->read->result, std::optional<std::string>(big));
}

// Redis: a status made final by a port change (not the finish composite) wakes
// the lifecycle's wait with a note that carries no record: the id comes without
// a read, and the orchestrator's own wait reads the same note.
TYPED_TEST(WaitAnyFinalRoundTrips, APortChangeWakesWithoutARecord) {
  for (const bool lifecycle : {true, false}) {
    const std::string id = lifecycle ? "p-life" : "p-orch";
    this->Running(id);
    std::thread changer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto r = this->orch_->TransitionStatus(InvocationId(id), S::kSuccess, kRunner.runner_id);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    });
    if (lifecycle) {
      auto got = this->life_->WaitAnyFinal({InvocationId(id)}, 5 * kSecond, 1024);
      changer.join();
      ASSERT_TRUE(got.ok() && got.value());
      EXPECT_EQ(got.value()->id, InvocationId(id));
      EXPECT_FALSE(got.value()->read.has_value());
    } else {
      auto got = this->orch_->WaitAnyFinal({InvocationId(id)}, 5 * kSecond);
      changer.join();
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got.value(), std::optional<InvocationId>(InvocationId(id)));
    }
  }
}

TEST(FinalNote, NamesOneOfTheIdsWaitedFor) {
  using redis_orchestrator::ParseFinalNote;
  const std::vector<InvocationId> ids{InvocationId("a:b"), InvocationId("abc"),
                                      InvocationId("12:x")};
  struct Case {
    const char* note;
    const char* id;
    const char* extra;
  };
  for (const Case& c : {
           Case{"3:abc", "abc", ""}, Case{"3:abcsuccess:17:r\"x\"", "abc", "success:17:r\"x\""},
           Case{"3:a:bfailed:5:n", "a:b", "failed:5:n"},  // a colon in the id
           Case{"12:x", "12:x", ""},  // an engine before the length prefix: the bare id
       }) {
    auto got = ParseFinalNote(c.note, ids);
    ASSERT_TRUE(got) << c.note;
    EXPECT_EQ(got->id, InvocationId(c.id)) << c.note;
    EXPECT_EQ(got->extra, c.extra) << c.note;
  }
  EXPECT_FALSE(ParseFinalNote("3:xyz", ids));   // not ours
  EXPECT_FALSE(ParseFinalNote("99:abc", ids));  // length past the end
  EXPECT_FALSE(ParseFinalNote("", ids));        // empty
  EXPECT_FALSE(ParseFinalNote("-3:abc", ids));  // no length
  EXPECT_FALSE(ParseFinalNote("abcd", ids));    // bare, not ours
}

// The record a finish script's note carries after the id.
TEST(FinalNote, CarriesTheFinalRecordAndASmallResult) {
  using native::ParseNoteRecord;
  auto ok = ParseNoteRecord("success:17:r\"a:b\"");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->record.status, InvocationStatus::kSuccess);
  EXPECT_EQ(ok->record.timestamp_us, 17);
  EXPECT_EQ(ok->record.runner_id, std::nullopt);
  EXPECT_EQ(ok->result, std::optional<std::string>("\"a:b\""));
  auto failed = ParseNoteRecord("failed:-5:n");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->record.status, InvocationStatus::kFailed);
  EXPECT_EQ(failed->record.timestamp_us, -5);
  EXPECT_EQ(failed->result, std::nullopt);
  auto left_out = ParseNoteRecord("success:9:n");  // a result too long for a note
  ASSERT_TRUE(left_out);
  EXPECT_EQ(left_out->result, std::nullopt);
  for (const char* bad :
       {"", "success", "success:17", "success:17:", "success::n", "success:1x:n", "success:17:x",
        "success:17:nx", "failed:17:rR", "running:17:n", "nonsense:17:n"}) {
    EXPECT_FALSE(ParseNoteRecord(bad)) << bad;
  }
}

}  // namespace
}  // namespace pynenc_cpp
