// SQLite Lifecycle: one write transaction per operation. The components opened
// on the same path share the process's Database object (Database::Open returns
// it), and a Database::Write/Read made on a thread that already runs a
// transaction on that Database joins it (sqlite/sqlite_db.h), so every port call
// of the operation commits or rolls back together. Lock contention retries the
// whole operation (Atomically's `fn` is re-run from the start).
#include "native/port_lifecycle.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::native {
namespace {

class SqliteLifecycle final : public PortLifecycle {
 public:
  SqliteLifecycle(LifecycleParts parts, TriggerContextNames names,
                  std::shared_ptr<sqlite::Database> db)
      : PortLifecycle(std::move(parts), std::move(names)), db_(std::move(db)) {}

 protected:
  Status Atomically(const std::function<Status()>& fn) override {
    return db_->Write([&](sqlite::Conn&) { return fn(); });
  }

 private:
  const std::shared_ptr<sqlite::Database> db_;
};

}  // namespace

Result<std::unique_ptr<Lifecycle>> NewSqliteLifecycle(LifecycleParts parts,
                                                      const BackendConfig& config,
                                                      TriggerContextNames names) {
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return std::unique_ptr<Lifecycle>(
      new SqliteLifecycle(std::move(parts), std::move(names), db.value()));
}

}  // namespace pynenc_cpp::native
