// SQLite cross-process wake-ups (sqlite/sqlite_wake.h): the board file is shared
// by every process that opens the database, a wait returns when another process
// bumps its slot, no wake-up is lost between a check and a sleep, and a broker
// Retrieve or an orchestrator WaitAnyFinal blocked in one process wakes for a
// route or a final status committed by another. No timing assertions: the poll
// cap is raised to an hour, so returning at all proves a wake-up, not a poll.
#include "sqlite/sqlite_wake.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/orchestrator.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {
namespace {

using pynenc_cpp::testing::SqliteBackend;
using Clock = std::chrono::steady_clock;
constexpr auto kHour = std::chrono::hours(1);

std::shared_ptr<Database> OpenDb(const SqliteBackend& b) {
  auto db = Database::Open(SqliteOptions{b.Path()});
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.value();
}

// Forks a child that runs `fn` after `delay` and exits 0 (1 if fn returned false).
pid_t ForkAfter(std::chrono::milliseconds delay, const std::function<bool()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::this_thread::sleep_for(delay);
    _exit(fn() ? 0 : 1);
  }
  return pid;
}

void ExpectChildOk(pid_t pid) {
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SqliteWakeBoard, TheFileBesideTheDatabaseIsSharedAcrossProcesses) {
  SqliteBackend b;
  auto db = OpenDb(b);
  WakeBoard& board = db->wake();
  ASSERT_TRUE(board.cross_process());
  EXPECT_EQ(board.path(), b.Path() + "-wake");
  struct stat db_st {
  }, wake_st{};
  ASSERT_EQ(stat(b.Path().c_str(), &db_st), 0);
  ASSERT_EQ(stat(board.path().c_str(), &wake_st), 0);
  EXPECT_EQ(wake_st.st_mode & 0777, db_st.st_mode & 0666) << "the board takes the file's mode";
  const std::uint32_t before = board.Seq(7);
  // The child maps the file afresh: only a shared file carries the bump back.
  ExpectChildOk(ForkAfter(std::chrono::milliseconds(0), [&] {
    WakeBoard::Open(b.Path())->Wake(std::uint64_t{1} << 7);
    return true;
  }));
  EXPECT_EQ(board.Seq(7), before + 1);
  EXPECT_EQ(board.Seq(8), 0u) << "other slots untouched";
}

TEST(SqliteWakeBoard, AWaitReturnsWhenAnotherProcessWakesItsSlot) {
  SqliteBackend b;
  auto db = OpenDb(b);
  WakeBoard& board = db->wake();
  board.set_poll_cap(kHour);
  const std::uint32_t seen = board.Seq(3);
  const pid_t child = ForkAfter(std::chrono::milliseconds(100), [&] {
    WakeBoard::Open(b.Path())->Wake(std::uint64_t{1} << 3);
    return true;
  });
  board.Wait(3, seen, Clock::now() + kHour);  // returns only if woken
  EXPECT_NE(board.Seq(3), seen);
  ExpectChildOk(child);
}

TEST(SqliteWakeBoard, AWriterWaitingForTheLockWakesWhenAWriteInAnotherProcessEnds) {
  SqliteBackend b;
  auto db = OpenDb(b);
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (x INTEGER)").ok());
  WakeBoard& board = db->wake();
  const std::uint32_t seen = board.WriterSeq();
  const std::uint32_t route_seq = board.Seq(1);
  // The child's write transaction ends: its Database bumps the write-lock counter.
  const pid_t child = ForkAfter(std::chrono::milliseconds(100), [&] {
    auto other = Database::Open(SqliteOptions{b.Path()});
    return other.ok() &&
           other.value()->Write([](Conn& c) { return c.Exec("INSERT INTO t VALUES (1)"); }).ok();
  });
  board.WaitWriter(seen, Clock::now() + kHour);  // returns only if woken
  EXPECT_NE(board.WriterSeq(), seen);
  EXPECT_EQ(board.Seq(1), route_seq);  // a counter of its own, not a route slot's
  ExpectChildOk(child);
  // A read transaction never held the lock: it wakes no one.
  const std::uint32_t after_write = board.WriterSeq();
  ASSERT_TRUE(db->Read([](Conn& c) { return c.Exec("SELECT count(*) FROM t"); }).ok());
  EXPECT_EQ(board.WriterSeq(), after_write);
  // A write that rolls back released the lock too.
  ASSERT_FALSE(db->Write([](Conn&) { return Status::InvalidArgument("no"); }).ok());
  EXPECT_EQ(board.WriterSeq(), after_write + 1);
}

TEST(SqliteWakeBoard, AWaitOnAnAlreadyMovedCounterReturnsAtOnce) {
  SqliteBackend b;
  auto db = OpenDb(b);
  WakeBoard& board = db->wake();
  board.set_poll_cap(kHour);
  const std::uint32_t seen = board.Seq(1);
  board.Wake(std::uint64_t{1} << 1);
  board.Wait(1, seen, Clock::now() + kHour);
  board.Wait(1, seen + 5, Clock::now() + kHour);  // any other value: no sleep
  EXPECT_EQ(board.Seq(1), seen + 1);
}

