// SWIM membership: the protocol period (Tick: probe one member, ask others to
// probe it when it does not answer, rejoin) and the messages it sends, each with
// its gossip. The rest of the protocol: membership.cc; the class: membership_impl.h.
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "cluster/membership/membership_impl.h"

namespace pynenc_cpp::cluster {
namespace {

// JoinAck stays well under the transport's default 256 KiB frame limit; records
// beyond it are learned through gossip instead.
constexpr std::size_t kJoinAckBudget = 128 * 1024;

std::size_t RecordBytes(const Member& m) {
  std::size_t n = 37 + m.id.size() + m.address.size() + m.node_class.size();
  for (const auto& [k, v] : m.metadata) n += 8 + k.size() + v.size();
  return n;
}

}  // namespace

// ---- protocol period ----

void Membership::Impl::Tick() {
  FinishProbe();
  CheckSuspects();
  ExpireTombstones();
  StartProbe();
  if (OtherLive() == 0) SendRejoin();
  Schedule(opt_.heartbeat_ms, [this] { Tick(); });
}

void Membership::Impl::RejoinTick() {
  SendRejoin();
  Schedule(opt_.rejoin_interval_ms, [this] { RejoinTick(); });
}

void Membership::Impl::FinishProbe() {
  if (!probe_.active) return;
  probe_.active = false;
  if (probe_.acked || InStallGrace()) return;
  auto it = members_.find(probe_.target);
  if (it == members_.end()) return;
  Entry& e = it->second;
  if (e.m.state != MemberState::kAlive || e.m.incarnation != probe_.incarnation) return;
  e.m.state = MemberState::kSuspect;
  MarkChanged(e);
  ++stats_.suspicions;
  Emit(MemberEventKind::kSuspected, e.m);
  ArmSuspectCheck(DeadAt(probe_.target, e));
  // Tell the suspect directly, so it can refute even if gossip is slow.
  Message notice;
  notice.type = MembershipMessage::kGossip;
  SendTo(e.m.address, std::move(notice));
}

void Membership::Impl::StartProbe() {
  NodeId target;
  for (int attempt = 0; attempt < 2 && target.empty(); ++attempt) {
    while (probe_index_ < probe_order_.size()) {
      const NodeId& id = probe_order_[probe_index_++];
      auto it = members_.find(id);
      if (it != members_.end() && IsLive(it->second.m.state)) {
        target = id;
        break;
      }
    }
    if (target.empty()) RebuildProbeOrder();
  }
  if (target.empty()) return;
  const Member& m = members_.at(target).m;
  probe_ = Probe{true, false, target, m.incarnation, ++seq_};
  SendPing(m.address, probe_.seq, target);
  const std::uint64_t seq = probe_.seq;
  Schedule(opt_.ping_timeout_ms, [this, seq] {
    if (probe_.active && probe_.seq == seq && !probe_.acked) SendPingReqs();
  });
}

void Membership::Impl::RebuildProbeOrder() {
  probe_order_.clear();
  for (const auto& [id, e] : members_) {
    if (id != self_id_ && IsLive(e.m.state)) probe_order_.push_back(id);
  }
  Shuffle(probe_order_);
  probe_index_ = 0;
}

void Membership::Impl::SendPingReqs() {
  auto target = members_.find(probe_.target);
  if (target == members_.end()) return;
  std::vector<Address> helpers;
  for (const auto& [id, e] : members_) {
    if (id != self_id_ && id != probe_.target && e.m.state == MemberState::kAlive) {
      helpers.push_back(e.m.address);
    }
  }
  Shuffle(helpers);
  const std::size_t k =
      std::min(helpers.size(), static_cast<std::size_t>(std::max(0, opt_.indirect_probes)));
  for (std::size_t i = 0; i < k; ++i) {
    Message m;
    m.type = MembershipMessage::kPingReq;
    m.seq = probe_.seq;
    m.target_address = target->second.m.address;
    m.target_id = probe_.target;
    ++stats_.ping_reqs_sent;
    SendTo(helpers[i], std::move(m));
  }
}

void Membership::Impl::HandleAck(const Message& m) {
  if (probe_.active && m.seq == probe_.seq && m.target_id == probe_.target) {
    if (!probe_.acked) ++stats_.acks_received;
    probe_.acked = true;
  }
  auto it = relays_.find(m.seq);
  if (it != relays_.end() && m.target_id == it->second.target) {
    SendAck(it->second.origin, it->second.origin_seq, it->second.target);
    relays_.erase(it);
  }
}

void Membership::Impl::HandlePingReq(const Address& from, const Message& m) {
  if (m.target_id == self_id_) {  // asked to probe ourselves: answer directly
    SendAck(from, m.seq, self_id_);
    return;
  }
  const std::uint64_t seq = ++seq_;
  relays_[seq] = Relay{from, m.seq, m.target_id};
  SendPing(m.target_address, seq, m.target_id);
  Schedule(opt_.heartbeat_ms, [this, seq] { relays_.erase(seq); });
}

void Membership::Impl::SendRejoin() {
  std::set<Address> live;
  for (const auto& [id, e] : members_) {
    if (IsLive(e.m.state)) live.insert(e.m.address);
  }
  std::set<Address> candidates;
  for (const auto& s : opt_.seeds) candidates.insert(s);
  for (const auto& [id, e] : members_) {
    if (e.m.state == MemberState::kDead) candidates.insert(e.m.address);
  }
  std::vector<Address> list;
  for (const auto& a : candidates) {
    if (!live.count(a) && a != self().address) list.push_back(a);
  }
  if (list.empty()) return;
  SendJoin(list[rejoin_index_++ % list.size()]);
}

// ---- sending ----

void Membership::Impl::SendPing(const Address& to, std::uint64_t seq, const NodeId& target) {
  Message m;
  m.type = MembershipMessage::kPing;
  m.seq = seq;
  m.target_id = target;
  ++stats_.pings_sent;
  SendTo(to, std::move(m));
}

void Membership::Impl::SendAck(const Address& to, std::uint64_t seq, const NodeId& about) {
  Message m;
  m.type = MembershipMessage::kAck;
  m.seq = seq;
  m.target_id = about;
  SendTo(to, std::move(m));
}

void Membership::Impl::SendJoin(const Address& to) {
  Message m;
  m.type = MembershipMessage::kJoin;
  ++stats_.joins_sent;
  SendTo(to, std::move(m));
}

void Membership::Impl::SendJoinAck(const Address& to) {
  Message m;
  m.type = MembershipMessage::kJoinAck;
  std::size_t bytes = 0;
  for (const auto& [id, e] : members_) {
    if (id == self_id_) continue;
    bytes += RecordBytes(e.m);
    if (m.members.size() >= membership::kMaxMembers || bytes > kJoinAckBudget) break;
    m.members.push_back(e.m);
  }
  SendTo(to, std::move(m));
}

void Membership::Impl::SendTo(const Address& to, Message m) {
  m.cluster_name = opt_.cluster_name;
  m.sender = self();
  m.gossip = BuildGossip(to);
  env_.Send(to, static_cast<std::uint8_t>(m.type), membership::EncodeMessage(m));
}

// The recipient's own record first when we hold it as not Alive (so it can
// refute even after that record stopped being retransmitted), then the most
// recently changed records that still have retransmissions left.
std::vector<Member> Membership::Impl::BuildGossip(const Address& to) {
  std::vector<Member> out;
  std::set<NodeId> taken;
  for (const auto& [id, e] : members_) {
    if (id != self_id_ && e.m.address == to && e.m.state != MemberState::kAlive &&
        out.size() < opt_.max_gossip) {
      out.push_back(e.m);
      taken.insert(id);
    }
  }
  std::vector<Entry*> fresh;
  for (auto& [id, e] : members_) {
    if (id != self_id_ && e.retransmit > 0 && !taken.count(id)) fresh.push_back(&e);
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const Entry* a, const Entry* b) { return a->change > b->change; });
  for (Entry* e : fresh) {
    if (out.size() >= opt_.max_gossip) break;
    out.push_back(e->m);
    --e->retransmit;
  }
  return out;
}

}  // namespace pynenc_cpp::cluster
