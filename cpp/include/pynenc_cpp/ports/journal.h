// Journal port: the event log of event-sourced actors (issue 7), fenced like
// the FencedStore (fenced_store.h): an append is accepted only at the expected
// sequence number AND with a generation no lower than the highest generation
// that ever appended to, fenced or snapshotted the entity. So a stale owner (a
// singleton instance paused past its failover) can neither append at a stale
// position nor, even at the right position, append after its successor fenced
// the journal.
//
// Entities are independent logs: entries 1, 2, 3, ... (sequence numbers start
// at 1; 0 means "empty"). Each entry keeps the packed generation of its writer.
// A snapshot is a state as of some sequence number; replay = load the snapshot,
// then read the entries after it.
//
// Backends (one URI picks one; `app_id` namespaces the data):
//   memory://             this object's memory (tests, one process)
//   sqlite:///path.db     one SQLite file; every call is one transaction
//   redis://host:port/db  a Redis server; every call that writes is one Lua script
//
// Thread safety: implementations are thread-safe. Calls may block on I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

struct JournalEntry {
  std::uint64_t seq = 0;
  std::uint64_t generation = 0;  // packed generation of the append that wrote it
  std::string payload;
  bool operator==(const JournalEntry&) const = default;
};

struct JournalSnapshot {
  std::uint64_t seq = 0;  // the state includes every entry up to this one
  std::uint64_t generation = 0;
  std::string state;
  bool operator==(const JournalSnapshot&) const = default;
};

class Journal {
 public:
  Journal() = default;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  virtual ~Journal() = default;

  // Appends `events` as entries expected_seq+1 .. expected_seq+n, atomically
  // (all or none), iff the entity's last sequence number is `expected_seq` and
  // `generation` is >= the entity's fence (the highest generation that ever
  // appended, fenced or snapshotted it). Returns the new last sequence number.
  // kStaleGeneration "stale generation <g> for entity '<e>': fenced at <f>" when
  // the generation is lower (checked first); kConflict "entity '<e>' is at
  // sequence <s>, not <expected>" when the position is wrong. Nothing changes
  // on error. kInvalidArgument for an empty entity, no events, or a generation
  // >= 2^63. Generations are printed as term.seq.
  virtual Result<std::uint64_t> Append(const std::string& entity, std::uint64_t expected_seq,
                                       std::uint64_t generation,
                                       const std::vector<std::string>& events) = 0;
  // Raises the entity's fence to `generation` (a new owner claims the log before
  // replaying it, so its predecessor's later appends fail). kStaleGeneration if
  // the fence is already higher; equal is fine. Returns the last sequence number.
  virtual Result<std::uint64_t> Fence(const std::string& entity, std::uint64_t generation) = 0;
  // Entries with seq > after_seq, in order; at most `limit` (0: all).
  virtual Result<std::vector<JournalEntry>> Read(const std::string& entity,
                                                 std::uint64_t after_seq,
                                                 std::size_t limit = 0) = 0;
  // The entity's last sequence number (0: empty).
  virtual Result<std::uint64_t> LastSeq(const std::string& entity) = 0;
  // The entity's fence (0: never written).
  virtual Result<std::uint64_t> FenceOf(const std::string& entity) = 0;

  // Stores a snapshot, fenced like an append (kStaleGeneration); it replaces an
  // older snapshot and is ignored (Ok) if an existing one has a higher seq.
  // kInvalidArgument when `seq` is past the entity's last sequence number.
  virtual Status SaveSnapshot(const std::string& entity, std::uint64_t seq,
                              std::uint64_t generation, const std::string& state) = 0;
  virtual Result<std::optional<JournalSnapshot>> LoadSnapshot(const std::string& entity) = 0;
};

// Opens the journal named by `config.uri`. kBadConfig for an unusable URI,
// kBackendFailure when the storage cannot be opened.
Result<std::unique_ptr<Journal>> OpenJournal(const BackendConfig& config);

}  // namespace pynenc_cpp
