// A CppRunner worker's take in native mode: the id taken from a queue and its
// claim in one operation (Lifecycle::TakeAndStart), with the two ways of taking
// ahead that save operations:
//
// * prefetch (TakePolicy::prefetch > 1): after a take whose claim moved the
//   invocation (PENDING or RUNNING), with nothing held and the queue not known to
//   be empty, up to prefetch - 1 more ids are taken and claimed in one operation
//   (TakeAndClaim) and held for the engine's workers;
// * take-ahead (TakePolicy::take_ahead, where the lifecycle TakesWithFinish):
//   the take arms its worker thread's next take (NextTake, TakeArmedNext); that
//   invocation's finish (FinishArmed) then takes and starts the next id in the
//   same operation (FinishThenTake) and leaves it held.
//
// What is held (HeldClaims) is handed out, in the order it was taken, by the
// next take of any worker of the engine, before the storage is asked. What is
// still held when the engine stops goes back with its orphans (Close).
//
// The Python runner (bindings/runner.cc) keeps only what touches Python: the
// GIL, the conversion of the claim, and the per-worker thread state.
//
// Thread safety: HeldClaims and ClaimingTake are thread-safe; a NextTake and a
// Taken belong to the worker thread that got them (the armed take is kept per
// thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "pynenc_cpp/ports/broker.h"

namespace pynenc_cpp::runner {

// Invocations taken ahead, not yet handed to a worker: started by finishes
// (FinishThenTake), or claimed by a take's prefetch (TakeAndClaim).
class HeldClaims {
 public:
  HeldClaims() = default;
  HeldClaims(const HeldClaims&) = delete;
  HeldClaims& operator=(const HeldClaims&) = delete;

  // A finish that may take ahead, or a prefetch, begins: false once Close() ran
  // (it then takes nothing). REQUIRES: End() or EndMany() follows a true Begin().
  bool Begin() PYNENC_EXCLUDES(mu_);
  // The finish that Begin() let start ended, with what it took ahead (if anything).
  void End(std::optional<TakenClaim> taken) PYNENC_EXCLUDES(mu_);
  // The prefetch that Begin() let start ended, with what it claimed, held in
  // order after what is held already.
  void EndMany(std::vector<TakenClaim> taken) PYNENC_EXCLUDES(mu_);
  // The first one held (nullopt: none).
  std::optional<TakenClaim> Pop() PYNENC_EXCLUDES(mu_);
  bool empty() const PYNENC_EXCLUDES(mu_);
  // Invocations prefetched (EndMany) so far.
  std::int64_t prefetched() const PYNENC_EXCLUDES(mu_);
  // Invocations taken ahead by finishes (End) and handed out (Pop) so far.
  std::int64_t handed_out() const PYNENC_EXCLUDES(mu_);
  // Stops taking ahead (the engine stops): waits for the finishes and prefetches
  // in flight, then returns the ids still held, which no worker will run.
  std::vector<std::string> Close() PYNENC_EXCLUDES(mu_);

 private:
  struct Entry {
    TakenClaim claim;
    bool prefetched;  // by a take's prefetch, not a finish
  };
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> claims_ PYNENC_GUARDED_BY(mu_);
  int in_flight_ PYNENC_GUARDED_BY(mu_) = 0;
  std::int64_t handed_out_ PYNENC_GUARDED_BY(mu_) = 0;
  std::int64_t prefetched_ PYNENC_GUARDED_BY(mu_) = 0;
  bool closed_ PYNENC_GUARDED_BY(mu_) = false;
};

// How a ClaimingTake takes ahead.
struct TakePolicy {
  int prefetch = 1;         // ids claimed per take, in [1, 1000] (1: no prefetch)
  bool take_ahead = false;  // finishes take the next id (where the lifecycle can)
};

// A worker's armed take: the finish of the invocation it took takes the next id
// of `queue` with it (FinishArmed), and leaves it in `held`.
struct NextTake {
  const Lifecycle* lifecycle;  // the finish must be this one's
  std::string queue;
  Actor taker;
  std::shared_ptr<HeldClaims> held;
};

// What one take gave a worker.
struct Taken {
  TakenClaim claim;       // the id and its claim's outcome (or error)
  Status prefetch_error;  // a prefetch that failed (the take stands)
};

class ClaimingTake {
 public:
  // `lifecycle` and `broker` (the lifecycle's, woken when a prefetch holds ids)
  // outlive this object. REQUIRES: policy.prefetch in [1, 1000].
  ClaimingTake(Lifecycle* lifecycle, Broker* broker, std::shared_ptr<HeldClaims> held,
               Actor actor, TakePolicy policy);

  // One take: what is held first, else TakeAndStart on `queue` waiting up to
  // `timeout_ms` (nullopt: nothing came), then the prefetch and the take-ahead
  // the policy allows (see the file comment): the calling thread's next take is
  // armed (TakeArmedNext) or, first thing, disarmed. An error: the take failed
  // (the id, if one was popped, is not lost by the storage).
  Result<std::optional<Taken>> Take(const std::string& queue, std::int64_t timeout_ms);

  const std::shared_ptr<HeldClaims>& held() const { return held_; }
  const Lifecycle& lifecycle() const { return *lifecycle_; }

 private:
  // The prefetch after `taken` (its backlog flag updated); the error, if it failed.
  Status Prefetch(const std::string& queue, TakenClaim& taken);

  Lifecycle* const lifecycle_;
  Broker* const broker_;
  const std::shared_ptr<HeldClaims> held_;
  const Actor actor_;
  const TakePolicy policy_;
  const bool ahead_;  // policy_.take_ahead and the lifecycle TakesWithFinish
};

// The next take armed on this thread by its last ClaimingTake::Take, taken (the
// thread is disarmed): for the finish of the invocation that take gave, made on the
// same thread (the engine's worker after the run, or Python's finish call within
// it). nullopt: none is armed.
std::optional<NextTake> TakeArmedNext();
// Forgets this thread's armed take (the thread exits).
void DisarmNext();

// FinishSuccess (`success`) or FinishFailure of `id` with `payload`; when `next`
// is armed for `l` and its HeldClaims still takes ahead, FinishThenTake instead,
// what it took left in next->held.
Result<FinishOutcome> FinishArmed(Lifecycle& l, const InvocationId& id, const std::string& payload,
                                  bool success, const Actor& actor, const TaskId& task,
                                  bool release_waiters, std::optional<NextTake> next);

}  // namespace pynenc_cpp::runner
