#include "cluster/actors/inbox_instance.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace pynenc_cpp::cluster {

void StopLatch::Done(const std::string& label, Generation generation) {
  {
    MutexLock lock(mu_);
    done_.insert({label, generation.Packed()});
  }
  cv_.notify_all();
}

bool StopLatch::Wait(const std::string& label, Generation generation, std::int64_t timeout_ms,
                     const Inbox& inbox) {
  const auto key = std::make_pair(label, generation.Packed());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  UniqueLock lock(mu_);
  while (!done_.count(key)) {
    if (inbox.closed()) return false;
    // Short waits: a closed inbox has no notify of its own.
    if (cv_.wait_until(lock.native(), std::min(deadline, std::chrono::steady_clock::now() +
                                                    std::chrono::milliseconds(50))) ==
            std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= deadline) {
      return done_.count(key) > 0;
    }
  }
  done_.erase(key);
  return true;
}

namespace {

class InboxInstance final : public ActorInstance {
 public:
  InboxInstance(Inbox& inbox, StopLatch& latch, const InstanceContext& ctx,
                std::int64_t stop_timeout_ms)
      : inbox_(inbox), latch_(latch), ctx_(ctx), stop_timeout_ms_(stop_timeout_ms) {
    InboxItem start;
    start.kind = InboxItem::Kind::kStart;
    start.label = ctx.label;
    start.generation = ctx.generation;
    start.spec_kind = ctx.kind;
    start.actor_type = ctx.actor_type;
    start.payload = ctx.state;
    if (!inbox_.Push(std::move(start))) throw std::runtime_error("the actor runtime has stopped");
  }

  void Stop(std::string_view reason) override {
    InboxItem stop;
    stop.kind = InboxItem::Kind::kStop;
    stop.label = ctx_.label;
    stop.generation = ctx_.generation;
    stop.payload = std::string(reason);
    if (!inbox_.Push(std::move(stop))) return;  // the runtime is gone: nothing runs any more
    if (!latch_.Wait(ctx_.label, ctx_.generation, stop_timeout_ms_, inbox_)) {
      std::fprintf(stderr,
                   "pynenc-cpp cluster: the actor runtime did not stop '%s' within %lld ms\n",
                   ctx_.label.c_str(), static_cast<long long>(stop_timeout_ms_));
    }
  }

  void OnGeneration(Generation generation) override {
    ctx_.generation = generation;
    InboxItem item;
    item.kind = InboxItem::Kind::kRegrant;
    item.label = ctx_.label;
    item.generation = generation;
    inbox_.Push(std::move(item));
  }

 private:
  Inbox& inbox_;
  StopLatch& latch_;
  InstanceContext ctx_;
  std::int64_t stop_timeout_ms_;
};

}  // namespace

ActorFactory MakeInboxFactory(Inbox& inbox, StopLatch& latch, std::int64_t stop_timeout_ms) {
  return [&inbox, &latch, stop_timeout_ms](const InstanceContext& ctx) {
    return std::make_unique<InboxInstance>(inbox, latch, ctx, stop_timeout_ms);
  };
}

}  // namespace pynenc_cpp::cluster
