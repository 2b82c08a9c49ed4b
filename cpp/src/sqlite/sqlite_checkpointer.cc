#include "sqlite/sqlite_checkpointer.h"

#include <unistd.h>

#include <utility>

namespace pynenc_cpp::sqlite {

Checkpointer::Checkpointer(std::function<void()> checkpoint)
    : checkpoint_(std::move(checkpoint)), pid_(getpid()), thread_([this] { Loop(); }) {}

Checkpointer::~Checkpointer() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Checkpointer::Request() {
  {
    MutexLock lock(mu_);
    if (requested_) return;  // already pending: the coming run covers this one
    requested_ = true;
  }
  cv_.notify_one();
}

std::uint64_t Checkpointer::completed() const {
  MutexLock lock(mu_);
  return completed_;
}

void Checkpointer::Loop() {
  UniqueLock lock(mu_);
  while (true) {
    cv_.wait(lock.native(), [this]() PYNENC_REQUIRES(mu_) {
      return requested_ || stopping_;
    });
    if (stopping_) return;
    requested_ = false;
    lock.Unlock();
    checkpoint_();
    lock.Lock();
    ++completed_;
  }
}

}  // namespace pynenc_cpp::sqlite
