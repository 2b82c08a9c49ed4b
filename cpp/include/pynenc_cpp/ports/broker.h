// Broker port: named queues of invocation ids with float priorities.
// Maps pynenc's BaseBroker: _route_invocation(s) -> Route, retrieve_invocation ->
// Retrieve (timeout 0), count_invocations -> Count, purge -> Purge.
//
// Ordering: within one queue a higher priority is retrieved first; equal
// priorities are retrieved in routing order (FIFO).
// Thread safety: implementations are thread-safe; Retrieve may block one thread
// while others Route.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/ids.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

class Broker {
 public:
  Broker() = default;
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;
  virtual ~Broker() = default;

  // Appends `ids`, in order, to `queue` at `priority`. Wakes waiting retrievers.
  virtual Status Route(const std::vector<InvocationId>& ids, const std::string& queue,
                       double priority) = 0;

  // Removes and returns the next id of `queue`. If the queue is empty, waits up
  // to `timeout_ms` for one to be routed (0: do not wait; no polling either way).
  // Returns nullopt if none arrived in time or Interrupt() was called.
  virtual Result<std::optional<InvocationId>> Retrieve(const std::string& queue,
                                                       std::int64_t timeout_ms) = 0;

  // Number of ids waiting in `queues`, summed.
  virtual Result<std::int64_t> Count(const std::vector<std::string>& queues) = 0;

  // Drops every queued id of this app.
  virtual Status Purge() = 0;

  // Wakes every Retrieve currently waiting; each returns nullopt. Later calls
  // wait normally. For runner shutdown, and for a runner's workers waiting while
  // a prefetch holds work for them. Not free: on Redis a push per waiting call
  // (from a thread of its own), on SQLite a wake of every waiter on the file.
  virtual void Interrupt() = 0;
};

// Opens the broker named by `config.uri`. kBadConfig for an unusable URI.
Result<std::unique_ptr<Broker>> OpenBroker(const BackendConfig& config);

}  // namespace pynenc_cpp
