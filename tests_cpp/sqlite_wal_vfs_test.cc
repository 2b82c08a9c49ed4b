// The WAL-buffering VFS (sqlite_wal_vfs.h): a commit's frames in one write,
// readers in this and other processes see every commit at once, a large
// transaction, synchronous=full, a writer killed mid-stream, a failed flush,
// the option.
#include "sqlite/sqlite_wal_vfs.h"

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

TEST(SqliteWalBuffer, OffWritesEachFrameAsSqliteAsks) {
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
// sound for the next writer.
TEST(SqliteWalBuffer, AWriterKilledMidStreamLeavesWholeTransactions) {
  SqliteBackend b;
  {
    auto db = OpenOk(b.Path());
    ASSERT_TRUE(db->EnsureSchema("t", 1, "CREATE TABLE t (tag INTEGER, body BLOB)").ok());
  }
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

}  // namespace
}  // namespace pynenc_cpp::sqlite
