// SWIM membership over an Env: periodic direct probes, indirect probes
// (ping-req through k other members) before suspicion, Alive -> Suspect -> Dead
// with incarnation numbers and self-refutation, member records piggy-backed on
// every protocol message, Join/JoinAck with seeds, periodic rejoin (healed
// partitions, restarted nodes) and a graceful Leave.
// Protocol, message bytes and timing formulas: docs/cluster/membership.md.
//
// Thread safety: not thread-safe. Every method, and every callback it makes
// (on_event, the incarnation callback), runs on the Env's loop thread (env.h).
// Lifecycle: construct, Start(), feed OnFrame() from the Env receiver (the
// caller installs it, so several protocols can share one Env), Leave() or
// destroy. The destructor cancels its timers; the Env must outlive the object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

// Membership message types (env.h: 16..31 are membership's).
enum class MembershipMessage : std::uint8_t {
  kPing = kMembershipTypeBase + 0,
  kAck = kMembershipTypeBase + 1,
  kPingReq = kMembershipTypeBase + 2,
  kJoin = kMembershipTypeBase + 3,
  kJoinAck = kMembershipTypeBase + 4,
  kGossip = kMembershipTypeBase + 5,  // records only: Leave, suspicion notices
};
inline bool IsMembershipType(std::uint8_t t) {
  return t >= kMembershipTypeBase && t < kMembershipTypeBase + 16;
}

struct MembershipOptions {
  std::string cluster_name = "pynenc-cpp";
  // This node. `self.incarnation` is where it starts: a restarted node passes its
  // persisted incarnation + 1. `self.address` must be env.LocalAddress().
  // `self.state` is ignored (a started node is Alive).
  Member self;
  std::vector<Address> seeds;        // may include self.address (ignored)
  std::int64_t heartbeat_ms = 200;   // protocol period: one probe per period
  std::int64_t ping_timeout_ms = 0;  // 0: heartbeat_ms / 2; then ping-req
  // A Suspect member is declared Dead at
  //   max(last_heard + suspect_timeout_ms, suspected_at + refute_window_ms)
  // where last_heard is when this node last got a frame from it directly
  // (OnFrame sender or NoteHeard; for a member never heard from, when it was
  // first learned of) and suspected_at is when this node marked or learned it
  // Suspect. docs/cluster/membership.md "Timing".
  std::int64_t suspect_timeout_ms = 1000;
  std::int64_t refute_window_ms = 0;       // 0: max(ping_timeout_ms, suspect_timeout_ms / 3)
  int indirect_probes = 3;                 // k
  std::size_t max_gossip = 8;              // records piggy-backed per message
  std::int64_t dead_retention_ms = 60000;  // Dead/Left tombstones kept this long
  std::int64_t rejoin_interval_ms = 0;     // 0: 5 * heartbeat_ms
  int gossip_lambda = 3;                   // each change is sent lambda*ceil(log2(n+1)) times
};

struct MembershipStats {
  std::uint64_t pings_sent = 0;
  std::uint64_t acks_received = 0;  // acks that completed a probe (direct or relayed)
  std::uint64_t ping_reqs_sent = 0;
  std::uint64_t joins_sent = 0;
  std::uint64_t suspicions = 0;         // members this node itself suspected
  std::uint64_t refutations = 0;        // self incarnation bumps
  std::uint64_t messages_rejected = 0;  // malformed frames
  std::uint64_t foreign_cluster = 0;    // well-formed frames of another cluster_name
};

class Membership {
 public:
  // `on_event` is called exactly once per transition of another member (never for
  // self): joined, suspected, alive again, dead, left.
  Membership(Env& env, MembershipOptions options, std::function<void(const MemberEvent&)> on_event);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Schedules the protocol period and sends Join to every seed. Idempotent.
  void Start();
  // Marks self Left at incarnation + 1, sends that record to every live member,
  // stops probing and ignores every later frame. Idempotent.
  void Leave();

  // Feeds one inbound frame. Frames of other types, malformed frames (counted)
  // and frames of another cluster (counted) are ignored; never throws.
  void OnFrame(const Address& from, std::uint8_t type, std::string_view payload);

  const Member& Self() const;
  // Every known member, self included, Dead and Left tombstones too, by id.
  std::vector<Member> Members() const;
  // Alive and Suspect members, self included (unless it left), by id.
  std::vector<Member> LiveMembers() const;
  // ComputeEpoch(LiveMembers()).
  std::uint64_t Epoch() const;
  // env.NowMs() when a frame from that node (by sender id) last arrived.
  std::optional<std::int64_t> LastHeardMs(const NodeId& id) const;
  // Reports a non-membership frame (e.g. lease traffic) from `from`, an
  // authenticated advertised address, as direct contact: sets LastHeardMs of the
  // live member at that address to now, which postpones its Dead deadline (see
  // MembershipOptions). Ignored unless exactly one Alive/Suspect member other
  // than self has that address (a node restarted under a new id at the same
  // address must not keep its predecessor alive). Changes no state, sends
  // nothing, emits no event.
  void NoteHeard(const Address& from);
  // Called with the new value whenever the self incarnation changes (persist it).
  void SetOnIncarnation(std::function<void(std::uint64_t)> fn);
  MembershipStats Stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The epoch every member computes for the same live view: the first 8 bytes
// (big-endian) of SHA-256 over the concatenation, for the members sorted by
// (started_at_ms, id), of "<id>|<started_at_ms in decimal>;". The input order
// of `live` does not matter; states are not looked at (pass live members only).
std::uint64_t ComputeEpoch(const std::vector<Member>& live);

}  // namespace pynenc_cpp::cluster
