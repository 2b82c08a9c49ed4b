// Factories of the SQLite broker (concrete class in sqlite_broker.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pynenc_cpp/ports/broker.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::sqlite {

struct SqliteBrokerOptions {
  std::int64_t lease_ms = 10'000;             // a consumer silent this long is presumed dead
  std::int64_t recovery_interval_ms = 1'000;  // at most one recovery pass per interval per broker
};

// Thread- and process-safe, with reliable dequeue (a popped id stays in
// broker_proc until the popping thread's next Retrieve; a consumer whose lease
// lapsed has its ids moved back: sqlite_broker.cc). A blocked Retrieve wakes at once for a route made
// by any process (the database's WakeBoard, sqlite_wake.h); only where the board
// cannot be shared are other processes' routes seen by a kCrossProcessPollMs poll.
Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config);
Result<std::unique_ptr<Broker>> NewSqliteBroker(std::shared_ptr<Database> db,
                                                const BackendConfig& config,
                                                const SqliteBrokerOptions& options);

// What a sqlite broker remembers of the calling thread's deliveries (the ones
// its next Retrieve acknowledges), taken before a write transaction that joins
// Retrieves and may roll back: the rows roll back, the broker's memory does not,
// so Restore() puts it back as it was (else the acknowledgements it consumed are
// lost, and the deliveries it recorded name rows that are queued again, which
// another thread of the process may pop under the same delivery key).
// Of(): kInvalidArgument if `broker` was not made by NewSqliteBroker.
class ThreadDeliveries {
 public:
  static Result<ThreadDeliveries> Of(Broker& broker);
  void Restore() const;  // on the thread Of() was called on

 private:
  ThreadDeliveries(Broker* broker, std::vector<std::int64_t> seqs)
      : broker_(broker), seqs_(std::move(seqs)) {}
  Broker* broker_;
  std::vector<std::int64_t> seqs_;
};

}  // namespace pynenc_cpp::sqlite
