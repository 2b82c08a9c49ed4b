// SQLite generation source. Schema and transaction rules: sqlite_generation_source.h.
#include "sqlite/sqlite_generation_source.h"

#include <algorithm>

#include "ports/fencing.h"

namespace pynenc_cpp::sqlite {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE generation_owner (
  app_id TEXT NOT NULL,
  label TEXT NOT NULL,
  owner TEXT NOT NULL,
  generation INTEGER NOT NULL,
  PRIMARY KEY (app_id, label)
);
CREATE TABLE generation_spec (
  app_id TEXT NOT NULL,
  label TEXT NOT NULL,
  spec TEXT NOT NULL,
  PRIMARY KEY (app_id, label)
);
)sql";

// A stored packed generation; kBackendFailure for a value no source writes.
Status DecodeGeneration(const Conn& c, std::int64_t packed, Generation* out) {
  if (packed < 0) {
    return Status::BackendFailure("sqlite '" + c.path() + "': corrupt generation " +
                                  std::to_string(packed) + " in generation_owner");
  }
  *out = Generation::FromPacked(static_cast<std::uint64_t>(packed));
  return Status::Ok();
}

class SqliteGenerationSource final : public GenerationSource {
 public:
  SqliteGenerationSource(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  Result<Generation> ClaimTerm(const std::string& label, const std::string& owner,
                               std::uint32_t min_term) override {
    if (Status s = fencing::CheckSourceClaim(label, owner); !s.ok()) return s;
    Generation claimed;
    Status s = db_->Write([&](Conn& c) -> Status {
      std::optional<Ownership> stored;
      if (Status r = Load(c, label, &stored); !r.ok()) return r;
      const std::uint32_t base = std::max(stored ? stored->generation.term : 0u, min_term);
      if (base >= kMaxGenerationTerm) {
        return Status::Conflict("label '" + label + "': term " + std::to_string(base) +
                                " + 1 would pass the largest term " +
                                std::to_string(kMaxGenerationTerm));
      }
      claimed = Generation{base + 1, 0};
      return Store(c, label, Ownership{owner, claimed});
    });
    if (!s.ok()) return s;
    return claimed;
  }

  Result<Generation> ClaimSeq(const std::string& label, const std::string& owner,
                              Generation expected) override {
    if (Status s = fencing::CheckSourceClaim(label, owner); !s.ok()) return s;
    Generation claimed;
    Status s = db_->Write([&](Conn& c) -> Status {
      std::optional<Ownership> stored;
      if (Status r = Load(c, label, &stored); !r.ok()) return r;
      const std::string wanted = "label '" + label + "': expected owner '" + owner + "' at " +
                                 expected.ToString() + ", but ";
      if (!stored) return Status::Conflict(wanted + "nothing is stored");
      if (stored->owner != owner || stored->generation != expected) {
        return Status::Conflict(wanted + "stored is owner '" + stored->owner + "' at " +
                                stored->generation.ToString());
      }
      if (stored->generation.seq == UINT32_MAX) {
        return Status::Conflict("label '" + label + "': seq of generation " +
                                stored->generation.ToString() + " would overflow");
      }
      claimed = Generation{expected.term, expected.seq + 1};
      return Store(c, label, Ownership{owner, claimed});
    });
    if (!s.ok()) return s;
    return claimed;
  }

  Result<std::optional<Ownership>> Current(const std::string& label) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    std::optional<Ownership> stored;
    Status s = db_->Read([&](Conn& c) -> Status { return Load(c, label, &stored); });
    if (!s.ok()) return s;
    return stored;
  }

  Status PutSpec(const std::string& label, const std::string& spec) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    return db_->Write([&](Conn& c) -> Status {
      auto q = c.Prepare(
          "INSERT INTO generation_spec (app_id, label, spec) VALUES (?, ?, ?)"
          " ON CONFLICT (app_id, label) DO UPDATE SET spec = excluded.spec");
      if (!q.ok()) return q.status();
      return q.value()->Bind(1, app_id_).Bind(2, label).Bind(3, spec).Run();
    });
  }

  Status RemoveSpec(const std::string& label) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    return db_->Write([&](Conn& c) -> Status {
      auto q = c.Prepare("DELETE FROM generation_spec WHERE app_id = ? AND label = ?");
      if (!q.ok()) return q.status();
      return q.value()->Bind(1, app_id_).Bind(2, label).Run();
    });
  }

  Result<std::vector<SpecRecord>> List() override {
    std::vector<SpecRecord> out;
    Status s = db_->Read([&](Conn& c) -> Status {
      out.clear();
      auto q = c.Prepare(
          "SELECT s.label, s.spec, o.owner, o.generation FROM generation_spec s"
          " LEFT JOIN generation_owner o ON o.app_id = s.app_id AND o.label = s.label"
          " WHERE s.app_id = ? ORDER BY s.label");
      if (!q.ok()) return q.status();
      Stmt& stmt = *q.value();
      stmt.Bind(1, app_id_);
      while (true) {
        Result<bool> row = stmt.Step();
        if (!row.ok()) return row.status();
        if (!row.value()) return Status::Ok();
        SpecRecord record{stmt.Text(0), stmt.Text(1), std::nullopt};
        if (!stmt.IsNull(3)) {
          Ownership ownership{stmt.Text(2), {}};
          if (Status d = DecodeGeneration(c, stmt.Int(3), &ownership.generation); !d.ok()) return d;
          record.ownership = std::move(ownership);
        }
        out.push_back(std::move(record));
      }
    });
    if (!s.ok()) return s;
    return out;
  }

  bool Shared() const override { return true; }

 private:
  Status Load(Conn& c, const std::string& label, std::optional<Ownership>* out) const {
    auto q =
        c.Prepare("SELECT owner, generation FROM generation_owner WHERE app_id = ? AND label = ?");
    if (!q.ok()) return q.status();
    Stmt& stmt = *q.value();
    stmt.Bind(1, app_id_).Bind(2, label);
    Result<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    Status s;
    if (row.value()) {
      Ownership ownership{stmt.Text(0), {}};
      s = DecodeGeneration(c, stmt.Int(1), &ownership.generation);
      *out = std::move(ownership);
    }
    stmt.Rewind();
    return s;
  }

  Status Store(Conn& c, const std::string& label, const Ownership& ownership) const {
    auto q = c.Prepare(
        "INSERT INTO generation_owner (app_id, label, owner, generation) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (app_id, label) DO UPDATE"
        " SET owner = excluded.owner, generation = excluded.generation");
    if (!q.ok()) return q.status();
    return q.value()
        ->Bind(1, app_id_)
        .Bind(2, label)
        .Bind(3, ownership.owner)
        .Bind(4, static_cast<std::int64_t>(ownership.generation.Packed()))
        .Run();
  }

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
};

}  // namespace

Result<std::unique_ptr<GenerationSource>> NewSqliteGenerationSource(std::shared_ptr<Database> db,
                                                                    const BackendConfig& config) {
  if (Status s = db->EnsureSchema("generation_source", 1, kSchema); !s.ok()) return s;
  return std::unique_ptr<GenerationSource>(
      std::make_unique<SqliteGenerationSource>(std::move(db), config.app_id));
}

}  // namespace pynenc_cpp::sqlite
