#include "pynenc_cpp/cluster/lease.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cluster/lease/lease_codec.h"

namespace pynenc_cpp::cluster {

namespace {
// Outstanding request rounds kept for late grants; older ones are forgotten (a
// grant that late would give a lease that already ran out or nearly so).
constexpr std::size_t kMaxRounds = 16;
}  // namespace

Lease::Lease(Env& env, LeaseOptions options, ExtendFn on_extend)
    : env_(env), options_(std::move(options)), on_extend_(std::move(on_extend)) {
  if (options_.margin_ms <= 0)
    options_.margin_ms = std::max<std::int64_t>(1, options_.lease_ms / 100);
}

Lease::~Lease() {
  if (timer_) env_.Cancel(*timer_);
}

void Lease::Start() {
  grants_from_ms_ = env_.NowMs() + options_.lease_ms;
  requesting_ = true;
  Arm();
}

void Lease::StopRequesting() {
  requesting_ = false;
  rounds_.clear();
}

void Lease::Release() {
  StopRequesting();
  released_ = true;
  lease_until_ms_ = 0;
  if (promise_.holder == options_.self_id) promise_ = {};
  auto [type, payload] = lease_wire::Encode(lease_wire::Release{options_.self_id});
  for (const auto& peer : view_.peers) env_.Send(peer, type, payload);
}

void Lease::Arm() {
  if (timer_) env_.Cancel(*timer_);
  timer_ = env_.After(options_.heartbeat_ms, [this] {
    timer_.reset();
    if (!requesting_) return;
    if (SelfElected()) RequestRound();
    Arm();
  });
}

bool Lease::SelfElected() const { return view_.elected && view_.elected->id == options_.self_id; }

void Lease::SetView(LeaseView view) {
  const bool was_elected = SelfElected();
  view_ = std::move(view);
  if (!SelfElected()) {
    rounds_.clear();  // grants for an old candidacy no longer count
    return;
  }
  // Newly elected: ask at once rather than at the next period.
  if (!was_elected && requesting_) {
    RequestRound();
    Arm();
  }
}

bool Lease::MayGrant(const NodeId& candidate, const Address& from) const {
  const std::int64_t now = env_.NowMs();
  if (now < grants_from_ms_) return false;  // a promise from before a restart may be live
  if (!view_.elected || view_.elected->id != candidate) return false;
  if (candidate != options_.self_id && view_.elected->address != from) return false;
  return now >= promise_.until_ms || promise_.holder == candidate;
}

void Lease::RequestRound() {
  if (released_) return;
  const std::uint64_t seq = next_seq_++;
  const std::int64_t now = env_.NowMs();
  rounds_[seq].sent_ms = now;
  while (rounds_.size() > kMaxRounds) rounds_.erase(rounds_.begin());
  auto [type, payload] =
      lease_wire::Encode(lease_wire::Request{seq, view_.epoch, options_.self_id});
  for (const auto& peer : view_.peers) {
    env_.Send(peer, type, payload);
    ++stats_.requests_sent;
  }
  // Self-grant under the same rule as any peer.
  if (MayGrant(options_.self_id, env_.LocalAddress())) {
    promise_ = {options_.self_id, std::max(promise_.until_ms, now + options_.lease_ms)};
    ++stats_.grants_given;
    OnGrant(seq, options_.self_id);
  } else {
    ++stats_.grants_refused;
  }
}

void Lease::OnGrant(std::uint64_t seq, const NodeId& grantor) {
  auto it = rounds_.find(seq);
  if (it == rounds_.end() || released_) return;
  it->second.grantors.insert(grantor);
  if (static_cast<int>(it->second.grantors.size()) < std::max(1, view_.quorum)) return;
  const std::int64_t until = it->second.sent_ms + options_.lease_ms - options_.margin_ms;
  // This round and every older one are settled (older ones give no later expiry).
  rounds_.erase(rounds_.begin(), std::next(it));
  if (until <= lease_until_ms_) return;  // renewals only extend
  if (on_extend_) on_extend_(until);
  lease_until_ms_ = until;
  ++stats_.extensions;
}

void Lease::OnFrame(const Address& from, std::uint8_t type, std::string_view payload) {
  auto decoded = lease_wire::Decode(type, payload);
  if (!decoded.ok()) {
    ++stats_.malformed;
    return;
  }
  const auto& msg = decoded.value();
  if (auto* req = std::get_if<lease_wire::Request>(&msg)) {
    if (req->candidate == options_.self_id) return;  // our own id from elsewhere: ignore
    const bool granted = MayGrant(req->candidate, from);
    if (granted) {
      promise_ = {req->candidate,
                  std::max(promise_.holder == req->candidate ? promise_.until_ms : 0,
                           env_.NowMs() + options_.lease_ms)};
      ++stats_.grants_given;
    } else {
      ++stats_.grants_refused;
    }
    auto [t, p] = lease_wire::Encode(lease_wire::Grant{req->seq, granted, options_.self_id});
    env_.Send(from, t, std::move(p));
  } else if (auto* grant = std::get_if<lease_wire::Grant>(&msg)) {
    if (grant->granted && grant->grantor != options_.self_id && SelfElected()) {
      OnGrant(grant->seq, grant->grantor);
    }
  } else if (auto* rel = std::get_if<lease_wire::Release>(&msg)) {
    if (promise_.holder == rel->holder && rel->holder != options_.self_id) promise_ = {};
  }
}

}  // namespace pynenc_cpp::cluster
