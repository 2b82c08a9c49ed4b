// SWIM membership: the entry points (start, leave, frames, queries), the member
// table and its merge rules, suspicion and its timers. The protocol period and the
// messages sent: membership_probe.cc; the class: membership_impl.h. See
// membership.h for the contract and docs/cluster/membership.md for the protocol.
#include "pynenc_cpp/cluster/membership.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "cluster/membership/membership_impl.h"

namespace pynenc_cpp::cluster {
namespace {

// SWIM precedence (types.h): a higher incarnation wins; at equal incarnation
// Left > Dead > Suspect > Alive (the enum values are in that order).
bool Overrides(const Member& incoming, const Member& current) {
  if (incoming.incarnation != current.incarnation)
    return incoming.incarnation > current.incarnation;
  return static_cast<int>(incoming.state) > static_cast<int>(current.state);
}

int CeilLog2(std::size_t n) {
  int r = 0;
  while ((std::size_t{1} << r) < n) ++r;
  return r;
}

}  // namespace

Membership::Impl::Impl(Env& env, MembershipOptions options,
                       std::function<void(const MemberEvent&)> on_event)
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

Membership::Impl::~Impl() {
  for (auto id : timers_) env_.Cancel(id);
}

void Membership::Impl::Start() {
  if (started_ || left_) return;
  started_ = true;
  for (const auto& seed : opt_.seeds) {
    if (seed != self().address) SendJoin(seed);
  }
  Schedule(opt_.heartbeat_ms, [this] { Tick(); });
  Schedule(opt_.rejoin_interval_ms, [this] { RejoinTick(); });
}

void Membership::Impl::Leave() {
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

void Membership::Impl::OnFrame(const Address& from, std::uint8_t type, std::string_view payload) {
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

std::vector<Member> Membership::Impl::Members() const {
  std::vector<Member> out;
  for (const auto& [id, e] : members_) out.push_back(e.m);
  return out;  // std::map: sorted by id
}

std::vector<Member> Membership::Impl::LiveMembers() const {
  std::vector<Member> out;
  for (const auto& [id, e] : members_) {
    if (IsLive(e.m.state)) out.push_back(e.m);
  }
  return out;
}

std::optional<std::int64_t> Membership::Impl::LastHeardMs(const NodeId& id) const {
  auto it = last_heard_.find(id);
  if (it == last_heard_.end()) return std::nullopt;
  return it->second;
}

void Membership::Impl::NoteHeard(const Address& from) {
  if (left_) return;
  const NodeId* match = nullptr;
  for (const auto& [id, e] : members_) {
    if (id == self_id_ || e.m.address != from || !IsLive(e.m.state)) continue;
    if (match) return;  // ambiguous: a restarted node may share the address
    match = &id;
  }
  if (match) last_heard_[*match] = env_.NowMs();
}

// Runs `fn` after `delay_ms` on the loop, then delivers queued events. The
// timer is cancelled by the destructor and by Leave().
void Membership::Impl::Schedule(std::int64_t delay_ms, std::function<void()> fn) {
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
void Membership::Impl::NoteLateness(std::int64_t late_ms) {
  if (late_ms <= opt_.heartbeat_ms) return;
  grace_until_ = env_.NowMs() + opt_.heartbeat_ms;
  env_.Log(LogLevel::kInfo, "membership: loop stalled " + std::to_string(late_ms) +
                                " ms; suspicion paused for one period");
}

void Membership::Impl::Flush() {
  while (!pending_.empty()) {
    auto events = std::move(pending_);
    pending_.clear();
    for (const auto& ev : events) {
      if (on_event_) on_event_(ev);
    }
  }
}

void Membership::Impl::MarkChanged(Entry& e) {
  e.since = env_.NowMs();
  e.change = ++change_counter_;
  e.retransmit =
      static_cast<std::uint32_t>(opt_.gossip_lambda * std::max(1, CeilLog2(members_.size() + 1)));
}

void Membership::Impl::Refute(std::uint64_t heard_incarnation) {
  Entry& e = members_.at(self_id_);
  e.m.incarnation = std::max(e.m.incarnation, heard_incarnation) + 1;
  e.m.state = MemberState::kAlive;
  MarkChanged(e);
  ++stats_.refutations;
  if (on_incarnation_) on_incarnation_(e.m.incarnation);
}

// Applies one record learned from the network or decided locally.
void Membership::Impl::Merge(const Member& r) {
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

void Membership::Impl::Transition(MemberState old, const Entry& e) {
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
std::int64_t Membership::Impl::DeadAt(const NodeId& id, const Entry& e) const {
  std::int64_t heard = e.known_since;
  auto it = last_heard_.find(id);
  if (it != last_heard_.end()) heard = std::max(heard, it->second);
  return std::max(heard + opt_.suspect_timeout_ms, e.since + opt_.refute_window_ms);
}

// Makes sure CheckSuspects runs at `at` (or earlier). One timer is tracked:
// a later one superseded by an earlier request still fires, harmlessly.
void Membership::Impl::ArmSuspectCheck(std::int64_t at) {
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
void Membership::Impl::CheckSuspects() {
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

void Membership::Impl::ExpireTombstones() {
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

std::size_t Membership::Impl::OtherLive() const {
  std::size_t n = 0;
  for (const auto& [id, e] : members_) n += (id != self_id_ && IsLive(e.m.state)) ? 1 : 0;
  return n;
}

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