TEST(SqliteWakeBoard, NoWakeUpIsLostBetweenACheckAndASleep) {
  // Consumers wait for the counter to reach each value in turn while a producer
  // bumps it as fast as it can; a lost wake-up would hang a consumer for an hour.
  SqliteBackend b;
  auto db = OpenDb(b);
  WakeBoard& board = db->wake();
  board.set_poll_cap(kHour);
  constexpr std::uint32_t kBumps = 20'000;
  const std::uint32_t base = board.Seq(9);
  std::vector<std::thread> consumers;
  for (int t = 0; t < 3; ++t) {
    consumers.emplace_back([&] {
      while (true) {
        const std::uint32_t seen = board.Seq(9);
        if (seen - base >= kBumps) return;
        board.Wait(9, seen, Clock::now() + kHour);
      }
    });
  }
  for (std::uint32_t i = 0; i < kBumps; ++i) board.Wake(std::uint64_t{1} << 9);
  for (auto& t : consumers) t.join();
  EXPECT_EQ(board.Seq(9) - base, kBumps);
}

TEST(SqliteWakeBoard, DeadlinesEndAWait) {
  SqliteBackend b;
  auto db = OpenDb(b);
  WakeBoard& board = db->wake();
  board.set_poll_cap(kHour);
  board.Wait(2, board.Seq(2), Clock::now() + std::chrono::milliseconds(20));
  board.Wait(2, board.Seq(2), Clock::now() - std::chrono::seconds(1));  // already past
  SUCCEED();
}

TEST(SqliteWakeBoard, AnUnmappableFileFallsBackToAProcessLocalBoard) {
  SqliteBackend b;
  std::filesystem::create_directories(b.Path() + "-wake");  // a directory where the file goes
  auto board = WakeBoard::Open(b.Path());
  EXPECT_FALSE(board->cross_process());
  const std::uint32_t seen = board->Seq(4);
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    board->Wake(std::uint64_t{1} << 4);
  });
  board->set_poll_cap(kHour);
  board->Wait(4, seen, Clock::now() + kHour);  // in-process wake-ups still work
  waker.join();
  EXPECT_EQ(board->Seq(4), seen + 1);
}

TEST(SqliteWakeBoard, QueueSlotsAreRouteSlotsAndStable) {
  for (const char* q : {"", "default", "q1", "a-very-long-queue-name-indeed"}) {
    const int slot = WakeBoard::QueueSlot("app", q);
    EXPECT_GE(slot, 1);
    EXPECT_LT(slot, WakeBoard::kSlots);
    EXPECT_NE(slot, WakeBoard::kFinalSlot);
    EXPECT_EQ(slot, WakeBoard::QueueSlot("app", q));
  }
}

TEST(SqliteWakeBoard, ARetrieveBlockedHereWakesForARouteFromAnotherProcess) {
  SqliteBackend b;
  auto db = OpenDb(b);
  db->wake().set_poll_cap(kHour);
  auto broker = OpenBroker(b.Config());
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  const pid_t child = ForkAfter(std::chrono::milliseconds(150), [&] {
    auto other = OpenBroker(b.Config());
    return other.ok() && other.value()->Route({InvocationId("from-child")}, "q", 0).ok();
  });
  auto got = broker.value()->Retrieve("q", 3'600'000);
  ExpectChildOk(child);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got.value().has_value());
  EXPECT_EQ(got.value()->str(), "from-child");
}

TEST(SqliteWakeBoard, AnInterruptEndsABlockedRetrieve) {
  SqliteBackend b;
  auto db = OpenDb(b);
  db->wake().set_poll_cap(kHour);
  auto broker = OpenBroker(b.Config());
  ASSERT_TRUE(broker.ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    broker.value()->Interrupt();
  });
  auto got = broker.value()->Retrieve("q", 3'600'000);
  stopper.join();
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got.value().has_value());
}

TEST(SqliteWakeBoard, AWaitAnyFinalHereWakesForAFinalStatusFromAnotherProcess) {
  SqliteBackend b;
  auto db = OpenDb(b);
  db->wake().set_poll_cap(kHour);
  auto orch = OpenOrchestrator(b.Config());
  ASSERT_TRUE(orch.ok()) << orch.status().ToString();
  const InvocationId id("inv-1");
  ASSERT_TRUE(orch.value()
                  ->RegisterInvocations({NewInvocation{id, TaskId("m.t"), CallId("m.t:1")}}, "r")
                  .ok());
  ASSERT_TRUE(orch.value()->TransitionStatus(id, InvocationStatus::kPending, "r").ok());
  ASSERT_TRUE(orch.value()->TransitionStatus(id, InvocationStatus::kRunning, "r").ok());
  const pid_t child = ForkAfter(std::chrono::milliseconds(150), [&] {
    auto other = OpenOrchestrator(b.Config());
    return other.ok() && other.value()->TransitionStatus(id, InvocationStatus::kSuccess, "r").ok();
  });
  auto got = orch.value()->WaitAnyFinal({id}, TimestampUs{3'600'000'000});
  ExpectChildOk(child);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), id);
}

}  // namespace
}  // namespace pynenc_cpp::sqlite
