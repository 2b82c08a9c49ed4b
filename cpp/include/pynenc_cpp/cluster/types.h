// Value types shared by every layer of the cluster core: members, their states,
// membership events and log levels.
//
// Thread safety: plain value types.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace pynenc_cpp::cluster {

// Upper bound of every drain or stop timeout (one day): larger values are
// refused, so deadlines computed from them never overflow.
inline constexpr std::int64_t kMaxDrainTimeoutMs = 86'400'000;
// Upper bound of every other timeout and interval (requests, asks, heartbeats,
// leases...): also a day, for the same reason.
inline constexpr std::int64_t kMaxTimeoutMs = kMaxDrainTimeoutMs;

// A node's persistent identity: 32 lowercase hex characters (128 random bits),
// created once and kept in `<state_dir>/node_id`, so a restarted process is the
// same node (it rejoins with a higher incarnation).
using NodeId = std::string;

// "host:port" a node listens on. Also how the transport addresses peers.
using Address = std::string;

enum class MemberState : std::uint8_t {
  kAlive = 0,
  kSuspect = 1,
  kDead = 2,
  kLeft = 3,  // announced a graceful Leaving
};
std::string_view MemberStateName(MemberState s);

// One member as every node sees it; gossip carries whole Member records.
// Precedence between two records of the same id (SWIM): a higher incarnation
// wins; at equal incarnation Left > Dead > Suspect > Alive.
struct Member {
  NodeId id;
  Address address;
  std::uint64_t incarnation = 0;
  MemberState state = MemberState::kAlive;
  // Join order: the wall-clock time (ms since the Unix epoch) at which this
  // process started, stamped by the node itself and carried in gossip, so every
  // node orders members the same way. A restarted process is younger. Ties are
  // broken by id.
  std::int64_t started_at_ms = 0;
  std::string node_class;
  std::map<std::string, std::string> metadata;

  bool operator==(const Member&) const = default;
};

// Live members take part in elections, quorum and the epoch.
inline bool IsLive(MemberState s) { return s == MemberState::kAlive || s == MemberState::kSuspect; }

enum class MemberEventKind : std::uint8_t {
  kJoined = 0,      // first seen alive (or alive again after Dead/Left with a higher incarnation)
  kSuspected = 1,   // Alive -> Suspect
  kAliveAgain = 2,  // Suspect -> Alive (refuted)
  kDead = 3,        // Suspect -> Dead (suspect timeout ran out)
  kLeft = 4,        // graceful Leaving received
};
std::string_view MemberEventName(MemberEventKind k);

struct MemberEvent {
  MemberEventKind kind;
  Member member;  // the record after the change
};

enum class LogLevel : std::uint8_t { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

}  // namespace pynenc_cpp::cluster
