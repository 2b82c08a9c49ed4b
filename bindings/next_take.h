// A runner worker's next take, made by its finish (Lifecycle::FinishThenTake),
// and what a take's prefetch claimed (Lifecycle::TakeAndClaim), both held in
// HeldClaims until a worker takes them.
//
// The runner's take (runner.cc) arms `tls_next_take` on the worker thread after it
// took and started an invocation; that invocation's finish, called from pynenc's
// `run` on the same thread (lifecycle.cc's finish_success / finish_failure), then
// takes and starts the next one in the same operation where the storage allows it,
// and leaves it in the engine's HeldClaims, which the next take of any worker of
// that engine returns before it asks the storage. What is still held when the
// engine stops goes back with its orphans (take_orphans).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/native/lifecycle.h"

namespace pynenc_cpp::bindings {

// Invocations taken ahead, not yet handed to a worker: started by finishes
// (FinishThenTake), or claimed by a worker's prefetch (TakeAndClaim). Handed out
// in the order they were taken. Thread-safe.
class HeldClaims {
 public:
  // A finish that may take ahead, or a prefetch, begins: false once the engine
  // stopped (it then takes nothing). REQUIRES: End() or EndMany() follows a true
  // Begin().
  bool Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    ++in_flight_;
    return true;
  }
  // The finish ended, with what it took ahead (if anything).
  void End(std::optional<TakenClaim> taken) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (taken) claims_.push_back(Entry{std::move(*taken), false});
      --in_flight_;
    }
    cv_.notify_all();
  }
  // A prefetch (Lifecycle::TakeAndClaim) that Begin() let start ended, with what
  // it claimed, held in order after what is held already.
  void EndMany(std::vector<TakenClaim> taken) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (TakenClaim& t : taken) claims_.push_back(Entry{std::move(t), true});
      prefetched_ += static_cast<std::int64_t>(taken.size());
      --in_flight_;
    }
    cv_.notify_all();
  }
  bool empty() const {
    std::lock_guard<std::mutex> lock(mu_);
    return claims_.empty();
  }
  // Invocations prefetched (EndMany) so far.
  std::int64_t prefetched() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prefetched_;
  }
  std::optional<TakenClaim> Pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (claims_.empty()) return std::nullopt;
    Entry out = std::move(claims_.front());
    claims_.pop_front();
    if (!out.prefetched) ++handed_out_;
    return std::move(out.claim);
  }
  // Invocations taken ahead by finishes and handed to a worker so far.
  std::int64_t handed_out() const {
    std::lock_guard<std::mutex> lock(mu_);
    return handed_out_;
  }
  // Stops taking ahead (the engine stops): waits for the finishes in flight,
  // then returns the ids still held, which no worker will run.
  std::vector<std::string> Close() {
    std::unique_lock<std::mutex> lock(mu_);
    closed_ = true;
    cv_.wait(lock, [this] { return in_flight_ == 0; });
    std::vector<std::string> ids;
    for (const Entry& e : claims_) ids.push_back(e.claim.id.str());
    claims_.clear();
    return ids;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Entry {
    TakenClaim claim;
    bool prefetched;  // by a take's prefetch, not a finish
  };
  std::deque<Entry> claims_;
  int in_flight_ = 0;
  std::int64_t handed_out_ = 0;
  std::int64_t prefetched_ = 0;
  bool closed_ = false;
};

struct NextTake {
  const Lifecycle* lifecycle;  // the finish must be this one's
  std::string queue;
  Actor taker;
  std::shared_ptr<HeldClaims> held;
};

// This worker thread's armed take (empty on every other thread).
inline thread_local std::optional<NextTake> tls_next_take;

// FinishSuccess (`success`) or FinishFailure of `id` with `payload`; when `next`
// is an armed take of `l` and its engine still takes ahead, FinishThenTake, what
// it took left in next->held. Makes no Python call: callable with or without the
// GIL (lifecycle.cc calls it from Python, runner_hooks.cc from a worker after its
// run).
Result<FinishOutcome> FinishArmed(Lifecycle& l, const InvocationId& id, const std::string& payload,
                                  bool success, const Actor& actor, const TaskId& task,
                                  bool release_waiters, std::optional<NextTake> next);

}  // namespace pynenc_cpp::bindings
