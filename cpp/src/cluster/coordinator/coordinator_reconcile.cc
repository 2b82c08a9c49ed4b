// The Coordinator's decisions: for every managed label, who should run it
// (placement, anchor or agent grid), what to do when its node failed (crash
// strategy), how to move it (drain, then start elsewhere), and the commands
// that make the nodes match. Called after every input and every heartbeat;
// idempotent: a converged cluster issues no command.
#include <algorithm>
#include <utility>

#include "cluster/coordinator/coordinator.h"

namespace pynenc_cpp::cluster {

namespace {
std::string Short(const NodeId& id) { return id.substr(0, 8); }
constexpr std::int64_t kActorDrainMs = 5'000;
}  // namespace

void Coordinator::SetState(Entry& e, SpecState s, std::string reason) {
  e.state = s;
  e.reason = std::move(reason);
}

std::int64_t Coordinator::DrainMs(const Entry& e) const {
  if (e.kind == SpecKind::kSingleton) return e.spec.singleton.drain_timeout_ms;
  if (e.kind == SpecKind::kAgent) {
    for (const auto& [id, ns] : nodes_) {
      for (const auto& f : ns.report.families) {
        if (f.scheme == e.family) return f.drain_timeout_ms;
      }
    }
  }
  return kActorDrainMs;
}

void Coordinator::Reconcile() {
  if (phase_ != Phase::kReady || reconciling_) return;
  reconciling_ = true;
  SyncAgents();
  pass_view_ = PlacementView();
  for (auto& [label, e] : entries_) ReconcileEntry(label, e);
  StopStrays();
  PushDirectory(false);
  reconciling_ = false;
}

// Nodes that may receive new work: live, reported, seeing quorum.
ClusterView Coordinator::PlacementView() const {
  ClusterView v = View();
  for (auto& n : v.nodes) {
    auto it = nodes_.find(n.id);
    if (it == nodes_.end() || !it->second.reported || !it->second.report.has_quorum ||
        it->second.report.leaving) {
      n.alive = false;
    }
    for (const auto& [label, e] : entries_) {
      if (e.placing == n.id) n.running.push_back(label);
    }
    std::sort(n.running.begin(), n.running.end());
  }
  return v;
}

// Agent entries follow the families the live nodes declare: a new agent gets
// an entry, an agent no node declares any more loses it (its instances stop).
// The grid's targets are computed for every family at once.
void Coordinator::SyncAgents() {
  struct Family {
    Distribution distribution = Distribution::kEvenly;
    std::set<std::string> agents;
    std::vector<GridNode> nodes;
  };
  std::map<std::string, Family> families;
  for (const auto& [id, ns] : nodes_) {  // by id: the smallest id's settings win
    if (!ns.live || !ns.reported || !ns.report.has_quorum) continue;
    for (const auto& f : ns.report.families) {
      auto [it, inserted] = families.try_emplace(f.scheme);
      if (inserted) it->second.distribution = f.distribution;
      it->second.agents.insert(f.agents.begin(), f.agents.end());
      GridNode g{id, std::nullopt};
      if (it->second.distribution == Distribution::kEvenlyByCapability) {
        const auto& sup = f.supported ? *f.supported : f.agents;
        g.supported = std::set<std::string>(sup.begin(), sup.end());
      }
      it->second.nodes.push_back(std::move(g));
    }
  }
  // Entries: add new agents, drop those no family declares.
  std::set<std::string> declared;
  for (const auto& [scheme, fam] : families) {
    for (const auto& uri : fam.agents) {
      declared.insert(uri);
      auto [it, inserted] = entries_.try_emplace(uri);
      if (inserted) {
        it->second.kind = SpecKind::kAgent;
        it->second.family = scheme;
        // A leader that just took over finds agents running: keep them where they are.
        for (const auto& [id, ns] : nodes_) {
          if (!ns.live || !ns.reported) continue;
          for (const auto& inst : ns.report.instances) {
            if (inst.label == uri && inst.phase != coord_wire::InstancePhase::kStopping &&
                (!it->second.owner || inst.generation > it->second.generation)) {
              it->second.owner = id;
              it->second.generation = inst.generation;
              it->second.placed_before = true;
            }
          }
        }
      } else if (it->second.kind != SpecKind::kAgent) {
        continue;  // an actor or singleton already uses this label: it wins
      }
    }
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool gone =
        it->second.kind == SpecKind::kAgent && !declared.count(it->first) && !it->second.store_busy;
    it = gone ? entries_.erase(it) : std::next(it);
  }
  // Targets.
  agent_targets_.clear();
  for (const auto& [scheme, fam] : families) {
    std::vector<std::string> agents(fam.agents.begin(), fam.agents.end());
    std::map<std::string, NodeId> current;
    for (const auto& uri : agents) {
      auto it = entries_.find(uri);
      if (it == entries_.end() || it->second.kind != SpecKind::kAgent) continue;
      const Entry& e = it->second;
      if (e.placing) {
        current[uri] = *e.placing;
      } else if (e.moving_to) {
        current[uri] = *e.moving_to;
      } else if (e.owner && Live(*e.owner)) {
        current[uri] = *e.owner;
      }
    }
    auto target = DistributeEvenly(agents, fam.nodes, current);
    for (const auto& uri : agents) {
      auto t = target.find(uri);
      if (t != target.end()) {
        agent_targets_[uri] = {t->second, ""};
      } else {
        agent_targets_[uri] = {std::nullopt, "no live node with quorum supports agent '" + uri +
                                                 "' (family " + scheme + ", " +
                                                 std::string(DistributionName(fam.distribution)) +
                                                 ")"};
      }
    }
  }
}

Coordinator::Target Coordinator::Choose(const std::string& label, const Entry& e) {
  auto registers = [&](const NodeId& id, const std::string& type) {
    for (const auto& n : pass_view_.nodes) {
      if (n.id == id) {
        return n.alive &&
               std::find(n.actor_types.begin(), n.actor_types.end(), type) != n.actor_types.end();
      }
    }
    return false;
  };
  if (e.corrupt) return {std::nullopt, e.reason};
  if (e.kind == SpecKind::kAgent) {
    auto it = agent_targets_.find(label);
    if (it == agent_targets_.end()) return {std::nullopt, "no family declares agent '" + label + "'"};
    return it->second;
  }
  if (e.kind == SpecKind::kSingleton) {
    const SingletonSpec& s = e.spec.singleton;
    const std::string& type = s.actor_type;
    switch (s.anchor.kind) {
      case SingletonAnchor::Kind::kLeader: {
        if (registers(options_.self_id, type)) return {options_.self_id, ""};
        if (!Staying(options_.self_id)) {
          // The leader is leaving: hand over to the node likely to lead next (the
          // oldest staying one); the next leader moves it again if it differs.
          const Member* best = nullptr;
          for (const auto& [id, ns] : nodes_) {
            if (!Staying(id) || !registers(id, type)) continue;
            if (!best || std::make_pair(ns.member.started_at_ms, id) <
                             std::make_pair(best->started_at_ms, best->id)) {
              best = &ns.member;
            }
          }
          if (best) return {best->id, ""};
        }
        return {std::nullopt, "the leader " + Short(options_.self_id) +
                                  " does not register actor type '" + type + "' (or lacks quorum)"};
      }
      case SingletonAnchor::Kind::kNode:
        if (!Live(s.anchor.value)) {
          return {std::nullopt, "anchor node " + s.anchor.value + " is not alive"};
        }
        if (registers(s.anchor.value, type)) return {s.anchor.value, ""};
        return {std::nullopt, "anchor node " + s.anchor.value + " does not register actor type '" +
                                  type + "' (or lacks quorum)"};
      case SingletonAnchor::Kind::kClass: {
        const Member* best = nullptr;
        for (const auto& [id, ns] : nodes_) {
          if (!ns.live || ns.member.node_class != s.anchor.value || !registers(id, type)) continue;
          if (!best || std::make_pair(ns.member.started_at_ms, id) <
                           std::make_pair(best->started_at_ms, best->id)) {
            best = &ns.member;
          }
        }
        if (best) return {best->id, ""};
        return {std::nullopt, "no live node of class '" + s.anchor.value +
                                  "' registers actor type '" + type + "' (with quorum)"};
      }
    }
  }
  const ActorSpec& spec = e.spec.actor;
  auto own = MakeStrategy(spec.strategy);
  const PlacementStrategy& strategy = own ? *own : *default_strategy_;
  PlacementResult r = ChooseNode(spec, pass_view_, strategy);
  return {r.node, r.reason};
}

void Coordinator::SendSpawn(const std::string& label, Entry& e) {
  if (!e.owner || !Live(*e.owner)) return;
  coord_wire::Command c;
  c.op = coord_wire::Command::Op::kSpawn;
  c.request_id = next_request_++;
  c.label = label;
  c.generation = e.generation;
  c.kind = e.kind;
  if (e.kind == SpecKind::kActor) {
    c.actor_type = e.spec.actor.actor_type;
    c.state = e.spec.actor.initial_state;
  } else if (e.kind == SpecKind::kSingleton) {
    c.actor_type = e.spec.singleton.actor_type;
    c.state = e.spec.singleton.state;
  } else {
    c.actor_type = e.family;
  }
  c.drain_ms = DrainMs(e);
  e.spawn = Pending{c.request_id, *e.owner, e.generation, env_.NowMs()};
  e.placed_before = true;
  auto [type, payload] = coord_wire::Encode(c);
  env_.Send(nodes_[*e.owner].member.address, type, std::move(payload));
  ++stats_.spawns_sent;
}

void Coordinator::SendStop(const NodeId& node, const std::string& label, Generation gen,
                           const std::string& reason, std::int64_t drain_ms) {
  const std::int64_t now = env_.NowMs();
  auto it = stops_.find({node, label});
  if (it != stops_.end() && it->second.generation >= gen &&
      now - it->second.sent_ms < options_.spawn_timeout_ms) {
    return;  // already asked
  }
  coord_wire::Command c;
  c.op = coord_wire::Command::Op::kStop;
  c.request_id = next_request_++;
  c.label = label;
  c.generation = gen;
  c.drain_ms = drain_ms;
  c.reason = reason;
  stops_[{node, label}] = Pending{c.request_id, node, gen, now};
  auto [type, payload] = coord_wire::Encode(c);
  env_.Send(nodes_[node].member.address, type, std::move(payload));
  ++stats_.stops_sent;
}

void Coordinator::ReconcileEntry(const std::string& label, Entry& e) {
  if (e.store_busy) return;
  const std::int64_t now = env_.NowMs();
  if (e.corrupt) return SetState(e, SpecState::kUnplaced, e.reason);
  if (e.abandoned) return;

  // A. The owner failed or left: the crash strategy decides (singletons and
  // agents always redistribute; their anchor or grid picks the next node).
  if (e.owner && !Live(*e.owner)) {
    e.spawn.reset();
    e.moving_to.reset();
    const NodeId failed = *e.owner;
    if (e.kind == SpecKind::kActor) {
      const CrashStrategy& cs = e.spec.actor.crash_strategy;
      if (cs.kind == CrashStrategy::Kind::kAbandon) {
        e.abandoned = true;
        return SetState(e, SpecState::kUnplaced,
                        "abandoned: node " + Short(failed) + " failed (crash strategy abandon)");
      }
      if (cs.kind == CrashStrategy::Kind::kWaitForReturn) {
        if (!e.waiting_for) {
          e.waiting_for = failed;
          e.waiting_since = now;
        }
        if (now - e.waiting_since < cs.wait_ms) {
          return SetState(e, SpecState::kWaitingForReturn,
                          "node " + Short(failed) + " failed; waiting up to " +
                              std::to_string(cs.wait_ms) + " ms for it to return");
        }
        env_.Log(LogLevel::kInfo, "coordinator: node " + Short(failed) + " did not return within " +
                                      std::to_string(cs.wait_ms) + " ms; redistributing '" +
                                      label + "'");
      }
    }
    e.previous_owner = e.owner;
    e.owner.reset();
    e.waiting_for.reset();
  }
  if (e.owner && e.waiting_for) e.waiting_for.reset();  // it returned (same node id)

  // B. No owner: choose one and claim a new term for it.
  if (!e.owner) {
    if (now < e.retry_at) {
      return SetState(e, SpecState::kPending, "retrying: " + e.last_error);
    }
    Target t = Choose(label, e);
    if (!t.node) return SetState(e, SpecState::kUnplaced, t.reason);
    if (t.node == e.previous_owner && !e.generation.IsZero()) {
      // The same node again (it came back): a re-grant, next seq.
      e.owner = t.node;
      e.previous_owner.reset();
      SetState(e, SpecState::kPending, "restarting on " + Short(*t.node));
      return ClaimSeq(label);
    }
    SetState(e, SpecState::kPending, "placing on " + Short(*t.node));
    return ClaimTerm(label, *t.node);
  }
  const NodeId owner = *e.owner;

  // C. A singleton's anchor or an agent's grid moved, or the owner is leaving
  // gracefully: drain the owner, then start on the new node (the next pass after
  // it stopped, or after the drain timeout: the new node still waits for the old
  // owner lease).
  if (e.kind != SpecKind::kActor || !Staying(owner)) {
    Target t = Choose(label, e);
    if (t.node && *t.node != owner) {
      const coord_wire::InstanceInfo* inst = Reported(owner, label);
      if (e.moving_to != t.node) {
        e.moving_to = t.node;
        e.move_deadline = now + DrainMs(e);
        e.spawn.reset();
        if (inst) SendStop(owner, label, inst->generation, "moving to " + Short(*t.node), DrainMs(e));
      }
      if (!inst || now >= e.move_deadline) {
        e.owner.reset();
        e.moving_to.reset();
        SetState(e, SpecState::kPending, "placing on " + Short(*t.node));
        return ClaimTerm(label, *t.node);
      }
      return SetState(e, SpecState::kPending,
                      "moving from " + Short(owner) + " to " + Short(*t.node));
    }
    e.moving_to.reset();
    if (!Staying(owner)) {
      // Its node is leaving and no other node can take it: stop it now (it
      // would stop at the node's shutdown anyway) so the leave need not wait;
      // once the node is gone its crash strategy applies.
      if (const coord_wire::InstanceInfo* inst = Reported(owner, label)) {
        SendStop(owner, label, inst->generation,
                 "its node is leaving and no other node can run it", DrainMs(e));
      }
      return SetState(e, SpecState::kPending,
                      "node " + Short(owner) + " is leaving; " +
                          (t.reason.empty() ? "no other node can run it" : t.reason));
    }
  }

  // D. The owner must run it under the current generation, which must not be
  // below what its storage is fenced at (a generation source that forgot, e.g.
  // memory:// after a full cluster restart, restarts terms at 1).
  if (const Generation* floor = ReportedFloor(owner, label); floor && *floor > e.generation) {
    env_.Log(LogLevel::kWarning, "coordinator: '" + label + "' is fenced in storage at " +
                                     floor->ToString() + ", above its generation " +
                                     e.generation.ToString() + "; claiming a newer term");
    SetState(e, SpecState::kPending, "claiming a term above the storage fence " +
                                         floor->ToString());
    return ClaimTerm(label, owner);
  }
  const coord_wire::InstanceInfo* inst = Reported(owner, label);
  if (inst && inst->generation > e.generation) {
    env_.Log(LogLevel::kWarning, "coordinator: '" + label + "' runs under " +
                                     inst->generation.ToString() + ", newer than the recorded " +
                                     e.generation.ToString() + "; adopting it");
    e.generation = inst->generation;
  }
  if (inst && inst->generation == e.generation) {
    switch (inst->phase) {
      case coord_wire::InstancePhase::kActive:
        e.spawn.reset();
        e.failures = 0;
        return SetState(e, SpecState::kRunning, "");
      case coord_wire::InstancePhase::kStopping:
        return SetState(e, SpecState::kPending, "stopping on " + Short(owner));
      default:
        return SetState(e, SpecState::kPending, "starting on " + Short(owner));
    }
  }
  if (e.spawn) {
    if (now - e.spawn->sent_ms < options_.spawn_timeout_ms) {
      return SetState(e, SpecState::kPending, "starting on " + Short(owner));
    }
    e.spawn.reset();
    ++e.failures;
    e.last_error = "no answer from " + Short(owner) + " within " +
                   std::to_string(options_.spawn_timeout_ms) + " ms";
  }
  const auto& ns = nodes_[owner];
  if (!ns.reported) {
    // A node that came back (or a reign that just began): its report was asked for.
    return SetState(e, SpecState::kPending, "waiting for " + Short(owner) + "'s report");
  }
  // An ack newer than the owner's last report, from the same process: trust it.
  if (e.acked.second != 0 && e.acked.first == ns.report.incarnation &&
      std::make_pair(ns.report.incarnation, ns.report.seq) < e.acked) {
    return SetState(e, SpecState::kRunning, "");
  }
  if (now < e.retry_at) return SetState(e, SpecState::kPending, "retrying: " + e.last_error);
  if (e.placed_before && (!inst || inst->generation < e.generation)) {
    // The instance of this generation is gone (or never confirmed): its
    // replacement on the same node gets the next seq.
    if (!inst) {
      SetState(e, SpecState::kPending, "restarting on " + Short(owner));
      return ClaimSeq(label);
    }
  }
  SetState(e, SpecState::kPending, "starting on " + Short(owner));
  SendSpawn(label, e);
}

void Coordinator::StopStrays() {
  // Stops that were answered by the instance going away, or that timed out
  // (re-sent below if the instance is still there), are settled.
  const std::int64_t now = env_.NowMs();
  for (auto it = stops_.begin(); it != stops_.end();) {
    const auto& [node, label] = it->first;
    const bool done = !Live(node) || !Reported(node, label) ||
                      now - it->second.sent_ms >= options_.spawn_timeout_ms;
    it = done ? stops_.erase(it) : std::next(it);
  }
  for (const auto& [id, ns] : nodes_) {
    if (!ns.live || !ns.reported) continue;
    for (const auto& inst : ns.report.instances) {
      if (inst.phase == coord_wire::InstancePhase::kStopping) continue;
      auto it = entries_.find(inst.label);
      std::string reason;
      if (it == entries_.end()) {
        reason = "no spec";
      } else {
        const Entry& e = it->second;
        if (e.store_busy || e.placing == id || e.owner == id) continue;
        reason = e.owner ? "runs on " + Short(*e.owner) : "not placed here";
      }
      SendStop(id, inst.label, inst.generation, "stopped by the coordinator: " + reason,
               it == entries_.end() ? kActorDrainMs : DrainMs(it->second));
    }
  }
}

}  // namespace pynenc_cpp::cluster
