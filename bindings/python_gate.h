// The gate every engine-owned C++ thread passes before it takes the GIL on its
// own (cluster callback and loop threads, runner workers and timer, destructors
// that drop Python references on any thread).
//
// Why: from the moment the interpreter starts finalizing, CPython 3.12 ends a
// thread that takes (or waits for) the GIL with pthread_exit. Its forced
// unwinding through a noexcept frame (a callback wrapper, a destructor) calls
// std::terminate: the process aborts at exit with "terminate called without an
// active exception". Checking _Py_IsFinalizing() before taking the GIL is not
// enough: finalization can start between the check and the wait.
//
// So the gate closes before finalization starts: the module registers an
// atexit hook (it runs after pynenc_cpp's Python hooks, which still need their
// callbacks, because atexit runs hooks in reverse order of registration). The
// hook closes the gate, so no thread enters Python afterwards, and waits (GIL
// released, bounded) for the threads inside to leave.
#pragma once

#include <Python.h>

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace pynenc_cpp::bindings {

// Whether the interpreter is finalizing: Py_IsFinalizing() is public from
// CPython 3.13 on, where the private _Py_IsFinalizing() of 3.12 is gone.
inline bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace pynenc_cpp::bindings

namespace pynenc_cpp::bindings {

// How often the bindings hand the GIL over, process-wide (bench/profile_burst.py
// reports them per task): engine calls that released the GIL and took it back
// (GilRelease), and passages of engine threads into Python (PythonEntry: a runner
// worker running an invocation, a callback). Relaxed counters: figures, not
// synchronization. Thread-safe.
struct GilCounts {
  std::atomic<std::uint64_t> engine_calls{0};
  std::atomic<std::uint64_t> thread_entries{0};
};
inline GilCounts& GilCounters() {
  static GilCounts counts;
  return counts;
}

class PythonGate {
 public:
  static PythonGate& Get() {
    static auto* gate = new PythonGate();  // leaked: threads may pass it during exit
    return *gate;
  }

  // True: the caller may take the GIL and must call Leave() after releasing it.
  // False: the interpreter is exiting (or not running); do not enter Python.
  bool Enter() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || !Py_IsInitialized() || InterpreterFinalizing()) return false;
    ++inside_;
    return true;
  }

  void Leave() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--inside_ == 0) cv_.notify_all();
  }

  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  // A hook run at exit before the gate closes (Python can still be called):
  // e.g. stopping the cluster nodes still running, whose stop callbacks are Python.
  void AddExitHook(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    exit_hooks_.push_back(std::move(hook));
  }

  // The atexit hook: runs the exit hooks, then closes the gate.
  // REQUIRES: the caller does not hold the GIL.
  int RunExitHooksAndClose(std::chrono::milliseconds wait) {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hooks.swap(exit_hooks_);
    }
    for (auto& hook : hooks) {
      try {
        hook();
      } catch (const std::exception&) {
        // A hook that failed must not keep the gate open.
      }
    }
    return Close(wait);
  }

  // Closes the gate, then waits up to `wait` for the threads inside to leave.
  // REQUIRES: the caller does not hold the GIL (the threads inside need it).
  // Returns the number still inside after the wait.
  int Close(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    closed_ = true;
    cv_.wait_for(lock, wait, [this] { return inside_ == 0; });
    return inside_;
  }

 private:
  PythonGate() = default;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int inside_ = 0;
  std::vector<std::function<void()>> exit_hooks_;
};

// One passage through the gate: `if (PythonEntry entry; entry) { ...take the GIL... }`.
class PythonEntry {
 public:
  PythonEntry() : entered_(PythonGate::Get().Enter()) {
    if (entered_) GilCounters().thread_entries.fetch_add(1, std::memory_order_relaxed);
  }
  ~PythonEntry() {
    if (entered_) PythonGate::Get().Leave();
  }
  PythonEntry(const PythonEntry&) = delete;
  PythonEntry& operator=(const PythonEntry&) = delete;
  explicit operator bool() const { return entered_; }

 private:
  bool entered_;
};

// Releases the GIL for its scope, like py::gil_scoped_release, for every
// binding that calls the engine. The difference is the destructor, which takes
// the GIL back: it is noexcept(false). A Python thread (a daemon thread, say)
// that comes back from the engine while the interpreter finalizes is ended by
// CPython 3.12 inside PyEval_RestoreThread with pthread_exit; that forced
// unwinding must pass this frame (pybind11's dispatcher rethrows it), and a
// noexcept destructor would turn it into std::terminate: "terminate called
// without an active exception" at exit. REQUIRES: the GIL is held.
class GilRelease {
 public:
  GilRelease() {
    (void)pybind11::detail::get_internals();  // as gil_scoped_release: set up before release
    GilCounters().engine_calls.fetch_add(1, std::memory_order_relaxed);
    tstate_ = PyEval_SaveThread();
  }
  ~GilRelease() noexcept(false) { PyEval_RestoreThread(tstate_); }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* tstate_ = nullptr;
};

// Registers the atexit hook that closes the gate. Called once by the module,
// before any other pynenc_cpp module registers its own hooks.
void InitPythonGate(pybind11::module_& m);

}  // namespace pynenc_cpp::bindings
