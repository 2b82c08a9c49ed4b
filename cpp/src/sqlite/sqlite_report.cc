// sqlite::Describe: what `pynenc-cpp doctor` shows of an SQLite file, read through
// a read-only connection of its own (a missing file is reported, never created).
#include <sqlite3.h>
#include <sys/stat.h>

#include "pynenc_cpp/ports/backend_report.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

namespace {

// The single value of `sql` (a PRAGMA or a scalar query), or the error (SQLite's
// cause, never the SQL).
Result<std::string> Scalar(sqlite3* db, const std::string& path, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return Status::BackendFailure("sqlite " + path + ": " + sqlite3_errmsg(db));
  }
  std::string out;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 0) != SQLITE_NULL) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    std::string why = sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    return Status::BackendFailure("sqlite " + path + ": " + why);
  }
  sqlite3_finalize(stmt);
  return out;
}

}  // namespace

Result<BackendReport> Describe(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = ParseBackendUri(config.uri);
  if (!parsed.ok()) return parsed.status();
  Result<SqliteOptions> options = ParseSqliteLocation(parsed.value().location);
  if (!options.ok()) return options.status();
  const std::string& path = options.value().path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::BadConfig("no SQLite database at " + path +
                             " (it is created when the app first opens it)");
  }
  if (!S_ISREG(st.st_mode)) return Status::BadConfig(path + " is not a regular file");
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK) {
    Status s = OpenError(path, rc, db);
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, options.value().busy_timeout_ms);
  BackendReport report;
  report.backend = "sqlite";
  auto fact = [&report](std::string name, std::string value) {
    report.facts.emplace_back(std::move(name), std::move(value));
  };
  fact("file", path);
  fact("size", std::to_string(st.st_size) + " bytes");
  fact("sqlite library", sqlite3_libversion());
  Status failed;
  auto read = [&](const char* sql) -> std::string {
    Result<std::string> r = Scalar(db, path, sql);
    if (!r.ok()) {
      if (failed.ok()) failed = r.status();
      return "";
    }
    return r.value();
  };
  const std::string journal = read("PRAGMA journal_mode");
  if (!failed.ok()) {  // not a database, or unreadable
    sqlite3_close(db);
    return Status::BadConfig(path + " cannot be read as an SQLite database: " +
                             failed.message());
  }
  fact("journal_mode", journal);
  const bool full = options.value().synchronous_full;
  fact("synchronous (this URI's connections)", full ? "FULL" : "NORMAL");
  fact("busy_timeout_ms", std::to_string(options.value().busy_timeout_ms));
  std::string schema;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT component, version FROM pynenc_cpp_schema ORDER BY component",
                         -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      if (!schema.empty()) schema += ", ";
      schema += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      schema += " v" + std::to_string(sqlite3_column_int64(stmt, 1));
    }
  }
  sqlite3_finalize(stmt);
  fact("schema", schema.empty() ? "none yet (no pynenc-cpp component has opened it)" : schema);
  sqlite3_close(db);

  if (journal != "wal") {
    // Without a journal on disk a crash mid-write corrupts the file or loses the
    // transaction; another mode (delete, truncate, persist) is only slower.
    auto& list = journal == "off" || journal == "memory" ? report.errors : report.warnings;
    list.push_back(
        "journal_mode is " + journal +
        ", not wal: the engine sets WAL when it opens the file; another tool changed it, or "
        "the engine has not opened it yet");
  }
  if (!full) {
    report.warnings.push_back(
        "synchronous=NORMAL: safe when a process crashes, but an OS crash or power loss may "
        "roll back the last acknowledged transactions; use cpp_sqlite_synchronous=\"full\" "
        "(?synchronous=full) to fsync every commit");
  }
  return report;
}

}  // namespace pynenc_cpp::sqlite
