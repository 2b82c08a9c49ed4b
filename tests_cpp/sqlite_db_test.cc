// SQLite plumbing: options, opening bad paths, schema versions, transactions,
// concurrent writers from threads and from forked processes.
#include "sqlite/sqlite_db.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/core/metrics.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite_test_util.h"

namespace pynenc_cpp::sqlite {
namespace {

using pynenc_cpp::testing::ReadInt;
using pynenc_cpp::testing::SqliteBackend;

std::shared_ptr<Database> OpenOk(const std::string& path) {
  auto db = Database::Open(SqliteOptions{path});
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? db.value() : nullptr;
}

std::int64_t CountRows(Database& db, const std::string& table) {
  return ReadInt(db, "SELECT count(*) FROM " + table);
}

TEST(SqliteOptions, ParsesPathAndOptions) {
  auto o = ParseSqliteLocation("/tmp/a.db?synchronous=full&busy_timeout_ms=250");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.value().path, "/tmp/a.db");
  EXPECT_TRUE(o.value().synchronous_full);
  EXPECT_EQ(o.value().busy_timeout_ms, 250);
  EXPECT_FALSE(ParseSqliteLocation("/tmp/a.db").value().synchronous_full);
  for (const char* bad : {"?synchronous=full", "/a?synchronous=off", "/a?busy_timeout_ms=-1",
                          "/a?busy_timeout_ms=x", "/a?colour=red"}) {
    auto r = ParseSqliteLocation(bad);
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig) << bad;
  }
}

