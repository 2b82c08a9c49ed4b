#include "sqlite/sqlite_wake.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>

namespace pynenc_cpp::sqlite {
namespace {

constexpr std::size_t kPageBytes = 4096;
// The slots' counters, their sleepers, then the write lock's counter and sleepers.
constexpr std::size_t kWords = 2 * WakeBoard::kSlots + 2;
static_assert(kWords * sizeof(std::uint32_t) <= kPageBytes);

long Futex(std::uint32_t* addr, int op, std::uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, addr, op, val, timeout, nullptr, 0);
}

// Maps "<db>-wake" shared, creating it (with the database file's permission
// bits) and sizing it to one page. nullptr when any step fails.
void* MapBoardFile(const std::string& path, const std::string& db_path) {
  mode_t mode = 0600;
  struct stat db_st {};
  if (stat(db_path.c_str(), &db_st) == 0) mode = db_st.st_mode & 0666;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* page = nullptr;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (static_cast<std::size_t>(st.st_size) >= kPageBytes ||
       ftruncate(fd, static_cast<off_t>(kPageBytes)) == 0)) {
    page = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) page = nullptr;
  }
  close(fd);
  return page;
}

}  // namespace

int WakeBoard::QueueSlot(std::string_view app_id, std::string_view queue) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  };
  mix(app_id);
  h = (h ^ 0xff) * 1099511628211ull;
  mix(queue);
  return 1 + static_cast<int>(h % (kSlots - 2));  // 1..62
}

std::unique_ptr<WakeBoard> WakeBoard::Open(const std::string& db_path) {
  const std::string path = db_path + "-wake";
  if (void* page = MapBoardFile(path, db_path)) {
    return std::unique_ptr<WakeBoard>(new WakeBoard(page, true, true, path));
  }
  void* page = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    // Out of address space: a static page keeps the board usable in-process.
    static std::uint32_t fallback[kWords];
    return std::unique_ptr<WakeBoard>(new WakeBoard(fallback, false, false, ""));
  }
  return std::unique_ptr<WakeBoard>(new WakeBoard(page, true, false, ""));
}

WakeBoard::WakeBoard(void* page, bool mapped, bool cross_process, std::string path)
    : page_(page),
      poll_cap_ms_(cross_process ? kWakeSafetyPollMs : kCrossProcessPollMs),
      mapped_(mapped),
      cross_process_(cross_process),
      path_(std::move(path)) {}

WakeBoard::~WakeBoard() {
  if (mapped_) munmap(page_, kPageBytes);
}

std::uint32_t* WakeBoard::seq(int slot) const {
  return static_cast<std::uint32_t*>(page_) + std::clamp(slot, 0, kSlots - 1);
}

std::uint32_t* WakeBoard::sleepers(int slot) const {
  return static_cast<std::uint32_t*>(page_) + kSlots + std::clamp(slot, 0, kSlots - 1);
}

std::uint32_t WakeBoard::Seq(int slot) const {
  return __atomic_load_n(seq(slot), __ATOMIC_SEQ_CST);
}

std::uint32_t* WakeBoard::writer_seq() const {
  return static_cast<std::uint32_t*>(page_) + 2 * kSlots;
}

std::uint32_t* WakeBoard::writer_sleepers() const {
  return static_cast<std::uint32_t*>(page_) + 2 * kSlots + 1;
}

void WakeBoard::Bump(std::uint32_t* counter, std::uint32_t* waiting) {
  __atomic_fetch_add(counter, 1u, __ATOMIC_SEQ_CST);
  // seq_cst on both sides: a sleeper that registered after this load sees the
  // new counter in its FUTEX_WAIT and does not sleep.
  if (__atomic_load_n(waiting, __ATOMIC_SEQ_CST) != 0) {
    Futex(counter, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void WakeBoard::WaitOn(SpinGate& gate, std::uint32_t* counter, std::uint32_t* waiting,
                       std::uint32_t seen, std::chrono::steady_clock::time_point until) {
  using Clock = std::chrono::steady_clock;
  if (until <= Clock::now()) return;  // nothing to wait for: no spin, no idle mark
  // Spinning first (core/spin_wait.h): a spinner is not counted as a sleeper, so
  // a commit meanwhile bumps the counter without a FUTEX_WAKE.
  if (SpinUntil(gate, until, [&] { return __atomic_load_n(counter, __ATOMIC_SEQ_CST) != seen; })) {
    return;
  }
  __atomic_fetch_add(waiting, 1u, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) == seen) {
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    // Returns at once (EAGAIN) if the counter already moved; EINTR and
    // ETIMEDOUT loop back to the checks above.
    Futex(counter, FUTEX_WAIT, seen, &ts);
  }
  __atomic_fetch_sub(waiting, 1u, __ATOMIC_SEQ_CST);
  gate.Settle(__atomic_load_n(counter, __ATOMIC_SEQ_CST) != seen);
}

void WakeBoard::Wake(std::uint64_t mask) {
  for (int slot = 0; slot < kSlots && mask != 0; ++slot, mask >>= 1) {
    if ((mask & 1) != 0) Bump(seq(slot), sleepers(slot));
  }
}

void WakeBoard::Wait(int slot, std::uint32_t seen, std::chrono::steady_clock::time_point deadline) {
  const auto cap = std::chrono::milliseconds(poll_cap_ms_.load());
  WaitOn(spin_gates_[static_cast<std::size_t>(std::clamp(slot, 0, kSlots - 1))], seq(slot),
         sleepers(slot), seen,
         std::min(deadline, std::chrono::steady_clock::now() + cap));
}

std::uint32_t WakeBoard::WriterSeq() const {
  return __atomic_load_n(writer_seq(), __ATOMIC_SEQ_CST);
}

void WakeBoard::WriterDone() { Bump(writer_seq(), writer_sleepers()); }

void WakeBoard::WaitWriter(std::uint32_t seen, std::chrono::steady_clock::time_point until) {
  WaitOn(writer_spin_gate_, writer_seq(), writer_sleepers(), seen, until);
}

}  // namespace pynenc_cpp::sqlite
