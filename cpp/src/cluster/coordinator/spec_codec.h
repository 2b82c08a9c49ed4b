// Byte encodings of specs, statuses and views: used in the generation source
// (a spec's stored body), in client requests forwarded to the leader, in the
// directory every node keeps, and in query replies. Layouts in
// docs/cluster/coordinator.md ("Wire format"); all integers big-endian
// (wire.h), strings are u32 length + bytes.
//
// Decoders never throw and never read out of bounds: truncated input,
// trailing bytes, unknown enum values or oversized fields are kInvalidArgument.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cluster/wire.h"
#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/cluster/specs.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::codec {

inline constexpr std::uint8_t kSpecFormat = 1;
inline constexpr std::uint32_t kMaxListEntries = 100'000;
inline constexpr std::size_t kMaxIdBytes = 128;
inline constexpr std::size_t kMaxAddressBytes = 512;
inline constexpr std::size_t kMaxReasonBytes = 4096;
inline constexpr std::size_t kMaxMetaBytes = 4096;

// A managed spec as stored: an actor or a singleton (agents are not stored:
// nodes declare them).
struct StoredSpec {
  SpecKind kind = SpecKind::kActor;
  ActorSpec actor;          // kActor
  SingletonSpec singleton;  // kSingleton
  const std::string& label() const { return kind == SpecKind::kActor ? actor.label : singleton.label; }
  bool operator==(const StoredSpec&) const = default;
};

std::string EncodeSpec(const StoredSpec& spec);  // u8 format | u8 kind | body
Result<StoredSpec> DecodeSpec(std::string_view bytes);

std::string EncodeStatuses(const std::vector<SpecStatus>& statuses);
Result<std::vector<SpecStatus>> DecodeStatuses(std::string_view bytes);

std::string EncodeView(const ClusterView& view);
Result<ClusterView> DecodeView(std::string_view bytes);

// Field helpers shared by the message codec.
void PutGeneration(wire::ByteWriter& w, Generation g);
bool GetGeneration(wire::ByteReader& r, Generation& g);
void PutStrings(wire::ByteWriter& w, const std::vector<std::string>& v);
bool GetStrings(wire::ByteReader& r, std::vector<std::string>& v, std::size_t max_len);
template <typename E>
bool GetEnum(wire::ByteReader& r, E& e, std::uint8_t max) {
  std::uint8_t v = 0;
  if (!r.U8(v) || v > max) return false;
  e = static_cast<E>(v);
  return true;
}

}  // namespace pynenc_cpp::cluster::codec
