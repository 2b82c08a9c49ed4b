// Cross-process wake-ups for one SQLite database, without polling.
//
// A small file beside the database, "<db>-wake" (one 4 KiB page), is mapped
// shared by every process that opens the database. It holds kSlots pairs of
// u32: a sequence counter and a count of sleepers. A writer bumps the slots its
// transaction touched right after COMMIT (Database does it for the slots a
// transaction marked with Conn::Notify) and FUTEX_WAKEs a slot only when
// someone sleeps on it. A waiter reads a slot's counter *before* it checks the
// database and FUTEX_WAITs on that value, so a commit between the check and the
// sleep makes the wait return at once: no wake-up is lost. A futex on a shared
// file mapping is keyed by the file's page, so it works across processes.
//
// Fallback: when the file cannot be made or mapped (read-only directory,
// another user's file), the board is an anonymous mapping of this process and
// a wait is capped at kCrossProcessPollMs (routes and final statuses from other
// processes are then seen by polling, as before). With the file, a wait is
// still capped at kWakeSafetyPollMs, a slow poll that bounds the damage of a
// wake the OS would lose (none is known).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pynenc_cpp/core/spin_wait.h"

namespace pynenc_cpp::sqlite {

inline constexpr int kCrossProcessPollMs = 20;
inline constexpr int kWakeSafetyPollMs = 5000;

class WakeBoard {
 public:
  static constexpr int kSlots = 64;
  // Slot 0: an invocation reached a final status. Slot 63: trigger valid
  // conditions were recorded (TriggerStore::WaitValidConditions). Slots 1..62:
  // broker routes, by a hash of (app id, queue).
  static constexpr int kFinalSlot = 0;
  static constexpr int kValidConditionsSlot = kSlots - 1;
  static int QueueSlot(std::string_view app_id, std::string_view queue);

  // The board of the database at `db_path` (never null: falls back to a
  // process-local board, see above).
  static std::unique_ptr<WakeBoard> Open(const std::string& db_path);

  WakeBoard(const WakeBoard&) = delete;
  WakeBoard& operator=(const WakeBoard&) = delete;
  ~WakeBoard();

  // The current counter of `slot`; read it before checking the database.
  std::uint32_t Seq(int slot) const;
  // Bumps every slot in `mask` (bit i = slot i) and wakes their sleepers.
  void Wake(std::uint64_t mask);
  // Sleeps until `slot`'s counter differs from `seen`, `deadline` passes, or the
  // poll cap runs out (whichever is first). Spurious returns are allowed: the
  // caller re-checks the database.
  void Wait(int slot, std::uint32_t seen, std::chrono::steady_clock::time_point deadline);

  // The write lock's own counter, after the 64 slots (an older build that does
  // not know it never bumps it: its waiters and ours then pause as before). A
  // write transaction bumps it when it ends (COMMIT or ROLLBACK: the lock is
  // free) and wakes the connections paused in SQLite's busy handler, so a
  // writer that found the lock taken tries again the moment it is released
  // instead of after a fixed pause (docs/backends/sqlite.md).
  std::uint32_t WriterSeq() const;
  void WriterDone();
  // Sleeps until the write lock's counter differs from `seen` or `until` passes.
  void WaitWriter(std::uint32_t seen, std::chrono::steady_clock::time_point until);

  // True when the board is shared with other processes (the file is mapped).
  bool cross_process() const { return cross_process_; }
  // The longest single Wait (kWakeSafetyPollMs, or kCrossProcessPollMs for a
  // process-local board). Tests raise it to prove a wake-up is not a poll.
  void set_poll_cap(std::chrono::milliseconds cap) { poll_cap_ms_.store(cap.count()); }
  const std::string& path() const { return path_; }

 private:
  WakeBoard(void* page, bool mapped, bool cross_process, std::string path);
  std::uint32_t* seq(int slot) const;
  std::uint32_t* sleepers(int slot) const;
  std::uint32_t* writer_seq() const;
  std::uint32_t* writer_sleepers() const;
  // FUTEX_WAITs on `counter` while it reads `seen`, until `until`, counted in
  // `waiting` meanwhile (what a waker checks before its FUTEX_WAKE).
  // A thread of this process that `gate` lets in spins on `counter` first.
  static void WaitOn(SpinGate& gate, std::uint32_t* counter, std::uint32_t* waiting,
                     std::uint32_t seen, std::chrono::steady_clock::time_point until);
  static void Bump(std::uint32_t* counter, std::uint32_t* waiting);

  // Per slot, and for the write lock: the one thread of this process that spins
  // before it sleeps (core/spin_wait.h).
  std::array<SpinGate, kSlots> spin_gates_;
  SpinGate writer_spin_gate_;
  void* page_;
  std::atomic<std::int64_t> poll_cap_ms_;
  const bool mapped_;  // page_ is an mmap of this board (else a static page)
  const bool cross_process_;
  const std::string path_;
};

}  // namespace pynenc_cpp::sqlite