TEST(SqliteDatabase, EachOpenHasItsOwnPoolOnTheSharedFileInWal) {
  SqliteBackend b;
  auto a = OpenOk(b.Path());
  auto again = OpenOk(b.Path());
  EXPECT_NE(a.get(), again.get());  // no process-wide registry: a Storage owns each
  ASSERT_TRUE(a->Write([](Conn& c) { return c.Exec("CREATE TABLE t (x INTEGER)"); }).ok());
  ASSERT_TRUE(a->Write([](Conn& c) { return c.Exec("INSERT INTO t VALUES (7)"); }).ok());
  std::int64_t seen = 0;
  ASSERT_TRUE(again
                  ->Read([&](Conn& c) -> Status {
                    auto q = c.Prepare("SELECT x FROM t");
                    if (!q.ok()) return q.status();
                    (void)q.value()->Step();
                    seen = q.value()->Int(0);
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(seen, 7);
  std::string mode;
  ASSERT_TRUE(a->Read([&](Conn& c) -> Status {
                 auto q = c.Prepare("PRAGMA journal_mode");
                 if (!q.ok()) return q.status();
                 (void)q.value()->Step();
                 mode = q.value()->Text(0);
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(mode, "wal");
}

TEST(SqliteDatabase, DirectoryAndCorruptFileAreClearErrors) {
  SqliteBackend b;
  const std::string dir = b.Path() + ".d";
  std::filesystem::create_directory(dir);
  auto d = Database::Open(SqliteOptions{dir});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(d.status().message().find("is a directory"), std::string::npos);

  const std::string junk = b.Path() + ".junk";
  std::ofstream(junk) << std::string(4096, 'x');
  auto j = Database::Open(SqliteOptions{junk});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(j.status().message().find("not a valid SQLite database"), std::string::npos)
      << j.status().message();

  auto missing_dir = Database::Open(SqliteOptions{b.Path() + ".nodir/x.db"});
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.status().message().find(".nodir/x.db"), std::string::npos);
}

TEST(SqliteDatabase, SchemaVersionsAreChecked) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  const std::string ddl = "CREATE TABLE t (x INTEGER)";
  ASSERT_TRUE(db->EnsureSchema("widget", 1, ddl).ok());
  ASSERT_TRUE(db->EnsureSchema("widget", 1, ddl).ok());  // idempotent
  Status newer = db->EnsureSchema("widget", 0, ddl);
  EXPECT_EQ(newer.code(), ErrorCode::kBadConfig);
  EXPECT_NE(newer.message().find("newer pynenc-cpp"), std::string::npos);
  Status older = db->EnsureSchema("widget", 2, ddl);
  EXPECT_EQ(older.code(), ErrorCode::kBadConfig);
  EXPECT_NE(older.message().find("no migration"), std::string::npos);
}

// How many indexes named `name` the file has.
std::int64_t CountIndex(Database& db, const std::string& name) {
  return ReadInt(
      db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = '" + name + "'");
}

std::int64_t StoredVersion(Database& db, const std::string& component) {
  return ReadInt(db, "SELECT version FROM pynenc_cpp_schema WHERE component = '" + component + "'");
}

const char* kWidgetV1 = "CREATE TABLE t (x INTEGER); CREATE INDEX t_x ON t (x);";

// A version-1 widget file holding one row.
std::shared_ptr<Database> WidgetV1(const std::string& path) {
  auto db = OpenOk(path);
  EXPECT_TRUE(db->EnsureSchema("widget", 1, kWidgetV1).ok());
  EXPECT_TRUE(db->Write([](Conn& c) { return c.Exec("INSERT INTO t (x) VALUES (7)"); }).ok());
  return db;
}

TEST(SqliteDatabase, MigrationsRunInOrderAndRecordTheNewVersion) {
  SqliteBackend b;
  auto db = WidgetV1(b.Path());
  const std::vector<SchemaMigration> steps = {
      // Listed out of order; step 2 needs the table step 1 makes.
      {2,
       "ALTER TABLE u ADD COLUMN b INTEGER; ALTER TABLE t ADD COLUMN y INTEGER NOT NULL DEFAULT 0"},
      {1, "DROP INDEX t_x; CREATE TABLE u (a INTEGER)"},
  };
  ASSERT_TRUE(db->EnsureSchema("widget", 3, "unused: the tables exist", steps).ok());
  EXPECT_EQ(StoredVersion(*db, "widget"), 3);
  EXPECT_EQ(CountIndex(*db, "t_x"), 0);
  EXPECT_EQ(ReadInt(*db, "SELECT x + y FROM t"), 7);  // the row is kept, the column added
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM pragma_table_info('u')"), 2);
  ASSERT_TRUE(db->EnsureSchema("widget", 3, "unused", steps).ok());  // nothing left to run
  EXPECT_EQ(db->EnsureSchema("widget", 1, kWidgetV1).code(), ErrorCode::kBadConfig);  // newer
}

TEST(SqliteDatabase, AMissingMigrationStepRefusesTheFileUntouched) {
  SqliteBackend b;
  auto db = WidgetV1(b.Path());
  Status s = db->EnsureSchema("widget", 3, "unused", {{1, "DROP INDEX t_x"}});  // no 2 -> 3
  EXPECT_EQ(s.code(), ErrorCode::kBadConfig);
  EXPECT_NE(s.message().find("no migration"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("widget"), std::string::npos);
  EXPECT_EQ(StoredVersion(*db, "widget"), 1);
  EXPECT_EQ(CountIndex(*db, "t_x"), 1);
}

TEST(SqliteDatabase, AFailingMigrationStepRollsEveryStepBack) {
  SqliteBackend b;
  auto db = WidgetV1(b.Path());
  Status s = db->EnsureSchema("widget", 3, "unused",
                              {{1, "DROP INDEX t_x"}, {2, "ALTER TABLE nowhere ADD COLUMN z"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("migrating the widget schema from version 2"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(b.Path()), std::string::npos) << s.message();
  EXPECT_EQ(StoredVersion(*db, "widget"), 1);
  EXPECT_EQ(CountIndex(*db, "t_x"), 1);  // step 1 was undone with step 2
  EXPECT_EQ(CountRows(*db, "t"), 1);
}

TEST(SqliteDatabase, FailedWriteRollsBack) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (x INTEGER)").ok());
  Status s = db->Write([](Conn& c) -> Status {
    if (Status e = c.Exec("INSERT INTO t VALUES (1)"); !e.ok()) return e;
    return Status::InvalidArgument("abort");
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(CountRows(*db, "t"), 0);
}

// Metrics counted inside a transaction are published only when it commits.
TEST(SqliteDatabase, MetricsCountOnlyWhatCommits) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  const StatusRecord from{InvocationStatus::kRunning, std::nullopt, 1'000};
  const StatusRecord to{InvocationStatus::kSuccess, std::nullopt, 251'000};
  const metrics::Snapshot before = metrics::Take();
  Status failed = db->Write([&](Conn& c) -> Status {
    c.CountRegistered(3);
    c.CountTransition(from, to);
    return Status::BackendFailure("a later step failed");
  });
  ASSERT_FALSE(failed.ok());
  metrics::Snapshot mid = metrics::Take();
  EXPECT_EQ(mid.entered, before.entered);
  EXPECT_EQ(mid.run_time.count, before.run_time.count);
  ASSERT_TRUE(db->Write([&](Conn& c) -> Status {
                  c.CountRegistered(2);
                  c.CountTransition(from, to);
                  return Status::Ok();
                }).ok());
  const metrics::Snapshot after = metrics::Take();
  const auto at = [](InvocationStatus s) { return static_cast<std::size_t>(s); };
  EXPECT_EQ(after.entered[at(InvocationStatus::kRegistered)] -
                before.entered[at(InvocationStatus::kRegistered)],
            2u);
  EXPECT_EQ(after.entered[at(InvocationStatus::kSuccess)] -
                before.entered[at(InvocationStatus::kSuccess)],
            1u);
  EXPECT_EQ(after.run_time.count - before.run_time.count, 1u);
  EXPECT_EQ(after.run_time.sum_us - before.run_time.sum_us, 250'000);
  // 250 ms falls in the le=0.25 s bucket.
  std::size_t bucket = 0;
  while (metrics::kBucketBoundsUs[bucket] < 250'000) ++bucket;
  EXPECT_EQ(after.run_time.buckets[bucket] - before.run_time.buckets[bucket], 1u);
}

TEST(SqliteDatabase, ConcurrentThreadWritersAllCommit) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (n INTEGER)").ok());
  ASSERT_TRUE(db->Write([](Conn& c) { return c.Exec("INSERT INTO t VALUES (0)"); }).ok());
  constexpr int kThreads = 4, kEach = 100;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kEach; ++j) {
        // Read-modify-write inside one IMMEDIATE transaction: no lost update.
        Status s = db->Write([](Conn& c) -> Status {
          auto q = c.Prepare("SELECT n FROM t");
          if (!q.ok()) return q.status();
          (void)q.value()->Step();
          const std::int64_t n = q.value()->Int(0);
          auto u = c.Prepare("UPDATE t SET n = ?");
          if (!u.ok()) return u.status();
          return u.value()->Bind(1, n + 1).Run();
        });
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::int64_t n = 0;
  ASSERT_TRUE(db->Read([&](Conn& c) -> Status {
                  auto q = c.Prepare("SELECT n FROM t");
                  (void)q.value()->Step();
                  n = q.value()->Int(0);
                  return Status::Ok();
                }).ok());
  EXPECT_EQ(n, kThreads * kEach);
}

TEST(SqliteDatabase, ForkedChildrenWriteTheSameFile) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (who INTEGER)").ok());
  constexpr int kChildren = 3, kEach = 50;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child reuses the parent's Database object: it must open its own handles.
      int failures = 0;
      for (int j = 0; j < kEach; ++j) {
        Status s = db->Write([&](Conn& c) -> Status {
          auto q = c.Prepare("INSERT INTO t VALUES (?)");
          if (!q.ok()) return q.status();
          return q.value()->Bind(1, static_cast<std::int64_t>(i)).Run();
        });
        failures += s.ok() ? 0 : 1;
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
  EXPECT_EQ(CountRows(*db, "t"), kChildren * kEach);
}

// A write nested in another write of the same file joins it even through
// another Database object. A forked child holds two for one path (the one its
// parent opened, used by components made before the fork, and the one it opens
// itself); a second BEGIN IMMEDIATE would wait for the lock its own thread
// holds until the busy timeout, while every other process waited for it
// (issue 15: "database stayed locked" with MultiThreadRunner).
TEST(SqliteDatabase, ANestedWriteThroughAnotherDatabaseOfTheFileJoinsIt) {
  SqliteBackend b;
  auto outer = Database::Open(SqliteOptions{b.Path(), false, 300});
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE(outer.value()->EnsureSchema("t", 1, "CREATE TABLE t (x INTEGER)").ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // In the child: the parent's object, and one opened here (another key).
    auto inner = Database::Open(SqliteOptions{b.Path(), false, 300});
    if (!inner.ok() || inner.value().get() == outer.value().get()) _exit(2);
    Status s = outer.value()->Write([&](Conn& c) -> Status {
      if (Status e = c.Exec("INSERT INTO t VALUES (1)"); !e.ok()) return e;
      return inner.value()->Write(
          [](Conn& c2) -> Status { return c2.Exec("INSERT INTO t VALUES (2)"); });
    });
    _exit(s.ok() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the nested write did not join (database locked)";
  EXPECT_EQ(CountRows(*outer.value(), "t"), 2);
  // The same in one process with two objects for the path (other options).
  auto other = Database::Open(SqliteOptions{b.Path(), true, 300});
  ASSERT_TRUE(other.ok());
  ASSERT_NE(other.value().get(), outer.value().get());
  Status s = outer.value()->Write([&](Conn& c) -> Status {
    if (Status e = c.Exec("INSERT INTO t VALUES (3)"); !e.ok()) return e;
    return other.value()->Write(
        [](Conn& c2) -> Status { return c2.Exec("DELETE FROM t WHERE x = 1"); });
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(CountRows(*outer.value(), "t"), 2);
}

// Runs `fn` while another Database object of the same file holds the write
// lock for `hold` (a writer frozen inside a transaction, or merely slow); the
// holder inserts 1, `fn` its own rows.
Status WriteWhileLocked(Database& holder, Database& waiter, std::chrono::milliseconds hold,
                        const std::function<Status(Conn&)>& fn) {
  std::atomic<bool> locked{false};
  std::thread t([&] {
    (void)holder.Write([&](Conn& c) -> Status {
      Status e = c.Exec("INSERT INTO t VALUES (1)");
      locked = true;
      std::this_thread::sleep_for(hold);
      return e;
    });
  });
  while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Status s = waiter.Write(fn);
  t.join();
  return s;
}

// A write that waits past the busy timeout for a lock another writer keeps (a
// process frozen inside a transaction) is a lost connection that applied
// nothing: the adapters ride it out like a storage server's outage.
TEST(SqliteDatabase, ALockHeldPastTheBusyTimeoutIsAnOutageThatAppliedNothing) {
  SqliteBackend b;
  auto holder = Database::Open(SqliteOptions{b.Path(), false, 5000});
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE(holder.value()->EnsureSchema("t", 1, "CREATE TABLE t (x INTEGER)").ok());
  auto waiter = Database::Open(SqliteOptions{b.Path(), true, 100});  // another object
  ASSERT_TRUE(waiter.ok());
  ASSERT_NE(waiter.value().get(), holder.value().get());
  Status s = WriteWhileLocked(*holder.value(), *waiter.value(), std::chrono::milliseconds(600),
                              [](Conn& c) -> Status { return c.Exec("INSERT INTO t VALUES (2)"); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stayed locked"), std::string::npos) << s.ToString();
  EXPECT_TRUE(s.connection_lost());
  EXPECT_FALSE(s.maybe_applied());
  EXPECT_EQ(CountRows(*holder.value(), "t"), 1);  // only the holder's row
}

// The busy handler retries a locked statement until the busy timeout has passed
// since the lock event began (a new event starts its own clock), then gives up.
TEST(SqliteConn, BusyHandlerRetriesUntilTheTimeoutThenGivesUp) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &raw), SQLITE_OK);
  Conn conn(raw, ":memory:");
  conn.SetBusyTimeout(30);
  EXPECT_TRUE(conn.OnBusy(0));
  EXPECT_TRUE(conn.OnBusy(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_FALSE(conn.OnBusy(2));  // 30 ms since the event's first call
  EXPECT_TRUE(conn.OnBusy(0));   // the next lock event
}

// A write that finds the lock taken waits for it and then applies.
TEST(SqliteDatabase, AWriteWaitsForALockReleasedWithinTheBusyTimeout) {
  SqliteBackend b;
  auto holder = Database::Open(SqliteOptions{b.Path(), false, 5000});
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE(holder.value()->EnsureSchema("t", 1, "CREATE TABLE t (x INTEGER)").ok());
  auto waiter = Database::Open(SqliteOptions{b.Path(), true, 5000});  // another object
  ASSERT_TRUE(waiter.ok());
  ASSERT_NE(waiter.value().get(), holder.value().get());
  const metrics::Snapshot before = metrics::Take();
  Status s = WriteWhileLocked(*holder.value(), *waiter.value(), std::chrono::milliseconds(150),
                              [](Conn& c) -> Status { return c.Exec("INSERT INTO t VALUES (2)"); });
  const metrics::Snapshot after = metrics::Take();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(CountRows(*holder.value(), "t"), 2);
  // The contention is counted: pauses of at most 1 ms, about as long in all as
  // the lock was held.
  EXPECT_GE(after.sqlite_busy_waits - before.sqlite_busy_waits, 2u);
  EXPECT_GE(after.sqlite_busy_wait_us - before.sqlite_busy_wait_us, 50'000);
}

// Commits `rows` rows of 8000 bytes each, one transaction per row: two pages
// of the database file a row, and four or five WAL frames (the leaf, the two
// overflow pages, an interior page, page 1). False on the first failure.
bool WriteBlobs(Database& db, int rows) {
  for (int i = 0; i < rows; ++i) {
    Status s =
        db.Write([](Conn& c) -> Status { return c.Exec("INSERT INTO t VALUES (zeroblob(8000))"); });
    if (!s.ok()) return false;
  }
  return true;
}

// Polls `db.checkpoints_run()` until it reaches `n` or 10 s pass.
bool WaitForCheckpoints(const Database& db, std::uint64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (db.checkpoints_run() < n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// No commit checkpoints on its own thread (SQLite's automatic checkpoint is off
// on every connection: the WAL hook replaced it); once the WAL passes the
// threshold, this process's checkpointer copies it into the database file.
TEST(SqliteDatabase, CheckpointsRunInTheBackgroundNotInTheCommit) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (x BLOB)").ok());
  EXPECT_EQ(ReadInt(*db, "PRAGMA wal_autocheckpoint"), 0) << "SQLite would checkpoint in commits";
  const auto before = std::filesystem::file_size(b.Path());
  ASSERT_TRUE(WriteBlobs(*db, 100));  // ~450 WAL frames: below the threshold
  EXPECT_EQ(db->checkpoints_run() + db->checkpoints_failed(), 0u);
  ASSERT_TRUE(WriteBlobs(*db, 500));  // past it
  ASSERT_TRUE(WaitForCheckpoints(*db, 1));
  // A checkpoint at 1,000 frames copied the ~220 rows written by then, 2 pages
  // of 4 KiB each, into the database file, which held none of them.
  EXPECT_GE(std::filesystem::file_size(b.Path()), before + (std::uintmax_t{1} << 20));
  EXPECT_EQ(CountRows(*db, "t"), 600);
}

// Under steady writes from two threads the WAL is never quiet, so a writer
// never finds it fully copied and SQLite never rewinds it: the checkpointer
// rewinds it itself past kRestartPages (RESTART, so the file is reused, never
// truncated), and asks for a checkpoint per kCheckpointPages of growth, not on
// every commit past the threshold.
// What one run of the steady-writes scenario below saw.
struct SteadyWrites {
  int failed = 0;
  std::int64_t rows = 0;
  std::uintmax_t largest_wal = 0;
  bool shrank = false;  // below restart_size after having reached it
  std::uint64_t checkpoints_run = 0;
  std::uint64_t checkpoints_failed = 0;
};

SteadyWrites RunSteadyWrites(std::uintmax_t restart_size) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  EXPECT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (x BLOB)").ok());
  const std::string wal = b.Path() + "-wal";
  constexpr int kRowsPerThread = 3000;  // ~4.5 WAL pages a row: ~27,000 pages in all
  std::atomic<std::uintmax_t> largest_wal{0};
  std::atomic<bool> shrank{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < kRowsPerThread; ++i) {
        if (!WriteBlobs(*db, 1)) ++failed;
        // The largest size seen before this one's is read first: a size read
        // earlier by this thread is not compared with a later peak.
        std::uintmax_t seen = largest_wal.load();
        std::error_code ec;
        const std::uintmax_t size = std::filesystem::file_size(wal, ec);
        if (ec) continue;
        if (seen >= restart_size && size < restart_size) shrank = true;
        while (size > seen && !largest_wal.compare_exchange_weak(seen, size)) {
        }
      }
    });
  }
  for (std::thread& w : writers) w.join();
  SteadyWrites out;
  out.failed = failed.load();
  out.rows = CountRows(*db, "t");
  out.largest_wal = largest_wal.load();
  out.shrank = shrank.load();
  out.checkpoints_run = db->checkpoints_run();
  out.checkpoints_failed = db->checkpoints_failed();
  return out;
}

TEST(SqliteDatabase, SteadyWritesKeepTheWalBoundedWithFewCheckpoints) {
  const std::uintmax_t page = 4096 + 24;  // a WAL frame: header + page
  const std::uintmax_t restart_size = std::uintmax_t{Database::kRestartPages} * page;
  // The checkpointer is a background thread: on a 2-core machine where another
  // test (ctest -j2) and the two writers take both cores, it can be starved long
  // enough for the WAL to pass the bound below although nothing is wrong (seen
  // once in a clean-clone CI run: 91 MB against 82 MB). Up to three runs; every
  // check is made on the last one, and a WAL that is never rewound fails all three.
  SteadyWrites run;
  for (int attempt = 0; attempt < 3; ++attempt) {
    run = RunSteadyWrites(restart_size);
    if (run.largest_wal <= 2 * restart_size) break;
  }
  EXPECT_EQ(run.failed, 0);
  EXPECT_EQ(run.rows, 2 * 3000);
  // A rewound WAL stays under kRestartPages plus what is written while the
  // checkpoints run (a RESTART that found the WAL busy is tried again 1,000 pages
  // later); never rewound, it holds all ~24,000-27,000 pages (~100-110 MB).
  EXPECT_GE(run.largest_wal, restart_size) << "the WAL never reached kRestartPages";
  EXPECT_LE(run.largest_wal, 2 * restart_size) << "the WAL grew without being rewound";
  // Rewound in place: the file keeps its size, so later frames overwrite pages
  // the OS has cached instead of pages it must allocate again.
  EXPECT_FALSE(run.shrank) << "the WAL file was truncated instead of reused";
  // One request per kCheckpointPages of growth: ~27 here (asked on every commit
  // past the threshold, the checkpointer ran back to back: hundreds).
  EXPECT_LE(run.checkpoints_run + run.checkpoints_failed, 60u);
  EXPECT_GE(run.checkpoints_run, 2u);
}

// A reader that keeps its snapshot keeps the WAL from being rewound, so it grows
// past kRestartPages; once the reader is gone, the next rewind cuts the file
// back to kWalSizeLimitBytes (PRAGMA journal_size_limit) instead of keeping it
// at its largest while the database is open.
TEST(SqliteDatabase, AWalGrownPastTheLimitIsCutBackWhenRewound) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (x BLOB)").ok());
  ASSERT_TRUE(WriteBlobs(*db, 1));
  const std::string wal = b.Path() + "-wal";
  const auto wal_size = [&] {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(wal, ec);
    return ec ? std::uintmax_t{0} : size;
  };
  const std::uintmax_t limit = static_cast<std::uintmax_t>(Database::kWalSizeLimitBytes);
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(b.Path().c_str(), &reader, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM t;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  int rows = 0;
  while (wal_size() <= limit + (std::uintmax_t{4} << 20) && rows < 20000) {
    ASSERT_TRUE(WriteBlobs(*db, 50));
    rows += 50;
  }
  const std::uintmax_t grown = wal_size();
  EXPECT_GT(grown, limit) << "the reader did not keep the WAL from being rewound";
  ASSERT_EQ(sqlite3_exec(reader, "COMMIT;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close_v2(reader);
  // The next checkpoint request (per kCheckpointPages of growth) rewinds it.
  for (int i = 0; i < 200 && wal_size() > limit; ++i) {
    ASSERT_TRUE(WriteBlobs(*db, 50));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_LE(wal_size(), limit) << "grown to " << grown << " bytes, never cut back";
}

// A forked child that writes through its parent's Database gets a checkpointer
// of its own (the parent's thread is not in the child), and the parent's keeps
// working.
TEST(SqliteDatabase, AForkedChildCheckpointsThroughItsOwnThread) {
#if defined(__SANITIZE_THREAD__)
  // The child must start a thread, and ThreadSanitizer refuses that in a child
  // forked from a threaded process ("not supported. Dying"); the plain and the
  // ASan+UBSan runs check it.
  GTEST_SKIP() << "ThreadSanitizer cannot start threads after a multi-threaded fork";
#endif
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (x BLOB)").ok());
  ASSERT_TRUE(WriteBlobs(*db, 600));
  ASSERT_TRUE(WaitForCheckpoints(*db, 1));  // the parent's checkpointer exists
  // Fork while it is idle: a thread inside SQLite or the pool at fork time
  // leaves the child its locks held (as any engine thread would).
  std::uint64_t parent_runs = db->checkpoints_run();
  do {
    parent_runs = db->checkpoints_run();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (db->checkpoints_run() != parent_runs);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (db->checkpoints_run() != 0) _exit(2);  // the parent's count is not the child's
    const auto at_fork = std::filesystem::file_size(b.Path());
    if (!WriteBlobs(*db, 600)) _exit(3);
    if (!WaitForCheckpoints(*db, 1)) _exit(4);
    // Its checkpoint copied its own rows into the file.
    _exit(std::filesystem::file_size(b.Path()) >= at_fork + (std::uintmax_t{1} << 20) ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: count shared, 3: write failed, 4: no checkpoint, 5: nothing copied";
  ASSERT_TRUE(WriteBlobs(*db, 600));
  EXPECT_TRUE(WaitForCheckpoints(*db, parent_runs + 1));
  EXPECT_EQ(CountRows(*db, "t"), 1800);
}

// fork() waits for a running checkpoint to end (a pthread_atfork handler), so
// a child never inherits locks that the checkpointer's thread held at the fork.
TEST(SqliteCheckpointer, AForkWaitsForTheRunningCheckpoint) {
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  Checkpointer checkpointer([&] {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished = true;
    return true;
  });
  checkpointer.Request();
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(finished ? 0 : 1);  // the memory as it was at the fork
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child was forked in the middle of a checkpoint";
}

// Requests made while a checkpoint runs fold into one more run; a failed or
// throwing checkpoint is counted as failed, not completed.
TEST(SqliteCheckpointer, FoldsRequestsAndCountsFailures) {
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  Checkpointer checkpointer([&]() -> bool {
    const int n = ++calls;
    while (n == 1 && !release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (n == 2) return false;
    if (n == 3) throw std::runtime_error("no connection");
    return true;
  });
  checkpointer.Request();
  while (calls == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int i = 0; i < 5; ++i) checkpointer.Request();  // while the first runs
  release = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (checkpointer.completed() + checkpointer.failed() < 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls, 2) << "five requests during a run are one more run";
  EXPECT_EQ(checkpointer.completed(), 1u);
  EXPECT_EQ(checkpointer.failed(), 1u);
  checkpointer.Request();  // throws: a failure, and the thread goes on
  while (checkpointer.failed() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(checkpointer.failed(), 2u);
  checkpointer.Request();
  while (checkpointer.completed() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(checkpointer.completed(), 2u);
  EXPECT_EQ(calls, 4);
}

}  // namespace
}  // namespace pynenc_cpp::sqlite
