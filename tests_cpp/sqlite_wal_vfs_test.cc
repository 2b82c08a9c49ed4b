// The WAL-buffering VFS (sqlite_wal_vfs.h): a commit's frames in one write;
// readers in this and another process see whole commits; a large transaction;
// a spilled and rewritten one recovered after a kill, and failing whole when a
// rewrite fails; synchronous=full with padded frames; writers killed
// mid-stream; a failed flush; exclusive locking refused; the option.
#include "sqlite/sqlite_wal_vfs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "backend_fixture.h"
#include "sqlite/sqlite_db.h"
#include "sqlite_test_util.h"

namespace pynenc_cpp::sqlite {
namespace {

using pynenc_cpp::testing::ReadInt;
using pynenc_cpp::testing::SqliteBackend;

std::shared_ptr<Database> OpenOk(const std::string& location) {
  auto options = ParseSqliteLocation(location);
  EXPECT_TRUE(options.ok()) << options.status().ToString();
  auto db = Database::Open(options.value());
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? db.value() : nullptr;
}

// Rows of `width` random bytes in table t, `n` in one transaction: each row
// dirties its own pages.
Status InsertRows(Database& db, int n, int width, std::int64_t tag) {
  return db.Write([&](Conn& c) -> Status {
    auto q = c.Prepare("INSERT INTO t (tag, body) VALUES (?, randomblob(?))");
    if (!q.ok()) return q.status();
    for (int i = 0; i < n; ++i) {
      q.value()->Reset();
      Status s = q.value()->Bind(1, tag).Bind(2, static_cast<std::int64_t>(width)).Run();
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

// Table t in a new file at `path`, the file closed again (before a fork).
void CreateTable(const std::string& path) {
  auto db = OpenOk(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
}

// 200 rows of 1 KB with a 20-page cache (SQLite spills frames before the end),
// then a change to the first 100 (spilled pages again: frames rewritten).
Status SpillAndRewrite(Conn& c) {
  Status st = c.Exec("PRAGMA cache_size=20");
  if (!st.ok()) return st;
  for (int i = 0; i < 200; ++i) {
    st = c.Exec("INSERT INTO t (tag, body) VALUES (" + std::to_string(i) + ", randomblob(1000))");
    if (!st.ok()) return st;
  }
  return c.Exec("UPDATE t SET tag = tag + 1000 WHERE tag < 100");
}

// The same file through SQLite's default VFS, outside the engine: what any other
// reader sees.
std::int64_t CountWithDefaultVfs(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::int64_t n = -1;
  if (sqlite3_prepare_v2(raw, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    n = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close_v2(raw);
  return n;
}

TEST(SqliteWalBuffer, IsRegisteredBesideTheDefaultVfs) {
  const char* name = WalBufferingVfsName();
  ASSERT_NE(name, nullptr);
  EXPECT_NE(sqlite3_vfs_find(name), nullptr);
  EXPECT_NE(sqlite3_vfs_find(nullptr), sqlite3_vfs_find(name));  // not made the default
  EXPECT_EQ(WalBufferingVfsName(), name);                         // registered once
}

TEST(SqliteWalBuffer, ACommitsFramesGoToTheFileInOneWrite) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
  ASSERT_TRUE(InsertRows(*db, 1, 10, 0).ok());
  const WalBufferingStats before = WalBufferingStatsNow();
  // 8 rows of 3 KB: 8 leaf pages at least, so 16+ writes asked of the VFS.
  ASSERT_TRUE(InsertRows(*db, 8, 3000, 1).ok());
  const WalBufferingStats after = WalBufferingStatsNow();
  EXPECT_GE(after.sqlite_writes - before.sqlite_writes, 16u);
  EXPECT_EQ(after.file_writes - before.file_writes, 1u);
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t WHERE tag = 1"), 8);
}

TEST(SqliteWalBuffer, OffLeavesTheFileToSqlitesOwnVfs) {
  SqliteBackend b;
  auto db = OpenOk(b.Path() + "?wal_buffer=off");
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
  const WalBufferingStats before = WalBufferingStatsNow();
  ASSERT_TRUE(InsertRows(*db, 8, 3000, 1).ok());
  const WalBufferingStats after = WalBufferingStatsNow();
  EXPECT_EQ(after.sqlite_writes, before.sqlite_writes);  // the shim is not in the way
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t WHERE tag = 1"), 8);
}

TEST(SqliteWalBuffer, TheOptionIsParsedAndCheckedAndOnByDefault) {
  EXPECT_TRUE(ParseSqliteLocation("/tmp/a.db").value().wal_buffer);
  EXPECT_TRUE(ParseSqliteLocation("/tmp/a.db?wal_buffer=on").value().wal_buffer);
  EXPECT_FALSE(ParseSqliteLocation("/tmp/a.db?wal_buffer=off").value().wal_buffer);
  auto bad = ParseSqliteLocation("/tmp/a.db?wal_buffer=maybe");
  EXPECT_EQ(bad.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(bad.status().message().find("wal_buffer"), std::string::npos);
}

// (After COMMIT returns the write lock is released, which flushes too: the
// reader process below is the stronger check.)
TEST(SqliteWalBuffer, EveryCommitIsVisibleToAnotherReaderWhenItReturns) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
  for (int i = 1; i <= 40; ++i) {
    ASSERT_TRUE(InsertRows(*db, 3, 1500, i).ok());
    ASSERT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t"), 3 * i) << "commit " << i;
  }
}

TEST(SqliteWalBuffer, ATransactionLargerThanTheBufferCommitsWhole) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
  // ~2 MB of pages: many buffer-fulls, and SQLite spills its cache mid-transaction.
  ASSERT_TRUE(InsertRows(*db, 500, 4000, 7).ok());
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t WHERE tag = 7"), 500);
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT sum(length(body)) FROM t"), 500 * 4000);
  ASSERT_TRUE(InsertRows(*db, 1, 10, 8).ok());  // and the next commit still works
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t"), 501);
}

TEST(SqliteWalBuffer, SynchronousFullCommitsAndReadsBack) {
  SqliteBackend b;
  auto db = OpenOk(b.Path() + "?synchronous=full");
  ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
  for (int i = 1; i <= 10; ++i) ASSERT_TRUE(InsertRows(*db, 4, 2000, i).ok());
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t"), 40);
}

// A writer process killed with SIGKILL at an arbitrary moment of a stream of
// commits: every transaction is there whole or not at all, and the file is
// sound for the next writer. (SQLite alone guarantees this too; the test shows
// the shim keeps it.)
TEST(SqliteWalBuffer, AWriterKilledMidStreamLeavesWholeTransactions) {
  SqliteBackend b;
  CreateTable(b.Path());
  constexpr int kRowsPerCommit = 5;
  for (int round = 0; round < 3; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto db = Database::Open(ParseSqliteLocation(b.Path()).value());
      if (!db.ok()) _exit(2);
      for (std::int64_t i = 0;; ++i) {
        if (!InsertRows(*db.value(), kRowsPerCommit, 1500, i).ok()) _exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 70 * round));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer stopped on its own: " << status;
    auto db = OpenOk(b.Path());
    const std::int64_t rows = ReadInt(*db, "SELECT count(*) FROM t WHERE tag >= 0");
    EXPECT_GT(rows, 0);
    EXPECT_EQ(rows % kRowsPerCommit, 0) << "a transaction was cut: " << rows;
    std::string check;
    ASSERT_TRUE(db->Read([&](Conn& c) -> Status {
                    auto q = c.Prepare("PRAGMA integrity_check");
                    if (!q.ok()) return q.status();
                    auto row = q.value()->Step();
                    if (!row.ok()) return row.status();
                    check = q.value()->Text(0);
                    return Status::Ok();
                  }).ok());
    EXPECT_EQ(check, "ok");
    ASSERT_TRUE(InsertRows(*db, 1, 10, -1).ok());  // and it takes new writes
  }
}

// The buffered frames are written when the commit frame's page arrives: a write
// that fails there (here: past RLIMIT_FSIZE, in a child) fails the COMMIT, and
// nothing of the transaction is published.
TEST(SqliteWalBuffer, AFlushThatFailsFailsTheCommitAndPublishesNothing) {
  SqliteBackend b;
  {
    auto db = OpenOk(b.Path());
    ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
    ASSERT_TRUE(InsertRows(*db, 5, 100, 1).ok());
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
    auto db = Database::Open(ParseSqliteLocation(b.Path()).value());
    if (!db.ok() || !InsertRows(*db.value(), 1, 10, 2).ok()) _exit(2);
    struct stat wal {};
    if (stat((b.Path() + "-wal").c_str(), &wal) != 0) _exit(3);
    const WalBufferingStats before = WalBufferingStatsNow();
    struct rlimit limit {};
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(wal.st_size) + 16 * 1024;
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(4);
    // ~10 pages of frames: well within the buffer, so the one write is the flush
    // at the commit frame.
    Status s = InsertRows(*db.value(), 8, 3000, 3);
    const WalBufferingStats after = WalBufferingStatsNow();
    if (s.ok()) _exit(5);
    if (after.file_writes - before.file_writes != 1) _exit(6);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto db = OpenOk(b.Path());
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t WHERE tag = 3"), 0);
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t WHERE tag IN (1, 2)"), 6);
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t WHERE tag = 3"), 0);
  ASSERT_TRUE(InsertRows(*db, 8, 3000, 4).ok());  // the file takes the same write now
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t WHERE tag = 4"), 8);
}

// A reader process reading all the time while this process commits: every
// snapshot it reads holds whole transactions with their bodies intact. (Forked
// before this process opens the file: SQLite's connections do not survive a
// fork.)
TEST(SqliteWalBuffer, AReaderProcessSeesOnlyWholeTransactionsAsTheyCommit) {
  SqliteBackend b;
  CreateTable(b.Path());
  constexpr int kRows = 4, kWidth = 2000;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[1]);
    sqlite3* raw = nullptr;
    if (sqlite3_open_v2(b.Path().c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      _exit(2);
    }
    sqlite3_busy_timeout(raw, 5000);
    const char* sql =
        "SELECT count(*), coalesce(sum(length(body)), 0),"
        " (SELECT count(*) FROM (SELECT tag FROM t GROUP BY tag HAVING count(*) != 4)) FROM t";
    if (fcntl(pipefd[0], F_SETFL, O_NONBLOCK) != 0) _exit(8);
    int reads = 0;
    for (char stop = 0; read(pipefd[0], &stop, 1) < 0;) {  // until a byte or EOF
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(raw, sql, -1, &stmt, nullptr) != SQLITE_OK) _exit(3);
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const sqlite3_int64 n = sqlite3_column_int64(stmt, 0);
        if (sqlite3_column_int64(stmt, 1) != n * kWidth) _exit(4);  // a body not intact
        if (sqlite3_column_int64(stmt, 2) != 0) _exit(5);           // a transaction cut
        ++reads;
      } else if (rc != SQLITE_BUSY) {
        _exit(6);
      }
      sqlite3_finalize(stmt);
      if (reads > 1'000'000) break;
    }
    sqlite3_close_v2(raw);
    _exit(reads > 10 ? 0 : 7);
  }
  close(pipefd[0]);
  auto db = OpenOk(b.Path());
  // ~6 pages a commit: checkpoints every ~170 commits (at 1,000 WAL pages).
  constexpr int kCommits = 1000;
  for (int i = 0; i < kCommits; ++i) ASSERT_TRUE(InsertRows(*db, kRows, kWidth, i).ok());
  const char stop = 1;
  ASSERT_EQ(write(pipefd[1], &stop, 1), 1);
  close(pipefd[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2 open, 3 prepare, 4 body, 5 cut, 6 error, 7 few reads, 8 fcntl";
  EXPECT_EQ(ReadInt(*db, "SELECT count(*) FROM t"), kCommits * kRows);
}

// A transaction larger than SQLite's page cache spills frames before it ends,
// then changes spilled pages again: SQLite rewrites those frames in place and
// the commit's checksums (not appends: written at once). Killed right after
// COMMIT returns, the writer's transaction is recovered whole from the WAL by
// the next process to open the file (which rebuilds the WAL index and checks
// every frame's checksum).
TEST(SqliteWalBuffer, ASpilledAndRewrittenTransactionIsRecoveredAfterAKill) {
  SqliteBackend b;
  CreateTable(b.Path());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto db = Database::Open(ParseSqliteLocation(b.Path()).value());
    if (!db.ok()) _exit(2);
    const unsigned long long rewrites = WalBufferingStatsNow().rewrites;
    Status s = db.value()->Write(SpillAndRewrite);
    if (!s.ok()) _exit(3);
    if (WalBufferingStatsNow().rewrites == rewrites) _exit(5);  // no frame was rewritten
    kill(getpid(), SIGKILL);  // no close: the next opener recovers from the WAL
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << " (5: nothing rewritten)";
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t"), 200);
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t WHERE tag >= 1000"), 100);
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT sum(length(body)) FROM t"), 200 * 1000);
}

// A rewrite of a frame the transaction appended is written at once, so its
// failure is its own call's: the transaction fails and nothing of it is
// published (FailWalRewriteForTest makes the first rewrite fail, in a child).
TEST(SqliteWalBuffer, ARewriteThatFailsFailsTheTransaction) {
  SqliteBackend b;
  CreateTable(b.Path());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto db = Database::Open(ParseSqliteLocation(b.Path()).value());
    if (!db.ok()) _exit(2);
    FailWalRewriteForTest(1);
    Status s = db.value()->Write(SpillAndRewrite);
    FailWalRewriteForTest(0);
    if (s.ok()) _exit(3);
    // The connection goes on: the next transaction commits.
    if (!InsertRows(*db.value(), 2, 100, 5000).ok()) _exit(4);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "3: the transaction committed; 4: the next failed";
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t WHERE tag < 5000"), 0);
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t WHERE tag = 5000"), 2);
}

TEST(SqliteWalBuffer, AnExclusiveLockingModeIsRefused) {
  SqliteBackend b;
  auto db = OpenOk(b.Path());
  Status s = db->Write([](Conn& c) { return c.Exec("PRAGMA locking_mode=EXCLUSIVE"); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("locking_mode=exclusive is not supported"), std::string::npos)
      << s.ToString();
}

// synchronous=FULL on a file without powersafe overwrite (psow=0): SQLite pads
// each commit to a sector boundary with copies of the commit frame, splitting
// the last one at the sync point. Every commit reads back whole.
TEST(SqliteWalBuffer, PaddedAndSplitCommitFramesReadBack) {
  SqliteBackend b;
  const std::string uri = "file:" + b.Path() + "?psow=0";
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(uri.c_str(), &raw,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                            WalBufferingVfsName()),
            SQLITE_OK);
  auto exec = [&](const std::string& sql) {
    char* error = nullptr;
    const int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  };
  exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (tag, body)");
  for (int i = 0; i < 30; ++i) {
    exec("INSERT INTO t VALUES (" + std::to_string(i) + ", randomblob(" +
         std::to_string(300 + 97 * i) + "))");
    ASSERT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t"), i + 1);
  }
  sqlite3_close_v2(raw);
  EXPECT_EQ(CountWithDefaultVfs(b.Path(), "SELECT count(*) FROM t"), 30);
}

}  // namespace
}  // namespace pynenc_cpp::sqlite
