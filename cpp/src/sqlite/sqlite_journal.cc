// SQLite journal. Schema and transaction rules: sqlite_journal.h.
#include "sqlite/sqlite_journal.h"

#include <limits>

#include "ports/fencing.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp::sqlite {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE journal_entity (
  app_id TEXT NOT NULL,
  entity TEXT NOT NULL,
  last_seq INTEGER NOT NULL,  -- 0: no entry yet (fenced or never written)
  fence INTEGER NOT NULL,     -- packed generation
  PRIMARY KEY (app_id, entity)
);
CREATE TABLE journal_entry (
  app_id TEXT NOT NULL,
  entity TEXT NOT NULL,
  seq INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (app_id, entity, seq)
) WITHOUT ROWID;
CREATE TABLE journal_snapshot (
  app_id TEXT NOT NULL,
  entity TEXT NOT NULL,
  seq INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (app_id, entity)
);
)sql";

constexpr int kSchemaVersion = 1;

constexpr std::uint64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

Status Corrupt(const Conn& c, const std::string& what, const std::string& entity) {
  return Status::BackendFailure("sqlite '" + c.path() + "': corrupt " + what +
                                " for journal entity '" + entity + "'");
}

// An entity's row: zeros when it has none.
struct EntityRow {
  std::uint64_t last_seq = 0;
  std::uint64_t fence = 0;
};

class SqliteJournal final : public Journal {
 public:
  SqliteJournal(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  Result<std::uint64_t> Append(const std::string& entity, std::uint64_t expected_seq,
                               std::uint64_t generation,
                               const std::vector<std::string>& events) override {
    if (Status s = fencing::CheckAppend(entity, generation, events); !s.ok()) return s;
    std::uint64_t last = 0;
    Status s = db_->Write([&](Conn& c) -> Status {
      EntityRow row;
      if (Status r = Load(c, entity, &row); !r.ok()) return r;
      if (generation < row.fence) return fencing::StaleEntity(entity, generation, row.fence);
      if (row.last_seq != expected_seq) {
        return fencing::SequenceConflict(entity, row.last_seq, expected_seq);
      }
      auto q = c.Prepare(
          "INSERT INTO journal_entry (app_id, entity, seq, generation, payload)"
          " VALUES (?, ?, ?, ?, ?)");
      if (!q.ok()) return q.status();
      Stmt& insert = *q.value();
      last = expected_seq;
      for (const std::string& payload : events) {
        insert.Reset();
        ++last;
        insert.Bind(1, app_id_)
            .Bind(2, entity)
            .Bind(3, static_cast<std::int64_t>(last))
            .Bind(4, static_cast<std::int64_t>(generation))
            .Bind(5, payload);
        if (Status r = insert.Run(); !r.ok()) return r;
      }
      return Store(c, entity, EntityRow{last, generation});
    });
    if (!s.ok()) return s;
    return last;
  }

  Result<std::uint64_t> Fence(const std::string& entity, std::uint64_t generation) override {
    if (Status s = fencing::CheckEntityWrite(entity, generation); !s.ok()) return s;
    EntityRow row;
    Status s = db_->Write([&](Conn& c) -> Status {
      if (Status r = Load(c, entity, &row); !r.ok()) return r;
      if (generation < row.fence) return fencing::StaleEntity(entity, generation, row.fence);
      row.fence = generation;
      return Store(c, entity, row);
    });
    if (!s.ok()) return s;
    return row.last_seq;
  }

  Result<std::vector<JournalEntry>> Read(const std::string& entity, std::uint64_t after_seq,
                                         std::size_t limit) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    std::vector<JournalEntry> out;
    if (after_seq >= kInt64Max) return out;  // no seq is above it
    // LIMIT -1: no limit.
    const std::int64_t max_rows =
        (limit == 0 || limit > kInt64Max) ? std::int64_t{-1} : static_cast<std::int64_t>(limit);
    Status s = db_->Read([&](Conn& c) -> Status {
      auto q = c.Prepare(
          "SELECT seq, generation, payload FROM journal_entry"
          " WHERE app_id = ? AND entity = ? AND seq > ? ORDER BY seq LIMIT ?");
      if (!q.ok()) return q.status();
      Stmt& stmt = *q.value();
      stmt.Bind(1, app_id_)
          .Bind(2, entity)
          .Bind(3, static_cast<std::int64_t>(after_seq))
          .Bind(4, max_rows);
      while (true) {
        Result<bool> row = stmt.Step();
        if (!row.ok()) return row.status();
        if (!row.value()) return Status::Ok();
        if (stmt.Int(0) <= 0 || stmt.Int(1) < 0) return Corrupt(c, "entry", entity);
        out.push_back(JournalEntry{static_cast<std::uint64_t>(stmt.Int(0)),
                                   static_cast<std::uint64_t>(stmt.Int(1)), stmt.Text(2)});
      }
    });
    if (!s.ok()) return s;
    return out;
  }

  Result<std::uint64_t> LastSeq(const std::string& entity) override {
    Result<EntityRow> row = ReadRow(entity);
    if (!row.ok()) return row.status();
    return row.value().last_seq;
  }

