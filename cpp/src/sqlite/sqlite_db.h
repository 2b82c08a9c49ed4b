// Shared SQLite plumbing for every SQLite backend (not a public header).
//
// A Database is one SQLite file opened by this process: a pool of connections
// (each with its own prepared-statement cache), WAL journaling, a busy timeout,
// and per-component schema versions. The five components of an app share the one
// Database its Storage opened (each Database::Open makes a new one: several on one
// file in one process share only the file, its locks and its wake board), and
// every table they create keys rows by app_id so several apps can share a file.
//
// Thread safety: Database is thread-safe. A Conn is handed to exactly one thread
// at a time (inside Read/Write) and must not escape the callback.
// Fork safety: a child process never touches its parent's connections; the first
// use after fork() opens fresh ones (the parent's are abandoned, not closed, as
// SQLite requires).
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/metrics.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite/sqlite_wake.h"

namespace pynenc_cpp::sqlite {

struct SqliteOptions {
  std::string path;
  bool synchronous_full = false;  // PRAGMA synchronous=FULL instead of NORMAL
  int busy_timeout_ms = 5000;     // how long a writer waits for the lock
  bool wal_buffer = true;         // a commit's WAL frames in one write (sqlite_wal_vfs.h)
};

// One step of a component's schema: SQL that takes a file recorded at
// `from_version` to `from_version + 1` (Database::EnsureSchema).
struct SchemaMigration {
  int from_version;
  std::string sql;
};

// Parses the location part of "sqlite://<location>": "/abs/path.db" optionally
// followed by "?synchronous=normal|full&busy_timeout_ms=N&wal_buffer=on|off".
// kBadConfig on error.
Result<SqliteOptions> ParseSqliteLocation(const std::string& location);

// A cached prepared statement. Binding indexes are 1-based, columns 0-based.
class Conn;

class Stmt {
 public:
  Stmt(sqlite3_stmt* stmt, Conn* conn) : stmt_(stmt), conn_(conn) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  Stmt& Bind(int index, std::string_view text);
  Stmt& Bind(int index, const std::string& text) { return Bind(index, std::string_view(text)); }
  Stmt& Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  Stmt& Bind(int index, std::int64_t value);
  Stmt& Bind(int index, double value);
  Stmt& Bind(int index, const std::optional<std::string>& text);  // nullopt binds NULL
  Stmt& Bind(int index, const std::optional<std::int64_t>& value);
  Stmt& BindNull(int index);

  // Advances; true when a row is available. kBackendFailure (or the busy code
  // the Database retries on) on error.
  Result<bool> Step();
  // Steps until done, ignoring rows.
  Status Run();

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  std::optional<std::string> OptText(int col) const;
  std::optional<std::int64_t> OptInt(int col) const;

  // Clears bindings and rewinds. Called by Conn::Prepare before handing it out.
  void Reset();
  // Rewinds only (ends a read cursor); bindings stay.
  void Rewind() { sqlite3_reset(stmt_); }

 private:
  Status Error(int rc) const;
  sqlite3_stmt* stmt_;
  Conn* conn_;
};

class Conn {
 public:
  Conn(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  // The statement for `sql`, compiled once per connection, reset and unbound.
  Result<Stmt*> Prepare(const std::string& sql);
  // Rewinds the statements handed out since the last call (ends their read
  // cursors); called before COMMIT. Only those: a connection caches dozens.
  void ResetAll() {
    for (Stmt* stmt : in_use_) stmt->Rewind();
    in_use_.clear();
  }
  // Runs `sql` (one or more statements, no results).
  Status Exec(const std::string& sql);
  // Rows changed by the last statement.
  std::int64_t Changes() const { return sqlite3_changes64(db_); }
  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }

