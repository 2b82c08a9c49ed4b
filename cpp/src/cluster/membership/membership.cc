// SWIM membership: probing, suspicion, refutation, gossip, join and rejoin.
// See membership.h for the contract and docs/cluster/membership.md for the
// protocol.
#include "pynenc_cpp/cluster/membership.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "cluster/membership/messages.h"

namespace pynenc_cpp::cluster {

using membership::Message;

namespace {

// SWIM precedence (types.h): a higher incarnation wins; at equal incarnation
// Left > Dead > Suspect > Alive (the enum values are in that order).
bool Overrides(const Member& incoming, const Member& current) {
  if (incoming.incarnation != current.incarnation)
    return incoming.incarnation > current.incarnation;
  return static_cast<int>(incoming.state) > static_cast<int>(current.state);
}

// JoinAck stays well under the transport's default 256 KiB frame limit; records
// beyond it are learned through gossip instead.
constexpr std::size_t kJoinAckBudget = 128 * 1024;

std::size_t RecordBytes(const Member& m) {
  std::size_t n = 37 + m.id.size() + m.address.size() + m.node_class.size();
  for (const auto& [k, v] : m.metadata) n += 8 + k.size() + v.size();
  return n;
}

int CeilLog2(std::size_t n) {
  int r = 0;
  while ((std::size_t{1} << r) < n) ++r;
  return r;
}

}  // namespace

class Membership::Impl {
 public:
  Impl(Env& env, MembershipOptions options, std::function<void(const MemberEvent&)> on_event)
      : env_(env), opt_(std::move(options)), on_event_(std::move(on_event)) {
    if (opt_.heartbeat_ms <= 0) opt_.heartbeat_ms = 200;
    if (opt_.ping_timeout_ms <= 0)
      opt_.ping_timeout_ms = std::max<std::int64_t>(1, opt_.heartbeat_ms / 2);
    if (opt_.rejoin_interval_ms <= 0) opt_.rejoin_interval_ms = 5 * opt_.heartbeat_ms;
    if (opt_.suspect_timeout_ms <= 0) opt_.suspect_timeout_ms = 5 * opt_.heartbeat_ms;
    if (opt_.refute_window_ms <= 0)
      opt_.refute_window_ms = std::max(opt_.ping_timeout_ms, opt_.suspect_timeout_ms / 3);
    if (opt_.max_gossip > membership::kMaxGossip) opt_.max_gossip = membership::kMaxGossip;
    if (opt_.gossip_lambda < 1) opt_.gossip_lambda = 1;
    opt_.self.state = MemberState::kAlive;
    self_id_ = opt_.self.id;
    Entry e;
    e.m = opt_.self;
    e.since = env_.NowMs();
    e.known_since = e.since;
    members_.emplace(self_id_, std::move(e));
  }

  ~Impl() {
    for (auto id : timers_) env_.Cancel(id);
  }

  void Start() {
    if (started_ || left_) return;
    started_ = true;
    for (const auto& seed : opt_.seeds) {
      if (seed != self().address) SendJoin(seed);
    }
    Schedule(opt_.heartbeat_ms, [this] { Tick(); });
    Schedule(opt_.rejoin_interval_ms, [this] { RejoinTick(); });
  }

  void Leave() {
    if (left_) return;
    left_ = true;
    Member& me = self();
    me.incarnation += 1;
    me.state = MemberState::kLeft;
    if (on_incarnation_) on_incarnation_(me.incarnation);
    for (const auto& [id, e] : members_) {
      if (id != self_id_ && IsLive(e.m.state)) {
        Message m;
        m.type = MembershipMessage::kGossip;
        SendTo(e.m.address, std::move(m));
      }
    }
    for (auto id : timers_) env_.Cancel(id);
    timers_.clear();
    probe_ = Probe{};
  }

