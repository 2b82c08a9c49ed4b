#include "sqlite/sqlite_checkpointer.h"

#include <pthread.h>
#include <unistd.h>

#include <mutex>
#include <utility>

#include "pynenc_cpp/core/thread_name.h"

namespace pynenc_cpp::sqlite {
namespace {

// Held by every checkpoint, and by fork() from its prepare handler until the
// child and the parent are both running again (see the header's "Fork").
std::mutex& ForkGate() {
  static std::mutex gate;
  return gate;
}

void LockGate() { ForkGate().lock(); }
void UnlockGate() { ForkGate().unlock(); }  // in the child: the forking thread's lock

void InstallForkGate() {
  static std::once_flag once;  // a child inherits the handlers, and the flag
  std::call_once(once, [] { pthread_atfork(&LockGate, &UnlockGate, &UnlockGate); });
}

}  // namespace

Checkpointer::Checkpointer(std::function<bool()> checkpoint)
    : checkpoint_((InstallForkGate(), std::move(checkpoint))),
      pid_(getpid()),
      thread_([this] { Loop(); }) {}

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

std::uint64_t Checkpointer::failed() const {
  MutexLock lock(mu_);
  return failed_;
}

void Checkpointer::Loop() {
  NameThisThread("pynenc-ckpt");
  UniqueLock lock(mu_);
  while (true) {
    cv_.wait(lock.native(), [this]() PYNENC_REQUIRES(mu_) { return requested_ || stopping_; });
    if (stopping_) return;
    requested_ = false;
    lock.Unlock();
    bool ok = false;
    {
      std::lock_guard<std::mutex> gate(ForkGate());
      try {
        ok = checkpoint_();
      } catch (...) {  // no memory for a connection, say: the next request tries again
        ok = false;
      }
    }
    lock.Lock();
    ++(ok ? completed_ : failed_);
  }
}

}  // namespace pynenc_cpp::sqlite
