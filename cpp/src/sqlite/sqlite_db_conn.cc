// Shared SQLite plumbing (sqlite_db.h), part 2: Stmt (cached prepared
// statements) and Conn (the statement cache, errors in words, the busy wait).
// The Database and the location's options: sqlite_db.cc.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "pynenc_cpp/core/metrics.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {
namespace {

bool IsBusy(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

// What a statement was doing, in words: errors never quote the engine's SQL
// (its tables and PRAGMAs are internals; the cause is SQLite's own text).
std::string Doing(std::string_view sql) {
  const auto start = std::min(sql.find_first_not_of(" \t\n("), sql.size());
  const auto end = std::min(sql.find_first_of(" \t\n;(", start), sql.size());
  std::string word(sql.substr(start, end - start));
  for (char& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (word == "SELECT" || word == "WITH") return "reading";
  if (word == "INSERT" || word == "UPDATE" || word == "DELETE" || word == "REPLACE") {
    return "writing";
  }
  if (word == "CREATE" || word == "ALTER" || word == "DROP") return "creating the schema";
  if (word == "BEGIN") return "starting a transaction";
  if (word == "COMMIT") return "committing";
  if (word == "ROLLBACK") return "rolling back";
  if (word == "PRAGMA") return "setting up the connection";
  return "running a statement";
}

// SQLite's own busy handler (sqlite3_busy_timeout) sleeps 1, 2, 5, 10, 15, 20,
// 25... ms between tries: a transaction that found the write lock taken four
// times has lost 18 ms, while the engine's write transactions hold it for well
// under a millisecond (two runner workers, a heartbeat and a client contend for
// it). This one retries sooner (Conn::OnBusy); docs/backends/sqlite.md.
int BusyWait(void* conn, int count) { return static_cast<Conn*>(conn)->OnBusy(count) ? 1 : 0; }

}  // namespace

void Conn::SetBusyTimeout(int timeout_ms) {
  busy_timeout_ = std::chrono::milliseconds(timeout_ms);
  sqlite3_busy_handler(db_, &BusyWait, this);
}

bool Conn::OnBusy(int count) {
  const auto now = std::chrono::steady_clock::now();
  if (count == 0) busy_since_ = now;
  if (now - busy_since_ >= busy_timeout_) return false;
  constexpr std::chrono::microseconds kFirst{50};
  constexpr std::chrono::microseconds kLongest{1000};
  const auto pause = std::min(kFirst * (std::int64_t{1} << std::min(count, 5)), kLongest);
  if (board_ != nullptr) {
    // Until the holder's transaction ends (it bumps the counter), at most `pause`.
    board_->WaitWriter(busy_seen_, now + pause);
    busy_seen_ = board_->WriterSeq();  // read before SQLite tries the lock again
  } else {
    std::this_thread::sleep_for(pause);
  }
  metrics::OnSqliteBusyWait(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - now)
          .count());
  return true;
}

// ---- Stmt ------------------------------------------------------------------

Stmt& Stmt::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::Bind(int index, std::int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, const std::optional<std::string>& text) {
  return text ? Bind(index, std::string_view(*text)) : BindNull(index);
}
Stmt& Stmt::Bind(int index, const std::optional<std::int64_t>& value) {
  return value ? Bind(index, *value) : BindNull(index);
}
Stmt& Stmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Stmt::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error(rc);
}

Status Stmt::Run() {
  while (true) {
    Result<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!row.value()) return Status::Ok();
  }
}

std::string Stmt::Text(int col) const {
  const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  const int size = sqlite3_column_bytes(stmt_, col);
  return data == nullptr ? std::string() : std::string(data, static_cast<std::size_t>(size));
}

std::optional<std::string> Stmt::OptText(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Text(col);
}

std::optional<std::int64_t> Stmt::OptInt(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Int(col);
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Status Stmt::Error(int rc) const {
  return conn_->Error(rc, sqlite3_sql(stmt_) == nullptr ? "" : sqlite3_sql(stmt_));
}

// ---- Conn ------------------------------------------------------------------

Conn::~Conn() {
  if (db_ == nullptr) {
    // Abandoned after fork: the statements belong to the parent's handle too.
    for (auto& [sql, stmt] : statements_) (void)stmt.release();
    return;
  }
  statements_.clear();  // finalize before close
  sqlite3_close_v2(db_);
}

Result<Stmt*> Conn::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    it->second->Reset();
    in_use_.push_back(it->second.get());
    return it->second.get();
  }
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) return Error(rc, sql);
  auto stmt = std::make_unique<Stmt>(raw, this);
  Stmt* out = stmt.get();
  statements_.emplace(sql, std::move(stmt));
  in_use_.push_back(out);
  return out;
}

Status Conn::Exec(const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string text = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  if (IsBusy(rc)) busy_ = true;
  return Status::BackendFailure("sqlite " + Quoted(path_) + ": " + text + " (while " + Doing(sql) +
                                ")");
}

Status Conn::Error(int rc, std::string_view sql) const {
  if (IsBusy(rc)) const_cast<Conn*>(this)->busy_ = true;
  const char* detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string msg = "sqlite " + Quoted(path_) + ": " + detail + " (while " + Doing(sql) + ")";
  if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
    return Status::BadConfig(msg + "; the file is not a valid SQLite database");
  }
  return Status::BackendFailure(std::move(msg));
}

}  // namespace pynenc_cpp::sqlite