  void OnFrame(const Address& from, std::uint8_t type, std::string_view payload) {
    if (!IsMembershipType(type) || left_) return;
    auto decoded = membership::DecodeMessage(type, payload);
    if (!decoded.ok()) {
      ++stats_.messages_rejected;
      env_.Log(LogLevel::kDebug,
               "membership: dropped frame from " + from + ": " + decoded.status().message());
      return;
    }
    Message m = std::move(decoded).value();
    if (m.cluster_name != opt_.cluster_name) {
      ++stats_.foreign_cluster;
      env_.Log(LogLevel::kWarning,
               "membership: ignored frame of cluster '" + m.cluster_name + "' from " + from);
      return;
    }
    if (m.sender.id == self_id_) {
      env_.Log(LogLevel::kWarning, "membership: frame from " + from + " claims our own id");
      return;
    }
    last_heard_[m.sender.id] = env_.NowMs();
    Merge(m.sender);
    for (const auto& g : m.gossip) Merge(g);
    switch (m.type) {
      case MembershipMessage::kPing:
        if (m.target_id.empty() || m.target_id == self_id_) SendAck(from, m.seq, self_id_);
        break;
      case MembershipMessage::kAck:
        HandleAck(m);
        break;
      case MembershipMessage::kPingReq:
        HandlePingReq(from, m);
        break;
      case MembershipMessage::kJoin:
        SendJoinAck(from);
        break;
      case MembershipMessage::kJoinAck:
        for (const auto& r : m.members) Merge(r);
        break;
      case MembershipMessage::kGossip:
        break;
    }
    Flush();
  }

  const Member& Self() const { return members_.at(self_id_).m; }

  std::vector<Member> Members() const {
    std::vector<Member> out;
    for (const auto& [id, e] : members_) out.push_back(e.m);
    return out;  // std::map: sorted by id
  }

  std::vector<Member> LiveMembers() const {
    std::vector<Member> out;
    for (const auto& [id, e] : members_) {
      if (IsLive(e.m.state)) out.push_back(e.m);
    }
    return out;
  }

  std::optional<std::int64_t> LastHeardMs(const NodeId& id) const {
    auto it = last_heard_.find(id);
    if (it == last_heard_.end()) return std::nullopt;
    return it->second;
  }

  void NoteHeard(const Address& from) {
    if (left_) return;
    const NodeId* match = nullptr;
    for (const auto& [id, e] : members_) {
      if (id == self_id_ || e.m.address != from || !IsLive(e.m.state)) continue;
      if (match) return;  // ambiguous: a restarted node may share the address
      match = &id;
    }
    if (match) last_heard_[*match] = env_.NowMs();
  }

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

  // Runs `fn` after `delay_ms` on the loop, then delivers queued events. The
  // timer is cancelled by the destructor and by Leave().
  void Schedule(std::int64_t delay_ms, std::function<void()> fn) {
    auto id = std::make_shared<Env::TimerId>(0);
    const std::int64_t due = env_.NowMs() + delay_ms;
    *id = env_.After(delay_ms, [this, id, due, fn = std::move(fn)] {
      timers_.erase(*id);
      NoteLateness(env_.NowMs() - due);
      fn();
      Flush();
    });
    timers_.insert(*id);
  }

  // A timer that fires more than a period late means this process was stalled
  // (SIGSTOP, swapped out, a blocked loop): the frames that arrived meanwhile
  // (acks, refutations) have not been processed yet, so for one period this node
  // neither suspects nor declares anyone dead on its own evidence.
  void NoteLateness(std::int64_t late_ms) {
    if (late_ms <= opt_.heartbeat_ms) return;
    grace_until_ = env_.NowMs() + opt_.heartbeat_ms;
    env_.Log(LogLevel::kInfo, "membership: loop stalled " + std::to_string(late_ms) +
                                  " ms; suspicion paused for one period");
  }
  bool InStallGrace() const { return env_.NowMs() < grace_until_; }

  // Events are queued while the tables change and delivered at the end of each
  // entry point, so a callback that calls back into us sees a consistent view.
  void Emit(MemberEventKind kind, const Member& m) { pending_.push_back(MemberEvent{kind, m}); }
  void Flush() {
    while (!pending_.empty()) {
      auto events = std::move(pending_);
      pending_.clear();
      for (const auto& ev : events) {
        if (on_event_) on_event_(ev);
      }
    }
  }

  void MarkChanged(Entry& e) {
    e.since = env_.NowMs();
    e.change = ++change_counter_;
    e.retransmit =
        static_cast<std::uint32_t>(opt_.gossip_lambda * std::max(1, CeilLog2(members_.size() + 1)));
  }

