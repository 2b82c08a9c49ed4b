// FencedStore port: a key -> value store for the data of a cluster singleton (or
// any fenced owner) that rejects writes from a stale owner. Every key carries
// the packed Generation (generation_source.h) of its last accepted write or
// delete; a write or delete stamped with a LOWER generation than the stored one
// is rejected and changes nothing, so an ex-owner that was paused past its
// failover (SIGSTOP, a long GC) cannot overwrite or delete its successor's
// data, whatever its own node believes. Equal generations are accepted (an
// owner writes many times).
//
// Deletes leave a tombstone: the value goes but the key keeps its generation,
// so a stale ex-owner cannot resurrect a deleted key either. A tombstoned key
// reads as absent and is written again only with a generation >= the
// tombstone's. Tombstones are never purged: a key, once written or deleted,
// stays fenced for the life of the storage (one small row / hash per key).
//
// Backends: memory:// (tests), sqlite:///path.db, redis://host:port/db (the
// compare and the write are one Lua script). `app_id` namespaces the keys.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

struct FencedValue {
  std::string value;
  std::uint64_t generation = 0;  // packed generation of the write that stored it
  bool operator==(const FencedValue&) const = default;
};

class FencedStore {
 public:
  FencedStore() = default;
  FencedStore(const FencedStore&) = delete;
  FencedStore& operator=(const FencedStore&) = delete;
  virtual ~FencedStore() = default;

  // Stores `value` under `key` stamped with `generation`, atomically, iff the
  // key has no stored generation (never written nor deleted) or its stored
  // generation (of a value or of a tombstone) is <= `generation`. A stale write
  // is kStaleGeneration "stale generation <g> for key '<key>': stored <s>" and
  // leaves the key as it was. kInvalidArgument for an empty key or a
  // generation >= 2^63.
  virtual Status Write(const std::string& key, const std::string& value,
                       std::uint64_t generation) = 0;
  // The stored value and its generation; nullopt if none is stored, i.e. the
  // key was never written or is tombstoned (a tombstone's generation is not
  // observable through Read).
  virtual Result<std::optional<FencedValue>> Read(const std::string& key) = 0;
  // Deletes `key`'s value and leaves a tombstone, atomically: iff the key's
  // stored generation (of a value or of a tombstone) is <= `generation`, or
  // the key has none, the value (if any) is removed and the key's stored
  // generation becomes `generation` (= max(stored, generation)). From then on
  // Read returns nullopt and a Write or Delete needs a generation >= that
  // tombstone (equal allowed). Deleting a key that was never written records
  // the tombstone too, so an owner can fence a key it never wrote. Otherwise
  // kStaleGeneration (same message as Write) and nothing changes.
  // kInvalidArgument as for Write.
  virtual Status Delete(const std::string& key, std::uint64_t generation) = 0;
};

// Opens the store named by `config.uri`. kBadConfig for an unusable URI,
// kBackendFailure when the storage cannot be opened.
Result<std::unique_ptr<FencedStore>> OpenFencedStore(const BackendConfig& config);

}  // namespace pynenc_cpp
