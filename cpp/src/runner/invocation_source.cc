#include "pynenc_cpp/runner/invocation_source.h"

#include "pynenc_cpp/core/metrics.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace pynenc_cpp::runner {
namespace {

class QueueSource final : public InvocationSource {
 public:
  QueueSource(TakeFn take, std::function<void()> interrupt, std::vector<std::string> queues,
              std::chrono::milliseconds slice)
      : take_(std::move(take)),
        interrupt_(std::move(interrupt)),
        queues_(std::move(queues)),
        slice_(slice) {}

  Result<std::optional<std::string>> Next(std::chrono::milliseconds timeout) override {
    const std::uint64_t epoch = interrupts_.load();
    if (queues_.size() == 1) return Pop(queues_[0], timeout.count());
    // A quick pass over every queue in order first (pynenc's ORDERED strategy).
    for (const std::string& q : queues_) {
      Result<std::optional<std::string>> got = Pop(q, 0);
      if (!got.ok() || got.value()) return got;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (std::size_t i = rotation_.fetch_add(1);; ++i) {
      if (interrupts_.load() != epoch) return std::optional<std::string>();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::optional<std::string>();
      Result<std::optional<std::string>> got =
          Pop(queues_[i % queues_.size()], std::min(left, slice_).count());
      if (!got.ok() || got.value()) return got;
    }
  }

  bool Blocks() const override { return true; }

  void Interrupt() override {
    interrupts_.fetch_add(1);
    interrupt_();
  }

 private:
  Result<std::optional<std::string>> Pop(const std::string& queue, std::int64_t timeout_ms) {
    Result<std::optional<std::string>> r = take_(queue, timeout_ms);
    if (!r.ok()) {
      // Never reaches Python (where the binding boundary counts): counted here.
      if (r.status().code() == ErrorCode::kBackendFailure) {
        metrics::OnBackendError(r.status().connection_lost());
      }
      return r.status();
    }
    return r;
  }

  const TakeFn take_;
  const std::function<void()> interrupt_;
  const std::vector<std::string> queues_;
  const std::chrono::milliseconds slice_;
  std::atomic<std::uint64_t> interrupts_{0};
  std::atomic<std::size_t> rotation_{0};
};

class FunctionSource final : public InvocationSource {
 public:
  explicit FunctionSource(std::function<Result<std::optional<std::string>>()> next)
      : next_(std::move(next)) {}
  Result<std::optional<std::string>> Next(std::chrono::milliseconds) override { return next_(); }
  bool Blocks() const override { return false; }
  void Interrupt() override {}

 private:
  std::function<Result<std::optional<std::string>>()> next_;
};

}  // namespace

std::unique_ptr<InvocationSource> MakeBrokerSource(Broker* broker,
                                                   std::vector<std::string> queues,
                                                   std::chrono::milliseconds slice) {
  auto take = [broker](const std::string& queue,
                       std::int64_t timeout_ms) -> Result<std::optional<std::string>> {
    Result<std::optional<InvocationId>> r = broker->Retrieve(queue, timeout_ms);
    if (!r.ok()) return r.status();
    if (!r.value()) return std::optional<std::string>();
    return std::optional<std::string>(r.value()->str());
  };
  return MakeQueueSource(std::move(take), [broker] { broker->Interrupt(); }, std::move(queues),
                         slice);
}

std::unique_ptr<InvocationSource> MakeQueueSource(TakeFn take, std::function<void()> interrupt,
                                                  std::vector<std::string> queues,
                                                  std::chrono::milliseconds slice) {
  return std::make_unique<QueueSource>(std::move(take), std::move(interrupt), std::move(queues),
                                       slice);
}

std::unique_ptr<InvocationSource> MakeFunctionSource(
    std::function<Result<std::optional<std::string>>()> next) {
  return std::make_unique<FunctionSource>(std::move(next));
}

}  // namespace pynenc_cpp::runner