  // Status for a failed call on this connection running `sql`: names the file,
  // SQLite's cause and what the statement was doing in words (never the SQL).
  Status Error(int rc, std::string_view sql) const;
  // Abandons the handle without closing it (after fork).
  void Abandon() { db_ = nullptr; }
  // True if an error since the last call was lock contention (SQLITE_BUSY /
  // SQLITE_LOCKED); clears the flag. The Database retries such transactions.
  bool TakeBusy() {
    bool b = busy_;
    busy_ = false;
    return b;
  }
  // Installs the busy handler (BusyWait in sqlite_db_conn.cc): a statement that finds
  // the database locked retries when the writer holding it is done (the wake
  // board's write-lock counter, armed by ArmBusyWake), or else after 50 us,
  // doubling to at most 1 ms, until `timeout_ms` have passed since it first
  // found it locked.
  void SetBusyTimeout(int timeout_ms);
  // Called before a transaction begins: the busy handler then waits on `board`'s
  // write-lock counter as read now (a writer that finishes after this read
  // wakes it). `board` outlives the transaction.
  void ArmBusyWake(WakeBoard* board) {
    board_ = board;
    busy_seen_ = board != nullptr ? board->WriterSeq() : 0;
  }
  // One call of the busy handler: pauses and returns true to retry, or false
  // once the timeout has passed. `count`: SQLite's count of earlier calls for
  // this lock event (0 on the first).
  bool OnBusy(int count);
  // Marks a WakeBoard slot to bump once the enclosing transaction commits
  // (sqlite_wake.h); a rollback forgets it.
  void Notify(int slot) { notify_ |= std::uint64_t{1} << slot; }
  std::uint64_t TakeNotify() {
    const std::uint64_t m = notify_;
    notify_ = 0;
    return m;
  }
  // Metrics of the enclosing transaction, counted once it commits (a rollback
  // or a retried transaction forgets them).
  void CountRegistered(std::uint64_t n) { registered_ += n; }
  void CountTransition(const StatusRecord& from, const StatusRecord& to) {
    transitions_.emplace_back(from, to);
  }
  void PublishMetrics() {
    metrics::OnEntered(InvocationStatus::kRegistered, registered_);
    for (const auto& [from, to] : transitions_) metrics::OnTransition(from, to);
    ForgetMetrics();
  }
  void ForgetMetrics() {
    registered_ = 0;
    transitions_.clear();
  }

 private:
  sqlite3* db_;
  std::string path_;
  bool busy_ = false;
  WakeBoard* board_ = nullptr;  // see ArmBusyWake
  std::uint32_t busy_seen_ = 0;
  std::chrono::milliseconds busy_timeout_{0};
  std::chrono::steady_clock::time_point busy_since_;
  std::uint64_t notify_ = 0;
  std::uint64_t registered_ = 0;
  std::vector<std::pair<StatusRecord, StatusRecord>> transitions_;
  std::unordered_map<std::string, std::unique_ptr<Stmt>> statements_;
  std::vector<Stmt*> in_use_;  // handed out by Prepare since the last ResetAll
};

class Database {
 public:
  // Opens the database at `options.path` with a connection pool of its own
  // (a Storage owns one per app; several on one file in one process share only
  // the file, its locks and its wake board).
  // Creates the file if missing. kBadConfig naming the path, the setting
  // (cpp_sqlite_path) and the cause in words (OpenError) for a directory, a
  // missing directory, a permission denied, a read-only file or mount, or a file
  // that is not an SQLite database: all refused here, not at the first write.
  static Result<std::shared_ptr<Database>> Open(const SqliteOptions& options);

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs `fn` in one write transaction (BEGIN IMMEDIATE ... COMMIT). `fn`
  // returning an error rolls back and returns that error. Lock contention waits
  // up to the busy timeout (SQLite's busy handler), then retries the whole
  // transaction until that time is spent; only then kBackendFailure "locked".
  // Nesting: called on a thread already inside a Write of this Database, or
  // of any Database of the same path (from its `fn`), it joins that
  // transaction: `fn` runs on the same connection and the outermost Write
  // commits or rolls back everything (native/Lifecycle relies on this).
  // REQUIRES: never nested inside a Read.
  Status Write(const std::function<Status(Conn&)>& fn);
  // Runs `fn` in one read transaction (a consistent snapshot); nested inside a
  // Write or Read of this Database on the same thread, it joins it.
  Status Read(const std::function<Status(Conn&)>& fn);

  // Creates `component`'s tables with `ddl` the first time, and records
  // `version`. A file at an older version is brought to `version` by running,
  // in order, the `migrations` whose `from_version` it passes through, all in
  // the same write transaction as the version update (a failing step leaves
  // the file as it was). A file at a newer version, or at an older one with a
  // step missing, is refused with kBadConfig naming the file, the component
  // and both versions: never silently used with a schema this build does not
  // know.
  Status EnsureSchema(const std::string& component, int version, const std::string& ddl,
                      const std::vector<SchemaMigration>& migrations = {});

  const SqliteOptions& options() const { return options_; }
  // Cross-process wake-ups of this file (routes, final statuses).
  WakeBoard& wake() const { return *wake_; }

