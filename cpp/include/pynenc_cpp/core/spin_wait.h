// Spinning before sleeping. A thread about to block on a condition variable or a
// futex for something that usually comes within microseconds (a serial task's
// worker waiting for the next submit, a client waiting for the result of the
// task it just submitted) first polls a lock-free predicate for a short budget.
// On the VMs these benchmarks run on, a sleep and the wake-up that ends it cost
// ~35 us each (a condition-variable ping-pong between two threads: 73 us a round
// trip, against 0.2 us spinning; bench/results/2026-12-02-stop-48-spin-before-sleep.md),
// which is more than the engine's own work in a serial task. A waker whose waiter is still
// spinning also skips its wake-up system call where the primitive lets it (the
// SQLite wake board counts sleepers; a spinner is not one).
//
// Between polls the spinner yields its CPU, so a runnable thread on the same core
// (the client it is waiting for, on a 2-core machine) is not starved by it. At
// most one thread spins per SpinGate; others sleep at once.
//
// Thread safety: everything here is safe from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace pynenc_cpp {

// The budget's default, in microseconds, chosen by measurement (stop 48).
inline constexpr std::int64_t kDefaultSpinWaitUs = 500;
// The largest budget SetSpinWaitUs accepts (a spinner burns a core meanwhile).
inline constexpr std::int64_t kMaxSpinWaitUs = 10'000;

// The process-wide spin budget (initially kDefaultSpinWaitUs; the Python
// package sets it from `cpp_spin_wait_us` when it opens a storage). 0: never spin.
// Process-wide because what it trades, a core's time for a wake-up's, is the
// machine's, not an app's.
std::int64_t SpinWaitUs();
// Sets it; a value outside [0, kMaxSpinWaitUs] is clamped into it.
void SetSpinWaitUs(std::int64_t us);

// One wait point's spinning: lets at most one thread spin at a time (the one
// whose TryEnter returned true, until its Leave), and none while the wait point
// is idle. A wait that spun in vain and then slept until its timeout reports it
// (Settle(false)): the next waits sleep at once, until one is ended by the event
// it waited for (Settle(true)). So an idle process spins once per idle period,
// not once per timeout of its waits.
class SpinGate {
 public:
  bool TryEnter() {
    return !idle_.load(std::memory_order_relaxed) && !busy_.exchange(true, std::memory_order_acquire);
  }
  void Leave() { busy_.store(false, std::memory_order_release); }
  // After a wait's sleep: whether the event came (true) or the wait timed out.
  void Settle(bool woken) { idle_.store(!woken, std::memory_order_relaxed); }

 private:
  std::atomic<bool> busy_{false};
  std::atomic<bool> idle_{false};
};

namespace spin_detail {
void Relax();   // a CPU pause hint
void Yield();   // sched_yield
}  // namespace spin_detail

// Polls `ready()` until it returns true (then true), the budget passes, or
// `deadline` comes (then false). Returns false at once when the budget is 0 or
// another thread holds `gate`. `ready` must not block and must not need a lock
// the waker holds while it makes `ready` true.
template <class Ready>
bool SpinUntil(SpinGate& gate, std::chrono::steady_clock::time_point deadline, Ready&& ready) {
  const std::int64_t budget = SpinWaitUs();
  if (budget <= 0 || !gate.TryEnter()) return false;
  const auto now = std::chrono::steady_clock::now();
  const auto end = std::min(deadline, now + std::chrono::microseconds(budget));
  bool got = false;
  while (!got) {
    for (int i = 0; i < 64 && !got; ++i) {
      got = ready();
      if (!got) spin_detail::Relax();
    }
    if (got || std::chrono::steady_clock::now() >= end) break;
    spin_detail::Yield();
  }
  gate.Leave();
  return got;
}

}  // namespace pynenc_cpp
