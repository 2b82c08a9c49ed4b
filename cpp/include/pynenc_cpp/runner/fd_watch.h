// FdWatch: a thread that calls a function each time a file descriptor becomes
// readable, and sleeps otherwise (no periodic wake-ups).
//
// The runner's main thread uses it to learn of a signal while it blocks in
// RunnerEngine::Wait: Python's C signal handler writes a byte to its wakeup fd
// (signal.set_wakeup_fd), the watch reads it and nudges the Wait, which then runs
// the Python handlers. Without it the Wait had to wake every 100 ms to look.
//
// Thread safety: Start and the destructor from any one thread; `on_readable` runs
// on the watch's own thread, never after the destructor returned.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::runner {

class FdWatch {
 public:
  // Watches `fd`, which stays the caller's and must stay open until this is
  // destroyed. Each time it is readable, reads what is there (up to 64 bytes a
  // time, discarded) and calls `on_readable`. The watch ends by itself when `fd`
  // is closed at its other end or fails. kInvalidArgument for a negative fd or an
  // empty function; kBackendFailure when the OS refuses a pipe or a thread.
  static Result<std::unique_ptr<FdWatch>> Start(int fd, std::function<void()> on_readable);

  FdWatch(const FdWatch&) = delete;
  FdWatch& operator=(const FdWatch&) = delete;
  // Stops the thread and joins it.
  ~FdWatch();

 private:
  FdWatch(int fd, std::function<void()> on_readable, int stop_read, int stop_write);
  void Run();

  const int fd_;
  const std::function<void()> on_readable_;
  const int stop_read_;  // the destructor's self-pipe
  const int stop_write_;
  std::thread thread_;
};

}  // namespace pynenc_cpp::runner
