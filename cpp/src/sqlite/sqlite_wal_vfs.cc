// The WAL-buffering VFS shim (sqlite_wal_vfs.h).
#include "sqlite/sqlite_wal_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pynenc_cpp::sqlite {
namespace {

constexpr const char* kVfsName = "pynenc-wal-buffer";
// 27 frames of 4 KiB pages (a commit of the engine's dirties ~16). Below 128 KiB:
// the unix VFS writes at most 2^17 - 1 bytes in one call (it masks the count;
// a larger write would fail as SQLITE_FULL).
constexpr int kBufferBytes = 112 * 1024;
constexpr int kWalHeaderBytes = 32;
constexpr int kFrameHeaderBytes = 24;

std::atomic<unsigned long long> g_file_writes{0};
std::atomic<unsigned long long> g_sqlite_writes{0};
std::atomic<unsigned long long> g_rewrites{0};
std::atomic<int> g_fail_rewrite_in{0};  // FailWalRewriteForTest

sqlite3_vfs g_vfs;
const char* g_registered_name = nullptr;

sqlite3_vfs* Real() { return static_cast<sqlite3_vfs*>(g_vfs.pAppData); }

// Our file handle; the real VFS's handle lives right after it (Real()->szOsFile
// bytes, aligned).
struct ShimFile {
  sqlite3_file base;
  sqlite3_file* real;
  bool wal;
  // A database file: the WAL file open beside it on the same connection (or
  // null). A WAL file: its database file (null once that closed).
  ShimFile* peer;
  // WAL files only: writes not yet made, contiguous from `offset`.
  char* buffer;
  int length;
  sqlite3_int64 offset;
  // The end of what this handle appended in its current write transaction (-1:
  // nothing yet). A write below it rewrites an appended frame.
  sqlite3_int64 append_end;
  // This write transaction appended its commit frame's header: every write
  // after it (the commit frame's page, synchronous=FULL's padding frames) is
  // made before its call returns.
  bool commit_seen;
  // A flush failed in this write transaction: calls on the WAL fail until the
  // write lock is released, so SQLite rolls the whole transaction back.
  bool failed;
};

constexpr int kShimBytes = (sizeof(ShimFile) + 7) & ~7;
// The WAL-index lock a writer holds for a whole write transaction (SQLite's
// WAL_WRITE_LOCK, slot 0 of the shared-memory locks).
constexpr int kWalWriteLock = 0;

ShimFile* Shim(sqlite3_file* f) { return reinterpret_cast<ShimFile*>(f); }
const sqlite3_io_methods* RealMethods(ShimFile* f) { return f->real->pMethods; }

// Writes the buffer with one call. The buffer is empty afterwards, whatever the
// outcome; a failure marks the handle failed (see ShimFile::failed).
int Flush(ShimFile* f) {
  if (f->length == 0) return SQLITE_OK;
  const int length = f->length;
  f->length = 0;
  g_file_writes.fetch_add(1, std::memory_order_relaxed);
  const int rc = RealMethods(f)->xWrite(f->real, f->buffer, length, f->offset);
  if (rc != SQLITE_OK) f->failed = true;
  return rc;
}

// A failed flush as the error of a call other than xWrite: an I/O error, which
// makes SQLite roll the whole transaction back (SQLITE_FULL from a read may not).
int FlushForOtherCall(ShimFile* f) {
  if (f->failed) return SQLITE_IOERR_WRITE;
  return Flush(f) == SQLITE_OK ? SQLITE_OK : SQLITE_IOERR_WRITE;
}

// The WAL buffered beside a database file, written before its shared memory
// (where SQLite publishes a commit) is touched.
int FlushPeerWal(ShimFile* f) {
  return !f->wal && f->peer != nullptr ? FlushForOtherCall(f->peer) : SQLITE_OK;
}

// ---- io methods -------------------------------------------------------------

int Close(sqlite3_file* file) {
  ShimFile* f = Shim(file);
  const int flushed = f->failed ? SQLITE_OK : Flush(f);
  if (f->peer != nullptr && f->peer->peer == f) f->peer->peer = nullptr;
  f->peer = nullptr;
  const int rc = RealMethods(f)->xClose(f->real);
  std::free(f->buffer);
  f->buffer = nullptr;
  return flushed != SQLITE_OK ? flushed : rc;
}

int Read(sqlite3_file* file, void* out, int amount, sqlite3_int64 offset) {
  ShimFile* f = Shim(file);
  if (f->wal) {
    const int rc = FlushForOtherCall(f);
    if (rc != SQLITE_OK) return rc;
  }
  return RealMethods(f)->xRead(f->real, out, amount, offset);
}

bool IsCommitFrameHeader(const void* data, int amount) {
  if (amount != kFrameHeaderBytes) return false;
  const auto* b = static_cast<const unsigned char*>(data);
  return (b[4] | b[5] | b[6] | b[7]) != 0;  // the database size after a commit
}

bool IsPageSize(int amount) {
  return amount >= 512 && amount <= 65536 && (amount & (amount - 1)) == 0;
}

// A write made at once, in order after the buffer, its error its own.
int WriteThrough(ShimFile* f, const void* data, int amount, sqlite3_int64 offset) {
  int rc = Flush(f);
  if (rc != SQLITE_OK) return rc;
  g_file_writes.fetch_add(1, std::memory_order_relaxed);
  rc = RealMethods(f)->xWrite(f->real, data, amount, offset);
  if (rc != SQLITE_OK) f->failed = true;
  return rc;
}

// Only appends are buffered: a WAL header at offset 0 (a new WAL), frame headers
// and pages at or past the end of what this transaction appended. Rewrites of
// appended frames (new checksums, a page changed again after a cache spill) and
// pieces of split writes go through at once: their errors are their own.
int Write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
  ShimFile* f = Shim(file);
  if (!f->wal) return RealMethods(f)->xWrite(f->real, data, amount, offset);
  g_sqlite_writes.fetch_add(1, std::memory_order_relaxed);
  if (f->failed) return SQLITE_IOERR_WRITE;
  const bool wal_header = offset == 0 && amount == kWalHeaderBytes;
  if (wal_header) f->append_end = 0;
  const bool append = f->append_end < 0 || offset >= f->append_end;
  const bool frame_part = wal_header || amount == kFrameHeaderBytes || IsPageSize(amount);
  if (!append || !frame_part) {
    if (append) {
      f->append_end = offset + amount;
    } else {
      g_rewrites.fetch_add(1, std::memory_order_relaxed);
      if (g_fail_rewrite_in.load(std::memory_order_relaxed) > 0 &&
          g_fail_rewrite_in.fetch_sub(1, std::memory_order_relaxed) == 1) {
        f->failed = true;
        f->length = 0;
        return SQLITE_IOERR_WRITE;
      }
    }
    return WriteThrough(f, data, amount, offset);
  }
  f->append_end = offset + amount;
  if (f->length > 0 && (offset != f->offset + f->length || f->length + amount > kBufferBytes)) {
    const int rc = Flush(f);
    if (rc != SQLITE_OK) return rc;
  }
  if (f->buffer == nullptr) f->buffer = static_cast<char*>(std::malloc(kBufferBytes));
  if (f->buffer == nullptr) return WriteThrough(f, data, amount, offset);
  if (f->length == 0) f->offset = offset;
  std::memcpy(f->buffer + f->length, data, static_cast<std::size_t>(amount));
  f->length += amount;
  if (offset >= kWalHeaderBytes && IsCommitFrameHeader(data, amount)) {
    f->commit_seen = true;  // its page follows; padding frames repeat the pair
    return SQLITE_OK;
  }
  // From the commit frame's page on, each write is made before this call
  // returns: a failure is its error, returned before SQLite publishes the commit.
  if (f->commit_seen) return Flush(f);
  return SQLITE_OK;
}

