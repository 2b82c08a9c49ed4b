// Inbox: what the node hands to the actor runtime of its process (Python's
// asyncio loop): instances starting and stopping, messages to labels and to
// node-local actor paths, in the order the node produced them. A thread-safe
// queue plus an eventfd that becomes readable when items are waiting, so the
// consumer can sleep in its own event loop (asyncio's add_reader) and drain in
// batches, with no thread of ours ever taking the consumer's locks (the GIL).
//
// Thread safety: every method is safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/actors.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

class Inbox {
 public:
  // kBackendFailure if the eventfd cannot be created.
  static Result<std::unique_ptr<Inbox>> Create(std::size_t max_items);
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // Queues `item`. Messages (kLabel, kPath) are refused (false, counted in
  // overflowed()) while max_items are waiting: the consumer is not keeping up.
  // Lifecycle items (start, stop, regrant) are always queued. False once closed.
  bool Push(InboxItem item);
  // Up to `max` waiting items, oldest first; clears the eventfd when none is left.
  std::vector<InboxItem> Drain(std::size_t max);
  // Readable while items are waiting (level-triggered like a pipe).
  int fd() const { return fd_; }
  std::size_t size() const;
  std::uint64_t overflowed() const;
  // Wakes the consumer once more with nothing queued (it drains nothing): used
  // when the node stops so a reader blocked on fd() notices.
  void Close();
  bool closed() const;

 private:
  Inbox(int fd, std::size_t max_items) : fd_(fd), max_items_(max_items) {}
  void Signal() PYNENC_REQUIRES(mu_);

  const int fd_;
  const std::size_t max_items_;
  mutable Mutex mu_;
  std::deque<InboxItem> items_ PYNENC_GUARDED_BY(mu_);
  bool signaled_ PYNENC_GUARDED_BY(mu_) = false;
  bool closed_ PYNENC_GUARDED_BY(mu_) = false;
  std::uint64_t overflowed_ PYNENC_GUARDED_BY(mu_) = 0;
};

}  // namespace pynenc_cpp::cluster
