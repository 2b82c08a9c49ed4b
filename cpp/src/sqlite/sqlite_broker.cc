// SQLite broker: one table of queued ids, and reliable dequeue as on Redis.
// A pop moves the best row (highest priority, then oldest) from broker_queue
// into broker_proc under this broker object's consumer id, inside one IMMEDIATE
// transaction, so two runners, threads or processes never get the same id; the
// calling thread's next Retrieve acknowledges (deletes) it. A Retrieve
// refreshes the consumer's lease (broker_consumers); at most once per recovery
// interval a Retrieve moves the processing rows of every consumer whose lease
// lapsed back into their queue at their original position. A Retrieve with
// nothing to acknowledge, recover or renew (over half the lease left) first
// looks at the queue with a read, and an empty queue costs no write lock: idle
// pollers (pynenc's own runners call retrieve in a loop) do not queue on the
// file's one write lock ahead of the processes that have work to store. A process killed
// between a pop and its claim therefore loses nothing: the id is redelivered
// (and a duplicate delivery is refused by the orchestrator's status
// compare-and-set).
#include "sqlite/sqlite_broker.h"
#include "ports/consumer_id.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

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

// Reliable dequeue (its own component, so files made before it gain it).
constexpr const char* kProcSchema = R"sql(
CREATE TABLE broker_proc (
  app_id TEXT NOT NULL,
  consumer TEXT NOT NULL,
  seq INTEGER NOT NULL,
  queue TEXT NOT NULL,
  priority REAL NOT NULL,
  invocation_id TEXT NOT NULL,
  PRIMARY KEY (app_id, consumer, seq)
);
CREATE TABLE broker_consumers (
  app_id TEXT NOT NULL,
  consumer TEXT NOT NULL,
  lease_until_us INTEGER NOT NULL,
  PRIMARY KEY (app_id, consumer)
);
CREATE INDEX broker_consumers_lease ON broker_consumers (app_id, lease_until_us);
)sql";

class SqliteBroker final : public Broker {
 public:
  SqliteBroker(std::shared_ptr<Database> db, const BackendConfig& config,
               SqliteBrokerOptions options)
      : db_(std::move(db)), app_id_(config.app_id), clock_(ClockOrReal(config)),
        options_(options) {}

