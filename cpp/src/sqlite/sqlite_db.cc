// Shared SQLite plumbing (sqlite_db.h): the location's options
// (ParseSqliteLocation), open errors in words (OpenError) and the Database: the
// connection pool, WAL checkpoints, transactions and schema versions. Stmt and
// Conn (statements, errors, the busy wait): sqlite_db_conn.cc.
#include "sqlite/sqlite_db.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "pynenc_cpp/core/thread_annotations.h"
#include "sqlite/sqlite_wal_vfs.h"

namespace pynenc_cpp::sqlite {
namespace {

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

// The prefix of every open error: the file and the setting that names it.
std::string CannotOpen(const std::string& path) {
  return "cannot open sqlite database " + Quoted(path) + " (cpp_sqlite_path): ";
}

std::string ParentDir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// BEGIN / COMMIT / ROLLBACK as cached statements: no re-parsing per transaction.
Status RunCached(Conn& conn, const char* sql) {
  Result<Stmt*> stmt = conn.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Status s = stmt.value()->Run();
  stmt.value()->Reset();
  return s;
}

}  // namespace

Result<SqliteOptions> ParseSqliteLocation(const std::string& location) {
  SqliteOptions options;
  const auto q = location.find('?');
  options.path = location.substr(0, q);
  if (options.path.empty()) return Status::BadConfig("sqlite URI has an empty path");
  if (q == std::string::npos) return options;
  std::string query = location.substr(q + 1);
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string key = pair.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (key == "synchronous") {
      if (value == "full") {
        options.synchronous_full = true;
      } else if (value == "normal") {
        options.synchronous_full = false;
      } else {
        return Status::BadConfig("sqlite option synchronous='" + value +
                                 "': expected 'normal' or 'full'");
      }
    } else if (key == "busy_timeout_ms") {
      char* tail = nullptr;
      const long ms = std::strtol(value.c_str(), &tail, 10);
      if (value.empty() || *tail != '\0' || ms < 0 || ms > 3'600'000) {
        return Status::BadConfig("sqlite option busy_timeout_ms='" + value +
                                 "': expected milliseconds between 0 and 3600000");
      }
      options.busy_timeout_ms = static_cast<int>(ms);
    } else if (key == "wal_buffer") {
      if (value != "on" && value != "off") {
        return Status::BadConfig("sqlite option wal_buffer='" + value +
                                 "': expected 'on' or 'off'");
      }
      options.wal_buffer = value == "on";
    } else {
      return Status::BadConfig("unknown sqlite option '" + key +
                               "'; known: synchronous, busy_timeout_ms, wal_buffer");
    }
  }
  return options;
}

// ---- Database --------------------------------------------------------------

Status OpenError(const std::string& path, int rc, sqlite3* db) {
  const int primary = rc & 0xff;
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
    return Status::BadConfig(CannotOpen(path) +
                             "not a database: the file is not a valid SQLite database "
                             "(it was left as it is)");
  }
  const std::string dir = ParentDir(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Status::BadConfig(CannotOpen(path) + "no such directory " + Quoted(dir) +
                               " (create it first)");
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return Status::BadConfig(CannotOpen(path) + Quoted(dir) + " is not a directory");
  }
  // SQLite's own errno is not the cause when it fell back to a read-only open, so
  // ask the kernel: may this process write the file, or create it in `dir`?
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const std::string& target = exists ? path : dir;
  const int denied = ::access(target.c_str(), W_OK) == 0 ? 0 : errno;
  if (denied == EROFS) {
    return Status::BadConfig(CannotOpen(path) + "read-only file system: " + Quoted(target) +
                             " is on a read-only mount");
  }
  if (exists && (denied == EACCES || denied == EPERM ||
                 (db != nullptr && sqlite3_db_readonly(db, "main") == 1))) {
    return Status::BadConfig(CannotOpen(path) +
                             "read-only: this process can read the file but not write it "
                             "(its permissions or an immutable attribute)");
  }
  const int err = db != nullptr ? sqlite3_system_errno(db) : 0;
  if (denied == EACCES || denied == EPERM || err == EACCES || err == EPERM) {
    return Status::BadConfig(CannotOpen(path) +
                             "permission denied: this user cannot create the file or its "
                             "-wal and -shm files in " + Quoted(dir));
  }
  std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (err != 0) detail += std::string(" (") + std::strerror(err) + ")";
  return Status::BadConfig(CannotOpen(path) + detail);
}

Database::Database(SqliteOptions options) : options_(std::move(options)), pid_(getpid()) {}

