#include "cluster/singletons/owner_leases.h"

#include <algorithm>
#include <utility>

namespace pynenc_cpp::cluster {

namespace {
constexpr std::size_t kMaxRounds = 16;  // older rounds' grants would give expired leases
}  // namespace

using coord_wire::LeaseClaim;

OwnerLeases::OwnerLeases(Env& env, OwnerLeaseOptions options, ExtendFn on_extend)
    : env_(env), options_(std::move(options)), on_extend_(std::move(on_extend)) {
  if (options_.margin_ms <= 0)
    options_.margin_ms = std::max<std::int64_t>(1, options_.lease_ms / 100);
}

OwnerLeases::~OwnerLeases() {
  if (timer_) env_.Cancel(*timer_);
  if (soon_timer_) env_.Cancel(*soon_timer_);
}

void OwnerLeases::Start() {
  if (started_) return;
  started_ = true;
  grants_from_ms_ = env_.NowMs() + options_.lease_ms;
  Arm();
}

void OwnerLeases::Arm() {
  if (timer_) env_.Cancel(*timer_);
  // While a wanted label has no lease yet (its previous holder's promises are
  // running out, or its release is on the way), ask four times per heartbeat: a
  // hand-over then waits a quarter period, not a whole one, after the release.
  const std::int64_t now = env_.NowMs();
  bool acquiring = false;
  for (const auto& [label, want] : wanted_) acquiring = acquiring || want.until_ms <= now;
  const std::int64_t period =
      acquiring ? std::max<std::int64_t>(1, options_.heartbeat_ms / 4) : options_.heartbeat_ms;
  timer_ = env_.After(period, [this] {
    timer_.reset();
    RequestRound();
    Arm();
  });
}

void OwnerLeases::SetView(const std::vector<Member>& live, int quorum) {
  live_.clear();
  peers_.clear();
  for (const auto& m : live) {
    live_[m.id] = m.address;
    if (m.id != options_.self_id) peers_.push_back(m.address);
  }
  quorum_ = std::max(1, quorum);
}

void OwnerLeases::Acquire(const std::string& label, Generation generation) {
  auto [it, inserted] = wanted_.try_emplace(label);
  if (!inserted && generation < it->second.generation) return;
  const bool changed = inserted || generation != it->second.generation;
  it->second.generation = generation;
  if (!changed || !started_) return;
  // Ask soon rather than at the next period (one extra round per event at most).
  if (!round_soon_) {
    round_soon_ = true;
    soon_timer_ = env_.After(0, [this] {
      soon_timer_.reset();
      round_soon_ = false;
      RequestRound();
      Arm();  // at the acquiring pace from now on
    });
  }
}

void OwnerLeases::SetStopping(const std::string& label) {
  auto it = wanted_.find(label);
  if (it != wanted_.end()) it->second.stopping = true;
}

void OwnerLeases::Drop(const std::string& label, bool release) {
  auto it = wanted_.find(label);
  if (it == wanted_.end()) return;
  const Generation gen = it->second.generation;
  wanted_.erase(it);
  for (auto& [seq, round] : rounds_) round.grants.erase(label);
  if (!release) return;
  auto slot = slots_.find(label);
  if (slot != slots_.end() && slot->second.holder == options_.self_id) slots_.erase(slot);
  // Sent even when this node's own lease already ran out: a peer's promise
  // (counted from when it received the request) outlives it by the margin.
  auto [type, payload] =
      coord_wire::Encode(coord_wire::LeaseRelease{options_.self_id, {{label, gen}}});
  for (const auto& peer : peers_) env_.Send(peer, type, payload);
}

std::int64_t OwnerLeases::Until(const std::string& label) const {
  auto it = wanted_.find(label);
  return it == wanted_.end() ? 0 : it->second.until_ms;
}

std::optional<OwnerLeases::Slot> OwnerLeases::SlotFor(const std::string& label) const {
  auto it = slots_.find(label);
  if (it == slots_.end()) return std::nullopt;
  return it->second;
}

Generation OwnerLeases::HighestSeen(const std::string& label) const {
  auto it = highest_.find(label);
  return it == highest_.end() ? Generation{} : it->second;
}

bool OwnerLeases::MayGrant(const NodeId& candidate, const Address& from, const LeaseClaim& c) {
  const std::int64_t now = env_.NowMs();
  Generation& highest = highest_[c.label];
  const bool current = c.generation >= highest;
  if (c.generation > highest) highest = c.generation;
  if (now < grants_from_ms_) return false;
  auto live = live_.find(candidate);
  if (live == live_.end()) return false;
  if (candidate != options_.self_id && live->second != from) return false;
  auto it = slots_.find(c.label);
  const bool held = it != slots_.end() && now < it->second.until_ms;
  if (!held) return current;
  if (it->second.holder != candidate) return false;
  return current || c.stopping;
}

void OwnerLeases::Grant(const NodeId& candidate, const LeaseClaim& c) {
  const std::int64_t now = env_.NowMs();
  Slot& slot = slots_[c.label];
  if (slot.holder != candidate) {
    slot = Slot{candidate, c.generation, now + options_.lease_ms};
  } else {
    slot.generation = std::max(slot.generation, c.generation);
    slot.until_ms = std::max(slot.until_ms, now + options_.lease_ms);
  }
  ++stats_.grants_given;
}

void OwnerLeases::RequestRound() {
  if (wanted_.empty() || !started_) return;
  const std::uint64_t seq = next_round_++;
  const std::int64_t now = env_.NowMs();
  Round& round = rounds_[seq];
  round.sent_ms = now;
  while (rounds_.size() > kMaxRounds) rounds_.erase(rounds_.begin());
  coord_wire::LeaseRequest req;
  req.round = seq;
  req.candidate = options_.self_id;
  for (const auto& [label, want] : wanted_) {
    req.claims.push_back({label, want.generation, want.stopping});
    round.grants[label].first = want.generation;
  }
  ++stats_.rounds;
  auto [type, payload] = coord_wire::Encode(req);
  for (const auto& peer : peers_) env_.Send(peer, type, payload);
  // Self-grant under the same rule as any peer.
  for (const auto& c : req.claims) {
    if (MayGrant(options_.self_id, env_.LocalAddress(), c)) {
      Grant(options_.self_id, c);
      OnGrant(seq, c.label, options_.self_id);
    } else {
      ++stats_.grants_refused;
    }
  }
}

void OwnerLeases::OnGrant(std::uint64_t seq, const std::string& label, const NodeId& grantor) {
  auto rit = rounds_.find(seq);
  if (rit == rounds_.end()) return;
  auto lit = rit->second.grants.find(label);
  auto want = wanted_.find(label);
  if (lit == rit->second.grants.end() || want == wanted_.end()) return;
  // A grant for an older generation of the label does not count for a newer one.
  if (lit->second.first != want->second.generation) return;
  lit->second.second.insert(grantor);
  if (static_cast<int>(lit->second.second.size()) < quorum_) return;
  const std::int64_t until = rit->second.sent_ms + options_.lease_ms - options_.margin_ms;
  rit->second.grants.erase(lit);  // settled; later grants of this round add nothing
  if (until <= want->second.until_ms) return;  // renewals only extend
  if (on_extend_) on_extend_(label, until);
  want->second.until_ms = until;
  ++stats_.extensions;
}

void OwnerLeases::OnRequest(const Address& from, const coord_wire::LeaseRequest& request) {
  if (request.candidate == options_.self_id) return;  // our own id from elsewhere
  coord_wire::LeaseReply reply;
  reply.round = request.round;
  reply.grantor = options_.self_id;
  for (const auto& c : request.claims) {
    const bool granted = MayGrant(request.candidate, from, c);
    if (granted) {
      Grant(request.candidate, c);
    } else {
      ++stats_.grants_refused;
    }
    reply.answers.push_back({c.label, granted});
  }
  auto [type, payload] = coord_wire::Encode(reply);
  env_.Send(from, type, std::move(payload));
}

void OwnerLeases::OnReply(const coord_wire::LeaseReply& reply) {
  if (reply.grantor == options_.self_id) return;
  for (const auto& a : reply.answers) {
    if (a.granted) OnGrant(reply.round, a.label, reply.grantor);
  }
}

void OwnerLeases::OnRelease(const coord_wire::LeaseRelease& release) {
  if (release.holder == options_.self_id) return;
  for (const auto& [label, gen] : release.labels) {
    auto it = slots_.find(label);
    if (it != slots_.end() && it->second.holder == release.holder && it->second.generation <= gen) {
      slots_.erase(it);
    }
  }
}

}  // namespace pynenc_cpp::cluster
