// Lease messages (frame types 32..34) and their codec, byte by byte in
// docs/cluster/supervisor.md ("Lease messages"). All integers big-endian (wire.h).
//
//   32 LeaseRequest  u64 seq | u64 epoch | str candidate
//   33 LeaseGrant    u64 seq | u8 granted (0 or 1) | str grantor
//   34 LeaseRelease  str holder
//   str = u32 length + bytes, at most kMaxLeaseNodeIdBytes.
//
// The decoder never throws and never reads out of bounds: a short, long or
// otherwise malformed payload is an error value.
//
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::lease_wire {

inline constexpr std::uint8_t kRequest = kLeaseTypeBase + 0;
inline constexpr std::uint8_t kGrant = kLeaseTypeBase + 1;
inline constexpr std::uint8_t kRelease = kLeaseTypeBase + 2;
inline constexpr std::size_t kMaxLeaseNodeIdBytes = 128;

struct Request {
  std::uint64_t seq = 0;
  std::uint64_t epoch = 0;
  NodeId candidate;
  bool operator==(const Request&) const = default;
};
struct Grant {
  std::uint64_t seq = 0;
  bool granted = false;
  NodeId grantor;
  bool operator==(const Grant&) const = default;
};
struct Release {
  NodeId holder;
  bool operator==(const Release&) const = default;
};
using Message = std::variant<Request, Grant, Release>;

// Frame type and payload for a message.
std::pair<std::uint8_t, std::string> Encode(const Message& message);
// kInvalidArgument for an unknown type or a malformed payload (truncated,
// trailing bytes, oversized id, granted byte other than 0/1).
Result<Message> Decode(std::uint8_t type, std::string_view payload);

}  // namespace pynenc_cpp::cluster::lease_wire
