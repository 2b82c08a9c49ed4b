// InboxInstance: an ActorInstance whose life is carried out by the process's
// actor runtime (Python's asyncio loop) through the Inbox: constructing it
// queues kStart, Stop queues kStop and waits until the runtime reports the
// instance stopped (ClusterNode::InstanceStopped), OnGeneration queues kRegrant.
// Messages for it go through the Mailer, not OnMessage.
//
// Thread safety: the instance is called on the node's callback thread (like
// every ActorInstance); StopLatch is safe from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "cluster/actors/inbox.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/cluster/instance.h"

namespace pynenc_cpp::cluster {

// Which (label, generation) instances the runtime reported stopped.
class StopLatch {
 public:
  void Done(const std::string& label, Generation generation);
  // True once Done(label, generation) was called; false after `timeout_ms` or
  // once the inbox closed (nobody is left to answer).
  bool Wait(const std::string& label, Generation generation, std::int64_t timeout_ms,
            const Inbox& inbox);

 private:
  Mutex mu_;
  std::condition_variable cv_;
  std::set<std::pair<std::string, std::uint64_t>> done_ PYNENC_GUARDED_BY(mu_);
};

// A factory of InboxInstances for one actor type. REQUIRES: inbox and latch
// outlive every instance (the node owns all three).
ActorFactory MakeInboxFactory(Inbox& inbox, StopLatch& latch, std::int64_t stop_timeout_ms);

}  // namespace pynenc_cpp::cluster
