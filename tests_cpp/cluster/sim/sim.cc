#include "sim/sim.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace pynenc_cpp::cluster::sim {

namespace {

void Fnv(std::uint64_t& h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
}

void FnvU64(std::uint64_t& h, std::uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (56 - 8 * i));
  Fnv(h, b, 8);
}

void FnvStr(std::uint64_t& h, std::string_view s) {
  FnvU64(h, s.size());
  Fnv(h, s.data(), s.size());
}

std::pair<Address, Address> Normalize(const Address& a, const Address& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

}  // namespace

// ---- SimEnv ----

SimEnv::SimEnv(SimWorld& world, Address address, std::uint64_t seed, std::uint64_t generation)
    : world_(world), address_(std::move(address)), rng_(seed), generation_(generation) {}

std::int64_t SimEnv::NowMs() { return world_.now_; }
std::int64_t SimEnv::WallMs() { return SimWorld::kWallBaseMs + world_.now_; }
std::uint64_t SimEnv::Random() { return rng_(); }

Env::TimerId SimEnv::After(std::int64_t delay_ms, std::function<void()> fn) {
  return world_.AddTimer(this, delay_ms, std::move(fn));
}

void SimEnv::Cancel(TimerId id) { world_.CancelTimer(id); }

void SimEnv::Send(const Address& to, std::uint8_t type, std::string payload) {
  world_.SendFrame(this, to, type, std::move(payload));
}

void SimEnv::SetReceiver(Receiver receiver) { receiver_ = std::move(receiver); }

void SimEnv::Log(LogLevel level, std::string_view message) {
  if (world_.log_sink_) {
    world_.log_sink_(address_, level, message);
  } else if (std::getenv("PYNENC_CPP_SIM_LOG") != nullptr) {
    std::cerr << "[" << world_.now_ << " " << address_ << "] " << message << "\n";
  }
}

// ---- SimWorld ----

SimWorld::SimWorld(std::uint64_t seed) : rng_(seed ^ 0x9e3779b97f4a7c15ull) {}

SimWorld::~SimWorld() = default;

double SimWorld::Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

SimWorld::Node* SimWorld::Find(const Address& addr) {
  auto it = nodes_.find(addr);
  return it == nodes_.end() ? nullptr : &it->second;
}

SimEnv* SimWorld::EnvAt(const Address& addr) {
  Node* n = Find(addr);
  return n == nullptr ? nullptr : n->env;
}

Env& SimWorld::AddNode(const Address& addr) { return Revive(addr); }

Env& SimWorld::Revive(const Address& addr) {
  if (Find(addr) != nullptr) Crash(addr);
  Node& node = nodes_[addr];
  auto env = std::make_unique<SimEnv>(*this, addr, rng_(), envs_.size());
  node = Node{};
  node.env = env.get();
  envs_.push_back(std::move(env));
  return *node.env;
}

void SimWorld::Crash(const Address& addr) {
  Node* node = Find(addr);
  if (node == nullptr) return;
  node->crashed = true;
  node->paused = false;
  node->held_timers.clear();
  node->held_frames.clear();
  SimEnv* env = node->env;
  env->active_ = false;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->second.kind == Event::Kind::kTimer && it->second.env == env) {
      timer_keys_.erase(it->second.timer_id);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

void SimWorld::Pause(const Address& addr) {
  Node* node = Find(addr);
  if (node != nullptr && !node->crashed) node->paused = true;
}

bool SimWorld::Paused(const Address& addr) const {
  auto it = nodes_.find(addr);
  return it != nodes_.end() && it->second.paused;
}

void SimWorld::Resume(const Address& addr) {
  Node* node = Find(addr);
  if (node == nullptr || !node->paused) return;
  node->paused = false;
  SimEnv* env = node->env;
  std::vector<std::pair<Env::TimerId, std::function<void()>>> timers;
  timers.swap(node->held_timers);
  std::vector<Event> frames;
  frames.swap(node->held_frames);
  resuming_timers_ = &timers;
  for (std::size_t i = 0; i < timers.size(); ++i) {
    // A callback may crash or re-pause the node, or cancel a later held timer
    // (CancelTimer clears its fn).
    if (!env->active_) break;
    if (node->paused) {
      node->held_timers.push_back(std::move(timers[i]));
      continue;
    }
    if (!timers[i].second) continue;
    auto fn = std::move(timers[i].second);
    timers[i].second = nullptr;
    fn();
  }
  resuming_timers_ = nullptr;
  for (auto& ev : frames) {
    if (!env->active_) break;
    if (node->paused) {
      node->held_frames.push_back(std::move(ev));
      continue;
    }
    Deliver(ev);
  }
}

Env::TimerId SimWorld::AddTimer(SimEnv* env, std::int64_t delay_ms, std::function<void()> fn) {
  const Env::TimerId id = next_timer_++;
  if (!env->active_) return id;
  Key key{now_ + std::max<std::int64_t>(0, delay_ms), seq_++};
  Event ev{Event::Kind::kTimer};
  ev.env = env;
  ev.timer_id = id;
  ev.fn = std::move(fn);
  queue_.emplace(key, std::move(ev));
  timer_keys_.emplace(id, key);
  return id;
}

void SimWorld::CancelTimer(Env::TimerId id) {
  auto it = timer_keys_.find(id);
  if (it != timer_keys_.end()) {
    queue_.erase(it->second);
    timer_keys_.erase(it);
    return;
  }
  // A timer held by a paused node, or one that Resume is running through.
  auto clear_in = [id](std::vector<std::pair<Env::TimerId, std::function<void()>>>& v) {
    for (auto& held : v) {
      if (held.first == id) held.second = nullptr;
    }
  };
  for (auto& [addr, node] : nodes_) clear_in(node.held_timers);
  if (resuming_timers_ != nullptr) clear_in(*resuming_timers_);
}

bool SimWorld::LinkCut(const Address& a, const Address& b) const {
  return cuts_.count(Normalize(a, b)) > 0;
}

void SimWorld::SendFrame(SimEnv* from, const Address& to, std::uint8_t type, std::string payload) {
  Node* sender = Find(from->address_);
  if (!from->active_ || sender == nullptr || sender->paused || LinkCut(from->address_, to) ||
      Find(to) == nullptr) {
    ++dropped_;
    return;
  }
  const int copies = (faults_.duplicate > 0 && Uniform() < faults_.duplicate) ? 2 : 1;
  for (int c = 0; c < copies; ++c) {
    if (faults_.drop > 0 && Uniform() < faults_.drop) {
      ++dropped_;
      continue;
    }
    const std::int64_t lo = std::max<std::int64_t>(0, faults_.min_delay_ms);
    const std::int64_t hi = std::max(lo, faults_.max_delay_ms);
    std::int64_t delay =
        lo + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
    const bool reorder = faults_.reorder > 0 && Uniform() < faults_.reorder;
    if (reorder)
      delay += static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(2 * hi + 1));
    auto& last = last_arrival_[{from->address_, to}];
    std::int64_t at = now_ + delay;
    if (!reorder && faults_.reorder <= 0) at = std::max(at, last);  // FIFO link
    last = std::max(last, at);
    Event ev{Event::Kind::kFrame};
    ev.from = from->address_;
    ev.to = to;
    ev.type = type;
    ev.payload = payload;
    queue_.emplace(Key{at, seq_++}, std::move(ev));
  }
}