  void Refute(std::uint64_t heard_incarnation) {
    Entry& e = members_.at(self_id_);
    e.m.incarnation = std::max(e.m.incarnation, heard_incarnation) + 1;
    e.m.state = MemberState::kAlive;
    MarkChanged(e);
    ++stats_.refutations;
    if (on_incarnation_) on_incarnation_(e.m.incarnation);
  }

  // Applies one record learned from the network or decided locally.
  void Merge(const Member& r) {
    if (r.id == self_id_) {
      const Member& me = self();
      if (r.incarnation > me.incarnation ||
          (r.incarnation == me.incarnation && r.state != MemberState::kAlive)) {
        Refute(r.incarnation);
      }
      return;
    }
    auto it = members_.find(r.id);
    if (it == members_.end()) {
      Entry e;
      e.m = r;
      MarkChanged(e);
      e.known_since = e.since;
      auto& ins = members_.emplace(r.id, std::move(e)).first->second;
      if (IsLive(r.state)) Emit(MemberEventKind::kJoined, ins.m);
      if (r.state == MemberState::kSuspect) ArmSuspectCheck(DeadAt(r.id, ins));
      return;
    }
    Entry& e = it->second;
    if (!Overrides(r, e.m)) return;
    const MemberState old = e.m.state;
    e.m = r;
    MarkChanged(e);
    Transition(old, e);
  }

  void Transition(MemberState old, const Entry& e) {
    const Member& m = e.m;
    const MemberState now = m.state;
    if (!IsLive(old) && IsLive(now)) {
      Emit(MemberEventKind::kJoined, m);
    } else if (old == MemberState::kAlive && now == MemberState::kSuspect) {
      Emit(MemberEventKind::kSuspected, m);
    } else if (old == MemberState::kSuspect && now == MemberState::kAlive) {
      Emit(MemberEventKind::kAliveAgain, m);
    } else if (IsLive(old) && now == MemberState::kDead) {
      Emit(MemberEventKind::kDead, m);
    } else if (IsLive(old) && now == MemberState::kLeft) {
      Emit(MemberEventKind::kLeft, m);
    }
    if (now == MemberState::kSuspect) ArmSuspectCheck(DeadAt(m.id, e));
  }

  // When Suspect member `e` is declared Dead (membership.h MembershipOptions):
  // the suspect timeout counts from the last direct contact, but a suspicion
  // always lasts at least the refute window (the suspicion notice went out when
  // it started, so a live member has that long to refute).
  std::int64_t DeadAt(const NodeId& id, const Entry& e) const {
    std::int64_t heard = e.known_since;
    auto it = last_heard_.find(id);
    if (it != last_heard_.end()) heard = std::max(heard, it->second);
    return std::max(heard + opt_.suspect_timeout_ms, e.since + opt_.refute_window_ms);
  }

  // Makes sure CheckSuspects runs at `at` (or earlier). One timer is tracked:
  // a later one superseded by an earlier request still fires, harmlessly.
  void ArmSuspectCheck(std::int64_t at) {
    const std::int64_t now = env_.NowMs();
    if (next_check_ && *next_check_ >= now && *next_check_ <= at) return;
    next_check_ = at;
    Schedule(std::max<std::int64_t>(0, at - now), [this, at] {
      if (next_check_ == at) next_check_.reset();
      CheckSuspects();
    });
  }

  // Declares Dead every Suspect member whose DeadAt has come and re-arms the
  // check for the earliest one still pending (contact heard since the
  // suspicion may have moved its deadline later).
  void CheckSuspects() {
    if (InStallGrace()) return;  // the next Tick checks again
    const std::int64_t now = env_.NowMs();
    std::optional<std::int64_t> next;
    for (auto& [id, e] : members_) {
      if (id == self_id_ || e.m.state != MemberState::kSuspect) continue;
      const std::int64_t dead_at = DeadAt(id, e);
      if (now < dead_at) {
        next = next ? std::min(*next, dead_at) : dead_at;
        continue;
      }
      e.m.state = MemberState::kDead;
      MarkChanged(e);
      Emit(MemberEventKind::kDead, e.m);
    }
    if (next) ArmSuspectCheck(*next);
  }