  ~SqliteBroker() override {
    // Clean close: this consumer's deliveries are acknowledged (a caller that
    // took an id and did not run it routes it back itself) and it unregisters.
    // If this fails, its lease lapses and another consumer recovers the rows.
    std::string consumer;
    {
      MutexLock lock(mu_);
      if (!registered_ || pid_ != getpid()) return;
      consumer = consumer_;
    }
    (void)db_->Write([&](Conn& c) -> Status {
      for (const char* sql : {"DELETE FROM broker_proc WHERE app_id = ? AND consumer = ?",
                              "DELETE FROM broker_consumers WHERE app_id = ? AND consumer = ?"}) {
        auto q = c.Prepare(sql);
        if (!q.ok()) return q.status();
        if (Status s = q.value()->Bind(1, app_id_).Bind(2, consumer).Run(); !s.ok()) return s;
      }
      return Status::Ok();
    });
  }

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
      // An Interrupt() since the call began (it bumps the slot, maybe before
      // `seen` was read, so the wait below would not return for it).
      if (interrupt_epoch_.load() != interrupts) return std::optional<InvocationId>();
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
      for (const char* sql : {"DELETE FROM broker_queue WHERE app_id = ?",
                              "DELETE FROM broker_proc WHERE app_id = ?"}) {
        auto q = c.Prepare(sql);
        if (!q.ok()) return q.status();
        if (Status s = q.value()->Bind(1, app_id_).Run(); !s.ok()) return s;
      }
      return Status::Ok();
    });
  }

  void Interrupt() override {
    interrupt_epoch_.fetch_add(1);
    // Which queue a Retrieve of this broker waits on is not tracked: wake every
    // route slot (other processes' waiters re-check their queue and sleep again).
    std::uint64_t routes = ~std::uint64_t{0};
    routes &= ~(std::uint64_t{1} << WakeBoard::kFinalSlot);
    routes &= ~(std::uint64_t{1} << WakeBoard::kValidConditionsSlot);
    db_->wake().Wake(routes);
  }

 private:
  // This process's consumer id (a forked child gets its own, and none of the
  // parent's pending acknowledgements), and the calling thread's deliveries
  // not yet acknowledged (taken).
  std::pair<std::string, std::vector<std::int64_t>> ConsumerAndAcks() {
    MutexLock lock(mu_);
    if (consumer_.empty() || pid_ != getpid()) {
      consumer_ = broker_ids::NewConsumerId();
      pid_ = getpid();
      unacked_.clear();
      registered_ = false;
      next_recovery_us_ = 0;
    }
    std::vector<std::int64_t> acks;
    if (auto it = unacked_.find(std::this_thread::get_id()); it != unacked_.end()) {
      acks = std::move(it->second);
      unacked_.erase(it);
    }
    return {consumer_, std::move(acks)};
  }

  void Remember(const std::vector<std::int64_t>& seqs) {
    if (seqs.empty()) return;
    MutexLock lock(mu_);
    auto& mine = unacked_[std::this_thread::get_id()];
    mine.insert(mine.end(), seqs.begin(), seqs.end());
  }

 public:
  // The calling thread's deliveries its next Pop acknowledges (ThreadDeliveries);
  // none in a forked child before its first Pop (which forgets the parent's).
  std::vector<std::int64_t> Unacked() {
    MutexLock lock(mu_);
    if (consumer_.empty() || pid_ != getpid()) return {};
    auto it = unacked_.find(std::this_thread::get_id());
    return it == unacked_.end() ? std::vector<std::int64_t>() : it->second;
  }
  void SetUnacked(std::vector<std::int64_t> seqs) {
    MutexLock lock(mu_);
    if (consumer_.empty() || pid_ != getpid()) return;  // nothing of this process's yet
    if (seqs.empty()) {
      unacked_.erase(std::this_thread::get_id());
    } else {
      unacked_[std::this_thread::get_id()] = std::move(seqs);
    }
  }

 private:
  // Moves the processing rows of every other consumer whose lease lapsed back
  // into their queues (original seq: same position), wakes those queues, and
  // forgets those consumers. REQUIRES: inside a Write.
  static Status Recover(Conn& c, const std::string& app_id, const std::string& me,
                        TimestampUs now) {
    constexpr const char* kDead =
        " FROM broker_proc p JOIN broker_consumers k ON k.app_id = p.app_id AND"
        " k.consumer = p.consumer WHERE p.app_id = ?1 AND k.lease_until_us < ?2 AND"
        " k.consumer != ?3";
    auto queues = c.Prepare(std::string("SELECT DISTINCT p.queue") + kDead);
    if (!queues.ok()) return queues.status();
    Stmt& qs = *queues.value();
    qs.Bind(1, app_id).Bind(2, static_cast<std::int64_t>(now)).Bind(3, me);
    while (true) {
      auto row = qs.Step();
      if (!row.ok()) return row.status();
      if (!row.value()) break;
      c.Notify(WakeBoard::QueueSlot(app_id, qs.Text(0)));
    }
    for (const std::string& sql :
         {std::string("INSERT INTO broker_queue (seq, app_id, queue, priority, invocation_id)"
                      " SELECT p.seq, p.app_id, p.queue, p.priority, p.invocation_id") +
              kDead,
          std::string("DELETE FROM broker_proc WHERE app_id = ?1 AND consumer IN (SELECT"
                      " consumer FROM broker_consumers WHERE app_id = ?1 AND lease_until_us < ?2"
                      " AND consumer != ?3)"),
          std::string("DELETE FROM broker_consumers WHERE app_id = ?1 AND lease_until_us < ?2"
                      " AND consumer != ?3")}) {
      auto q = c.Prepare(sql);
      if (!q.ok()) return q.status();
      if (Status s = q.value()->Bind(1, app_id).Bind(2, static_cast<std::int64_t>(now)).Bind(3, me).Run();
          !s.ok()) {
        return s;
      }
    }
    return Status::Ok();
  }

  // One transaction: acknowledge the calling thread's previous deliveries,
  // refresh the lease, maybe recover lapsed consumers, then move the next
  // item into this consumer's processing rows.
  Result<std::optional<InvocationId>> Pop(const std::string& queue) {
    // Named references, not structured bindings: lambdas capture them (clang 14
    // cannot capture a structured binding).
    auto consumer_and_acks = ConsumerAndAcks();
    const auto& consumer = consumer_and_acks.first;
    const auto& acks = consumer_and_acks.second;
    std::optional<InvocationId> out;
    std::int64_t delivered = 0;
    bool recover = false;
    bool lease_fresh = false;
    const TimestampUs now = clock_->NowMicros();
    const TimestampUs lease_us = options_.lease_ms * 1000;
    {
      MutexLock lock(mu_);
      if (now >= next_recovery_us_) {
        recover = true;
        next_recovery_us_ = now + options_.recovery_interval_ms * 1000;
      }
      lease_fresh = registered_ && now + lease_us / 2 < lease_until_us_;
    }
    // Nothing to acknowledge, recover or renew: an empty queue is seen without the
    // write lock (a poller of an idle queue does not hold up the writers of others).
    if (acks.empty() && !recover && lease_fresh) {
      Result<bool> queued = HasQueued(queue);
      if (!queued.ok()) return queued.status();
      if (!queued.value()) return std::optional<InvocationId>();
    }
    Status s = db_->Write([&](Conn& c) -> Status {
      out.reset();
      if (!acks.empty()) {
        auto ack = c.Prepare("DELETE FROM broker_proc WHERE app_id = ? AND consumer = ? AND seq = ?");
        if (!ack.ok()) return ack.status();
        for (std::int64_t seq : acks) {
          Stmt& q = *ack.value();
          q.Reset();
          if (Status r = q.Bind(1, app_id_).Bind(2, consumer).Bind(3, seq).Run(); !r.ok()) return r;
        }
      }
      auto lease = c.Prepare(
          "INSERT INTO broker_consumers (app_id, consumer, lease_until_us) VALUES (?, ?, ?)"
          " ON CONFLICT (app_id, consumer) DO UPDATE SET lease_until_us = excluded.lease_until_us");
      if (!lease.ok()) return lease.status();
      if (Status r = lease.value()
                         ->Bind(1, app_id_)
                         .Bind(2, consumer)
                         .Bind(3, static_cast<std::int64_t>(now + options_.lease_ms * 1000))
                         .Run();
          !r.ok()) {
        return r;
      }
      if (recover) {
        if (Status r = Recover(c, app_id_, consumer, now); !r.ok()) return r;
      }
      auto q = c.Prepare(
          "DELETE FROM broker_queue WHERE seq = (SELECT seq FROM broker_queue"
          " WHERE app_id = ? AND queue = ? ORDER BY priority DESC, seq LIMIT 1)"
          " RETURNING seq, priority, invocation_id");
      if (!q.ok()) return q.status();
      q.value()->Bind(1, app_id_).Bind(2, queue);
      auto row = q.value()->Step();
      if (!row.ok()) return row.status();
      if (!row.value()) return Status::Ok();
      delivered = q.value()->Int(0);
      const double priority = q.value()->Double(1);
      out = InvocationId(q.value()->Text(2));
      q.value()->Reset();
      auto proc = c.Prepare(
          "INSERT INTO broker_proc (app_id, consumer, seq, queue, priority, invocation_id)"
          " VALUES (?, ?, ?, ?, ?, ?)");
      if (!proc.ok()) return proc.status();
      return proc.value()
          ->Bind(1, app_id_)
          .Bind(2, consumer)
          .Bind(3, delivered)
          .Bind(4, queue)
          .Bind(5, priority)
          .Bind(6, out->str())
          .Run();
    });
    if (!s.ok()) {
      Remember(acks);  // rolled back: acknowledge them next time
      return s;
    }
    {
      MutexLock lock(mu_);
      registered_ = true;
      lease_until_us_ = now + lease_us;
    }
    if (out) Remember({delivered});
    return out;
  }

  // Whether `queue` holds any item (a read: no write lock is taken).
  Result<bool> HasQueued(const std::string& queue) {
    bool queued = false;
    Status s = db_->Read([&](Conn& c) -> Status {
      auto q = c.Prepare("SELECT 1 FROM broker_queue WHERE app_id = ? AND queue = ? LIMIT 1");
      if (!q.ok()) return q.status();
      q.value()->Bind(1, app_id_).Bind(2, queue);
      auto row = q.value()->Step();
      if (!row.ok()) return row.status();
      queued = row.value();
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return queued;
  }

  const std::shared_ptr<Database> db_;
  const std::string app_id_;
  const std::shared_ptr<Clock> clock_;
  const SqliteBrokerOptions options_;
  std::atomic<std::uint64_t> interrupt_epoch_{0};
  Mutex mu_;
  std::string consumer_ PYNENC_GUARDED_BY(mu_);  // "" until the first pop
  long pid_ PYNENC_GUARDED_BY(mu_) = 0;  // the process consumer_ belongs to
  bool registered_ PYNENC_GUARDED_BY(mu_) = false;  // a pop committed under consumer_
  TimestampUs lease_until_us_ PYNENC_GUARDED_BY(mu_) = 0;  // the last lease written
  TimestampUs next_recovery_us_ PYNENC_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::thread::id, std::vector<std::int64_t>> unacked_
      PYNENC_GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config) {
  return NewSqliteBroker(std::move(db), config, SqliteBrokerOptions{});
}

Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config,
                                                const SqliteBrokerOptions& options) {
  if (options.lease_ms <= 0 || options.recovery_interval_ms <= 0 ||
      options.lease_ms > 86'400'000 || options.recovery_interval_ms > 86'400'000) {
    return Status::BadConfig("sqlite broker: lease_ms and recovery_interval_ms must be 1..86400000");
  }
  if (Status s = db->EnsureSchema("broker", 1, kSchema); !s.ok()) return s;
  if (Status s = db->EnsureSchema("broker_proc", 1, kProcSchema); !s.ok()) return s;
  return std::unique_ptr<Broker>(std::make_unique<SqliteBroker>(std::move(db), config, options));
}

Result<ThreadDeliveries> ThreadDeliveries::Of(Broker& broker) {
  auto* sqlite = dynamic_cast<SqliteBroker*>(&broker);
  if (sqlite == nullptr) {
    return Status::InvalidArgument("ThreadDeliveries needs a sqlite broker (NewSqliteBroker)");
  }
  return ThreadDeliveries(sqlite, sqlite->Unacked());
}

void ThreadDeliveries::Restore() const {
  static_cast<SqliteBroker*>(broker_)->SetUnacked(seqs_);
}

}  // namespace pynenc_cpp::sqlite
