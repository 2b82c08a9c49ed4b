#include "cluster/coordinator/messages.h"

#include "cluster/coordinator/spec_codec.h"
#include "cluster/wire.h"

namespace pynenc_cpp::cluster::coord_wire {

using codec::GetEnum;
using codec::GetGeneration;
using codec::GetStrings;
using codec::kMaxAddressBytes;
using codec::kMaxIdBytes;
using codec::kMaxListEntries;
using codec::kMaxReasonBytes;
using codec::PutGeneration;
using codec::PutStrings;
using wire::ByteReader;
using wire::ByteWriter;

std::string_view InstancePhaseName(InstancePhase p) {
  switch (p) {
    case InstancePhase::kAcquiring:
      return "acquiring";
    case InstancePhase::kStarting:
      return "starting";
    case InstancePhase::kActive:
      return "active";
    case InstancePhase::kStopping:
      return "stopping";
  }
  return "unknown";
}

namespace {

// Payloads (actor state, actor messages) are bounded by the transport's frame
// limit; this only keeps a decoder from trusting absurd lengths.
constexpr std::size_t kMaxPayloadBytes = 64u << 20;
constexpr std::uint8_t kMaxErrorCode = static_cast<std::uint8_t>(ErrorCode::kResourceExhausted);

bool GetBool(ByteReader& r, bool& b) {
  std::uint8_t v = 0;
  if (!r.U8(v) || v > 1) return false;
  b = v == 1;
  return true;
}

void PutFamily(ByteWriter& w, const AgentFamily& f) {
  w.Str(f.scheme);
  PutStrings(w, f.agents);
  w.U8(f.supported ? 1 : 0);
  if (f.supported) PutStrings(w, *f.supported);
  w.U8(static_cast<std::uint8_t>(f.distribution));
  w.I64(f.drain_timeout_ms);
}
bool GetFamily(ByteReader& r, AgentFamily& f) {
  bool has = false;
  if (!r.Str(f.scheme, kMaxActorTypeBytes) || !GetStrings(r, f.agents, kMaxLabelBytes) ||
      !GetBool(r, has)) {
    return false;
  }
  if (has) {
    std::vector<std::string> s;
    if (!GetStrings(r, s, kMaxLabelBytes)) return false;
    f.supported = std::move(s);
  }
  return GetEnum(r, f.distribution, 1) && r.I64(f.drain_timeout_ms) &&
         f.drain_timeout_ms > 0 && f.drain_timeout_ms <= kMaxDrainTimeoutMs;
}

struct EncodeVisitor {
  ByteWriter& w;
  std::uint8_t operator()(const Command& m) {
    w.U8(static_cast<std::uint8_t>(m.op));
    w.U64(m.request_id);
    w.Str(m.label);
    PutGeneration(w, m.generation);
    w.U8(static_cast<std::uint8_t>(m.kind));
    w.Str(m.actor_type);
    w.Str(m.state);
    w.I64(m.drain_ms);
    w.Str(m.reason);
    return kCommand;
  }
  std::uint8_t operator()(const Ack& m) {
    w.U64(m.request_id);
    w.U8(static_cast<std::uint8_t>(m.op));
    w.Str(m.label);
    PutGeneration(w, m.generation);
    w.U8(static_cast<std::uint8_t>(m.code));
    w.Str(m.message);
    w.U64(m.incarnation);
    w.U64(m.report_seq);
    return kAck;
  }
  std::uint8_t operator()(const Report& m) {
    w.U64(m.incarnation);
    w.U64(m.seq);
    w.U8(m.has_quorum ? 1 : 0);
    w.U8(m.leaving ? 1 : 0);
    PutStrings(w, m.actor_types);
    w.U32(static_cast<std::uint32_t>(m.instances.size()));
    for (const auto& i : m.instances) {
      w.Str(i.label);
      PutGeneration(w, i.generation);
      w.U8(static_cast<std::uint8_t>(i.kind));
      w.U8(static_cast<std::uint8_t>(i.phase));
      w.Str(i.actor_type);
    }
    w.U32(static_cast<std::uint32_t>(m.families.size()));
    for (const auto& f : m.families) PutFamily(w, f);
    w.U32(static_cast<std::uint32_t>(m.floors.size()));
    for (const auto& f : m.floors) {
      w.Str(f.label);
      PutGeneration(w, f.generation);
    }
    w.U32(m.min_term);
    return kReport;
  }
  std::uint8_t operator()(const ReportRequest& m) {
    w.U64(m.nonce);
    return kReportRequest;
  }
  std::uint8_t operator()(const LeaseRequest& m) {
    w.U64(m.round);
    w.Str(m.candidate);
    w.U32(static_cast<std::uint32_t>(m.claims.size()));
    for (const auto& c : m.claims) {
      w.Str(c.label);
      PutGeneration(w, c.generation);
      w.U8(c.stopping ? 1 : 0);
    }
    return kLeaseRequest;
  }
  std::uint8_t operator()(const LeaseReply& m) {
    w.U64(m.round);
    w.Str(m.grantor);
    w.U32(static_cast<std::uint32_t>(m.answers.size()));
    for (const auto& a : m.answers) {
      w.Str(a.label);
      w.U8(a.granted ? 1 : 0);
    }
    return kLeaseReply;
  }
  std::uint8_t operator()(const LeaseRelease& m) {
    w.Str(m.holder);
    w.U32(static_cast<std::uint32_t>(m.labels.size()));
    for (const auto& [label, gen] : m.labels) {
      w.Str(label);
      PutGeneration(w, gen);
    }
    return kLeaseRelease;
  }
  std::uint8_t operator()(const Directory& m) {
    w.Str(m.leader);
    w.U64(m.reign);
    w.U64(m.version);
    w.U32(m.chunk);
    w.U32(m.chunks);
    w.U32(static_cast<std::uint32_t>(m.entries.size()));
    for (const auto& e : m.entries) {
      w.Str(e.label);
      w.U8(static_cast<std::uint8_t>(e.kind));
      w.U8(static_cast<std::uint8_t>(e.state));
      w.Str(e.owner);
      w.Str(e.owner_address);
      PutGeneration(w, e.generation);
      w.Str(e.reason);
      w.Str(e.spec);
    }
    return kDirectory;
  }
  std::uint8_t operator()(const ClientRequest& m) {
    w.U64(m.id);
    w.U8(static_cast<std::uint8_t>(m.op));
    w.Str(m.body);
    return kClientRequest;
  }
  std::uint8_t operator()(const ClientReply& m) {
    w.U64(m.id);
    w.U8(static_cast<std::uint8_t>(m.code));
    w.Str(m.message);
    w.Str(m.body);
    return kClientReply;
  }
  std::uint8_t operator()(const ActorMessage& m) {
    w.U64(m.id);
    w.Str(m.label);
    w.U8(m.expects_reply ? 1 : 0);
    w.Str(m.payload);
    return kActorMessage;
  }
  std::uint8_t operator()(const ActorReply& m) {
    w.U64(m.id);
    w.U8(static_cast<std::uint8_t>(m.code));
    w.Str(m.message);
    w.Str(m.payload);
    return kActorReply;
  }
  std::uint8_t operator()(const PathMessage& m) {
    w.Str(m.path);
    w.Str(m.payload);
    return kPathMessage;
  }
  std::uint8_t operator()(const LabelEnvelope& m) {
    w.Str(m.label);
    w.U64(m.sender_epoch);
    w.U64(m.seq);
    w.Str(m.payload);
    return kLabelEnvelope;
  }
  std::uint8_t operator()(const LabelAck& m) {
    w.Str(m.label);
    w.U64(m.sender_epoch);
    w.U64(m.seq);
    w.U8(static_cast<std::uint8_t>(m.outcome));
    return kLabelAck;
  }
};

bool DecodeBody(ByteReader& r, Command& m) {
  return GetEnum(r, m.op, 1) && r.U64(m.request_id) && r.Str(m.label, kMaxLabelBytes) &&
         GetGeneration(r, m.generation) && GetEnum(r, m.kind, 2) &&
         r.Str(m.actor_type, kMaxActorTypeBytes) && r.Str(m.state, kMaxPayloadBytes) &&
         r.I64(m.drain_ms) && m.drain_ms >= 0 && m.drain_ms <= kMaxDrainTimeoutMs &&
         r.Str(m.reason, kMaxReasonBytes);
}
bool DecodeBody(ByteReader& r, Ack& m) {
  return r.U64(m.request_id) && GetEnum(r, m.op, 1) && r.Str(m.label, kMaxLabelBytes) &&
         GetGeneration(r, m.generation) && GetEnum(r, m.code, kMaxErrorCode) &&
         r.Str(m.message, kMaxReasonBytes) && r.U64(m.incarnation) && r.U64(m.report_seq);
}
bool DecodeBody(ByteReader& r, Report& m) {
  std::uint32_t n = 0;
  if (!r.U64(m.incarnation) || !r.U64(m.seq) || !GetBool(r, m.has_quorum) ||
      !GetBool(r, m.leaving) ||
      !GetStrings(r, m.actor_types, kMaxActorTypeBytes) || !r.Count(n, kMaxListEntries)) {
    return false;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    InstanceInfo info;
    if (!r.Str(info.label, kMaxLabelBytes) || !GetGeneration(r, info.generation) ||
        !GetEnum(r, info.kind, 2) || !GetEnum(r, info.phase, 3) ||
        !r.Str(info.actor_type, kMaxActorTypeBytes)) {
      return false;
    }
    m.instances.push_back(std::move(info));
  }
  if (!r.Count(n, kMaxListEntries)) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    AgentFamily f;
    if (!GetFamily(r, f)) return false;
    m.families.push_back(std::move(f));
  }
  if (!r.Count(n, kMaxReportedFloors)) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    GenerationFloor f;
    if (!r.Str(f.label, kMaxLabelBytes) || !GetGeneration(r, f.generation)) return false;
    m.floors.push_back(std::move(f));
  }
  return r.U32(m.min_term);
}
bool DecodeBody(ByteReader& r, ReportRequest& m) { return r.U64(m.nonce); }
bool DecodeBody(ByteReader& r, LeaseRequest& m) {
  std::uint32_t n = 0;
  if (!r.U64(m.round) || !r.Str(m.candidate, kMaxIdBytes) || !r.Count(n, kMaxListEntries)) {
    return false;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    LeaseClaim c;
    if (!r.Str(c.label, kMaxLabelBytes) || !GetGeneration(r, c.generation) ||
        !GetBool(r, c.stopping)) {
      return false;
    }
    m.claims.push_back(std::move(c));
  }
  return true;
}
bool DecodeBody(ByteReader& r, LeaseReply& m) {
  std::uint32_t n = 0;
  if (!r.U64(m.round) || !r.Str(m.grantor, kMaxIdBytes) || !r.Count(n, kMaxListEntries)) {
    return false;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    LeaseAnswer a;
    if (!r.Str(a.label, kMaxLabelBytes) || !GetBool(r, a.granted)) return false;
    m.answers.push_back(std::move(a));
  }
  return true;
}
bool DecodeBody(ByteReader& r, LeaseRelease& m) {
  std::uint32_t n = 0;
  if (!r.Str(m.holder, kMaxIdBytes) || !r.Count(n, kMaxListEntries)) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string label;
    Generation g;
    if (!r.Str(label, kMaxLabelBytes) || !GetGeneration(r, g)) return false;
    m.labels.emplace_back(std::move(label), g);
  }
  return true;
}
bool DecodeBody(ByteReader& r, Directory& m) {
  std::uint32_t n = 0;
  if (!r.Str(m.leader, kMaxIdBytes) || !r.U64(m.reign) || !r.U64(m.version) || !r.U32(m.chunk) ||
      !r.U32(m.chunks) || m.chunks == 0 || m.chunk >= m.chunks || !r.Count(n, kMaxListEntries)) {
    return false;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    DirectoryEntry e;
    if (!r.Str(e.label, kMaxLabelBytes) || !GetEnum(r, e.kind, 2) || !GetEnum(r, e.state, 3) ||
        !r.Str(e.owner, kMaxIdBytes) || !r.Str(e.owner_address, kMaxAddressBytes) ||
        !GetGeneration(r, e.generation) || !r.Str(e.reason, kMaxReasonBytes) ||
        !r.Str(e.spec, kMaxPayloadBytes)) {
      return false;
    }
    m.entries.push_back(std::move(e));
  }
  return true;
}
bool DecodeBody(ByteReader& r, ClientRequest& m) {
  return r.U64(m.id) && GetEnum(r, m.op, 4) && r.Str(m.body, kMaxPayloadBytes);
}
bool DecodeBody(ByteReader& r, ClientReply& m) {
  return r.U64(m.id) && GetEnum(r, m.code, kMaxErrorCode) && r.Str(m.message, kMaxReasonBytes) &&
         r.Str(m.body, kMaxPayloadBytes);
}
bool DecodeBody(ByteReader& r, ActorMessage& m) {
  return r.U64(m.id) && r.Str(m.label, kMaxLabelBytes) && GetBool(r, m.expects_reply) &&
         r.Str(m.payload, kMaxPayloadBytes);
}
bool DecodeBody(ByteReader& r, ActorReply& m) {
  return r.U64(m.id) && GetEnum(r, m.code, kMaxErrorCode) && r.Str(m.message, kMaxReasonBytes) &&
         r.Str(m.payload, kMaxPayloadBytes);
}

