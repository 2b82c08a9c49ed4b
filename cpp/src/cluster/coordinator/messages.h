// The coordinator protocol: frame types 48..57 (commands, acks and reports
// between the leader and every node's host; per-label owner leases; the
// directory the leader pushes; client requests forwarded to the leader) and
// 64..65 (actor messages). Byte layouts: docs/cluster/coordinator.md
// ("Wire format"). All integers big-endian, strings u32 length + bytes.
//
// Decode never throws and never reads out of bounds: a truncated, oversized or
// otherwise malformed payload (bad enum, trailing bytes) is kInvalidArgument.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pynenc_cpp/cluster/actors.h"
#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/specs.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::coord_wire {

inline constexpr std::uint8_t kCommand = kCoordinatorTypeBase + 0;
inline constexpr std::uint8_t kAck = kCoordinatorTypeBase + 1;
inline constexpr std::uint8_t kReport = kCoordinatorTypeBase + 2;
inline constexpr std::uint8_t kReportRequest = kCoordinatorTypeBase + 3;
inline constexpr std::uint8_t kLeaseRequest = kCoordinatorTypeBase + 4;
inline constexpr std::uint8_t kLeaseReply = kCoordinatorTypeBase + 5;
inline constexpr std::uint8_t kLeaseRelease = kCoordinatorTypeBase + 6;
inline constexpr std::uint8_t kDirectory = kCoordinatorTypeBase + 7;
inline constexpr std::uint8_t kClientRequest = kCoordinatorTypeBase + 8;
inline constexpr std::uint8_t kClientReply = kCoordinatorTypeBase + 9;
inline constexpr std::uint8_t kActorMessage = kActorTypeBase + 0;
inline constexpr std::uint8_t kActorReply = kActorTypeBase + 1;
inline constexpr std::uint8_t kPathMessage = kActorTypeBase + 2;
inline constexpr std::uint8_t kLabelEnvelope = kActorTypeBase + 3;
inline constexpr std::uint8_t kLabelAck = kActorTypeBase + 4;

inline bool IsCoordinatorType(std::uint8_t t) { return t >= kCommand && t <= kClientReply; }
inline bool IsActorType(std::uint8_t t) { return t >= kActorMessage && t <= kLabelAck; }

enum class InstancePhase : std::uint8_t {
  kAcquiring = 0,  // accepted; waiting for its owner lease and the node's gating
  kStarting = 1,   // the factory runs
  kActive = 2,     // running
  kStopping = 3,   // its stop runs
};
std::string_view InstancePhaseName(InstancePhase p);

// Leader -> node: start or stop one instance.
struct Command {
  enum class Op : std::uint8_t { kSpawn = 0, kStop = 1 };
  Op op = Op::kSpawn;
  std::uint64_t request_id = 0;
  std::string label;
  Generation generation;
  SpecKind kind = SpecKind::kActor;  // kSpawn
  std::string actor_type;            // kSpawn
  std::string state;                 // kSpawn: bytes for the factory
  std::int64_t drain_ms = 0;         // how long a stop may take before the lease is let go
  std::string reason;                // kStop
  bool operator==(const Command&) const = default;
};

// Node -> the command's sender: the outcome of one command, always sent.
struct Ack {
  std::uint64_t request_id = 0;
  Command::Op op = Command::Op::kSpawn;
  std::string label;
  Generation generation;
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::uint64_t incarnation = 0;  // the node's, and its report sequence after the change
  std::uint64_t report_seq = 0;
  bool operator==(const Ack&) const = default;
};

struct InstanceInfo {
  std::string label;
  Generation generation;
  SpecKind kind = SpecKind::kActor;
  InstancePhase phase = InstancePhase::kAcquiring;
  std::string actor_type;
  bool operator==(const InstanceInfo&) const = default;
};

// Node -> leader: everything the leader needs to know about the node. `seq`
// grows with every change; (incarnation, seq) orders reports of one node id.
// A generation the node found in storage above the one it was given for the
// label (an event-sourced journal fenced higher, e.g. after a full restart with
// a generation source that forgot): the leader claims a term above it.
struct GenerationFloor {
  std::string label;
  Generation generation;
  bool operator==(const GenerationFloor&) const = default;
};

inline constexpr std::size_t kMaxReportedFloors = 1024;

struct Report {
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  bool has_quorum = false;
  bool leaving = false;  // draining before a graceful leave: move everything off it
  std::vector<std::string> actor_types;
  std::vector<InstanceInfo> instances;
  std::vector<AgentFamily> families;
  std::vector<GenerationFloor> floors;  // at most kMaxReportedFloors
  // The highest term an instance started under on this node in an earlier
  // process (its state dir): every term the leader claims is above it.
  std::uint32_t min_term = 0;
  bool operator==(const Report&) const = default;
};

