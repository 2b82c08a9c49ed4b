// The process-wide spin budget (pynenc_cpp/core/spin_wait.h).
#include "pynenc_cpp/core/spin_wait.h"

#include <sched.h>

#include <algorithm>

namespace pynenc_cpp {
namespace {

std::int64_t Clamp(std::int64_t us) { return std::clamp<std::int64_t>(us, 0, kMaxSpinWaitUs); }

std::atomic<std::int64_t>& Budget() {
  static std::atomic<std::int64_t> budget{kDefaultSpinWaitUs};
  return budget;
}

}  // namespace

std::int64_t SpinWaitUs() { return Budget().load(std::memory_order_relaxed); }

void SetSpinWaitUs(std::int64_t us) { Budget().store(Clamp(us), std::memory_order_relaxed); }

namespace spin_detail {

void Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void Yield() { sched_yield(); }

}  // namespace spin_detail
}  // namespace pynenc_cpp
