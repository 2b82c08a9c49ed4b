#include "cluster/actors/inbox.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pynenc_cpp::cluster {

Result<std::unique_ptr<Inbox>> Inbox::Create(std::size_t max_items) {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    return Status::BackendFailure(std::string("cannot create the inbox eventfd: ") +
                                  std::strerror(errno));
  }
  return std::unique_ptr<Inbox>(new Inbox(fd, max_items));
}

Inbox::~Inbox() { ::close(fd_); }

void Inbox::Signal() {
  if (signaled_) return;
  const std::uint64_t one = 1;
  // A full counter (never: we write at most once between reads) is harmless.
  (void)!::write(fd_, &one, sizeof(one));
  signaled_ = true;
}

bool Inbox::Push(InboxItem item) {
  MutexLock lock(mu_);
  if (closed_) return false;
  const bool message =
      item.kind == InboxItem::Kind::kLabel || item.kind == InboxItem::Kind::kPath;
  if (message && items_.size() >= max_items_) {
    ++overflowed_;
    return false;
  }
  items_.push_back(std::move(item));
  Signal();
  return true;
}

std::vector<InboxItem> Inbox::Drain(std::size_t max) {
  std::vector<InboxItem> out;
  MutexLock lock(mu_);
  while (!items_.empty() && out.size() < max) {
    out.push_back(std::move(items_.front()));
    items_.pop_front();
  }
  if (items_.empty() && signaled_) {
    std::uint64_t v = 0;
    (void)!::read(fd_, &v, sizeof(v));
    signaled_ = false;
  }
  return out;
}

std::size_t Inbox::size() const {
  MutexLock lock(mu_);
  return items_.size();
}

std::uint64_t Inbox::overflowed() const {
  MutexLock lock(mu_);
  return overflowed_;
}

void Inbox::Close() {
  MutexLock lock(mu_);
  closed_ = true;
  Signal();
}

bool Inbox::closed() const {
  MutexLock lock(mu_);
  return closed_;
}

}  // namespace pynenc_cpp::cluster
