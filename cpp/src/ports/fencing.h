// Argument checks and error values shared by the generation-fenced backends
// (FencedStore and Journal, on memory, SQLite and Redis) and the generation
// sources, so that every backend refuses the same input with the same words.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp::fencing {

// Packed generations stay below 2^63 (signed 64-bit columns, kMaxGenerationTerm).
inline constexpr std::uint64_t kGenerationLimit = std::uint64_t{1} << 63;

// kInvalidArgument "<port>: <noun> must not be empty".
inline Status CheckName(std::string_view port, std::string_view noun, const std::string& name) {
  if (!name.empty()) return Status::Ok();
  return Status::InvalidArgument(std::string(port) + ": " + std::string(noun) +
                                 " must not be empty");
}

// The generation sources' label and owner checks.
inline Status CheckSourceLabel(const std::string& label) {
  return CheckName("generation source", "label", label);
}
inline Status CheckSourceOwner(const std::string& owner) {
  return CheckName("generation source", "owner", owner);
}
// A claim's label and owner (CheckSourceLabel, then CheckSourceOwner).
inline Status CheckSourceClaim(const std::string& label, const std::string& owner) {
  if (Status s = CheckSourceLabel(label); !s.ok()) return s;
  return CheckSourceOwner(owner);
}

// CheckName, then kInvalidArgument "<port>: generation <g> for <noun> '<name>' is
// not below 2^63".
inline Status CheckWrite(std::string_view port, std::string_view noun, const std::string& name,
                         std::uint64_t generation) {
  if (Status s = CheckName(port, noun, name); !s.ok()) return s;
  if (generation < kGenerationLimit) return Status::Ok();
  return Status::InvalidArgument(std::string(port) + ": generation " + std::to_string(generation) +
                                 " for " + std::string(noun) + " '" + name + "' is not below 2^63");
}

// kStaleGeneration "stale generation <given> for <noun> '<name>': <label> <stored>",
// generations printed as term.seq (label: "stored" or "fenced at").
inline Status Stale(std::string_view noun, const std::string& name, std::uint64_t given,
                    std::uint64_t stored, std::string_view label) {
  return Status::StaleGeneration(
      "stale generation " + Generation::FromPacked(given).ToString() + " for " + std::string(noun) +
      " '" + name + "': " + std::string(label) + " " + Generation::FromPacked(stored).ToString());
}

// FencedStore's words: keys, "stored".
inline Status CheckKeyWrite(const std::string& key, std::uint64_t generation) {
  return CheckWrite("fenced store", "key", key, generation);
}
inline Status StaleKey(const std::string& key, std::uint64_t given, std::uint64_t stored) {
  return Stale("key", key, given, stored, "stored");
}

// Journal's words: entities, "fenced at".
inline Status CheckEntity(const std::string& entity) {
  return CheckName("journal", "entity", entity);
}
inline Status CheckEntityWrite(const std::string& entity, std::uint64_t generation) {
  return CheckWrite("journal", "entity", entity, generation);
}
inline Status StaleEntity(const std::string& entity, std::uint64_t given, std::uint64_t fence) {
  return Stale("entity", entity, given, fence, "fenced at");
}
// An append's arguments: CheckEntityWrite, and at least one event.
inline Status CheckAppend(const std::string& entity, std::uint64_t generation,
                          const std::vector<std::string>& events) {
  if (Status s = CheckEntityWrite(entity, generation); !s.ok()) return s;
  if (events.empty()) {
    return Status::InvalidArgument("journal: no events to append to entity '" + entity + "'");
  }
  return Status::Ok();
}
// kConflict: an append expected `entity` at `expected`, and it is at `at`.
inline Status SequenceConflict(const std::string& entity, std::uint64_t at,
                               std::uint64_t expected) {
  return Status::Conflict("entity '" + entity + "' is at sequence " + std::to_string(at) +
                          ", not " + std::to_string(expected));
}

}  // namespace pynenc_cpp::fencing
