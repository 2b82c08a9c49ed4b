#include "sim/sim_cluster.h"

#include <map>
#include <set>
#include <tuple>

namespace pynenc_cpp::cluster::sim {

SimCluster::SimCluster(std::uint64_t seed, int n, MembershipOptions base)
    : world_(seed), base_(std::move(base)) {
  for (int i = 0; i < n; ++i) {
    Node node;
    node.address = "10.0.0." + std::to_string(i + 1) + ":7000";
    std::string id = "node" + std::to_string(i);
    id.resize(32, '0');
    node.id = id;
    nodes_.push_back(std::move(node));
  }
}

void SimCluster::Boot(int i, std::uint64_t incarnation) {
  Node& n = nodes_[i];
  Env& env = world_.Revive(n.address);
  MembershipOptions o = base_;
  o.self.id = n.id;
  o.self.address = n.address;
  o.self.incarnation = incarnation;
  o.self.started_at_ms = env.WallMs();
  if (o.self.node_class.empty()) o.self.node_class = (i % 2 == 0) ? "even" : "odd";
  o.seeds = {nodes_[0].address};
  n.persisted = incarnation;
  const int life = n.boots++;
  n.membership = std::make_unique<Membership>(env, o, [this, i, life, &env](const MemberEvent& ev) {
    events_.push_back(
        SeenEvent{env.NowMs(), i, ev.kind, ev.member.id, ev.member.incarnation, ev.member.state, life});
  });
  n.membership->SetOnIncarnation([this, i](std::uint64_t v) { nodes_[i].persisted = v; });
  Membership* m = n.membership.get();
  env.SetReceiver([m](const Address& from, std::uint8_t type, std::string payload) {
    m->OnFrame(from, type, payload);
  });
}

void SimCluster::StartAll() {
  for (int i = 0; i < size(); ++i) Boot(i, 0);
  for (int i = 0; i < size(); ++i) node(i).Start();
}

void SimCluster::Crash(int i) {
  world_.Crash(nodes_[i].address);
  nodes_[i].membership.reset();
}

void SimCluster::Restart(int i) {
  if (up(i)) Crash(i);
  Boot(i, nodes_[i].persisted + 1);
  node(i).Start();
}

std::vector<int> SimCluster::UpNodes() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (up(i)) out.push_back(i);
  }
  return out;
}

bool SimCluster::Converged(const std::vector<int>& group) const {
  std::set<NodeId> want;
  for (int i : group) want.insert(nodes_[i].id);
  std::optional<std::uint64_t> epoch;
  for (int i : group) {
    if (!up(i)) return false;
    const Membership& m = *nodes_[i].membership;
    std::set<NodeId> seen;
    for (const auto& mem : m.LiveMembers()) {
      if (mem.state != MemberState::kAlive) return false;
      seen.insert(mem.id);
    }
    if (seen != want) return false;
    if (epoch && *epoch != m.Epoch()) return false;
    epoch = m.Epoch();
  }
  return true;
}

bool SimCluster::AllConverged() const { return Converged(UpNodes()); }

bool SimCluster::EventsWellFormed(std::string* why) const {
  enum class S { kNone, kAlive, kSuspect, kGone };
  std::map<std::tuple<int, int, NodeId>, S> state;
  for (const auto& e : events_) {
    S& s = state[{e.observer, e.life, e.about}];
    bool ok = false;
    S next = s;
    switch (e.kind) {
      case MemberEventKind::kJoined:
        ok = s == S::kNone || s == S::kGone;
        next = e.state == MemberState::kSuspect ? S::kSuspect : S::kAlive;
        break;
      case MemberEventKind::kSuspected:
        ok = s == S::kAlive;
        next = S::kSuspect;
        break;
      case MemberEventKind::kAliveAgain:
        ok = s == S::kSuspect;
        next = S::kAlive;
        break;
      case MemberEventKind::kDead:
      case MemberEventKind::kLeft:
        ok = s == S::kAlive || s == S::kSuspect;
        next = S::kGone;
        break;
    }
    if (!ok) {
      if (why != nullptr) {
        *why = "observer " + std::to_string(e.observer) + " event " +
               std::string(MemberEventName(e.kind)) + " about " + e.about + " at " +
               std::to_string(e.at);
      }
      return false;
    }
    s = next;
  }
  return true;
}

int SimCluster::Count(int observer, MemberEventKind kind, int about) const {
  int n = 0;
  for (const auto& e : events_) {
    n += (e.observer == observer && e.kind == kind && e.about == nodes_[about].id) ? 1 : 0;
  }
  return n;
}

}  // namespace pynenc_cpp::cluster::sim
