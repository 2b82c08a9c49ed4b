// A CppRunner worker's take in native mode, its prefetch and its take-ahead:
// claiming_take.h.
#include "pynenc_cpp/runner/claiming_take.h"

#include <utility>

namespace pynenc_cpp::runner {
namespace {

// This worker thread's armed take (empty on every other thread).
thread_local std::optional<NextTake> tls_armed;

}  // namespace

std::optional<NextTake> TakeArmedNext() {
  std::optional<NextTake> out = std::move(tls_armed);
  tls_armed.reset();
  return out;
}

void DisarmNext() { tls_armed.reset(); }

// ---- HeldClaims -------------------------------------------------------------

bool HeldClaims::Begin() {
  MutexLock lock(mu_);
  if (closed_) return false;
  ++in_flight_;
  return true;
}

void HeldClaims::End(std::optional<TakenClaim> taken) {
  {
    MutexLock lock(mu_);
    if (taken) claims_.push_back(Entry{std::move(*taken), false});
    --in_flight_;
  }
  cv_.notify_all();
}

void HeldClaims::EndMany(std::vector<TakenClaim> taken) {
  {
    MutexLock lock(mu_);
    for (TakenClaim& t : taken) claims_.push_back(Entry{std::move(t), true});
    prefetched_ += static_cast<std::int64_t>(taken.size());
    --in_flight_;
  }
  cv_.notify_all();
}

std::optional<TakenClaim> HeldClaims::Pop() {
  MutexLock lock(mu_);
  if (claims_.empty()) return std::nullopt;
  Entry out = std::move(claims_.front());
  claims_.pop_front();
  if (!out.prefetched) ++handed_out_;
  return std::move(out.claim);
}

bool HeldClaims::empty() const {
  MutexLock lock(mu_);
  return claims_.empty();
}

std::int64_t HeldClaims::prefetched() const {
  MutexLock lock(mu_);
  return prefetched_;
}

std::int64_t HeldClaims::handed_out() const {
  MutexLock lock(mu_);
  return handed_out_;
}

std::vector<std::string> HeldClaims::Close() {
  UniqueLock lock(mu_);
  closed_ = true;
  cv_.wait(lock.native(), [&]() PYNENC_REQUIRES(mu_) { return in_flight_ == 0; });
  std::vector<std::string> ids;
  for (const Entry& e : claims_) ids.push_back(e.claim.id.str());
  claims_.clear();
  return ids;
}

// ---- ClaimingTake -----------------------------------------------------------

ClaimingTake::ClaimingTake(Lifecycle* lifecycle, Broker* broker, std::shared_ptr<HeldClaims> held,
                           Actor actor, TakePolicy policy)
    : lifecycle_(lifecycle),
      broker_(broker),
      held_(std::move(held)),
      actor_(std::move(actor)),
      policy_(policy),
      ahead_(policy.take_ahead && lifecycle->TakesWithFinish()) {}

Result<std::optional<Taken>> ClaimingTake::Take(const std::string& queue,
                                                std::int64_t timeout_ms) {
  tls_armed.reset();
  // Taken ahead by a finish, or prefetched by a take.
  std::optional<TakenClaim> taken = held_->Pop();
  if (!taken) {
    Result<std::optional<TakenClaim>> r = lifecycle_->TakeAndStart(queue, timeout_ms, actor_);
    if (!r.ok()) return r.status();
    if (!r.value()) return std::optional<Taken>();
    taken = std::move(*r.value());
  }
  Taken out;
  out.claim = std::move(*taken);
  out.prefetch_error = Prefetch(queue, out.claim);
  // Its finish takes the next one where that saves an operation, nothing is held,
  // and the queue was not known to be empty.
  if (ahead_ && out.claim.backlog && held_->empty()) {
    tls_armed = NextTake{lifecycle_, queue, actor_, held_};
  }
  return std::optional<Taken>(std::move(out));
}

Status ClaimingTake::Prefetch(const std::string& queue, TakenClaim& taken) {
  // Only after a take that is PENDING or RUNNING already: the prefetch's pops
  // acknowledge this thread's earlier delivery (SQLite), which an id still
  // waiting for its own claim must keep until it is claimed or routed back.
  const bool claimed = taken.claim_status.ok() && (taken.claim.kind == ClaimKind::kStarted ||
                                                   taken.claim.kind == ClaimKind::kClaimed);
  if (policy_.prefetch <= 1 || !taken.backlog || !claimed || !held_->empty() ||
      !held_->Begin()) {
    return Status::Ok();
  }
  std::vector<TakenClaim> got;
  Status failed;
  bool wake = false;
  {
    struct Ended {  // what Begin() started always ends, or a stop waits forever
      HeldClaims& held;
      std::vector<TakenClaim>& got;
      ~Ended() { held.EndMany(std::move(got)); }
    } ended{*held_, got};
    Result<std::vector<TakenClaim>> more =
        lifecycle_->TakeAndClaim(queue, policy_.prefetch - 1, actor_);
    if (more.ok()) {
      got = std::move(more).value();
      // Fewer than asked: the queue ran dry, or its next id needs a claim of its
      // own; the last one's take-ahead would most likely find nothing.
      if (static_cast<int>(got.size()) < policy_.prefetch - 1) {
        taken.backlog = false;
        if (!got.empty()) got.back().backlog = false;
      }
    } else {
      failed = more.status();
    }
    // (On Redis a reply lost after the script ran leaves what it claimed PENDING,
    // for pynenc's pending recovery; a later take prefetches again.)
    wake = !got.empty();
  }
  // Held now (EndMany ran): a worker waiting on the queue ends its wait and takes
  // it (the takes consumed the wake tokens of what they took).
  if (wake) broker_->Interrupt();
  return failed;
}

// ---- FinishArmed ------------------------------------------------------------

Result<FinishOutcome> FinishArmed(Lifecycle& l, const InvocationId& id, const std::string& payload,
                                  bool success, const Actor& actor, const TaskId& task,
                                  bool release_waiters, std::optional<NextTake> next) {
  if (!next || next->lifecycle != &l || !next->held->Begin()) {
    return success ? l.FinishSuccess(id, payload, actor, task, release_waiters)
                   : l.FinishFailure(id, payload, actor, task, release_waiters);
  }
  FinishedAndTaken both = l.FinishThenTake(id, payload, success, actor, task, release_waiters,
                                           next->queue, next->taker);
  next->held->End(std::move(both.next));
  return std::move(both.finish);
}

}  // namespace pynenc_cpp::runner
