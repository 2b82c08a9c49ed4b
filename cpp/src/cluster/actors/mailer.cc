#include "cluster/actors/mailer.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <algorithm>
#include <random>
#include <utility>

namespace pynenc_cpp::cluster {

using coord_wire::LabelAck;
using coord_wire::LabelEnvelope;
using coord_wire::PathMessage;

Mailer::Mailer(Env& env, Router& router, Host& host, Inbox* inbox, MailerOptions options)
    : env_(env), router_(router), host_(host), inbox_(inbox), options_(std::move(options)) {
  if (options_.sender_epoch == 0) {
    std::random_device rd;
    options_.sender_epoch = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ env_.Random();
    if (options_.sender_epoch == 0) options_.sender_epoch = 1;
  }
  options_.window = std::max<std::size_t>(1, options_.window);
}

Mailer::~Mailer() {
  *alive_ = false;
  for (auto& [label, ob] : outboxes_) {
    if (ob.timer) env_.Cancel(*ob.timer);
  }
}

Result<std::uint64_t> Mailer::Enqueue(const std::string& label, std::string payload) {
  MutexLock lock(mu_);
  std::size_t& count = counts_[label];
  if (count >= options_.buffer_limit) {
    ++stats_.label_overflowed;
    return Status::ResourceExhausted("buffer for '" + label + "' is full (" +
                                     std::to_string(count) + " messages waiting)");
  }
  ++count;
  const std::uint64_t seq = ++next_seq_[label];
  staged_[label].push_back(Out{seq, std::move(payload), false, 0});
  return seq;
}

void Mailer::PumpAll() {
  std::vector<std::string> labels;
  {
    MutexLock lock(mu_);
    for (const auto& [label, v] : staged_) labels.push_back(label);
  }
  for (const auto& [label, ob] : outboxes_) labels.push_back(label);
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  for (const auto& label : labels) Pump(label);
}

void Mailer::Pump(const std::string& label) {
  Outbox& ob = outboxes_[label];
  {
    MutexLock lock(mu_);
    auto it = staged_.find(label);
    if (it != staged_.end()) {
      for (auto& out : it->second) ob.queue.push_back(std::move(out));
      staged_.erase(it);
    }
  }
  if (ob.queue.empty()) {
    if (ob.timer) env_.Cancel(*ob.timer);
    outboxes_.erase(label);
    return;
  }
  const std::int64_t now = env_.NowMs();
  auto where = router_.Lookup(label);
  const bool running = where && where->state == SpecState::kRunning && !where->owner_address.empty();
  if (running && ob.target != where->owner_address) {
    ob.target = where->owner_address;  // a new owner: all over again, from the oldest
    for (auto& out : ob.queue) out.sent = false;
    ob.probing = true;
    ob.hold_until = 0;  // a "not here" from the previous owner says nothing of this one
  }
  if (!running || now < ob.hold_until) {
    // No owner yet (or it just said "not here"): everything waits, in order.
    for (auto& out : ob.queue) out.sent = false;
    ob.probing = true;
    return Arm(label, ob, running ? ob.hold_until : now + options_.retry_ms);
  }
  // The oldest in flight went unanswered too long: send everything again.
  const Out& oldest = ob.queue.front();
  if (oldest.sent && now - oldest.sent_at >= options_.resend_ms) {
    for (auto& out : ob.queue) out.sent = false;
    ob.probing = true;
  }
  std::size_t in_flight = 0;
  for (const auto& out : ob.queue) in_flight += out.sent ? 1 : 0;
  const std::size_t window = ob.probing ? 1 : options_.window;
  std::int64_t next_check = 0;
  for (auto& out : ob.queue) {
    if (out.sent) {
      next_check = next_check ? std::min(next_check, out.sent_at + options_.resend_ms)
                              : out.sent_at + options_.resend_ms;
      continue;
    }
    if (in_flight >= window) break;
    const bool resend = out.sent_at != 0;
    out.sent = true;
    out.sent_at = now;
    ++in_flight;
    next_check = next_check ? std::min(next_check, now + options_.resend_ms)
                            : now + options_.resend_ms;
    auto [type, payload] =
        coord_wire::Encode(LabelEnvelope{label, options_.sender_epoch, out.seq, out.payload});
    env_.Send(*ob.target, type, std::move(payload));
    MutexLock lock(mu_);
    ++stats_.label_sent;
    if (resend) ++stats_.label_resent;
  }
  if (next_check) Arm(label, ob, next_check);
}

void Mailer::Arm(const std::string& label, Outbox& ob, std::int64_t at) {
  if (ob.timer && ob.timer_at <= at) return;  // an earlier check is already due
  if (ob.timer) env_.Cancel(*ob.timer);
  ob.timer_at = at;
  std::weak_ptr<bool> alive = alive_;
  ob.timer = env_.After(std::max<std::int64_t>(0, at - env_.NowMs()), [this, alive, label] {
    if (!alive.lock()) return;
    auto it = outboxes_.find(label);
    if (it != outboxes_.end()) it->second.timer.reset();
    Pump(label);
  });
}

void Mailer::OnAck(const LabelAck& a) {
  if (a.sender_epoch != options_.sender_epoch) return;  // for an earlier process
  auto it = outboxes_.find(a.label);
  if (it == outboxes_.end()) return;
  Outbox& ob = it->second;
  auto out = std::find_if(ob.queue.begin(), ob.queue.end(),
                          [&](const Out& o) { return o.seq == a.seq; });
  if (out == ob.queue.end()) return;  // answered before (a re-send's second answer)
  if (a.outcome == LabelOutcome::kNotHere) {
    // The owner is not (or no longer) running it: all again, in order, a bit later.
    for (auto& o : ob.queue) o.sent = false;
    ob.probing = true;
    ob.hold_until = env_.NowMs() + options_.retry_ms;
    return Arm(a.label, ob, ob.hold_until);
  }
  ob.queue.erase(out);
  ob.probing = false;  // this owner answers: pipeline
  {
    MutexLock lock(mu_);
    ++stats_.label_acked;
    std::size_t& count = counts_[a.label];
    if (count > 0) --count;
  }
  Pump(a.label);
}

void Mailer::Reply(const Address& to, const LabelEnvelope& e, LabelOutcome outcome) {
  auto [type, payload] = coord_wire::Encode(LabelAck{e.label, e.sender_epoch, e.seq, outcome});
  env_.Send(to, type, std::move(payload));
}

void Mailer::OnEnvelope(const Address& from, const LabelEnvelope& e) {
  const std::optional<Generation> gen = host_.ActiveGeneration(e.label);
  if (!gen || !inbox_) return Reply(from, e, LabelOutcome::kNotHere);
  // A new instance is a new conversation; a re-grant (same instance, higher
  // generation) is not: what it was handed stays handed.
  const Generation instance = *host_.StartedGeneration(e.label);
  Peer& peer = peers_[{e.label, from, e.sender_epoch}];
  if (peer.instance != instance) peer = Peer{instance, 0, 0};
  if (peer.processed != 0 && e.seq <= peer.processed) {
    MutexLock lock(mu_);
    ++stats_.label_duplicates;
    return Reply(from, e, LabelOutcome::kDuplicate);
  }
  if (peer.handed != 0 && e.seq <= peer.handed) return;  // in the inbox: its answer will come
  if (peer.handed != 0 && e.seq != peer.handed + 1) {
    return Reply(from, e, LabelOutcome::kNotHere);  // a gap: make the sender re-send in order
  }
  const std::uint64_t token = next_token_++;
  InboxItem item;
  item.kind = InboxItem::Kind::kLabel;
  item.label = e.label;
  item.generation = *gen;
  item.payload = e.payload;
  item.token = token;
  if (!inbox_->Push(std::move(item))) return Reply(from, e, LabelOutcome::kNotHere);
  peer.handed = e.seq;
  tokens_[token] = Token{e.label, from, e.sender_epoch, e.seq};
}

void Mailer::AckToken(std::uint64_t token, LabelOutcome outcome) {
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return;
  const Token t = std::move(it->second);
  tokens_.erase(it);
  auto peer = peers_.find({t.label, t.from, t.epoch});
  if (peer != peers_.end()) {
    if (outcome == LabelOutcome::kNotHere) {
      // Not handled (the instance had gone): forget it was handed, so the re-send goes in.
      peer->second.handed = std::min(peer->second.handed, t.seq - 1);
    } else if (t.seq > peer->second.processed) {
      peer->second.processed = t.seq;
    }
  }
  auto [type, payload] = coord_wire::Encode(LabelAck{t.label, t.epoch, t.seq, outcome});
  env_.Send(t.from, type, std::move(payload));
}

void Mailer::SendPath(const Address& to, const std::string& path, std::string payload) {
  {
    MutexLock lock(mu_);
    ++stats_.path_sent;
  }
  auto [type, bytes] = coord_wire::Encode(PathMessage{path, std::move(payload)});
  env_.Send(to, type, std::move(bytes));
}

void Mailer::OnPath(const PathMessage& m) {
  InboxItem item;
  item.kind = InboxItem::Kind::kPath;
  item.label = m.path;
  item.payload = m.payload;
  if (!inbox_ || !inbox_->Push(std::move(item))) {
    MutexLock lock(mu_);
    ++stats_.path_dropped;
  }
}

void Mailer::AfterEvent() {
  if (router_.directory_updates() == directory_seen_) return;
  directory_seen_ = router_.directory_updates();
  // Owners may have changed: pump every label with messages waiting.
  std::vector<std::string> labels;
  for (const auto& [label, ob] : outboxes_) labels.push_back(label);
  for (const auto& label : labels) Pump(label);
}

ActorMailStats Mailer::Stats() const {
  MutexLock lock(mu_);
  ActorMailStats s = stats_;
  for (const auto& [label, n] : counts_) {
    if (n) s.buffered[label] = n;
  }
  if (inbox_) s.inbox_overflowed = inbox_->overflowed();
  return s;
}

}  // namespace pynenc_cpp::cluster
