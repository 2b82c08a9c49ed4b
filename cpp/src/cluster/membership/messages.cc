#include "cluster/membership/messages.h"

#include "cluster/wire.h"

namespace pynenc_cpp::cluster::membership {

namespace {

void PutMember(wire::ByteWriter& w, const Member& m) {
  w.Str(m.id);
  w.Str(m.address);
  w.U64(m.incarnation);
  w.U8(static_cast<std::uint8_t>(m.state));
  w.I64(m.started_at_ms);
  w.Str(m.node_class);
  w.U32(static_cast<std::uint32_t>(m.metadata.size()));
  for (const auto& [k, v] : m.metadata) {
    w.Str(k);
    w.Str(v);
  }
}

bool GetMember(wire::ByteReader& r, Member& m) {
  std::uint8_t state = 0;
  std::uint32_t n = 0;
  if (!r.Str(m.id, kMaxIdBytes) || !r.Str(m.address, kMaxAddressBytes) || !r.U64(m.incarnation) ||
      !r.U8(state) || !r.I64(m.started_at_ms) || !r.Str(m.node_class, kMaxClassBytes) ||
      !r.Count(n, kMaxMetadataEntries)) {
    return false;
  }
  if (state > static_cast<std::uint8_t>(MemberState::kLeft) || m.id.empty()) return false;
  m.state = static_cast<MemberState>(state);
  m.metadata.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!r.Str(k, kMaxMetadataKeyBytes) || !r.Str(v, kMaxMetadataValueBytes)) return false;
    if (!m.metadata.emplace(std::move(k), std::move(v)).second) return false;  // duplicate key
  }
  return true;
}

void PutMembers(wire::ByteWriter& w, const std::vector<Member>& ms) {
  w.U32(static_cast<std::uint32_t>(ms.size()));
  for (const auto& m : ms) PutMember(w, m);
}

bool GetMembers(wire::ByteReader& r, std::vector<Member>& ms, std::uint32_t max) {
  std::uint32_t n = 0;
  if (!r.Count(n, max)) return false;
  // Each record takes at least 34 bytes: never reserve more than the input holds.
  if (n > r.remaining() / 34) return false;
  ms.resize(n);
  for (auto& m : ms) {
    if (!GetMember(r, m)) return false;
  }
  return true;
}

}  // namespace

std::string EncodeMessage(const Message& m) {
  wire::ByteWriter w;
  w.Str(m.cluster_name);
  PutMember(w, m.sender);
  switch (m.type) {
    case MembershipMessage::kPing:
      w.U64(m.seq);
      w.Str(m.target_id);
      break;
    case MembershipMessage::kAck:
      w.U64(m.seq);
      w.Str(m.target_id);
      break;
    case MembershipMessage::kPingReq:
      w.U64(m.seq);
      w.Str(m.target_address);
      w.Str(m.target_id);
      break;
    case MembershipMessage::kJoinAck:
      PutMembers(w, m.members);
      break;
    case MembershipMessage::kJoin:
    case MembershipMessage::kGossip:
      break;
  }
  PutMembers(w, m.gossip);
  return std::move(w).Take();
}

Result<Message> DecodeMessage(std::uint8_t type, std::string_view payload) {
  if (type < static_cast<std::uint8_t>(MembershipMessage::kPing) ||
      type > static_cast<std::uint8_t>(MembershipMessage::kGossip)) {
    return Status::InvalidArgument("membership: unknown message type " + std::to_string(type));
  }
  Message m;
  m.type = static_cast<MembershipMessage>(type);
  wire::ByteReader r(payload);
  bool ok = r.Str(m.cluster_name, kMaxClusterNameBytes) && GetMember(r, m.sender);
  if (ok) {
    switch (m.type) {
      case MembershipMessage::kPing:
        ok = r.U64(m.seq) && r.Str(m.target_id, kMaxIdBytes);
        break;
      case MembershipMessage::kAck:
        ok = r.U64(m.seq) && r.Str(m.target_id, kMaxIdBytes);
        break;
      case MembershipMessage::kPingReq:
        ok = r.U64(m.seq) && r.Str(m.target_address, kMaxAddressBytes) &&
             r.Str(m.target_id, kMaxIdBytes) && !m.target_address.empty();
        break;
      case MembershipMessage::kJoinAck:
        ok = GetMembers(r, m.members, kMaxMembers);
        break;
      case MembershipMessage::kJoin:
      case MembershipMessage::kGossip:
        break;
    }
  }
  ok = ok && GetMembers(r, m.gossip, kMaxGossip) && r.done();
  if (!ok)
    return Status::InvalidArgument("membership: malformed message type " + std::to_string(type));
  return m;
}

}  // namespace pynenc_cpp::cluster::membership