  void ExpireTombstones() {
    const std::int64_t now = env_.NowMs();
    for (auto it = members_.begin(); it != members_.end();) {
      const Entry& e = it->second;
      if (it->first != self_id_ && !IsLive(e.m.state) && now - e.since >= opt_.dead_retention_ms) {
        last_heard_.erase(it->first);
        it = members_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::size_t OtherLive() const {
    std::size_t n = 0;
    for (const auto& [id, e] : members_) n += (id != self_id_ && IsLive(e.m.state)) ? 1 : 0;
    return n;
  }

  // ---- protocol period ----

  void Tick() {
    FinishProbe();
    CheckSuspects();
    ExpireTombstones();
    StartProbe();
    if (OtherLive() == 0) SendRejoin();
    Schedule(opt_.heartbeat_ms, [this] { Tick(); });
  }

  void RejoinTick() {
    SendRejoin();
    Schedule(opt_.rejoin_interval_ms, [this] { RejoinTick(); });
  }

  void FinishProbe() {
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

  void StartProbe() {
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

  void RebuildProbeOrder() {
    probe_order_.clear();
    for (const auto& [id, e] : members_) {
      if (id != self_id_ && IsLive(e.m.state)) probe_order_.push_back(id);
    }
    Shuffle(probe_order_);
    probe_index_ = 0;
  }

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[env_.Random() % i]);
    }
  }

  void SendPingReqs() {
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

  void HandleAck(const Message& m) {
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

  void HandlePingReq(const Address& from, const Message& m) {
    if (m.target_id == self_id_) {  // asked to probe ourselves: answer directly
      SendAck(from, m.seq, self_id_);
      return;
    }
    const std::uint64_t seq = ++seq_;
    relays_[seq] = Relay{from, m.seq, m.target_id};
    SendPing(m.target_address, seq, m.target_id);
    Schedule(opt_.heartbeat_ms, [this, seq] { relays_.erase(seq); });
  }

  void SendRejoin() {
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

  void SendPing(const Address& to, std::uint64_t seq, const NodeId& target) {
    Message m;
    m.type = MembershipMessage::kPing;
    m.seq = seq;
    m.target_id = target;
    ++stats_.pings_sent;
    SendTo(to, std::move(m));
  }

  void SendAck(const Address& to, std::uint64_t seq, const NodeId& about) {
    Message m;
    m.type = MembershipMessage::kAck;
    m.seq = seq;
    m.target_id = about;
    SendTo(to, std::move(m));
  }

  void SendJoin(const Address& to) {
    Message m;
    m.type = MembershipMessage::kJoin;
    ++stats_.joins_sent;
    SendTo(to, std::move(m));
  }

  void SendJoinAck(const Address& to) {
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

  void SendTo(const Address& to, Message m) {
    m.cluster_name = opt_.cluster_name;
    m.sender = self();
    m.gossip = BuildGossip(to);
    env_.Send(to, static_cast<std::uint8_t>(m.type), membership::EncodeMessage(m));
  }

  // The recipient's own record first when we hold it as not Alive (so it can
  // refute even after that record stopped being retransmitted), then the most
  // recently changed records that still have retransmissions left.
  std::vector<Member> BuildGossip(const Address& to) {
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

Membership::Membership(Env& env, MembershipOptions options,
                       std::function<void(const MemberEvent&)> on_event)
    : impl_(std::make_unique<Impl>(env, std::move(options), std::move(on_event))) {}
Membership::~Membership() = default;
void Membership::Start() { impl_->Start(); }
void Membership::Leave() { impl_->Leave(); }
void Membership::OnFrame(const Address& from, std::uint8_t type, std::string_view payload) {
  impl_->OnFrame(from, type, payload);
}
const Member& Membership::Self() const { return impl_->Self(); }
std::vector<Member> Membership::Members() const { return impl_->Members(); }
std::vector<Member> Membership::LiveMembers() const { return impl_->LiveMembers(); }
std::uint64_t Membership::Epoch() const { return ComputeEpoch(impl_->LiveMembers()); }
std::optional<std::int64_t> Membership::LastHeardMs(const NodeId& id) const {
  return impl_->LastHeardMs(id);
}
void Membership::NoteHeard(const Address& from) { impl_->NoteHeard(from); }
void Membership::SetOnIncarnation(std::function<void(std::uint64_t)> fn) {
  impl_->SetOnIncarnation(std::move(fn));
}
MembershipStats Membership::Stats() const { return impl_->Stats(); }

}  // namespace pynenc_cpp::cluster