struct ReportRequest {
  std::uint64_t nonce = 0;
  bool operator==(const ReportRequest&) const = default;
};

// Owner leases (owner_leases.h).
struct LeaseClaim {
  std::string label;
  Generation generation;
  bool stopping = false;
  bool operator==(const LeaseClaim&) const = default;
};
struct LeaseRequest {
  std::uint64_t round = 0;
  NodeId candidate;
  std::vector<LeaseClaim> claims;
  bool operator==(const LeaseRequest&) const = default;
};
struct LeaseAnswer {
  std::string label;
  bool granted = false;
  bool operator==(const LeaseAnswer&) const = default;
};
struct LeaseReply {
  std::uint64_t round = 0;
  NodeId grantor;
  std::vector<LeaseAnswer> answers;
  bool operator==(const LeaseReply&) const = default;
};
struct LeaseRelease {
  NodeId holder;
  std::vector<std::pair<std::string, Generation>> labels;
  bool operator==(const LeaseRelease&) const = default;
};

// Leader -> every node: where every managed label is (directory.h).
struct DirectoryEntry {
  std::string label;
  SpecKind kind = SpecKind::kActor;
  SpecState state = SpecState::kPending;
  NodeId owner;           // empty: none
  Address owner_address;  // empty: none
  Generation generation;
  std::string reason;
  std::string spec;  // the stored spec bytes (actors, singletons); empty for agents
  bool operator==(const DirectoryEntry&) const = default;
};
struct Directory {
  NodeId leader;
  std::uint64_t reign = 0;    // the leader's reign: a new one replaces the whole directory
  std::uint64_t version = 0;  // grows within a reign
  std::uint32_t chunk = 0;    // this frame's index among `chunks`
  std::uint32_t chunks = 1;
  std::vector<DirectoryEntry> entries;
  bool operator==(const Directory&) const = default;
};

// Any node -> leader: a request a node forwards to the Coordinator.
enum class ClientOp : std::uint8_t {
  kSubmitActor = 0,      // body: EncodeSpec (actor)
  kSubmitSingleton = 1,  // body: EncodeSpec (singleton)
  kRemove = 2,           // body: the label
  kView = 3,             // reply body: EncodeView
  kStatuses = 4,         // reply body: EncodeStatuses
};
struct ClientRequest {
  std::uint64_t id = 0;
  ClientOp op = ClientOp::kView;
  std::string body;
  bool operator==(const ClientRequest&) const = default;
};
struct ClientReply {
  std::uint64_t id = 0;
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::string body;
  bool operator==(const ClientReply&) const = default;
};

// Any node -> the node running `label`.
struct ActorMessage {
  std::uint64_t id = 0;
  std::string label;
  bool expects_reply = false;
  std::string payload;
  bool operator==(const ActorMessage&) const = default;
};
struct ActorReply {
  std::uint64_t id = 0;
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::string payload;
  bool operator==(const ActorReply&) const = default;
};

// Any node -> a node-local actor path (best effort, at most once: actors'
// replies and messages to plain actors).
struct PathMessage {
  std::string path;
  std::string payload;
  bool operator==(const PathMessage&) const = default;
};

// Reliable delivery to a label's instance (docs/cluster/actors.md): sequence
// numbers per (sender, label), acknowledged by the owner once processed,
// re-sent to the next owner otherwise.
struct LabelEnvelope {
  std::string label;
  std::uint64_t sender_epoch = 0;  // random per sending process: a restarted sender starts anew
  std::uint64_t seq = 0;
  std::string payload;
  bool operator==(const LabelEnvelope&) const = default;
};
using LabelOutcome = ::pynenc_cpp::cluster::LabelOutcome;  // actors.h
struct LabelAck {
  std::string label;
  std::uint64_t sender_epoch = 0;
  std::uint64_t seq = 0;
  LabelOutcome outcome = LabelOutcome::kProcessed;
  bool operator==(const LabelAck&) const = default;
};

using Message = std::variant<Command, Ack, Report, ReportRequest, LeaseRequest, LeaseReply,
                             LeaseRelease, Directory, ClientRequest, ClientReply, ActorMessage,
                             ActorReply, PathMessage, LabelEnvelope, LabelAck>;

std::pair<std::uint8_t, std::string> Encode(const Message& message);
// kInvalidArgument for an unknown type or a malformed payload.
Result<Message> Decode(std::uint8_t type, std::string_view payload);

}  // namespace pynenc_cpp::cluster::coord_wire
