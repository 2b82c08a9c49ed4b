// WAL checkpoints off the commit path, for one SQLite database in one process.
//
// SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past
// wal_autocheckpoint pages, on the committing thread, and a checkpoint fsyncs
// the WAL and then the database file even with synchronous=NORMAL: that commit
// (a task's submit, claim or finish) returned one or two fsyncs late, and so did
// the wake-up of whoever waited for it (docs/backends/sqlite.md, "Checkpoints").
// The Database installs a WAL hook on each of its connections instead, which
// turns SQLite's automatic checkpoint off for it, and calls Request() from that
// hook; the checkpoint runs here, on a thread of its own.
//
// Thread safety: thread-safe. Request() never waits for a checkpoint; requests
// made while one runs are folded into one more run.
// Fork: a checkpoint never overlaps a fork(): a pthread_atfork handler makes
// fork() wait for a running checkpoint to end, so a child never inherits the
// pool's or SQLite's locks held by this thread. A Checkpointer belongs to the
// process that made it (pid()); its thread does not exist in a forked child,
// which must neither use nor destroy it (Database makes the child its own and
// leaves the parent's alone).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <thread>

#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp::sqlite {

class Checkpointer {
 public:
  // Starts the thread (std::system_error if it cannot). `checkpoint` runs one
  // checkpoint and says whether it succeeded; it is called on that thread only,
  // never concurrently with itself nor with a fork(). An exception from it
  // counts as a failure.
  explicit Checkpointer(std::function<bool()> checkpoint);
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;
  // Lets a running checkpoint finish, drops pending requests, joins the thread.
  // REQUIRES: called in the process that made it (pid() == getpid()).
  ~Checkpointer();

  // Asks for a checkpoint soon (one run covers every request made before it starts).
  void Request() PYNENC_EXCLUDES(mu_);
  // Checkpoints that succeeded, and that failed, so far.
  std::uint64_t completed() const PYNENC_EXCLUDES(mu_);
  std::uint64_t failed() const PYNENC_EXCLUDES(mu_);
  pid_t pid() const { return pid_; }

 private:
  void Loop() PYNENC_EXCLUDES(mu_);

  const std::function<bool()> checkpoint_;
  const pid_t pid_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool requested_ PYNENC_GUARDED_BY(mu_) = false;
  bool stopping_ PYNENC_GUARDED_BY(mu_) = false;
  std::uint64_t completed_ PYNENC_GUARDED_BY(mu_) = 0;
  std::uint64_t failed_ PYNENC_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts once the fields above exist
};

}  // namespace pynenc_cpp::sqlite
