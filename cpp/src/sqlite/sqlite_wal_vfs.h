// A VFS shim that writes a transaction's WAL frames with one system call.
//
// SQLite appends each WAL frame with two pwrite()s, its 24-byte header and its
// page, so a commit that dirties 16 pages makes 32 of them. On Linux the call,
// not the copy, is most of their cost (bench/results/2026-11-29-stop-46-sqlite-wal-one-write.md:
// 16 frames in 37 us as 32 pwrites, 12 us as one). This VFS wraps the default one and
// buffers a WAL file's appends (the WAL header of a new WAL, then frame
// headers and pages at or past the end of what the current write transaction
// appended) in the file handle, and writes the buffer with one pwrite():
//
//   * when the page of a commit frame (a frame whose header carries the
//     database size: a transaction's last append) is written, and at each
//     write after it (synchronous=FULL's padding frames), so that a failure is
//     that write's error, returned to SQLite before it publishes the commit
//     (it then rolls the transaction back);
//   * before any other call on the WAL file (xRead, xSync, xTruncate,
//     xFileSize, xFileControl, xLock, xUnlock, xClose), before a write that
//     does not continue the buffer or would overflow it, and before any call of
//     the database file's shared-memory methods (xShmMap, xShmLock,
//     xShmBarrier, xShmUnmap): SQLite publishes a commit by writing the WAL
//     index header there, between a barrier and an unlock.
//
// Every other write (a rewrite of a frame the transaction appended: new
// checksums, a page changed again after a cache spill; a piece of a split
// write) goes to the file at once, after the buffer, with its own error. After
// a failed write the handle fails every WAL call with SQLITE_IOERR_WRITE until
// the transaction's write lock is released, so SQLite rolls the whole
// transaction back rather than going on with frames that are not in the file.
//
// So readers, in this process or another, never see a committed frame that is
// not in the file, xSync still covers every frame written before it
// (synchronous=FULL), and a process killed before the flush loses only frames
// no one could have read: the commit had not been published. Files other than
// WAL files pass straight through. PRAGMA locking_mode=EXCLUSIVE is refused
// with an error (SQLite makes no shared-memory calls then).
//
// Thread safety: as SQLite's own VFS; a file handle is used by one connection
// at a time. The registration is thread-safe.
#pragma once

namespace pynenc_cpp::sqlite {

// The VFS's name for sqlite3_open_v2. Registers it (once, thread-safe) on top
// of the default VFS, not as the default. nullptr if registration failed (the
// caller then opens with the default VFS).
const char* WalBufferingVfsName();

// Per-process counters (tests, bench): pwrite()s this VFS made to WAL files,
// the WAL writes SQLite asked of it, and those that rewrote a frame appended by
// the same transaction (made at once).
struct WalBufferingStats {
  unsigned long long file_writes = 0;
  unsigned long long sqlite_writes = 0;
  unsigned long long rewrites = 0;
};
WalBufferingStats WalBufferingStatsNow();

// Fault injection for tests (process-wide): the `nth` WAL rewrite from now (see
// above) fails with SQLITE_IOERR_WRITE and writes nothing; 0 turns it off.
void FailWalRewriteForTest(int nth);

}  // namespace pynenc_cpp::sqlite