Database::~Database() {
  // First, while the pool still takes back the connection of a running checkpoint.
  Checkpointer* checkpointer = checkpointer_.exchange(nullptr);
  if (checkpointer != nullptr && checkpointer->pid() == getpid()) delete checkpointer;
  // else: made by the process this one forked from; its thread is not here.
  MutexLock lock(mu_);
  if (pid_ != getpid()) {
    for (auto& conn : idle_) conn->Abandon();
  }
  idle_.clear();
}

Result<std::shared_ptr<Database>> Database::Open(const SqliteOptions& options) {
  struct stat st {};
  if (stat(options.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::BadConfig(CannotOpen(options.path) +
                             "it is a directory; expected a database file");
  }
  std::shared_ptr<Database> db(new Database(options));
  // Open one connection now so that a bad path fails here, with a clear error.
  Result<std::unique_ptr<Conn>> conn = db->Acquire();
  if (!conn.ok()) return conn.status();
  Status meta = conn.value()->Exec(
      "CREATE TABLE IF NOT EXISTS pynenc_cpp_schema ("
      " component TEXT PRIMARY KEY, version INTEGER NOT NULL)");
  if (!meta.ok()) {
    conn.value()->TakeBusy();
    return meta;
  }
  db->Release(std::move(conn).value());
  db->wake_ = WakeBoard::Open(options.path);  // after the file exists: it takes its mode
  return db;
}

Result<std::unique_ptr<Conn>> Database::Acquire() {
  {
    MutexLock lock(mu_);
    if (pid_ != getpid()) {  // forked: the pooled handles belong to the parent
      for (auto& conn : idle_) conn->Abandon();
      idle_.clear();
      pid_ = getpid();
    }
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
  }
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(options_.path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      options_.wal_buffer ? WalBufferingVfsName() : nullptr);
  if (rc != SQLITE_OK) {
    Status s = OpenError(options_.path, rc, raw);
    sqlite3_close_v2(raw);
    return s;
  }
  auto conn = std::make_unique<Conn>(raw, options_.path);
  conn->SetBusyTimeout(options_.busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  // journal_mode=WAL reads the header first, so a non-database file fails here.
  const std::string pragmas =
      std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=") +
      (options_.synchronous_full ? "FULL" : "NORMAL") +
      "; PRAGMA foreign_keys=OFF; PRAGMA journal_size_limit=" + std::to_string(kWalSizeLimitBytes) +
      ";";
  // Switching a new file to WAL needs a moment of exclusive access, and SQLite
  // does not call the busy handler for it: several processes creating the same
  // file at once get SQLITE_BUSY here. Retry within the busy timeout.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
  Status s = conn->Exec(pragmas);
  for (auto backoff = std::chrono::milliseconds(1);
       !s.ok() && conn->TakeBusy() && std::chrono::steady_clock::now() < deadline;
       backoff = std::min(backoff * 2, std::chrono::milliseconds(50))) {
    std::this_thread::sleep_for(backoff);
    s = conn->Exec(pragmas);
  }
  if (!s.ok()) {
    // The first statement reads the file: a junk file, an unwritable file or
    // directory (the -wal and -shm files are made here) fails now, and is said
    // in words; anything else (disk I/O error, say) is SQLite's own text.
    const int rc = sqlite3_extended_errcode(raw);
    const int primary = rc & 0xff;
    if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT || primary == SQLITE_CANTOPEN ||
        primary == SQLITE_READONLY || primary == SQLITE_PERM || primary == SQLITE_AUTH ||
        rc == SQLITE_IOERR_ACCESS || sqlite3_db_readonly(raw, "main") == 1) {
      return OpenError(options_.path, rc, raw);
    }
    return s;
  }
  if (sqlite3_db_readonly(raw, "main") == 1) {
    // SQLite opens a file it may not write read-only without saying so: the
    // first write would fail. Refused here, when the app opens its storage.
    return OpenError(options_.path, SQLITE_READONLY, raw);
  }
  // Replaces SQLite's automatic checkpoint on this connection (sqlite_checkpointer.h).
  sqlite3_wal_hook(raw, &Database::OnWalCommit, this);
  return conn;
}

int Database::OnWalCommit(void* self, sqlite3* db, const char* schema, int pages) noexcept {
  auto* database = static_cast<Database*>(self);
  std::atomic<int>& requested_at = database->requested_at_pages_;
  if (pages < kCheckpointPages) {
    if (requested_at.load(std::memory_order_relaxed) != 0) {
      requested_at.store(0, std::memory_order_relaxed);  // the WAL was rewound
    }
    return SQLITE_OK;
  }
  int last = requested_at.load(std::memory_order_relaxed);
  if (last != 0 && pages >= last && pages < last + kCheckpointPages) return SQLITE_OK;
  if (!requested_at.compare_exchange_strong(last, pages, std::memory_order_relaxed)) {
    return SQLITE_OK;  // another commit of this process asked just now
  }
  try {
    database->RequestCheckpoint();
  } catch (...) {  // no thread (process limits) or no memory: keep the WAL bounded here
    (void)sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
  return SQLITE_OK;
}

void Database::RequestCheckpoint() {
  Checkpointer* current = checkpointer_.load(std::memory_order_acquire);
  if (current == nullptr || current->pid() != getpid()) {
    auto* fresh = new Checkpointer([this] { return RunCheckpoint(); });
    if (checkpointer_.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) {
      current = fresh;  // a parent's `current`, if any, is left alone (see ~Database)
    } else {
      delete fresh;  // another thread of this process made one first: `current` is it
    }
  }
  current->Request();
}

bool Database::RunCheckpoint() {
  Result<std::unique_ptr<Conn>> acquired = Acquire();
  if (!acquired.ok()) return false;
  std::unique_ptr<Conn> conn = std::move(acquired).value();
  // PASSIVE: copies what no reader still needs and never waits for a lock, so
  // writers and readers of every process go on meanwhile.
  int wal_pages = 0;
  int rc = sqlite3_wal_checkpoint_v2(conn->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &wal_pages,
                                     nullptr);
  if (rc == SQLITE_OK && wal_pages >= kRestartPages) {
    // Only the pages written since the PASSIVE pass are left to copy, so writers
    // wait for one short copy and the rewind. It holds the write lock while it
    // waits for readers, so it waits kRestartWaitMs at most (not the busy
    // timeout writers have): a WAL still in use is left for the next request.
    conn->SetBusyTimeout(kRestartWaitMs);
    const int restarted = sqlite3_wal_checkpoint_v2(conn->raw(), nullptr, SQLITE_CHECKPOINT_RESTART,
                                                    nullptr, nullptr);
    conn->SetBusyTimeout(options_.busy_timeout_ms);
    if ((restarted & 0xff) != SQLITE_BUSY) rc = restarted;
  }
  Release(std::move(conn));
  return rc == SQLITE_OK;
}

std::uint64_t Database::checkpoints_run() const {
  Checkpointer* current = checkpointer_.load(std::memory_order_acquire);
  return current != nullptr && current->pid() == getpid() ? current->completed() : 0;
}

std::uint64_t Database::checkpoints_failed() const {
  Checkpointer* current = checkpointer_.load(std::memory_order_acquire);
  return current != nullptr && current->pid() == getpid() ? current->failed() : 0;
}

void Database::Release(std::unique_ptr<Conn> conn) {
  MutexLock lock(mu_);
  if (pid_ != getpid()) {
    conn->Abandon();
    return;
  }
  idle_.push_back(std::move(conn));
}

namespace {
// The transactions open on this thread, innermost last (see Database::Write).
thread_local std::vector<std::pair<const Database*, Conn*>> tl_open_transactions;
thread_local long tl_open_transactions_pid = 0;  // the process the list belongs to

// Registers an open transaction for nested calls to join, and unregisters it
// when the scope ends, also by an exception (no dangling Conn* to join later).
class OpenTransaction {
 public:
  OpenTransaction(const Database* db, Conn* conn) { tl_open_transactions.emplace_back(db, conn); }
  ~OpenTransaction() { tl_open_transactions.pop_back(); }
  OpenTransaction(const OpenTransaction&) = delete;
  OpenTransaction& operator=(const OpenTransaction&) = delete;
};
}  // namespace

Status Database::Transaction(const char* begin, const std::function<Status(Conn&)>& fn) {
  if (tl_open_transactions_pid != getpid()) {
    // A child forked while this thread was inside a transaction: those
    // connections are the parent's, never to be joined here.
    tl_open_transactions.clear();
    tl_open_transactions_pid = getpid();
  }
  for (const auto& [db, open] : tl_open_transactions) {
    // Joins the enclosing transaction on the same file, whichever Database
    // object began it: a process can hold two for one path (other options, or
    // one opened before a fork and one after), and a second BEGIN IMMEDIATE on
    // another connection would wait for the write lock this thread holds until
    // the busy timeout ("database stayed locked"), blocking every process.
    if (db == this || db->options_.path == options_.path) return fn(*open);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
  const bool is_write = std::string_view(begin) != "BEGIN DEFERRED";
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    Result<std::unique_ptr<Conn>> acquired = Acquire();
    if (!acquired.ok()) return acquired.status();
    std::unique_ptr<Conn> conn = std::move(acquired).value();
    conn->ArmBusyWake(wake_.get());
    Status s = RunCached(*conn, begin);
    if (s.ok()) {
      (void)conn->TakeNotify();
      conn->ForgetMetrics();
      {
        OpenTransaction open(this, conn.get());
        s = fn(*conn);
      }
      conn->ResetAll();
      if (s.ok()) s = RunCached(*conn, "COMMIT");
      if (!s.ok() && !sqlite3_get_autocommit(conn->raw())) (void)RunCached(*conn, "ROLLBACK");
      // The write lock is free: writers paused in the busy handler try again now.
      if (wake_ != nullptr && is_write) wake_->WriterDone();
      // Wake-ups only for what committed, and only after it is visible.
      if (const std::uint64_t notify = conn->TakeNotify(); s.ok() && notify != 0) {
        wake_->Wake(notify);
      }
      if (s.ok()) {
        conn->PublishMetrics();
      } else {
        conn->ForgetMetrics();
      }
    }
    const bool busy = conn->TakeBusy();
    Release(std::move(conn));
    if (s.ok() || !busy) return s;
    if (std::chrono::steady_clock::now() >= deadline) {
      // Rolled back, so nothing was applied. The file is held by a writer that
      // does not let go (another process frozen inside a transaction, say): the
      // storage is unavailable, as when a server is unreachable, and callers
      // that ride out outages try again later (_outage.py).
      return Status::ConnectionLost(
          "sqlite " + Quoted(options_.path) +
              ": database stayed locked for longer than busy_timeout_ms=" +
              std::to_string(options_.busy_timeout_ms) + " (" + s.message() + ")",
          /*maybe_applied=*/false);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

Status Database::Write(const std::function<Status(Conn&)>& fn) {
  return Transaction("BEGIN IMMEDIATE", fn);
}

Status Database::Read(const std::function<Status(Conn&)>& fn) {
  return Transaction("BEGIN DEFERRED", fn);
}

Status Database::EnsureSchema(const std::string& component, int version, const std::string& ddl,
                              const std::vector<SchemaMigration>& migrations) {
  return Write([&](Conn& conn) -> Status {
    Result<Stmt*> get = conn.Prepare("SELECT version FROM pynenc_cpp_schema WHERE component = ?");
    if (!get.ok()) return get.status();
    Stmt& q = *get.value();
    q.Bind(1, component);
    Result<bool> row = q.Step();
    if (!row.ok()) return row.status();
    if (!row.value()) {
      q.Reset();
      if (Status s = conn.Exec(ddl); !s.ok()) return s;
      Result<Stmt*> put =
          conn.Prepare("INSERT INTO pynenc_cpp_schema (component, version) VALUES (?, ?)");
      if (!put.ok()) return put.status();
      return put.value()->Bind(1, component).Bind(2, static_cast<std::int64_t>(version)).Run();
    }
    const std::int64_t stored = q.Int(0);
    q.Reset();
    if (stored == version) return Status::Ok();
    auto refused = [&](const char* why) {
      return Status::BadConfig("sqlite " + Quoted(options_.path) + ": the " + component +
                               " schema is version " + std::to_string(stored) +
                               " but this pynenc-cpp knows version " + std::to_string(version) +
                               why);
    };
    if (stored > version) return refused(" (the file was written by a newer pynenc-cpp)");
    // Every step first, so a gap refuses the file before anything is changed.
    std::vector<const SchemaMigration*> steps;
    for (std::int64_t from = stored; from < version; ++from) {
      auto step = std::find_if(migrations.begin(), migrations.end(),
                               [&](const SchemaMigration& m) { return m.from_version == from; });
      if (step == migrations.end()) return refused(" (no migration from that version exists)");
      steps.push_back(&*step);
    }
    for (const SchemaMigration* step : steps) {
      if (Status s = conn.Exec(step->sql); !s.ok()) {
        return Status::FromCode(s.code(), "sqlite " + Quoted(options_.path) + ": migrating the " +
                                              component + " schema from version " +
                                              std::to_string(step->from_version) + ": " +
                                              s.message());
      }
    }
    Result<Stmt*> set =
        conn.Prepare("UPDATE pynenc_cpp_schema SET version = ? WHERE component = ?");
    if (!set.ok()) return set.status();
    return set.value()->Bind(1, static_cast<std::int64_t>(version)).Bind(2, component).Run();
  });
}

Result<std::shared_ptr<Database>> OpenDatabase(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = ParseBackendUri(config.uri);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind != BackendKind::kSqlite) {
    return Status::BadConfig("backend URI '" + RedactUri(config.uri) + "' is not an sqlite:// URI");
  }
  Result<SqliteOptions> options = ParseSqliteLocation(parsed.value().location);
  if (!options.ok()) return options.status();
  return Database::Open(options.value());
}

}  // namespace pynenc_cpp::sqlite
