// SQLite client data store: table client_data (app_id, key) -> value.
#include "sqlite/sqlite_client_data_store.h"

#include <optional>
#include <string>
#include <utility>

namespace pynenc_cpp::sqlite {
namespace {

class SqliteClientDataStore final : public ClientDataStore {
 public:
  SqliteClientDataStore(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  Status Store(const std::string& key, const std::string& value) override {
    return db_->Write([&](Conn& c) -> Status {
      auto q = c.Prepare(
          "INSERT INTO client_data (app_id, key, value) VALUES (?, ?, ?)"
          " ON CONFLICT (app_id, key) DO UPDATE SET value = excluded.value");
      if (!q.ok()) return q.status();
      return q.value()->Bind(1, app_id_).Bind(2, key).Bind(3, value).Run();
    });
  }

  Result<std::string> Retrieve(const std::string& key) override {
    std::optional<std::string> value;
    Status s = db_->Read([&](Conn& c) -> Status {
      auto q = c.Prepare("SELECT value FROM client_data WHERE app_id = ? AND key = ?");
      if (!q.ok()) return q.status();
      q.value()->Bind(1, app_id_).Bind(2, key);
      auto row = q.value()->Step();
      if (!row.ok()) return row.status();
      if (row.value()) value = q.value()->Text(0);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    if (!value) return Status::NotFound("client data key not found: " + key);
    return std::move(*value);
  }

  Status Purge() override {
    return db_->Write([&](Conn& c) -> Status {
      auto q = c.Prepare("DELETE FROM client_data WHERE app_id = ?");
      if (!q.ok()) return q.status();
      return q.value()->Bind(1, app_id_).Run();
    });
  }

 private:
  const std::shared_ptr<Database> db_;
  const std::string app_id_;
};

}  // namespace

Result<std::unique_ptr<ClientDataStore>> NewSqliteClientDataStore(std::shared_ptr<Database> db,
                                                                  const BackendConfig& config) {
  Status s = db->EnsureSchema("client_data", 1,
                              "CREATE TABLE client_data (app_id TEXT NOT NULL, key TEXT NOT NULL,"
                              " value TEXT NOT NULL, PRIMARY KEY (app_id, key))");
  if (!s.ok()) return s;
  return std::unique_ptr<ClientDataStore>(
      std::make_unique<SqliteClientDataStore>(std::move(db), config.app_id));
}

}  // namespace pynenc_cpp::sqlite