void SimWorld::Deliver(const Event& ev) {
  Node* node = Find(ev.to);
  if (node == nullptr || node->crashed || !node->env->active_) {
    ++dropped_;
    return;
  }
  ++delivered_;
  FnvU64(trace_hash_, static_cast<std::uint64_t>(now_));
  FnvStr(trace_hash_, ev.from);
  FnvStr(trace_hash_, ev.to);
  FnvU64(trace_hash_, ev.type);
  FnvStr(trace_hash_, ev.payload);
  if (node->env->receiver_) node->env->receiver_(ev.from, ev.type, ev.payload);
}

void SimWorld::Dispatch(Event ev) {
  if (ev.kind == Event::Kind::kTimer) {
    SimEnv* env = ev.env;
    if (!env->active_) return;
    Node* node = Find(env->address_);
    if (node != nullptr && node->paused) {
      node->held_timers.emplace_back(ev.timer_id, std::move(ev.fn));
      return;
    }
    ev.fn();
    return;
  }
  Node* node = Find(ev.to);
  if (node == nullptr || node->crashed || LinkCut(ev.from, ev.to)) {
    ++dropped_;
    return;
  }
  if (node->paused) {
    node->held_frames.push_back(std::move(ev));
    return;
  }
  Deliver(ev);
}

bool SimWorld::StepOne(std::int64_t limit) {
  if (queue_.empty()) return false;
  auto it = queue_.begin();
  if (it->first.first > limit) return false;
  now_ = std::max(now_, it->first.first);
  Event ev = std::move(it->second);
  queue_.erase(it);
  if (ev.kind == Event::Kind::kTimer) timer_keys_.erase(ev.timer_id);
  Dispatch(std::move(ev));
  return true;
}

void SimWorld::RunFor(std::int64_t ms) {
  const std::int64_t end = now_ + std::max<std::int64_t>(0, ms);
  while (StepOne(end)) {
  }
  now_ = end;
}

bool SimWorld::RunUntil(const std::function<bool()>& pred, std::int64_t max_ms) {
  const std::int64_t end = now_ + std::max<std::int64_t>(0, max_ms);
  if (pred()) return true;
  while (StepOne(end)) {
    if (pred()) return true;
  }
  now_ = end;
  return pred();
}

void SimWorld::CutLink(const Address& a, const Address& b) { cuts_.insert(Normalize(a, b)); }

void SimWorld::HealLink(const Address& a, const Address& b) { cuts_.erase(Normalize(a, b)); }

void SimWorld::Partition(const std::vector<std::vector<Address>>& sides) {
  for (std::size_t i = 0; i < sides.size(); ++i) {
    for (std::size_t j = i + 1; j < sides.size(); ++j) {
      for (const auto& a : sides[i]) {
        for (const auto& b : sides[j]) CutLink(a, b);
      }
    }
  }
}

void SimWorld::HealAll() { cuts_.clear(); }

}  // namespace pynenc_cpp::cluster::sim
