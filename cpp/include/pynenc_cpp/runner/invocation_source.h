// Where the runner's workers get invocation ids from.
//
// BrokerSource blocks on the engine broker port (no polling) across several
// queues; FunctionSource wraps a callback (used by the bindings when the app's
// broker is not a pynenc-cpp broker, and by tests).
//
// Thread safety: Next() and Interrupt() may be called from any number of threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/broker.h"

namespace pynenc_cpp::runner {

class InvocationSource {
 public:
  InvocationSource() = default;
  InvocationSource(const InvocationSource&) = delete;
  InvocationSource& operator=(const InvocationSource&) = delete;
  virtual ~InvocationSource() = default;

  // The next invocation id, waiting up to `timeout` for one. nullopt when none
  // arrived in time or Interrupt() was called; an error value when the storage
  // failed (the id, if any was popped, is not lost by the source).
  virtual Result<std::optional<std::string>> Next(std::chrono::milliseconds timeout) = 0;

  // True if Next() waits for work by itself; false if the runner must back off
  // between empty answers.
  virtual bool Blocks() const = 0;

  // Wakes every Next() currently waiting; each returns nullopt.
  virtual void Interrupt() = 0;
};

// Retrieval over `queues` of `broker` (not owned; must outlive the source).
// One queue: a single blocking Retrieve. Several: one non-blocking pass over
// every queue in order, then a blocking wait on the queues in rotation, in
// slices of at most `slice` each, so no queue waits longer than one slice.
// REQUIRES: !queues.empty().
std::unique_ptr<InvocationSource> MakeBrokerSource(
    Broker* broker, std::vector<std::string> queues,
    std::chrono::milliseconds slice = std::chrono::milliseconds(50));

// Takes one id from `queue`, waiting up to `timeout_ms` (0: no wait); nullopt
// when none arrived in time or the wait was interrupted.
using TakeFn = std::function<Result<std::optional<std::string>>(const std::string& queue,
                                                                std::int64_t timeout_ms)>;

// MakeBrokerSource's retrieval over `queues` with `take` in place of the
// broker's Retrieve (e.g. a take that also claims what it takes); `interrupt`
// wakes every take waiting. REQUIRES: !queues.empty().
std::unique_ptr<InvocationSource> MakeQueueSource(
    TakeFn take, std::function<void()> interrupt, std::vector<std::string> queues,
    std::chrono::milliseconds slice = std::chrono::milliseconds(50));

// A source backed by `next` (non-blocking: the runner backs off between empty
// answers). `next` is called with no engine lock held.
std::unique_ptr<InvocationSource> MakeFunctionSource(
    std::function<Result<std::optional<std::string>>()> next);

}  // namespace pynenc_cpp::runner
