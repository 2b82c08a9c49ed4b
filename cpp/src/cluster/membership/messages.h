// Membership (SWIM) message codec. Byte layout: docs/cluster/membership.md.
//
// Every message is   header | body | gossip
//   header = Str cluster_name, MemberRecord sender
//   gossip = u32 count (<= kMaxGossip), count x MemberRecord
// Bodies: Ping {u64 seq, Str target_id}; Ack {u64 seq, Str acked_id}; PingReq {u64 seq,
// Str target_address, Str target_id}; Join {}; JoinAck {u32 count (<= kMaxMembers),
// MemberRecord...}; Gossip {}.
// Decoding never throws and never reads out of bounds: malformed input
// (truncated, trailing bytes, oversized strings or counts, unknown state) is a
// kInvalidArgument Status.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/cluster/membership.h"
#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::membership {

inline constexpr std::size_t kMaxIdBytes = 128;
inline constexpr std::size_t kMaxAddressBytes = 512;
inline constexpr std::size_t kMaxClassBytes = 256;
inline constexpr std::size_t kMaxClusterNameBytes = 256;
inline constexpr std::uint32_t kMaxMetadataEntries = 64;
inline constexpr std::size_t kMaxMetadataKeyBytes = 256;
inline constexpr std::size_t kMaxMetadataValueBytes = 4096;
inline constexpr std::uint32_t kMaxGossip = 64;
inline constexpr std::uint32_t kMaxMembers = 4096;

struct Message {
  MembershipMessage type = MembershipMessage::kPing;
  std::string cluster_name;
  Member sender;
  std::uint64_t seq = 0;        // Ping, Ack, PingReq
  std::string target_id;        // Ping, PingReq; Ack: the id whose liveness it acknowledges
  Address target_address;       // PingReq
  std::vector<Member> members;  // JoinAck
  std::vector<Member> gossip;   // every type

  bool operator==(const Message&) const = default;
};

// REQUIRES: limits above respected by the caller (Encode does not truncate;
// Decode would reject an oversized message).
std::string EncodeMessage(const Message& m);
Result<Message> DecodeMessage(std::uint8_t type, std::string_view payload);

}  // namespace pynenc_cpp::cluster::membership