int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  ShimFile* f = Shim(file);
  const int rc = FlushForOtherCall(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xTruncate(f->real, size);
}

int Sync(sqlite3_file* file, int flags) {
  ShimFile* f = Shim(file);
  const int rc = FlushForOtherCall(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xSync(f->real, flags);
}

int FileSize(sqlite3_file* file, sqlite3_int64* size) {
  ShimFile* f = Shim(file);
  const int rc = FlushForOtherCall(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xFileSize(f->real, size);
}

int Lock(sqlite3_file* file, int level) {
  ShimFile* f = Shim(file);
  const int rc = FlushForOtherCall(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xLock(f->real, level);
}

int Unlock(sqlite3_file* file, int level) {
  ShimFile* f = Shim(file);
  const int rc = FlushForOtherCall(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xUnlock(f->real, level);
}

int CheckReservedLock(sqlite3_file* file, int* out) {
  ShimFile* f = Shim(file);
  return RealMethods(f)->xCheckReservedLock(f->real, out);
}

int FileControl(sqlite3_file* file, int op, void* arg) {
  ShimFile* f = Shim(file);
  if (op == SQLITE_FCNTL_PRAGMA && !f->wal) {
    // With an exclusive lock SQLite keeps the WAL index in heap memory and makes
    // no shared-memory calls: the flushes and resets above would not happen.
    char** pragma = static_cast<char**>(arg);
    if (pragma[1] != nullptr && pragma[2] != nullptr &&
        sqlite3_stricmp(pragma[1], "locking_mode") == 0 &&
        sqlite3_stricmp(pragma[2], "exclusive") == 0) {
      pragma[0] = sqlite3_mprintf(
          "locking_mode=exclusive is not supported by the %s VFS (open with wal_buffer=off)",
          kVfsName);
      return SQLITE_ERROR;
    }
  }
  const int rc = FlushForOtherCall(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xFileControl(f->real, op, arg);
}

int SectorSize(sqlite3_file* file) {
  ShimFile* f = Shim(file);
  return RealMethods(f)->xSectorSize(f->real);
}

int DeviceCharacteristics(sqlite3_file* file) {
  ShimFile* f = Shim(file);
  return RealMethods(f)->xDeviceCharacteristics(f->real);
}

bool HasShm(ShimFile* f) { return RealMethods(f)->iVersion >= 2 && RealMethods(f)->xShmMap; }

int ShmMap(sqlite3_file* file, int page, int page_size, int extend, void volatile** out) {
  ShimFile* f = Shim(file);
  if (!HasShm(f)) return SQLITE_IOERR_SHMMAP;
  const int rc = FlushPeerWal(f);
  if (rc != SQLITE_OK) return rc;
  return RealMethods(f)->xShmMap(f->real, page, page_size, extend, out);
}

int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
  ShimFile* f = Shim(file);
  if (!HasShm(f)) return SQLITE_IOERR_SHMLOCK;
  const int flushed = FlushPeerWal(f);
  const bool write_lock = offset == kWalWriteLock && (flags & SQLITE_SHM_EXCLUSIVE) != 0;
  if ((flags & SQLITE_SHM_LOCK) != 0) {
    if (flushed != SQLITE_OK) return flushed;
    const int rc = RealMethods(f)->xShmLock(f->real, offset, n, flags);
    ShimFile* wal = f->wal ? nullptr : f->peer;
    if (rc == SQLITE_OK && write_lock && wal != nullptr) {
      wal->append_end = -1;  // a write transaction begins: its appends start anew
      wal->commit_seen = false;
      wal->failed = false;
      wal->length = 0;
    }
    return rc;
  }
  // An unlock: after the write lock, a failed transaction is over (rolled back).
  if (write_lock && !f->wal && f->peer != nullptr && f->peer->failed) {
    f->peer->length = 0;  // what a failed transaction left unwritten: rolled back
    f->peer->failed = false;
  }
  return RealMethods(f)->xShmLock(f->real, offset, n, flags);
}

void ShmBarrier(sqlite3_file* file) {
  ShimFile* f = Shim(file);
  if (!HasShm(f)) return;
  (void)FlushPeerWal(f);  // a barrier cannot fail; the commit frame flushed already
  RealMethods(f)->xShmBarrier(f->real);
}

int ShmUnmap(sqlite3_file* file, int delete_flag) {
  ShimFile* f = Shim(file);
  if (!HasShm(f)) return SQLITE_OK;
  (void)FlushPeerWal(f);
  return RealMethods(f)->xShmUnmap(f->real, delete_flag);
}

int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
  ShimFile* f = Shim(file);
  if (RealMethods(f)->iVersion < 3) {
    *out = nullptr;
    return SQLITE_OK;
  }
  return RealMethods(f)->xFetch(f->real, offset, amount, out);
}

int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  ShimFile* f = Shim(file);
  if (RealMethods(f)->iVersion < 3) return SQLITE_OK;
  return RealMethods(f)->xUnfetch(f->real, offset, page);
}

// In sqlite3_io_methods' order.
const sqlite3_io_methods kMethods = {
    3,  // iVersion: with xShm* and xFetch/xUnfetch
    Close,
    Read,
    Write,
    Truncate,
    Sync,
    FileSize,
    Lock,
    Unlock,
    CheckReservedLock,
    FileControl,
    SectorSize,
    DeviceCharacteristics,
    ShmMap,
    ShmLock,
    ShmBarrier,
    ShmUnmap,
    Fetch,
    Unfetch,
};

// ---- vfs methods ------------------------------------------------------------

int Open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  ShimFile* f = Shim(file);
  std::memset(f, 0, sizeof(ShimFile));
  f->append_end = -1;
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kShimBytes);
  const int rc = Real()->xOpen(Real(), name, f->real, flags, out_flags);
  if (rc != SQLITE_OK || f->real->pMethods == nullptr) {
    file->pMethods = nullptr;  // SQLite then calls no method, not even xClose
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  // Buffering needs the real file's shared-memory methods (version 2+), which
  // every VFS that supports WAL has.
  if ((flags & SQLITE_OPEN_WAL) != 0 && name != nullptr && f->real->pMethods->iVersion >= 2) {
    sqlite3_file* db = sqlite3_database_file_object(name);
    if (db != nullptr && db->pMethods == &kMethods) {
      f->wal = true;
      f->peer = Shim(db);
      f->peer->peer = f;
    }
  }
  file->pMethods = &kMethods;
  return SQLITE_OK;
}

int Delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return Real()->xDelete(Real(), name, sync_dir);
}
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return Real()->xAccess(Real(), name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return Real()->xFullPathname(Real(), name, n, out);
}
void* DlOpen(sqlite3_vfs*, const char* name) { return Real()->xDlOpen(Real(), name); }
void DlError(sqlite3_vfs*, int n, char* out) { Real()->xDlError(Real(), n, out); }
void (*DlSym(sqlite3_vfs*, void* handle, const char* symbol))(void) {
  return Real()->xDlSym(Real(), handle, symbol);
}
void DlClose(sqlite3_vfs*, void* handle) { Real()->xDlClose(Real(), handle); }
int Randomness(sqlite3_vfs*, int n, char* out) { return Real()->xRandomness(Real(), n, out); }
int Sleep(sqlite3_vfs*, int us) { return Real()->xSleep(Real(), us); }
int CurrentTime(sqlite3_vfs*, double* out) { return Real()->xCurrentTime(Real(), out); }
int GetLastError(sqlite3_vfs*, int n, char* out) {
  return Real()->xGetLastError != nullptr ? Real()->xGetLastError(Real(), n, out) : 0;
}
int CurrentTimeInt64(sqlite3_vfs*, sqlite3_int64* out) {
  if (Real()->iVersion >= 2 && Real()->xCurrentTimeInt64 != nullptr) {
    return Real()->xCurrentTimeInt64(Real(), out);
  }
  double days = 0;
  const int rc = Real()->xCurrentTime(Real(), &days);
  *out = static_cast<sqlite3_int64>(days * 86400000.0);
  return rc;
}

