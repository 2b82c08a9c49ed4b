// Membership::Impl, the SWIM membership's state and protocol (membership.h),
// shared by its source files
//   membership.cc        entry points, the member table, suspicion and its timers
//   membership_probe.cc  the protocol period (probes, indirect probes, rejoin) and
//                        the messages it sends (with their gossip)
// Not a public header. Thread safety: none of its own; every entry point runs on
// the Env's loop (membership.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/membership/messages.h"
#include "pynenc_cpp/cluster/membership.h"

namespace pynenc_cpp::cluster {

using membership::Message;

class Membership::Impl {
 public:
  // membership.cc
  Impl(Env& env, MembershipOptions options, std::function<void(const MemberEvent&)> on_event);
  ~Impl();
  void Start();
  void Leave();
  void OnFrame(const Address& from, std::uint8_t type, std::string_view payload);
  const Member& Self() const { return members_.at(self_id_).m; }
  std::vector<Member> Members() const;
  std::vector<Member> LiveMembers() const;
  std::optional<std::int64_t> LastHeardMs(const NodeId& id) const;
  void NoteHeard(const Address& from);
  void SetOnIncarnation(std::function<void(std::uint64_t)> fn) { on_incarnation_ = std::move(fn); }
  MembershipStats Stats() const { return stats_; }

 private:
  struct Entry {
    Member m;
    std::int64_t since = 0;        // env.NowMs() of the last state change
    std::int64_t known_since = 0;  // env.NowMs() when this node first learned of it
    std::uint32_t retransmit = 0;  // gossip sends left for the current record
    std::uint64_t change = 0;      // change order: most recent first in gossip
  };
  struct Probe {
    bool active = false;
    bool acked = false;
    NodeId target;
    std::uint64_t incarnation = 0;
    std::uint64_t seq = 0;
  };
  struct Relay {
    Address origin;
    std::uint64_t origin_seq = 0;
    NodeId target;
  };

  Member& self() { return members_.at(self_id_).m; }
  const Member& self() const { return members_.at(self_id_).m; }

  // membership.cc
  void Schedule(std::int64_t delay_ms, std::function<void()> fn);
  void NoteLateness(std::int64_t late_ms);
  bool InStallGrace() const { return env_.NowMs() < grace_until_; }

  // Events are queued while the tables change and delivered at the end of each
  // entry point, so a callback that calls back into us sees a consistent view.
  void Emit(MemberEventKind kind, const Member& m) { pending_.push_back(MemberEvent{kind, m}); }
  void Flush();
  void MarkChanged(Entry& e);
  void Refute(std::uint64_t heard_incarnation);
  void Merge(const Member& r);
  void Transition(MemberState old, const Entry& e);
  std::int64_t DeadAt(const NodeId& id, const Entry& e) const;
  void ArmSuspectCheck(std::int64_t at);
  void CheckSuspects();
  void ExpireTombstones();
  std::size_t OtherLive() const;

  // membership_probe.cc
  void Tick();
  void RejoinTick();
  void FinishProbe();
  void StartProbe();
  void RebuildProbeOrder();
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[env_.Random() % i]);
    }
  }
  void SendPingReqs();
  void HandleAck(const Message& m);
  void HandlePingReq(const Address& from, const Message& m);
  void SendRejoin();
  void SendPing(const Address& to, std::uint64_t seq, const NodeId& target);
  void SendAck(const Address& to, std::uint64_t seq, const NodeId& about);
  void SendJoin(const Address& to);
  void SendJoinAck(const Address& to);
  void SendTo(const Address& to, Message m);
  std::vector<Member> BuildGossip(const Address& to);

  Env& env_;
  MembershipOptions opt_;
  std::function<void(const MemberEvent&)> on_event_;
  std::function<void(std::uint64_t)> on_incarnation_;
  NodeId self_id_;
  std::map<NodeId, Entry> members_;  // self included
  std::map<NodeId, std::int64_t> last_heard_;
  std::map<std::uint64_t, Relay> relays_;
  std::vector<NodeId> probe_order_;
  std::size_t probe_index_ = 0;
  std::size_t rejoin_index_ = 0;
  Probe probe_;
  std::uint64_t seq_ = 0;
  std::uint64_t change_counter_ = 0;
  std::set<Env::TimerId> timers_;
  std::vector<MemberEvent> pending_;
  MembershipStats stats_;
  std::int64_t grace_until_ = 0;            // see NoteLateness
  std::optional<std::int64_t> next_check_;  // due time of the pending CheckSuspects timer
  bool started_ = false;
  bool left_ = false;
};

}  // namespace pynenc_cpp::cluster
