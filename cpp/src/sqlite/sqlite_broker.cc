// SQLite broker: one table of queued ids; a pop is one DELETE ... RETURNING of
// the best row (highest priority, then oldest) inside an IMMEDIATE transaction,
// so two runners, threads or processes never get the same id.
#include "sqlite/sqlite_broker.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace pynenc_cpp::sqlite {
namespace {

// Longer waits are clamped (no time_point overflow): ~31 years.
constexpr std::int64_t kMaxWaitMs = 1'000'000'000'000;

constexpr const char* kSchema = R"sql(
CREATE TABLE broker_queue (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT NOT NULL,
  queue TEXT NOT NULL,
  priority REAL NOT NULL,
  invocation_id TEXT NOT NULL
);
CREATE INDEX broker_queue_pop ON broker_queue (app_id, queue, priority DESC, seq);
)sql";

class SqliteBroker final : public Broker {
 public:
  SqliteBroker(std::shared_ptr<Database> db, std::string app_id)
      : db_(std::move(db)), app_id_(std::move(app_id)) {}

  Status Route(const std::vector<InvocationId>& ids, const std::string& queue,
               double priority) override {
    if (ids.empty()) return Status::Ok();
    return db_->Write([&](Conn& c) -> Status {
      c.Notify(WakeBoard::QueueSlot(app_id_, queue));  // wakes Retrieve, here or elsewhere
      auto ins = c.Prepare(
          "INSERT INTO broker_queue (app_id, queue, priority, invocation_id) VALUES (?, ?, ?, ?)");
      if (!ins.ok()) return ins.status();
      for (const InvocationId& id : ids) {
        Stmt& q = *ins.value();
        q.Reset();
        if (Status r = q.Bind(1, app_id_).Bind(2, queue).Bind(3, priority).Bind(4, id.str()).Run();
            !r.ok()) {
          return r;
        }
      }
      return Status::Ok();
    });
  }

  Result<std::optional<InvocationId>> Retrieve(const std::string& queue,
                                               std::int64_t timeout_ms) override {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::clamp<std::int64_t>(timeout_ms, 0, kMaxWaitMs));
    const std::uint64_t interrupts = interrupt_epoch_.load();
    WakeBoard& board = db_->wake();
    const int slot = WakeBoard::QueueSlot(app_id_, queue);
    while (true) {
      // Read the slot before looking at the table: a route committed after the
      // look bumps it, and the wait below returns at once.
      const std::uint32_t seen = board.Seq(slot);
      Result<std::optional<InvocationId>> popped = Pop(queue);
      if (!popped.ok() || popped.value() || timeout_ms <= 0) return popped;
      if (std::chrono::steady_clock::now() >= deadline) return std::optional<InvocationId>();
      // No transaction is held while waiting: for a route from any process,
      // an interrupt, or the board's poll cap.
      board.Wait(slot, seen, deadline);
      if (interrupt_epoch_.load() != interrupts) return std::optional<InvocationId>();
    }
  }

  Result<std::int64_t> Count(const std::vector<std::string>& queues) override {
    if (queues.empty()) return std::int64_t{0};
    std::string sql = "SELECT count(*) FROM broker_queue WHERE app_id = ? AND queue IN (?";
    for (std::size_t i = 1; i < queues.size(); ++i) sql += ", ?";
    sql += ")";
    std::int64_t count = 0;
    Status s = db_->Read([&](Conn& c) -> Status {
      auto q = c.Prepare(sql);
      if (!q.ok()) return q.status();
      q.value()->Bind(1, app_id_);
      for (std::size_t i = 0; i < queues.size(); ++i) {
        q.value()->Bind(static_cast<int>(i) + 2, queues[i]);
      }
      auto row = q.value()->Step();
      if (!row.ok()) return row.status();
      count = q.value()->Int(0);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return count;
  }

  Status Purge() override {
    return db_->Write([&](Conn& c) -> Status {
      auto q = c.Prepare("DELETE FROM broker_queue WHERE app_id = ?");
      if (!q.ok()) return q.status();
      return q.value()->Bind(1, app_id_).Run();
    });
  }

  void Interrupt() override {
    interrupt_epoch_.fetch_add(1);
    // Which queue a Retrieve of this broker waits on is not tracked: wake every
    // route slot (other processes' waiters re-check their queue and sleep again).
    std::uint64_t routes = ~std::uint64_t{0};
    routes &= ~(std::uint64_t{1} << WakeBoard::kFinalSlot);
    db_->wake().Wake(routes);
  }

 private:
  Result<std::optional<InvocationId>> Pop(const std::string& queue) {
    std::optional<InvocationId> out;
    Status s = db_->Write([&](Conn& c) -> Status {
      auto q = c.Prepare(
          "DELETE FROM broker_queue WHERE seq = (SELECT seq FROM broker_queue"
          " WHERE app_id = ? AND queue = ? ORDER BY priority DESC, seq LIMIT 1)"
          " RETURNING invocation_id");
      if (!q.ok()) return q.status();
      q.value()->Bind(1, app_id_).Bind(2, queue);
      auto row = q.value()->Step();
      if (!row.ok()) return row.status();
      if (row.value()) out = InvocationId(q.value()->Text(0));
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return out;
  }

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
  std::atomic<std::uint64_t> interrupt_epoch_{0};
};

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

Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config) {
  if (Status s = db->EnsureSchema("broker", 1, kSchema); !s.ok()) return s;
  return std::unique_ptr<Broker>(std::make_unique<SqliteBroker>(std::move(db), config.app_id));
}

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
