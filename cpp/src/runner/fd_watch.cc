#include "pynenc_cpp/runner/fd_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "pynenc_cpp/core/thread_name.h"

namespace pynenc_cpp::runner {

Result<std::unique_ptr<FdWatch>> FdWatch::Start(int fd, std::function<void()> on_readable) {
  if (fd < 0) return Status::InvalidArgument("FdWatch: a negative file descriptor");
  if (!on_readable) return Status::InvalidArgument("FdWatch: no function to call");
  int stop[2];
  if (::pipe2(stop, O_CLOEXEC) != 0) {
    return Status::BackendFailure(std::string("FdWatch: pipe2: ") + std::strerror(errno));
  }
  std::unique_ptr<FdWatch> watch(new FdWatch(fd, std::move(on_readable), stop[0], stop[1]));
  try {
    watch->thread_ = std::thread([w = watch.get()] { w->Run(); });
  } catch (const std::system_error& e) {
    return Status::BackendFailure(std::string("FdWatch: cannot start its thread (") + e.what() +
                                  ")");
  }
  return watch;
}

FdWatch::FdWatch(int fd, std::function<void()> on_readable, int stop_read, int stop_write)
    : fd_(fd),
      on_readable_(std::move(on_readable)),
      stop_read_(stop_read),
      stop_write_(stop_write) {}

FdWatch::~FdWatch() {
  if (thread_.joinable()) {
    const char byte = 0;
    while (::write(stop_write_, &byte, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  ::close(stop_read_);
  ::close(stop_write_);
}

void FdWatch::Run() {
  NameThisThread("pynenc-signals");
  pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_read_, POLLIN, 0}};
  while (true) {
    fds[0].revents = fds[1].revents = 0;
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;  // a signal handled on this thread
      return;
    }
    if (fds[1].revents != 0) return;  // the destructor
    if ((fds[0].revents & POLLIN) != 0) {
      char buf[64];
      const ssize_t got = ::read(fd_, buf, sizeof buf);
      if (got > 0) {
        on_readable_();
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        return;  // the other end closed, or the fd failed
      }
      continue;
    }
    if ((fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return;
  }
}

}  // namespace pynenc_cpp::runner