  Result<std::uint64_t> FenceOf(const std::string& entity) override {
    Result<EntityRow> row = ReadRow(entity);
    if (!row.ok()) return row.status();
    return row.value().fence;
  }

  Status SaveSnapshot(const std::string& entity, std::uint64_t seq, std::uint64_t generation,
                      const std::string& state) override {
    if (Status s = fencing::CheckEntityWrite(entity, generation); !s.ok()) return s;
    return db_->Write([&](Conn& c) -> Status {
      EntityRow row;
      if (Status r = Load(c, entity, &row); !r.ok()) return r;
      if (generation < row.fence) return fencing::StaleEntity(entity, generation, row.fence);
      if (seq > row.last_seq) {
        return Status::InvalidArgument("journal: snapshot at sequence " + std::to_string(seq) +
                                       " of entity '" + entity + "' is past its last sequence " +
                                       std::to_string(row.last_seq));
      }
      // Replaces the stored snapshot unless that one is newer (then: ignored).
      auto q = c.Prepare(
          "INSERT INTO journal_snapshot (app_id, entity, seq, generation, state)"
          " VALUES (?, ?, ?, ?, ?) ON CONFLICT (app_id, entity) DO UPDATE"
          " SET seq = excluded.seq, generation = excluded.generation, state = excluded.state"
          " WHERE excluded.seq >= journal_snapshot.seq");
      if (!q.ok()) return q.status();
      Status put = q.value()
                       ->Bind(1, app_id_)
                       .Bind(2, entity)
                       .Bind(3, static_cast<std::int64_t>(seq))
                       .Bind(4, static_cast<std::int64_t>(generation))
                       .Bind(5, state)
                       .Run();
      if (!put.ok()) return put;
      if (c.Changes() == 0) return Status::Ok();  // an older snapshot: nothing changes
      row.fence = generation;
      return Store(c, entity, row);
    });
  }

  Result<std::optional<JournalSnapshot>> LoadSnapshot(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    std::optional<JournalSnapshot> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      Result<Stmt*> q = FirstRow(
          c, "SELECT seq, generation, state FROM journal_snapshot WHERE app_id = ? AND entity = ?",
          entity);
      if (!q.ok()) return q.status();
      if (q.value() == nullptr) return Status::Ok();
      Stmt& stmt = *q.value();
      if (stmt.Int(0) < 0 || stmt.Int(1) < 0) return Corrupt(c, "snapshot", entity);
      out = JournalSnapshot{static_cast<std::uint64_t>(stmt.Int(0)),
                            static_cast<std::uint64_t>(stmt.Int(1)), stmt.Text(2)};
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return out;
  }

 private:
  Result<EntityRow> ReadRow(const std::string& entity) {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    EntityRow row;
    Status s = db_->Read([&](Conn& c) { return Load(c, entity, &row); });
    if (!s.ok()) return s;
    return row;
  }

  // `sql` (the app id, then the entity, as its two parameters) prepared and
  // stepped once: the statement on its first row, or null when there is none.
  Result<Stmt*> FirstRow(Conn& c, const std::string& sql, const std::string& entity) const {
    Result<Stmt*> q = c.Prepare(sql);
    if (!q.ok()) return q.status();
    Stmt& stmt = *q.value();
    stmt.Bind(1, app_id_).Bind(2, entity);
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    return row.value() ? &stmt : nullptr;
  }

  // Reads the entity's row into *out (left as zeros when it has none). Runs
  // inside the caller's transaction.
  Status Load(Conn& c, const std::string& entity, EntityRow* out) const {
    Result<Stmt*> q = FirstRow(
        c, "SELECT last_seq, fence FROM journal_entity WHERE app_id = ? AND entity = ?", entity);
    if (!q.ok()) return q.status();
    if (q.value() == nullptr) return Status::Ok();
    Stmt& stmt = *q.value();
    const std::int64_t last_seq = stmt.Int(0), fence = stmt.Int(1);
    stmt.Rewind();
    if (last_seq < 0 || fence < 0) return Corrupt(c, "sequence or fence", entity);
    *out = EntityRow{static_cast<std::uint64_t>(last_seq), static_cast<std::uint64_t>(fence)};
    return Status::Ok();
  }

  // Upserts the entity's row. Runs inside the caller's write transaction.
  Status Store(Conn& c, const std::string& entity, const EntityRow& row) const {
    auto q = c.Prepare(
        "INSERT INTO journal_entity (app_id, entity, last_seq, fence) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (app_id, entity) DO UPDATE"
        " SET last_seq = excluded.last_seq, fence = excluded.fence");
    if (!q.ok()) return q.status();
    return q.value()
        ->Bind(1, app_id_)
        .Bind(2, entity)
        .Bind(3, static_cast<std::int64_t>(row.last_seq))
        .Bind(4, static_cast<std::int64_t>(row.fence))
        .Run();
  }

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
};

}  // namespace

Result<std::unique_ptr<Journal>> NewSqliteJournal(std::shared_ptr<Database> db,
                                                  const BackendConfig& config) {
  if (Status s = db->EnsureSchema("journal", kSchemaVersion, kSchema); !s.ok()) return s;
  return std::unique_ptr<Journal>(std::make_unique<SqliteJournal>(std::move(db), config.app_id));
}

}  // namespace pynenc_cpp::sqlite