void Register() {
  sqlite3_vfs* real = sqlite3_vfs_find(nullptr);
  if (real == nullptr || real->iVersion < 1) return;
  std::memset(&g_vfs, 0, sizeof(g_vfs));
  g_vfs.iVersion = 2;
  g_vfs.szOsFile = kShimBytes + real->szOsFile;
  g_vfs.mxPathname = real->mxPathname;
  g_vfs.zName = kVfsName;
  g_vfs.pAppData = real;
  g_vfs.xOpen = Open;
  g_vfs.xDelete = Delete;
  g_vfs.xAccess = Access;
  g_vfs.xFullPathname = FullPathname;
  g_vfs.xDlOpen = DlOpen;
  g_vfs.xDlError = DlError;
  g_vfs.xDlSym = DlSym;
  g_vfs.xDlClose = DlClose;
  g_vfs.xRandomness = Randomness;
  g_vfs.xSleep = Sleep;
  g_vfs.xCurrentTime = CurrentTime;
  g_vfs.xGetLastError = GetLastError;
  g_vfs.xCurrentTimeInt64 = CurrentTimeInt64;
  if (sqlite3_vfs_register(&g_vfs, /*makeDflt=*/0) == SQLITE_OK) g_registered_name = kVfsName;
}

}  // namespace

const char* WalBufferingVfsName() {
  static std::once_flag once;
  std::call_once(once, Register);
  return g_registered_name;
}

void FailWalRewriteForTest(int nth) {
  g_fail_rewrite_in.store(nth > 0 ? nth : 0, std::memory_order_relaxed);
}

WalBufferingStats WalBufferingStatsNow() {
  WalBufferingStats s;
  s.file_writes = g_file_writes.load(std::memory_order_relaxed);
  s.sqlite_writes = g_sqlite_writes.load(std::memory_order_relaxed);
  s.rewrites = g_rewrites.load(std::memory_order_relaxed);
  return s;
}

}  // namespace pynenc_cpp::sqlite