  // WAL pages past which a commit asks for a checkpoint (SQLite's default
  // wal_autocheckpoint). The checkpoint runs on this process's Checkpointer
  // thread (sqlite_checkpointer.h), never inside the commit.
  static constexpr int kCheckpointPages = 1000;
  // WAL pages past which the checkpoint, after its PASSIVE pass, also rewinds the
  // WAL (RESTART: it takes the write lock and waits for readers in the busy
  // handler, so the next writer starts the WAL over from its first frame). A WAL
  // is otherwise rewound only by a writer that begins when every frame is
  // copied, which under steady writes never happens once checkpoints run off the
  // commit: the WAL would grow without end. 10,000 pages of 4 KiB: 40 MiB.
  // RESTART, not TRUNCATE: the file keeps its size, so the frames that follow
  // overwrite pages the OS has cached; a truncated WAL makes every later frame
  // a page the kernel must allocate and zero (~20% of a task's run path on SQLite,
  // measured in bench/results/2026-11-26-stop-29-sqlite-wal-restart.md).
  static constexpr int kRestartPages = 10 * kCheckpointPages;
  // The longest the RESTART step waits for writers and readers to leave the WAL
  // (it holds the write lock meanwhile).
  static constexpr int kRestartWaitMs = 10;
  // PRAGMA journal_size_limit: a WAL file larger than this (one that grew past
  // kRestartPages while readers kept it from being rewound) is cut back to it
  // when it is rewound. Above kRestartPages frames, so a normal cycle keeps its file.
  static constexpr std::int64_t kWalSizeLimitBytes = std::int64_t{48} << 20;
  // Checkpoints this process's checkpointer ran to success for this Database,
  // and the ones that failed (another process was checkpointing, say).
  std::uint64_t checkpoints_run() const;
  std::uint64_t checkpoints_failed() const;

 private:
  explicit Database(SqliteOptions options);
  Result<std::unique_ptr<Conn>> Acquire();
  void Release(std::unique_ptr<Conn> conn);
  Status Transaction(const char* begin, const std::function<Status(Conn&)>& fn);
  // SQLite's WAL hook (sqlite3_wal_hook), after every commit of a connection of
  // this Database: `pages` is the WAL's length in pages. Never throws (it runs
  // inside sqlite3_step): when no checkpointer thread can be had, it checkpoints
  // on `db` itself, as SQLite's own hook does.
  static int OnWalCommit(void* self, sqlite3* db, const char* schema, int pages) noexcept;
  // Hands a checkpoint to this process's Checkpointer, making it on first use
  // (and again in a forked child: the parent's thread is not there).
  void RequestCheckpoint();
  // One PASSIVE checkpoint on a pooled connection (the Checkpointer's thread),
  // then, for a WAL of kRestartPages or more, a RESTART one; true if they
  // succeeded. A failure (another process checkpointing, say) is left for the
  // next request.
  bool RunCheckpoint();

  const SqliteOptions options_;
  std::unique_ptr<WakeBoard> wake_;  // set by Open, before the Database is shared
  Mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_ PYNENC_GUARDED_BY(mu_);
  long pid_ PYNENC_GUARDED_BY(mu_);  // the process that opened idle_
  // Made by the first RequestCheckpoint of each process; a forked child's
  // replaces (and leaks) its parent's, whose thread it does not have.
  std::atomic<Checkpointer*> checkpointer_{nullptr};
  // The WAL length (pages) at this process's last checkpoint request; 0 after the
  // WAL was rewound. A request is made per kCheckpointPages of growth, not on every
  // commit past the threshold.
  std::atomic<int> requested_at_pages_{0};
};

// kBadConfig for a file that cannot be opened for use: "cannot open sqlite
// database '<path>' (cpp_sqlite_path): <cause>", the cause in words ("no such
// directory", "permission denied", "read-only", "read-only file system", "not a
// database") from `rc`, `db`'s read-only flag and errno, and the directory;
// else SQLite's own text. `db` may be null.
Status OpenError(const std::string& path, int rc, sqlite3* db);

}  // namespace pynenc_cpp::sqlite

#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp::sqlite {

// The Database named by an sqlite:// BackendConfig. REQUIRES: config.uri is sqlite.
Result<std::shared_ptr<Database>> OpenDatabase(const BackendConfig& config);

}  // namespace pynenc_cpp::sqlite
