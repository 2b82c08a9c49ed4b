// In-memory broker: per queue, a map priority -> FIFO deque, guarded by one
// mutex; a condition variable wakes blocked retrievers when work is routed. A
// retriever that finds its queue empty spins briefly on the routes' counter
// before it sleeps (core/spin_wait.h).
#include "mem/mem_broker.h"
#include "pynenc_cpp/core/spin_wait.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace pynenc_cpp {
namespace {

class MemBroker final : public Broker {
 public:
  Status Route(const std::vector<InvocationId>& ids, const std::string& queue,
               double priority) override {
    if (ids.empty()) return Status::Ok();
    {
      MutexLock lock(mu_);
      auto& fifo = queues_[queue][priority];
      fifo.insert(fifo.end(), ids.begin(), ids.end());
      changes_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    return Status::Ok();
  }

  Result<std::optional<InvocationId>> Retrieve(const std::string& queue,
                                               std::int64_t timeout_ms) override {
    UniqueLock lock(mu_);
    const std::uint64_t epoch = interrupt_epoch_;
    if (auto id = PopLocked(queue)) return std::optional<InvocationId>(std::move(*id));
    if (timeout_ms <= 0) return std::optional<InvocationId>();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    const std::uint64_t seen = changes_.load(std::memory_order_acquire);
    lock.Unlock();
    SpinUntil(spin_gate_, deadline,
              [&] { return changes_.load(std::memory_order_acquire) != seen; });
    lock.Lock();
    if (interrupt_epoch_ != epoch) return std::optional<InvocationId>();
    if (auto id = PopLocked(queue)) return std::optional<InvocationId>(std::move(*id));
    while (true) {
      if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
        std::optional<InvocationId> id = PopLocked(queue);
        spin_gate_.Settle(id.has_value());
        return id;
      }
      if (interrupt_epoch_ != epoch) return std::optional<InvocationId>();
      if (auto id = PopLocked(queue)) {
        spin_gate_.Settle(true);
        return std::optional<InvocationId>(std::move(*id));
      }
    }
  }

  Result<std::int64_t> Count(const std::vector<std::string>& queues) override {
    MutexLock lock(mu_);
    std::int64_t total = 0;
    for (const std::string& name : queues) {
      auto it = queues_.find(name);
      if (it == queues_.end()) continue;
      for (const auto& [priority, fifo] : it->second)
        total += static_cast<std::int64_t>(fifo.size());
    }
    return total;
  }

  Status Purge() override {
    MutexLock lock(mu_);
    queues_.clear();
    return Status::Ok();
  }

  void Interrupt() override {
    {
      MutexLock lock(mu_);
      ++interrupt_epoch_;
      changes_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
  }

 private:
  std::optional<InvocationId> PopLocked(const std::string& queue) PYNENC_REQUIRES(mu_) {
    auto it = queues_.find(queue);
    if (it == queues_.end()) return std::nullopt;
    for (auto& [priority, fifo] : it->second) {  // highest priority first
      if (fifo.empty()) continue;
      InvocationId id = std::move(fifo.front());
      fifo.pop_front();
      return id;
    }
    return std::nullopt;
  }

  Mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::map<double, std::deque<InvocationId>, std::greater<>>>
      queues_ PYNENC_GUARDED_BY(mu_);
  std::uint64_t interrupt_epoch_ PYNENC_GUARDED_BY(mu_) = 0;
  // Bumped by every Route and Interrupt (under mu_): what a spinning retriever polls.
  std::atomic<std::uint64_t> changes_{0};
  SpinGate spin_gate_;
};

}  // namespace

std::unique_ptr<Broker> NewMemBroker(const BackendConfig&) { return std::make_unique<MemBroker>(); }

}  // namespace pynenc_cpp
