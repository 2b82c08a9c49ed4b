// CallbackThread: runs jobs one at a time, in order, on its own thread (the
// node's callback thread: user callbacks, instance factories and stops).
//
// Thread safety: Push, Finish and RunOne are safe from any thread.
#pragma once

#include <cxxabi.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp::cluster {

// Runs jobs one at a time, in order, on its own thread. A job that throws is
// reported to stderr and skipped (user callbacks must not kill the node).
class CallbackThread {
 public:
  CallbackThread() : thread_([this] { Run(); }) {}
  ~CallbackThread() {
    Finish();
    if (thread_.joinable()) {
      if (OnThisThread()) {
        thread_.detach();  // destroyed from inside a callback: it exits after it
      } else {
        thread_.join();
      }
    }
  }
  void Push(std::function<void()> job) {
    {
      MutexLock lock(mu_);
      if (finishing_) return;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
  }
  // Runs the queued jobs, then ends the thread. Idempotent. On the callback
  // thread itself it only marks the end (the thread exits after this job).
  void Finish() {
    {
      MutexLock lock(mu_);
      finishing_ = true;
    }
    cv_.notify_all();
    if (!OnThisThread() && thread_.joinable()) thread_.join();
  }
  bool OnThisThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Runs one queued job on the calling thread; false if none was queued.
  bool RunOne() {
    std::function<void()> job;
    {
      MutexLock lock(mu_);
      if (jobs_.empty()) return false;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Invoke(job);
    return true;
  }

 private:
  static void Invoke(const std::function<void()>& job) {
    try {
      job();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pynenc-cpp cluster: callback raised: %s\n", e.what());
    } catch (const abi::__forced_unwind&) {
      throw;  // the thread is being ended (pthread_exit): let it unwind
    } catch (...) {
      std::fprintf(stderr, "pynenc-cpp cluster: callback raised an unknown exception\n");
    }
  }
  void Run() {
    for (;;) {
      std::function<void()> job;
      {
        UniqueLock lock(mu_);
        cv_.wait(lock.native(),
                 [this]() PYNENC_REQUIRES(mu_) { return finishing_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      Invoke(job);
    }
  }
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_ PYNENC_GUARDED_BY(mu_);
  bool finishing_ PYNENC_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace pynenc_cpp::cluster
