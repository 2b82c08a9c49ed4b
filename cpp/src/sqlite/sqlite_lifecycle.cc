// SQLite Lifecycle: one write transaction per operation. The components of one
// app share its Storage's Database object (sqlite/sqlite_db.h), and a
// Database::Write/Read made on a thread that already runs a
// transaction on that Database joins it (sqlite/sqlite_db.h), so every port call
// of the operation commits or rolls back together. Lock contention retries the
// whole operation (Atomically's `fn` is re-run from the start).
#include "lifecycle/port_lifecycle.h"
#include "sqlite/sqlite_broker.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::native {
namespace {

class SqliteLifecycle final : public PortLifecycle {
 public:
  SqliteLifecycle(LifecycleParts parts, TriggerContextNames names,
                  std::shared_ptr<sqlite::Database> db)
      : PortLifecycle(std::move(parts), std::move(names)), db_(std::move(db)) {}

  // When the queue has an id: the broker's pop and ClaimAndStart in ONE write
  // transaction (the broker's Retrieve joins it). Otherwise, or when the claim
  // fails (the transaction, pop included, is rolled back), the two operations:
  // the blocking wait is the broker's, and the claim's result or error is
  // exactly ClaimAndStart's. (A rolled-back transaction puts the broker's memory
  // of this thread's deliveries back as it was: ThreadDeliveries.)
  Result<std::optional<TakenClaim>> TakeAndStart(const std::string& queue, std::int64_t timeout_ms,
                                                 const Actor& actor) override {
    std::optional<InvocationId> taken;
    ClaimOutcome claim;
    bool claim_failed = false;
    const std::optional<sqlite::ThreadDeliveries> before = Deliveries();
    Status s = db_->Write([&](sqlite::Conn&) -> Status {
      if (before) before->Restore();  // a re-run starts from what the broker knew
      taken.reset();
      claim_failed = false;
      Result<std::optional<InvocationId>> got = parts().broker->Retrieve(queue, 0);
      if (!got.ok()) return got.status();
      if (!got.value()) return Status::Ok();
      taken = *got.value();
      Status claimed = ClaimSteps(*taken, actor, true, &claim);
      claim_failed = !claimed.ok();
      return claimed;
    });
    if (!s.ok() && before) before->Restore();  // rolled back
    if (claim_failed) return PortLifecycle::TakeAndStart(queue, 0, actor);
    if (!s.ok()) return s;
    if (taken) return std::optional<TakenClaim>(TakenClaim{*taken, Status::Ok(), claim});
    if (timeout_ms <= 0) return std::optional<TakenClaim>();
    return PortLifecycle::TakeAndStart(queue, timeout_ms, actor);
  }

  // Every take and claim in ONE write transaction; a failing take rolls it all
  // back (nothing taken: the error is returned). An id the claim does not move by
  // itself, or whose claim fails, stays queued, as on Redis: its take is rolled
  // back with the rest, and the ones before it are taken again without it (a
  // taken id that is neither PENDING nor RUNNING must not lose its delivery
  // record to this thread's next pop, which acknowledges it).
  Result<std::vector<TakenClaim>> TakeAndClaim(const std::string& queue, int max,
                                               const Actor& actor) override {
    std::vector<TakenClaim> out;
    const std::optional<sqlite::ThreadDeliveries> before = Deliveries();
    for (int limit = max; limit > 0;) {
      bool unclaimed_last = false;
      Status s = db_->Write([&](sqlite::Conn&) -> Status {
        if (before) before->Restore();  // a re-run starts from what the broker knew
        unclaimed_last = false;
        if (Status st = TakeClaimSteps(queue, limit, actor, /*strict=*/true, &out); !st.ok()) {
          return st;
        }
        if (out.empty()) return Status::Ok();
        const TakenClaim& last = out.back();
        if (last.claim_status.ok() && last.claim.kind == ClaimKind::kClaimed) return Status::Ok();
        unclaimed_last = true;
        return Status::Conflict("not claimed by itself: left in its queue");  // rolls back
      });
      if (s.ok()) return out;
      if (before) before->Restore();  // rolled back
      if (!unclaimed_last) return s;
      limit = static_cast<int>(out.size()) - 1;
      out.clear();
    }
    return out;
  }

  // The finish and the next take in ONE write transaction: one lock hand-off and
  // one commit per task instead of two. A finish that fails fails the transaction
  // as it would alone; a take or claim that fails rolls the transaction back and
  // the finish is made alone (no take).
  FinishedAndTaken FinishThenTake(const InvocationId& id, const std::string& payload, bool success,
                                  const Actor& actor, const TaskId& task, bool release_waiters,
                                  const std::string& queue, const Actor& taker) override {
    FinishedAndTaken out{FinishOutcome{}, std::nullopt};
    bool finish_failed = false;
    const std::optional<sqlite::ThreadDeliveries> before = Deliveries();
    Status s = db_->Write([&](sqlite::Conn&) -> Status {
      if (before) before->Restore();  // a re-run starts from what the broker knew
      out.next.reset();
      finish_failed = false;
      Result<FinishOutcome> finished =
          success ? FinishSuccess(id, payload, actor, task, release_waiters)
                  : FinishFailure(id, payload, actor, task, release_waiters);
      if (!finished.ok()) {
        finish_failed = true;
        return finished.status();
      }
      out.finish = std::move(finished).value();
      Result<std::optional<InvocationId>> got = parts().broker->Retrieve(queue, 0);
      if (!got.ok()) return got.status();
      if (!got.value()) return Status::Ok();
      ClaimOutcome claim;
      if (Status claimed = ClaimSteps(*got.value(), taker, true, &claim); !claimed.ok()) {
        return claimed;
      }
      out.next = TakenClaim{*got.value(), Status::Ok(), std::move(claim)};
      return Status::Ok();
    });
    if (s.ok()) return out;
    if (before) before->Restore();  // rolled back
    if (finish_failed) return FinishedAndTaken{s, std::nullopt};
    return PortLifecycle::FinishThenTake(id, payload, success, actor, task, release_waiters, queue,
                                         taker);
  }
  bool TakesWithFinish() const override { return true; }

 protected:
  // The broker's memory of this thread's deliveries, to put back when a
  // transaction that joined its Retrieves rolls back (sqlite_broker.h).
  std::optional<sqlite::ThreadDeliveries> Deliveries() {
    Result<sqlite::ThreadDeliveries> d = sqlite::ThreadDeliveries::Of(*parts().broker);
    if (!d.ok()) return std::nullopt;  // not a sqlite broker: nothing to keep
    return std::move(d).value();
  }

  Status Atomically(const std::function<Status()>& fn) override {
    return db_->Write([&](sqlite::Conn&) { return fn(); });
  }

 private:
  const std::shared_ptr<sqlite::Database> db_;
};

}  // namespace

Result<std::unique_ptr<Lifecycle>> NewSqliteLifecycle(LifecycleParts parts,
                                                      std::shared_ptr<sqlite::Database> db,
                                                      TriggerContextNames names) {
  return std::unique_ptr<Lifecycle>(
      new SqliteLifecycle(std::move(parts), std::move(names), std::move(db)));
}

}  // namespace pynenc_cpp::native