bool DecodeBody(ByteReader& r, PathMessage& m) {
  return r.Str(m.path, kMaxLabelBytes) && r.Str(m.payload, kMaxPayloadBytes);
}
bool DecodeBody(ByteReader& r, LabelEnvelope& m) {
  return r.Str(m.label, kMaxLabelBytes) && r.U64(m.sender_epoch) && r.U64(m.seq) &&
         r.Str(m.payload, kMaxPayloadBytes);
}
bool DecodeBody(ByteReader& r, LabelAck& m) {
  return r.Str(m.label, kMaxLabelBytes) && r.U64(m.sender_epoch) && r.U64(m.seq) &&
         GetEnum(r, m.outcome, 3);
}

template <typename T>
Result<Message> DecodeAs(std::string_view payload, const char* name) {
  ByteReader r(payload);
  T m;
  if (!DecodeBody(r, m) || !r.done()) {
    return Status::InvalidArgument(std::string("malformed coordinator message ") + name);
  }
  return Message(std::move(m));
}

}  // namespace

std::pair<std::uint8_t, std::string> Encode(const Message& message) {
  ByteWriter w;
  const std::uint8_t type = std::visit(EncodeVisitor{w}, message);
  return {type, std::move(w).Take()};
}

Result<Message> Decode(std::uint8_t type, std::string_view payload) {
  switch (type) {
    case kCommand:
      return DecodeAs<Command>(payload, "Command");
    case kAck:
      return DecodeAs<Ack>(payload, "Ack");
    case kReport:
      return DecodeAs<Report>(payload, "Report");
    case kReportRequest:
      return DecodeAs<ReportRequest>(payload, "ReportRequest");
    case kLeaseRequest:
      return DecodeAs<LeaseRequest>(payload, "LeaseRequest");
    case kLeaseReply:
      return DecodeAs<LeaseReply>(payload, "LeaseReply");
    case kLeaseRelease:
      return DecodeAs<LeaseRelease>(payload, "LeaseRelease");
    case kDirectory:
      return DecodeAs<Directory>(payload, "Directory");
    case kClientRequest:
      return DecodeAs<ClientRequest>(payload, "ClientRequest");
    case kClientReply:
      return DecodeAs<ClientReply>(payload, "ClientReply");
    case kActorMessage:
      return DecodeAs<ActorMessage>(payload, "ActorMessage");
    case kActorReply:
      return DecodeAs<ActorReply>(payload, "ActorReply");
    case kPathMessage:
      return DecodeAs<PathMessage>(payload, "PathMessage");
    case kLabelEnvelope:
      return DecodeAs<LabelEnvelope>(payload, "LabelEnvelope");
    case kLabelAck:
      return DecodeAs<LabelAck>(payload, "LabelAck");
    default:
      break;
  }
  return Status::InvalidArgument("unknown coordinator message type " + std::to_string(type));
}

}  // namespace pynenc_cpp::cluster::coord_wire
