// SQLite fenced store. Schema and transaction rules: sqlite_fenced_store.h.
#include "sqlite/sqlite_fenced_store.h"

#include "ports/fencing.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp::sqlite {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE fenced_value (
  app_id TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT,  -- NULL: a tombstone (deleted; the generation still fences)
  generation INTEGER NOT NULL,
  PRIMARY KEY (app_id, key)
);
)sql";

// Version 2: nullable value (tombstones). See sqlite_fenced_store.h.
constexpr int kSchemaVersion = 1;

class SqliteFencedStore final : public FencedStore {
 public:
  SqliteFencedStore(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  Status Write(const std::string& key, const std::string& value,
               std::uint64_t generation) override {
    return Put(key, value, generation);
  }

  Result<std::optional<FencedValue>> Read(const std::string& key) override {
    if (key.empty()) return Status::InvalidArgument("fenced store: key must not be empty");
    std::optional<FencedValue> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      auto q = c.Prepare("SELECT value, generation FROM fenced_value WHERE app_id = ? AND key = ?");
      if (!q.ok()) return q.status();
      Stmt& stmt = *q.value();
      stmt.Bind(1, app_id_).Bind(2, key);
      Result<bool> row = stmt.Step();
      if (!row.ok()) return row.status();
      if (!row.value() || stmt.IsNull(0)) return Status::Ok();  // absent or tombstone
      if (stmt.Int(1) < 0) return Corrupt(c, key, stmt.Int(1));
      out = FencedValue{stmt.Text(0), static_cast<std::uint64_t>(stmt.Int(1))};
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return out;
  }

  Status Delete(const std::string& key, std::uint64_t generation) override {
    return Put(key, std::nullopt, generation);
  }

 private:
  // Upserts `value` (nullopt: a tombstone, NULL) stamped with `generation`
  // unless the stored generation is above it, in one write transaction.
  Status Put(const std::string& key, const std::optional<std::string>& value,
             std::uint64_t generation) {
    if (Status s = fencing::CheckKeyWrite(key, generation); !s.ok()) return s;
    return db_->Write([&](Conn& c) -> Status {
      if (Status s = Fence(c, key, generation); !s.ok()) return s;
      auto q = c.Prepare(
          "INSERT INTO fenced_value (app_id, key, value, generation) VALUES (?, ?, ?, ?)"
          " ON CONFLICT (app_id, key) DO UPDATE"
          " SET value = excluded.value, generation = excluded.generation");
      if (!q.ok()) return q.status();
      return q.value()
          ->Bind(1, app_id_)
          .Bind(2, key)
          .Bind(3, value)
          .Bind(4, static_cast<std::int64_t>(generation))
          .Run();
    });
  }

  static Status Corrupt(const Conn& c, const std::string& key, std::int64_t stored) {
    return Status::BackendFailure("sqlite '" + c.path() + "': corrupt generation " +
                                  std::to_string(stored) + " for fenced key '" + key + "'");
  }

  // Ok iff `key` has no row or its generation (of a value or a tombstone) is
  // <= `generation`;
  // kStaleGeneration otherwise. Runs inside the caller's write transaction.
  Status Fence(Conn& c, const std::string& key, std::uint64_t generation) const {
    auto q = c.Prepare("SELECT generation FROM fenced_value WHERE app_id = ? AND key = ?");
    if (!q.ok()) return q.status();
    Stmt& stmt = *q.value();
    stmt.Bind(1, app_id_).Bind(2, key);
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!row.value()) return Status::Ok();
    const std::int64_t stored = stmt.Int(0);
    stmt.Rewind();
    if (stored < 0) return Corrupt(c, key, stored);
    if (static_cast<std::uint64_t>(stored) > generation) {
      return fencing::StaleKey(key, generation, static_cast<std::uint64_t>(stored));
    }
    return Status::Ok();
  }

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
};

}  // namespace

Result<std::unique_ptr<FencedStore>> NewSqliteFencedStore(std::shared_ptr<Database> db,
                                                          const BackendConfig& config) {
  if (Status s = db->EnsureSchema("fenced_store", kSchemaVersion, kSchema); !s.ok()) return s;
  return std::unique_ptr<FencedStore>(
      std::make_unique<SqliteFencedStore>(std::move(db), config.app_id));
}

}  // namespace pynenc_cpp::sqlite
