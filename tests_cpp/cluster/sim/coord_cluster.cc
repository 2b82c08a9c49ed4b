#include "sim/coord_cluster.h"

#include <algorithm>
#include <utility>

#include "cluster/coordinator/spec_codec.h"

namespace pynenc_cpp::cluster::sim {

namespace {

// The in-memory source, seen by the coordinator as shared (as an external
// store reached by every node would be).
class SharedSource final : public GenerationSource {
 public:
  explicit SharedSource(std::unique_ptr<GenerationSource> base) : base_(std::move(base)) {}
  Result<Generation> ClaimTerm(const std::string& l, const std::string& o,
                               std::uint32_t min_term) override {
    return base_->ClaimTerm(l, o, min_term);
  }
  Result<Generation> ClaimSeq(const std::string& l, const std::string& o, Generation e) override {
    return base_->ClaimSeq(l, o, e);
  }
  Result<std::optional<Ownership>> Current(const std::string& l) override {
    return base_->Current(l);
  }
  Status PutSpec(const std::string& l, const std::string& s) override {
    return base_->PutSpec(l, s);
  }
  Status RemoveSpec(const std::string& l) override { return base_->RemoveSpec(l); }
  Result<std::vector<SpecRecord>> List() override { return base_->List(); }
  bool Shared() const override { return true; }

 private:
  std::unique_ptr<GenerationSource> base_;
};

}  // namespace

CoordCluster::CoordCluster(std::uint64_t seed, std::vector<SimNodeSpec> specs, CoordParams params)
    : world_(seed), p_(params) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Node n;
    n.spec = std::move(specs[i]);
    n.address = "10.0.2." + std::to_string(i + 1) + ":7000";
    n.id = "c" + std::to_string(i);
    n.id.resize(32, '0');
    nodes_.push_back(std::move(n));
  }
  if (p_.quorum <= 0) p_.quorum = static_cast<int>(nodes_.size()) / 2 + 1;
  source_ = std::make_shared<SharedSource>(
      std::move(OpenGenerationSource(BackendConfig{"memory://", "sim", nullptr})).value());
  fenced_ = std::move(OpenFencedStore(BackendConfig{"memory://", "sim", nullptr})).value();
}

CoordCluster::~CoordCluster() {
  for (auto& n : nodes_) n.core.reset();
}

int CoordCluster::IndexOf(const NodeId& id) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i].id == id) return i;
  }
  return -1;
}

void CoordCluster::StartAll() {
  for (int i = 0; i < size(); ++i) Boot(i);
}

