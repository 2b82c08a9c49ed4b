#include "cluster/singletons/host.h"

#include <algorithm>
#include <utility>

namespace pynenc_cpp::cluster {

using coord_wire::Command;
using coord_wire::InstancePhase;

Result<std::string> ActorInstance::OnMessage(const std::string&) {
  return Status::InvalidArgument("this actor takes no messages");
}

Host::Host(Env& env, OwnerLeases& leases, HostOptions options, HostHooks hooks)
    : env_(env), leases_(leases), options_(std::move(options)), hooks_(std::move(hooks)) {}

Host::~Host() {
  if (report_timer_) env_.Cancel(*report_timer_);
  if (gate_timer_) env_.Cancel(*gate_timer_);
  if (expiry_timer_) env_.Cancel(*expiry_timer_);
}

void Host::Start() { ArmReport(); }

void Host::ArmReport() {
  if (report_timer_) env_.Cancel(*report_timer_);
  report_timer_ = env_.After(options_.report_interval_ms, [this] {
    report_timer_.reset();
    if (leader_) SendReport(*leader_);  // anti-entropy: the leader may have missed one
    ArmReport();
  });
}

void Host::SetActorTypes(std::set<std::string> types) {
  if (types == types_) return;
  types_ = std::move(types);
  Changed();
}

void Host::SetFamilies(std::vector<AgentFamily> families) {
  if (families == families_) return;
  families_ = std::move(families);
  Changed();
}

bool Host::Gated() const {
  return has_quorum_ && !shutdown_ && env_.NowMs() >= quorum_since_ + options_.stabilize_ms;
}

void Host::SetView(bool has_quorum, std::optional<Address> leader, std::uint64_t incarnation) {
  incarnation_ = incarnation;
  if (has_quorum != has_quorum_) {
    has_quorum_ = has_quorum;
    quorum_since_ = env_.NowMs();
    if (!has_quorum) StopAll("lost quorum");
    dirty_ = true;
  }
  if (leader != leader_) {
    leader_ = std::move(leader);
    dirty_ = true;  // a new leader gets our report at once
  }
}

void Host::Answer(const Waiter& w, Command::Op op, const std::string& label, const Status& status) {
  coord_wire::Ack ack;
  ack.request_id = w.request_id;
  ack.op = op;
  ack.label = label;
  ack.generation = w.generation;
  ack.code = status.code();
  ack.message = status.message();
  ack.incarnation = incarnation_;
  ack.report_seq = report_seq_;
  auto [type, payload] = coord_wire::Encode(ack);
  env_.Send(w.to, type, std::move(payload));
}

void Host::AnswerAll(std::vector<Waiter>& waiters, Command::Op op, const std::string& label,
                     const Status& status) {
  std::vector<Waiter> ws;
  ws.swap(waiters);
  for (const auto& w : ws) Answer(w, op, label, status);
}

void Host::Record(const std::string& event, const std::string& label, Generation g,
                  const std::string& reason) {
  if (hooks_.record) {
    hooks_.record({event, label, g, env_.NowMs(), leases_.Until(label), reason});
  }
}

void Host::OnCommand(const Address& from, const Command& c) {
  if (c.op == Command::Op::kSpawn) {
    Spawn(from, c);
  } else {
    Stop(from, c);
  }
}

void Host::Spawn(const Address& from, const Command& c) {
  const Waiter w{from, c.request_id, c.generation};
  Generation& known = known_[c.label];
  if (c.generation < known) {
    return Answer(w, Command::Op::kSpawn, c.label,
                  Status::StaleGeneration("generation " + c.generation.ToString() +
                                          " is older than " + known.ToString() + " known for '" +
                                          c.label + "'"));
  }
  known = c.generation;
  if (shutdown_ || leaving_) {
    return Answer(w, Command::Op::kSpawn, c.label,
                  Status::Unavailable("node " + options_.self_id +
                                      (shutdown_ ? " is shutting down" : " is leaving")));
  }
  if (!has_quorum_) {
    return Answer(w, Command::Op::kSpawn, c.label,
                  Status::Unavailable("node " + options_.self_id + " does not see quorum"));
  }
  if (c.kind == SpecKind::kAgent) {
    auto f = std::find_if(families_.begin(), families_.end(),
                          [&](const AgentFamily& fam) { return fam.scheme == c.actor_type; });
    const bool ok = f != families_.end() &&
                    (!f->supported || std::find(f->supported->begin(), f->supported->end(),
                                                c.label) != f->supported->end());
    if (!ok) {
      return Answer(w, Command::Op::kSpawn, c.label,
                    Status::NotFound("agent '" + c.label + "' is not supported on node " +
                                     options_.self_id));
    }
  } else if (!types_.count(c.actor_type)) {
    return Answer(w, Command::Op::kSpawn, c.label,
                  Status::NotFound("actor type '" + c.actor_type + "' is not registered on node " +
                                   options_.self_id));
  }
  auto it = instances_.find(c.label);
  if (it == instances_.end()) {
    if (auto ran = ran_.find(c.label); ran != ran_.end() && c.generation <= ran->second) {
      return Answer(w, Command::Op::kSpawn, c.label,
                    Status::StaleGeneration("generation " + c.generation.ToString() + " of '" +
                                            c.label + "' already ran on this node"));
    }
    Instance inst;
    inst.generation = c.generation;
    inst.kind = c.kind;
    inst.actor_type = c.actor_type;
    inst.state = c.state;
    inst.drain_ms = c.drain_ms;
    inst.spawn_waiters.push_back(w);
    instances_.emplace(c.label, std::move(inst));
    leases_.Acquire(c.label, c.generation);
    DropFloorBelow(c.label, c.generation);
    Changed();
    return;
  }
  Instance& inst = it->second;
  if (inst.phase == InstancePhase::kStopping) {
    return Answer(w, Command::Op::kSpawn, c.label,
                  Status::Unavailable("'" + c.label + "' is stopping on node " + options_.self_id +
                                      "; retry once it stopped"));
  }
  inst.drain_ms = c.drain_ms;
  if (c.generation > inst.generation) {
    // A re-grant: same instance, higher generation. Older waiters are superseded.
    AnswerAll(inst.spawn_waiters, Command::Op::kSpawn, c.label,
              Status::StaleGeneration("superseded by generation " + c.generation.ToString()));
    inst.generation = c.generation;
    DropFloorBelow(c.label, c.generation);
    leases_.Acquire(c.label, c.generation);
    Changed();
    if (inst.phase == InstancePhase::kActive) {
      Record("instance_regrant", c.label, c.generation, "");
      if (hooks_.regrant) hooks_.regrant(c.label, c.generation);
    }
  }
  if (inst.phase == InstancePhase::kActive) {
    Answer(w, Command::Op::kSpawn, c.label, Status::Ok());
  } else {
    inst.spawn_waiters.push_back(w);
  }
}

void Host::Stop(const Address& from, const Command& c) {
  const Waiter w{from, c.request_id, c.generation};
  Generation& known = known_[c.label];
  if (c.generation > known) known = c.generation;
  auto it = instances_.find(c.label);
  if (it == instances_.end()) return Answer(w, Command::Op::kStop, c.label, Status::Ok());
  Instance& inst = it->second;
  if (c.generation < inst.generation) {
    return Answer(w, Command::Op::kStop, c.label,
                  Status::StaleGeneration("stop for generation " + c.generation.ToString() +
                                          " but '" + c.label + "' runs under " +
                                          inst.generation.ToString()));
  }
  if (c.drain_ms > 0) inst.drain_ms = c.drain_ms;
  inst.stop_waiters.push_back(w);
  BeginStop(c.label, c.reason.empty() ? "stopped by the coordinator" : c.reason);
}

void Host::BeginStop(const std::string& label, const std::string& reason) {
  auto it = instances_.find(label);
  if (it == instances_.end()) return;
  Instance& inst = it->second;
  switch (inst.phase) {
    case InstancePhase::kAcquiring:
      // Never started: cancel. Every waiter hears of it.
      return Discard(it, Status::Unavailable("cancelled: " + reason));
    case InstancePhase::kStarting:
      inst.stop_after_start = true;
      if (inst.stop_reason.empty()) inst.stop_reason = reason;
      return;
    case InstancePhase::kActive: {
      inst.phase = InstancePhase::kStopping;
      inst.stop_reason = reason;
      inst.drain_deadline = env_.NowMs() + std::max<std::int64_t>(inst.drain_ms, 0);
      if (leases_.Until(label) > env_.NowMs()) leases_.SetStopping(label);
      Changed();
      const Generation g = inst.generation;
      if (hooks_.stop) hooks_.stop(label, g, reason);  // may answer Stopped at once
      return;
    }
    case InstancePhase::kStopping:
      return;
  }
}

void Host::StopAll(const std::string& reason) {
  std::vector<std::string> labels;
  for (const auto& [label, inst] : instances_) labels.push_back(label);
  for (const auto& label : labels) BeginStop(label, reason);  // cancels the acquiring ones
}

void Host::Started(const std::string& label, Generation gen, const Status& status) {
  auto it = instances_.find(label);
  if (it == instances_.end() || it->second.phase != InstancePhase::kStarting ||
      it->second.started_generation != gen) {
    return;
  }
  Instance& inst = it->second;
  if (!status.ok()) {
    Record("instance_failed", label, gen, status.message());
    ran_[label] = std::max(ran_[label], inst.generation);
    return Discard(it, status);
  }
  inst.phase = InstancePhase::kActive;
  Changed();
  const bool lease_ok = LeaseLeft(label, env_.NowMs());
  if (inst.stop_after_start || !lease_ok || !Gated()) {
    const std::string reason = inst.stop_after_start ? inst.stop_reason
                               : !lease_ok           ? "lease expired"
                                                     : "lost quorum";
    AnswerAll(inst.spawn_waiters, Command::Op::kSpawn, label,
              Status::Unavailable("stopped right after it started: " + reason));
    BeginStop(label, reason);
    return;
  }
  AnswerAll(inst.spawn_waiters, Command::Op::kSpawn, label, Status::Ok());
  if (inst.generation > gen) {
    Record("instance_regrant", label, inst.generation, "");
    if (hooks_.regrant) hooks_.regrant(label, inst.generation);
  }
}

void Host::Stopped(const std::string& label, Generation gen) {
  auto it = instances_.find(label);
  if (it == instances_.end() || it->second.phase != InstancePhase::kStopping) return;
  (void)gen;  // the instance may have been re-granted while it stopped
  Instance& inst = it->second;
  Record("instance_stop", label, inst.generation, inst.stop_reason);
  ran_[label] = std::max(ran_[label], inst.generation);
  Discard(it, Status::Unavailable("'" + label + "' stopped: " + inst.stop_reason));
}

void Host::DropFloorBelow(const std::string& label, Generation accepted) {
  auto f = floors_.find(label);
  if (f != floors_.end() && accepted > f->second.generation) floors_.erase(f);
}

void Host::RaiseFloor(const std::string& label, Generation floor) {
  Floor& f = floors_[label];
  if (floor <= f.generation) return;
  f = Floor{floor, 0};
  Generation& known = known_[label];
  known = std::max(known, floor);
  env_.Log(LogLevel::kWarning, "instance '" + label + "': storage is fenced at " +
                                   floor.ToString() + "; asking the leader for a newer term");
  auto it = instances_.find(label);
  if (it != instances_.end() && it->second.generation < floor &&
      it->second.phase != InstancePhase::kStopping) {
    Record("instance_failed", label, it->second.generation,
           "storage fenced at " + floor.ToString());
    ran_[label] = std::max(ran_[label], it->second.generation);
    return Discard(it, Status::StaleGeneration("'" + label + "' is fenced in storage at " +
                                               floor.ToString()));
  }
  Changed();
}

void Host::Discard(std::map<std::string, Instance>::iterator it, const Status& spawn_answer) {
  const std::string label = it->first;
  std::vector<Waiter> spawns, stops;
  spawns.swap(it->second.spawn_waiters);
  stops.swap(it->second.stop_waiters);
  instances_.erase(it);
  leases_.Drop(label, /*release=*/true);
  Changed();
  for (const auto& w : spawns) Answer(w, Command::Op::kSpawn, label, spawn_answer);
  for (const auto& w : stops) Answer(w, Command::Op::kStop, label, Status::Ok());
}

void Host::CheckExpiry() {
  const std::int64_t now = env_.NowMs();
  std::vector<std::string> expired;
  for (auto& [label, inst] : instances_) {
    const bool running =
        inst.phase == InstancePhase::kStarting || inst.phase == InstancePhase::kActive;
    if (running && !inst.lease_lost && !LeaseLeft(label, now)) expired.push_back(label);
    if (inst.phase == InstancePhase::kStopping && now >= inst.drain_deadline &&
        leases_.Wanted(label)) {
      env_.Log(LogLevel::kError, "instance '" + label + "' did not stop within " +
                                     std::to_string(inst.drain_ms) +
                                     " ms; its owner lease is left to run out (storage fencing "
                                     "protects its successor)");
      leases_.Drop(label, /*release=*/false);
    }
  }
  for (const auto& label : expired) {
    auto it = instances_.find(label);
    it->second.lease_lost = true;
    const std::int64_t left = leases_.Until(label) - now;
    Record("instance_lease_expired", label, it->second.generation,
           left > 0 ? std::to_string(left) + " ms before expiry (stop lead)"
                    : "detected " + std::to_string(-left) + " ms after expiry");
    leases_.Drop(label, /*release=*/false);  // never renewed again under this instance
    BeginStop(label, "lease expired");
  }
}

void Host::StartGated() {
  const std::int64_t now = env_.NowMs();
  if (!has_quorum_ || shutdown_) return;
  if (now < quorum_since_ + options_.stabilize_ms) {
    const std::int64_t at = quorum_since_ + options_.stabilize_ms;
    if (!gate_timer_) {
      gate_timer_ = env_.After(at - now, [this] { gate_timer_.reset(); });  // an event at `at`
    }
    return;
  }
  std::vector<std::string> ready;
  for (const auto& [label, inst] : instances_) {
    if (inst.phase == InstancePhase::kAcquiring && LeaseLeft(label, now)) {
      ready.push_back(label);
    }
  }
  for (const auto& label : ready) {
    auto it = instances_.find(label);
    if (it == instances_.end() || it->second.phase != InstancePhase::kAcquiring) continue;
    Instance& inst = it->second;
    inst.phase = InstancePhase::kStarting;
    inst.started_generation = inst.generation;
    Changed();
    Record("instance_start", label, inst.generation, "");
    InstanceContext ctx{options_.self_id, label,     inst.kind,
                        inst.actor_type,  inst.state, inst.generation};
    if (hooks_.start) {
      hooks_.start(ctx);  // may answer Started at once
    } else {
      Started(label, ctx.generation, Status::Ok());
    }
  }
}

void Host::AfterEvent() {
  StartGated();
  ArmExpiry();
  if (dirty_ && leader_) {
    dirty_ = false;
    SendReport(*leader_);
  }
}

// One timer at the earliest moment a running instance must stop, so the stop
// does not wait for the node's next event.
void Host::ArmExpiry() {
  std::optional<std::int64_t> at;
  for (const auto& [label, inst] : instances_) {
    const bool running =
        inst.phase == InstancePhase::kStarting || inst.phase == InstancePhase::kActive;
    if (!running || inst.lease_lost) continue;  // a lost lease is handled once, not re-armed
    const std::int64_t t = leases_.Until(label) - options_.stop_lead_ms;
    if (!at || t < *at) at = t;
  }
  if (expiry_timer_ && at != expiry_at_) {
    env_.Cancel(*expiry_timer_);
    expiry_timer_.reset();
  }
  if (!at || expiry_timer_) return;
  expiry_at_ = at;
  expiry_timer_ = env_.After(std::max<std::int64_t>(0, *at - env_.NowMs()), [this] {
    expiry_timer_.reset();  // the event itself runs CheckExpiry (NodeCore::Guarded)
    expiry_at_.reset();
  });
}

void Host::BeginLeave() {
  if (leaving_) return;
  leaving_ = true;
  Changed();
}

void Host::Shutdown() {
  if (shutdown_) return;
  shutdown_ = true;
  StopAll("shutdown");
  dirty_ = true;
}

void Host::OnReportRequest(const Address& from) { SendReport(from); }

void Host::SendReport(const Address& to) {
  coord_wire::Report r;
  r.incarnation = incarnation_;
  r.seq = report_seq_;
  r.has_quorum = has_quorum_;
  r.leaving = leaving_ || shutdown_;
  if (!r.leaving) {  // a leaving node offers nothing new
    r.actor_types.assign(types_.begin(), types_.end());
    r.families = families_;
  }
  r.instances = Instances();
  // Floors within a byte budget far below any usable max_frame_bytes; each is
  // reported kFloorReports times (the leader acts on the first), then dropped,
  // which lets the next ones in. A floor dropped too early does no harm: the
  // journal is still fenced, and the instance's next start reports it again.
  std::size_t bytes = 0;
  for (auto it = floors_.begin(); it != floors_.end();) {
    const std::size_t size = it->first.size() + 16;
    if (r.floors.size() == coord_wire::kMaxReportedFloors || bytes + size > kFloorReportBytes) {
      break;
    }
    bytes += size;
    r.floors.push_back({it->first, it->second.generation});
    it = ++it->second.reports >= kFloorReports ? floors_.erase(it) : std::next(it);
  }
  r.min_term = term_floor_;
  auto [type, payload] = coord_wire::Encode(r);
  env_.Send(to, type, std::move(payload));
}

std::vector<coord_wire::InstanceInfo> Host::Instances() const {
  std::vector<coord_wire::InstanceInfo> out;
  for (const auto& [label, inst] : instances_) {
    out.push_back({label, inst.generation, inst.kind, inst.phase, inst.actor_type});
  }
  return out;
}

std::optional<Generation> Host::ActiveGeneration(const std::string& label) const {
  auto it = instances_.find(label);
  if (it == instances_.end() || it->second.phase != InstancePhase::kActive) return std::nullopt;
  return it->second.generation;
}

std::optional<Generation> Host::StartedGeneration(const std::string& label) const {
  auto it = instances_.find(label);
  if (it == instances_.end() || it->second.phase != InstancePhase::kActive) return std::nullopt;
  return it->second.started_generation;
}

Generation Host::KnownGeneration(const std::string& label) const {
  auto it = known_.find(label);
  return it == known_.end() ? Generation{} : it->second;
}

}  // namespace pynenc_cpp::cluster
