// Clang thread-safety analysis (-Wthread-safety): the annotations, an annotated
// mutex and its scoped locks. Under other compilers the annotations expand to
// nothing and the types are thin wrappers over std::mutex / std::unique_lock.
//
//   Mutex mu_;
//   int count_ PYNENC_GUARDED_BY(mu_);
//   void Bump() { MutexLock lock(mu_); ++count_; }
//   void BumpLocked() PYNENC_REQUIRES(mu_) { ++count_; }
//
// A condition variable waits on UniqueLock::native(); the analysis treats the
// capability as held across the wait (as abseil's CondVar does), which matches
// what the waiting code may touch once the wait returns. A wait predicate is a
// lambda of its own: annotate it `[&]() PYNENC_REQUIRES(mu_) { ... }`.
//
// scripts/test.sh compiles the annotated code with clang and
// -Werror=thread-safety ("thread-safety analysis"); docs/building.md lists
// which classes are annotated.
//
// Thread safety: Mutex is a mutex; MutexLock and UniqueLock belong to the thread
// that made them.
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define PYNENC_TSA(x) __attribute__((x))
#else
#define PYNENC_TSA(x)
#endif

#define PYNENC_CAPABILITY(name) PYNENC_TSA(capability(name))
#define PYNENC_SCOPED_CAPABILITY PYNENC_TSA(scoped_lockable)
#define PYNENC_GUARDED_BY(x) PYNENC_TSA(guarded_by(x))
#define PYNENC_PT_GUARDED_BY(x) PYNENC_TSA(pt_guarded_by(x))
#define PYNENC_REQUIRES(...) PYNENC_TSA(requires_capability(__VA_ARGS__))
#define PYNENC_ACQUIRE(...) PYNENC_TSA(acquire_capability(__VA_ARGS__))
#define PYNENC_RELEASE(...) PYNENC_TSA(release_capability(__VA_ARGS__))
#define PYNENC_TRY_ACQUIRE(...) PYNENC_TSA(try_acquire_capability(__VA_ARGS__))
#define PYNENC_ACQUIRE_SHARED(...) PYNENC_TSA(acquire_shared_capability(__VA_ARGS__))
#define PYNENC_RELEASE_SHARED(...) PYNENC_TSA(release_shared_capability(__VA_ARGS__))
#define PYNENC_RELEASE_GENERIC(...) PYNENC_TSA(release_generic_capability(__VA_ARGS__))
#define PYNENC_EXCLUDES(...) PYNENC_TSA(locks_excluded(__VA_ARGS__))
#define PYNENC_NO_THREAD_SAFETY_ANALYSIS PYNENC_TSA(no_thread_safety_analysis)

namespace pynenc_cpp {

class PYNENC_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() PYNENC_ACQUIRE() { mu_.lock(); }
  void unlock() PYNENC_RELEASE() { mu_.unlock(); }
  bool try_lock() PYNENC_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For UniqueLock (condition variables need a std::unique_lock<std::mutex>).
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope (std::lock_guard).
class PYNENC_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) PYNENC_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() PYNENC_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds `mu` for its scope, can let go of it and take it again, and lends a
// std::unique_lock to condition variables (std::unique_lock).
class PYNENC_SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) PYNENC_ACQUIRE(mu) : lock_(mu.native()) {}
  ~UniqueLock() PYNENC_RELEASE() {}
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void Unlock() PYNENC_RELEASE() { lock_.unlock(); }
  void Lock() PYNENC_ACQUIRE() { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// A reader/writer mutex (std::shared_mutex): readers share it, a writer holds it alone.
class PYNENC_CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() PYNENC_ACQUIRE() { mu_.lock(); }
  void unlock() PYNENC_RELEASE() { mu_.unlock(); }
  void lock_shared() PYNENC_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() PYNENC_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` alone for its scope (std::unique_lock<std::shared_mutex>).
class PYNENC_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) PYNENC_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() PYNENC_RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Shares `mu` with other readers for its scope (std::shared_lock).
class PYNENC_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) PYNENC_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() PYNENC_RELEASE_GENERIC() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace pynenc_cpp