void CoordCluster::Boot(int i) {
  Node& n = nodes_[i];
  Env& env = world_.Revive(n.address);
  NodeCoreOptions o;
  o.membership.cluster_name = "sim";
  o.membership.self.id = n.id;
  o.membership.self.address = n.address;
  o.membership.self.incarnation = n.incarnation + (n.boots > 0 ? 1 : 0);
  o.membership.self.started_at_ms = env.WallMs();
  o.membership.self.node_class = n.spec.node_class;
  o.membership.self.metadata = n.spec.metadata;
  for (const auto& other : nodes_) o.membership.seeds.push_back(other.address);
  o.membership.heartbeat_ms = p_.heartbeat_ms;
  o.membership.suspect_timeout_ms = p_.suspect_timeout_ms;
  o.quorum = p_.quorum;
  o.election = p_.election;
  o.stabilize_ms = p_.stabilize_ms;
  o.services.source = source_;
  if (p_.with_inbox) {
    n.inbox = std::move(Inbox::Create(100'000)).value();
    o.services.inbox = n.inbox.get();
  }
  n.incarnation = o.membership.self.incarnation;
  const int life = n.boots++;

  NodeCoreHooks h;
  h.incarnation = [this, i](std::uint64_t v) { nodes_[i].incarnation = v; };
  // The node's own work (the mastership) starts and stops at once.
  h.start_work = [this, i](const Activation&) { nodes_[i].core->WorkStarted(); };
  h.stop_work = [this, i](const Activation&, const std::string&) { nodes_[i].core->WorkStopped(); };
  if (p_.with_inbox) {
    // The simulated runtime starts and stops instances; lifetimes are recorded
    // when it answers (AnswerStarted / AnswerStopped).
    h.services.host.start = [this, i](const InstanceContext& ctx) {
      InboxItem item;
      item.kind = InboxItem::Kind::kStart;
      item.label = ctx.label;
      item.generation = ctx.generation;
      item.spec_kind = ctx.kind;
      item.actor_type = ctx.actor_type;
      item.payload = ctx.state;
      nodes_[i].inbox->Push(std::move(item));
    };
    h.services.host.stop = [this, i](const std::string& label, Generation gen,
                                     const std::string& reason) {
      InboxItem item;
      item.kind = InboxItem::Kind::kStop;
      item.label = label;
      item.generation = gen;
      item.payload = reason;
      nodes_[i].inbox->Push(std::move(item));
    };
  } else {
    SetRecordingHooks(h, i, life, env);
  }
  h.services.owner_lease_extended = [this, i](const std::string& label, std::int64_t until) {
    auto it = nodes_[i].open.find(label);
    if (it != nodes_[i].open.end()) lifetimes_[it->second].lease_until = until;
  };
  h.services.router.deliver = [i](const std::string& label, std::string payload,
                                  RouterHooks::ReplyFn reply) {
    reply("node" + std::to_string(i) + ":" + label + ":" + payload);
  };
  n.open.clear();
  n.core = std::make_unique<NodeCore>(env, std::move(o), std::move(h));
  n.core->Run([&] {
    n.core->services().host().SetActorTypes(n.spec.actor_types);
    n.core->services().host().SetFamilies(n.spec.families);
  });
  n.core->Start();
}

// Instances are plain records: the start hook records a lifetime and answers
// Started (at once or after factory_ms); the stop hook answers Stopped.
void CoordCluster::SetRecordingHooks(NodeCoreHooks& h, int i, int life, Env& env) {
  h.services.host.start = [this, i, life, &env](const InstanceContext& ctx) {
    Node& node = nodes_[i];
    Lifetime lt;
    lt.label = ctx.label;
    lt.node = i;
    lt.life = life;
    lt.generation = ctx.generation;
    lt.start = env.NowMs();
    lt.lease_until = node.core->services().leases().Until(ctx.label);
    node.open[ctx.label] = static_cast<int>(lifetimes_.size());
    lifetimes_.push_back(lt);
    bool fail = false;
    if (auto f = fail_.find(ctx.label); f != fail_.end() && f->second > 0) {
      --f->second;
      fail = true;
    }
    auto answer = [this, i, life, label = ctx.label, gen = ctx.generation, fail, &env] {
      Node& node = nodes_[i];
      if (!node.core || node.boots != life + 1) return;  // crashed meanwhile
      if (fail) {
        auto it = node.open.find(label);
        if (it != node.open.end()) {
          lifetimes_[it->second].stop = env.NowMs();
          lifetimes_[it->second].failed = true;
          node.open.erase(it);
        }
      }
      node.core->Run([&] {
        node.core->services().host().Started(
            label, gen, fail ? Status::InvalidArgument("factory failed (injected)") : Status::Ok());
      });
    };
    if (p_.factory_ms > 0) {
      env.After(p_.factory_ms, answer);
    } else {
      answer();
    }
  };
  h.services.host.stop = [this, i, life, &env](const std::string& label, Generation gen,
                                               const std::string& reason) {
    auto answer = [this, i, life, label, gen, reason, &env] {
      Node& node = nodes_[i];
      if (!node.core || node.boots != life + 1) return;
      auto it = node.open.find(label);
      if (it != node.open.end()) {
        lifetimes_[it->second].stop = env.NowMs();
        lifetimes_[it->second].reason = reason;
        node.open.erase(it);
      }
      node.core->Run([&] { node.core->services().host().Stopped(label, gen); });
    };
    if (p_.stop_ms > 0) {
      env.After(p_.stop_ms, answer);
    } else {
      answer();
    }
  };
}

void CoordCluster::EndOpen(int i, const std::string& reason) {
  for (auto& [label, idx] : nodes_[i].open) {
    lifetimes_[idx].stop = world_.Now();
    lifetimes_[idx].reason = reason;
  }
  nodes_[i].open.clear();
}

void CoordCluster::Crash(int i) {
  world_.Crash(nodes_[i].address);
  EndOpen(i, "crash");
  nodes_[i].core.reset();
}

void CoordCluster::Restart(int i) {
  if (up(i)) Crash(i);
  Boot(i);
}

void CoordCluster::Leave(int i, bool hand_over) {
  NodeCore& core = *nodes_[i].core;
  if (hand_over) {
    // As ClusterNode::Stop: the leader moves this node's instances away first.
    core.BeginLeave();
    RunUntilWithRuntime(
        [&] {
          const NodeStatus s = core.Status();
          return core.services().Idle() || !s.leader || !s.has_quorum;
        },
        10'000);
  }
  core.Shutdown();
  RunUntilWithRuntime([&] { return core.services().Idle() && !core.WorkActive(); }, 30'000);
  core.Leave();
  world_.RunFor(20);
  world_.Crash(nodes_[i].address);
  EndOpen(i, "left");
  nodes_[i].core.reset();
}

void CoordCluster::DrainInboxes() {
  for (int i = 0; i < size(); ++i) {
    if (!up(i) || !nodes_[i].inbox || world_.Paused(nodes_[i].address)) continue;
    for (const auto& item : nodes_[i].inbox->Drain(1'000)) {
      if (runtime_) runtime_(i, item);
      if (!up(i)) break;
    }
  }
}

void CoordCluster::RunWithRuntime(std::int64_t ms) {
  const std::int64_t until = world_.Now() + ms;
  world_.RunUntil(
      [&] {
        DrainInboxes();
        return false;
      },
      ms);
  world_.RunFor(std::max<std::int64_t>(0, until - world_.Now()));
}

bool CoordCluster::RunUntilWithRuntime(const std::function<bool()>& pred, std::int64_t max_ms) {
  return world_.RunUntil(
      [&] {
        DrainInboxes();
        return pred();
      },
      max_ms);
}

void CoordCluster::AnswerStarted(int i, const std::string& label, Generation gen) {
  Node& node = nodes_[i];
  Lifetime lt;
  lt.label = label;
  lt.node = i;
  lt.life = node.boots - 1;
  lt.generation = gen;
  lt.start = world_.Now();
  lt.lease_until = node.core->services().leases().Until(label);
  node.open[label] = static_cast<int>(lifetimes_.size());
  lifetimes_.push_back(lt);
  node.core->Run([&] { node.core->services().host().Started(label, gen, Status::Ok()); });
}

void CoordCluster::AnswerStopped(int i, const std::string& label, Generation gen) {
  Node& node = nodes_[i];
  auto it = node.open.find(label);
  if (it != node.open.end()) {
    lifetimes_[it->second].stop = world_.Now();
    node.open.erase(it);
  }
  node.core->Run([&] { node.core->services().host().Stopped(label, gen); });
}

void CoordCluster::Ack(int i, std::uint64_t token, LabelOutcome outcome) {
  NodeCore& core = *nodes_[i].core;
  core.Run([&] { core.services().mailer().AckToken(token, outcome); });
}

Result<std::uint64_t> CoordCluster::SendLabel(int i, const std::string& label,
                                              std::string payload) {
  NodeCore& core = *nodes_[i].core;
  auto seq = core.services().mailer().Enqueue(label, std::move(payload));
  if (seq.ok()) core.Run([&] { core.services().mailer().Pump(label); });
  return seq;
}

std::optional<int> CoordCluster::Leader() const {
  std::optional<int> found;
  for (int i = 0; i < size(); ++i) {
    if (!up(i) || nodes_[i].core->supervisor().state() != SupervisorState::kMaster) continue;
    if (found) return std::nullopt;
    found = i;
  }
  return found;
}

template <typename T>
Result<T> CoordCluster::Wait(int i, coord_wire::ClientOp op, std::string body,
                             std::function<Result<T>(std::string)> decode) {
  auto got = std::make_shared<std::optional<Result<std::string>>>();
  NodeCore& core = *nodes_[i].core;
  core.Run([&] {
    core.services().router().Request(op, std::move(body), 20'000,
                                     [got](Result<std::string> r) { got->emplace(std::move(r)); });
  });
  world_.RunUntil([&] { return got->has_value(); }, 30'000);
  if (!got->has_value()) return Status::Timeout("sim: no answer");
  if (!(*got)->ok()) return (*got)->status();
  return decode(std::move(**got).value());
}

Status CoordCluster::SubmitActor(int i, const ActorSpec& spec) {
  codec::StoredSpec s;
  s.kind = SpecKind::kActor;
  s.actor = spec;
  return Wait<std::string>(i, coord_wire::ClientOp::kSubmitActor, codec::EncodeSpec(s),
                           [](std::string b) { return Result<std::string>(std::move(b)); })
      .status();
}

Status CoordCluster::SubmitSingleton(int i, const SingletonSpec& spec) {
  codec::StoredSpec s;
  s.kind = SpecKind::kSingleton;
  s.singleton = spec;
  return Wait<std::string>(i, coord_wire::ClientOp::kSubmitSingleton, codec::EncodeSpec(s),
                           [](std::string b) { return Result<std::string>(std::move(b)); })
      .status();
}

Status CoordCluster::Remove(int i, const std::string& label) {
  return Wait<std::string>(i, coord_wire::ClientOp::kRemove, label,
                           [](std::string b) { return Result<std::string>(std::move(b)); })
      .status();
}

Result<std::vector<SpecStatus>> CoordCluster::Statuses(int i) {
  return Wait<std::vector<SpecStatus>>(i, coord_wire::ClientOp::kStatuses, "",
                                       [](std::string b) { return codec::DecodeStatuses(b); });
}

Result<ClusterView> CoordCluster::View(int i) {
  return Wait<ClusterView>(i, coord_wire::ClientOp::kView, "",
                           [](std::string b) { return codec::DecodeView(b); });
}

Result<std::string> CoordCluster::Ask(int i, const std::string& label, const std::string& payload) {
  auto got = std::make_shared<std::optional<Result<std::string>>>();
  NodeCore& core = *nodes_[i].core;
  core.Run([&] {
    core.services().router().Ask(label, payload, true, 5'000,
                                 [got](Result<std::string> r) { got->emplace(std::move(r)); });
  });
  world_.RunUntil([&] { return got->has_value(); }, 10'000);
  if (!got->has_value()) return Status::Timeout("sim: no answer");
  return std::move(**got);
}

std::map<std::string, std::vector<int>> CoordCluster::Running() const {
  std::map<std::string, std::vector<int>> out;
  for (int i = 0; i < size(); ++i) {
    for (const auto& [label, idx] : nodes_[i].open) {
      if (!lifetimes_[idx].failed) out[label].push_back(i);
    }
  }
  return out;
}

int CoordCluster::Starts(const std::string& label) const {
  return static_cast<int>(std::count_if(lifetimes_.begin(), lifetimes_.end(),
                                        [&](const Lifetime& l) { return l.label == label; }));
}

bool CoordCluster::NoOverlap(std::string* why, bool authorized) const {
  std::map<std::string, std::vector<const Lifetime*>> by_label;
  for (const auto& l : lifetimes_) by_label[l.label].push_back(&l);
  for (auto& [label, ls] : by_label) {
    std::sort(ls.begin(), ls.end(), [](auto* a, auto* b) { return a->start < b->start; });
    const Lifetime* longest = nullptr;
    std::int64_t end_max = -1;
    for (const Lifetime* l : ls) {
      if (longest && end_max > l->start) {
        if (why) {
          *why = "'" + label + "': node " + std::to_string(longest->node) + " (" +
                 longest->generation.ToString() + ", " + std::to_string(longest->start) + ".." +
                 std::to_string(longest->stop) + ") overlaps node " + std::to_string(l->node) +
                 " (" + l->generation.ToString() + ", from " + std::to_string(l->start) + ")";
        }
        return false;
      }
      std::int64_t end = l->stop < 0 ? INT64_MAX : l->stop;
      if (authorized) end = std::min(end, l->lease_until);
      if (end > end_max) {
        end_max = end;
        longest = l;
      }
    }
  }
  return true;
}

bool CoordCluster::GenerationsIncrease(std::string* why) const {
  std::map<std::string, const Lifetime*> last;
  std::vector<const Lifetime*> ordered;
  for (const auto& l : lifetimes_) ordered.push_back(&l);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](auto* a, auto* b) { return a->start < b->start; });
  for (const Lifetime* l : ordered) {
    auto it = last.find(l->label);
    if (it != last.end() && !(it->second->generation < l->generation)) {
      if (why) {
        *why = "'" + l->label + "': generation " + l->generation.ToString() + " on node " +
               std::to_string(l->node) + " at " + std::to_string(l->start) + " follows " +
               it->second->generation.ToString() + " on node " + std::to_string(it->second->node);
      }
      return false;
    }
    last[l->label] = l;
  }
  return true;
}

bool CoordCluster::Converged(const std::vector<std::string>& labels) {
  auto leader = Leader();
  if (!leader) return false;
  Coordinator* c = nodes_[*leader].core->services().coordinator();
  if (!c || c->phase() != Coordinator::Phase::kReady) return false;
  std::map<std::string, SpecStatus> statuses;
  for (auto& s : c->Statuses()) statuses[s.label] = s;
  const auto running = Running();
  for (const auto& label : labels) {
    auto st = statuses.find(label);
    auto run = running.find(label);
    if (st == statuses.end() || st->second.state != SpecState::kRunning) return false;
    if (run == running.end() || run->second.size() != 1) return false;
    if (!st->second.node || IndexOf(*st->second.node) != run->second[0]) return false;
  }
  return true;
}

CoordinatorStats CoordCluster::LeaderStats() const {
  auto leader = Leader();
  if (!leader) return {};
  Coordinator* c = nodes_[*leader].core->services().coordinator();
  return c ? c->stats() : CoordinatorStats{};
}

}  // namespace pynenc_cpp::cluster::sim
