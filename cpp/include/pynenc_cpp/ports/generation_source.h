// GenerationSource port: the authority that mints singleton and actor
// generations and keeps every managed spec, so that a new cluster leader can
// rebuild what should run where after the previous leader died
// (docs/cluster/singletons.md, "Generation source").
//
// A Generation {term, seq} orders term-major. `term` changes when ownership of a
// label moves (a failover or a move: ClaimTerm); `seq` when the same owner is
// granted the label again (a restarted process, a re-spawn: ClaimSeq). It packs
// into one u64 (term << 32 | seq), so a downstream fence compares one integer.
//
// Backends (one URI picks one, like every port; `app_id` namespaces the data,
// the cluster uses its cluster name):
//   memory://             this object's memory; Shared() is false (tests, one process)
//   sqlite:///path.db     one SQLite file: every process on the machine sees it
//   redis://host:port/db  a Redis server; claims are one Lua script each (atomic)
//
// Thread safety: implementations are thread-safe. Every call may block on I/O
// (the cluster runs them off its network loop).
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

struct Generation {
  std::uint32_t term = 0;
  std::uint32_t seq = 0;

  // term << 32 | seq: the order of Generations is the order of their packed values.
  std::uint64_t Packed() const { return (static_cast<std::uint64_t>(term) << 32) | seq; }
  static Generation FromPacked(std::uint64_t v) {
    return Generation{static_cast<std::uint32_t>(v >> 32), static_cast<std::uint32_t>(v)};
  }
  bool IsZero() const { return term == 0 && seq == 0; }
  // "term.seq", e.g. "3.1".
  std::string ToString() const { return std::to_string(term) + "." + std::to_string(seq); }

  auto operator<=>(const Generation&) const = default;  // term-major (declaration order)
};

// The largest term a source hands out: packed generations stay below 2^63, so
// every backend can keep them in a signed 64-bit integer.
inline constexpr std::uint32_t kMaxGenerationTerm = 0x7fffffffu;

// Who owns a label, and under which generation.
struct Ownership {
  std::string owner;  // a node id
  Generation generation;
  bool operator==(const Ownership&) const = default;
};

// One managed spec as stored: its encoded body (opaque to the source) and the
// label's current ownership, if any generation was ever claimed for it.
struct SpecRecord {
  std::string label;
  std::string spec;
  std::optional<Ownership> ownership;
  bool operator==(const SpecRecord&) const = default;
};

class GenerationSource {
 public:
  GenerationSource() = default;
  GenerationSource(const GenerationSource&) = delete;
  GenerationSource& operator=(const GenerationSource&) = delete;
  virtual ~GenerationSource() = default;

  // Begins a new ownership epoch of `label` for `owner`, atomically:
  // term = max(current term, min_term) + 1, seq = 0. The first claim of a label
  // (with min_term 0) is {1, 0}. kInvalidArgument for an empty label or owner;
  // kConflict when the term would pass kMaxGenerationTerm.
  virtual Result<Generation> ClaimTerm(const std::string& label, const std::string& owner,
                                       std::uint32_t min_term = 0) = 0;
  // Grants `label` again to its current owner, atomically: {term, seq + 1}, only
  // if the stored ownership is exactly {owner, expected}; otherwise nothing
  // changes and kConflict names what is stored (a compare-and-set: two leaders
  // can never both re-grant). kConflict too when seq would overflow.
  virtual Result<Generation> ClaimSeq(const std::string& label, const std::string& owner,
                                      Generation expected) = 0;
  // The label's ownership; nullopt if no generation was ever claimed for it.
  virtual Result<std::optional<Ownership>> Current(const std::string& label) = 0;

  // Stores (or replaces) the spec of `label`.
  virtual Status PutSpec(const std::string& label, const std::string& spec) = 0;
  // Forgets the spec of `label` (no error if there is none). Its generation is
  // kept: a label submitted again continues above it, never below.
  virtual Status RemoveSpec(const std::string& label) = 0;
  // Every label that has a spec, with its ownership, sorted by label.
  virtual Result<std::vector<SpecRecord>> List() = 0;

  // True when other processes opening the same URI see the same data (SQLite,
  // Redis); false for memory:// (a leader in another process starts empty).
  virtual bool Shared() const = 0;
};

// Opens the source named by `config.uri`; `config.app_id` namespaces its data.
// kBadConfig for an unusable URI, kBackendFailure when the storage cannot be
// opened (the message names it).
Result<std::unique_ptr<GenerationSource>> OpenGenerationSource(const BackendConfig& config);

}  // namespace pynenc_cpp
