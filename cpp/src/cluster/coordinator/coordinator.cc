// The Coordinator's reign: loading and rebuilding, inputs from the nodes, the
// view, the directory. Placement decisions: coordinator_reconcile.cc; client
// requests: coordinator_requests.cc.
#include "cluster/coordinator/coordinator.h"

#include <algorithm>
#include <utility>

namespace pynenc_cpp::cluster {

namespace {
constexpr std::size_t kDirectoryChunkBytes = 64 * 1024;
}  // namespace

Coordinator::Coordinator(Env& env, std::shared_ptr<GenerationSource> source,
                         CoordinatorOptions options, ReplicaFn replica)
    : env_(env),
      source_(std::move(source)),
      options_(std::move(options)),
      replica_(std::move(replica)) {
  if (options_.spawn_timeout_ms <= 0)
    options_.spawn_timeout_ms = std::max<std::int64_t>(5'000, 3 * options_.lease_ms);
  if (options_.rebuild_timeout_ms <= 0)
    options_.rebuild_timeout_ms = std::max<std::int64_t>(1'000, 5 * options_.heartbeat_ms);
  if (options_.retry_ms <= 0) options_.retry_ms = 5 * options_.heartbeat_ms;
  if (options_.directory_interval_ms <= 0)
    options_.directory_interval_ms = 10 * options_.heartbeat_ms;
  default_strategy_ = MakeStrategy(options_.default_strategy);
  if (!default_strategy_) default_strategy_ = MakeLeastLoaded();
}

Coordinator::~Coordinator() {
  *alive_ = false;
  if (tick_) env_.Cancel(*tick_);
  // Requests still queued are answered: none is left hanging.
  auto queued = std::move(queued_);
  for (auto& [req, reply] : queued) {
    reply(Status::Unavailable("the coordinator stepped down"), "");
  }
}

void Coordinator::Start(const std::vector<Member>& members) {
  reign_ = (static_cast<std::uint64_t>(env_.WallMs()) << 16) ^ (env_.Random() & 0xffff);
  SetMembers(members);
  Load();
  Tick();
}

void Coordinator::Tick() {
  // The token: NodeCore's expiry check, run just before this timer's callback,
  // may have ended the reign (and destroyed this object) already.
  tick_ = env_.After(options_.heartbeat_ms, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (!alive.lock()) return;
    tick_.reset();
    MaybeReady();
    Reconcile();
    Tick();
  });
}

void Coordinator::SetMembers(const std::vector<Member>& members) {
  std::set<NodeId> seen;
  for (const auto& m : members) {
    NodeState& ns = nodes_[m.id];
    const bool was_live = ns.live;
    ns.member = m;
    ns.live = IsLive(m.state);
    if (!ns.live) ns.reported = false;  // a returning node is asked for a fresh report
    if (ns.live && !was_live && phase_ != Phase::kLoading) {
      auto [type, payload] = coord_wire::Encode(coord_wire::ReportRequest{reign_});
      env_.Send(m.address, type, std::move(payload));
    }
    seen.insert(m.id);
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    it = seen.count(it->first) ? std::next(it) : nodes_.erase(it);  // tombstones expired
  }
  // Requests in flight to nodes that are gone are resolved now.
  for (auto& [label, e] : entries_) {
    if (e.spawn && !Live(e.spawn->node)) e.spawn.reset();
  }
  for (auto it = stops_.begin(); it != stops_.end();) {
    it = Live(it->first.first) ? std::next(it) : stops_.erase(it);
  }
  MaybeReady();
  Reconcile();
}

void Coordinator::Load() {
  phase_ = Phase::kLoading;
  auto source = source_;
  Async<Result<std::vector<SpecRecord>>>([source] { return source->List(); },
                                         [this](Result<std::vector<SpecRecord>> r) {
                                           OnLoaded(std::move(r));
                                         });
}

void Coordinator::OnLoaded(Result<std::vector<SpecRecord>> result) {
  if (!result.ok()) {
    ++stats_.store_errors;
    env_.Log(LogLevel::kError, "coordinator: cannot read the generation source (" +
                                   result.status().ToString() + "); retrying in " +
                                   std::to_string(options_.retry_ms) + " ms");
    env_.After(options_.retry_ms, [alive = std::weak_ptr<bool>(alive_), this] {
      if (alive.lock()) Load();
    });
    return;
  }
  for (auto& rec : std::move(result).value()) {
    Entry e;
    e.encoded = rec.spec;
    auto spec = codec::DecodeSpec(rec.spec);
    if (spec.ok()) {
      e.spec = std::move(spec).value();
      e.kind = e.spec.kind;
    } else {
      e.corrupt = true;
      e.reason = "corrupt spec in the generation source: " + spec.status().message();
      env_.Log(LogLevel::kError, "coordinator: label '" + rec.label + "': " + e.reason);
    }
    if (rec.ownership) {
      e.owner = rec.ownership->owner;
      e.generation = rec.ownership->generation;
      e.placed_before = true;
    }
    entries_[rec.label] = std::move(e);
  }
  if (!source_->Shared()) MergeReplica();
  phase_ = Phase::kCollecting;
  collect_deadline_ = env_.NowMs() + options_.rebuild_timeout_ms;
  auto [type, payload] = coord_wire::Encode(coord_wire::ReportRequest{reign_});
  for (const auto& [id, ns] : nodes_) {
    if (ns.live) env_.Send(ns.member.address, type, payload);
  }
  MaybeReady();
}

// The source keeps nothing another process wrote (memory://): what the previous
// leader pushed to this node's directory replica is the best record of the
// specs and their generations. Stored back so later claims start above them.
void Coordinator::MergeReplica() {
  if (!replica_) return;
  for (const auto& d : replica_()) {
    if (d.kind == SpecKind::kAgent || d.spec.empty() || entries_.count(d.label)) continue;
    auto spec = codec::DecodeSpec(d.spec);
    if (!spec.ok()) continue;
    Entry e;
    e.spec = std::move(spec).value();
    e.kind = e.spec.kind;
    e.encoded = d.spec;
    // The generation is kept with or without an owner (one being moved or whose
    // node left has none): the next term is claimed above it, never at 1 again.
    e.generation = d.generation;
    if (!d.owner.empty()) {
      e.owner = d.owner;
      e.placed_before = true;
    }
    auto source = source_;
    const std::string label = d.label, bytes = d.spec;
    Async<Status>([source, label, bytes] { return source->PutSpec(label, bytes); },
                  [this, label](Status s) {
                    if (!s.ok()) {
                      ++stats_.store_errors;
                      env_.Log(LogLevel::kError, "coordinator: cannot store spec '" + label +
                                                     "': " + s.ToString());
                    }
                  });
    entries_[d.label] = std::move(e);
  }
}

void Coordinator::MaybeReady() {
  if (phase_ != Phase::kCollecting) return;
  bool all = true;
  for (const auto& [id, ns] : nodes_) all = all && (!ns.live || ns.reported);
  if (!all && env_.NowMs() < collect_deadline_) return;
  phase_ = Phase::kReady;
  SyncAgents();
  Adopt();
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& [req, reply] : queued) Serve(req, std::move(reply));
  Reconcile();
}

// After a leader change: what the nodes report running wins over what the
// source lost (memory://) or never recorded. An instance newer than the
// recorded generation is adopted with its node; the source's record wins
// otherwise (a stray older instance is stopped by StopStrays).
void Coordinator::Adopt() {
  for (auto& [label, e] : entries_) {
    const NodeId* best = nullptr;
    Generation best_gen;
    for (const auto& [id, ns] : nodes_) {
      if (!ns.live || !ns.reported) continue;
      for (const auto& inst : ns.report.instances) {
        if (inst.label == label && inst.phase != coord_wire::InstancePhase::kStopping &&
            (!best || inst.generation > best_gen)) {
          best = &id;
          best_gen = inst.generation;
        }
      }
    }
    if (best && (!e.owner || best_gen > e.generation)) {
      e.owner = *best;
      e.generation = best_gen;
      e.placed_before = true;
    }
  }
}

bool Coordinator::Live(const NodeId& id) const {
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.live;
}

bool Coordinator::Staying(const NodeId& id) const {
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.live &&
         !(it->second.reported && it->second.report.leaving);
}

std::optional<NodeId> Coordinator::NodeAt(const Address& address) const {
  for (const auto& [id, ns] : nodes_) {
    if (ns.live && ns.member.address == address) return id;
  }
  return std::nullopt;
}

const coord_wire::InstanceInfo* Coordinator::Reported(const NodeId& node,
                                                      const std::string& label) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || !it->second.reported) return nullptr;
  for (const auto& inst : it->second.report.instances) {
    if (inst.label == label) return &inst;
  }
  return nullptr;
}

const Generation* Coordinator::ReportedFloor(const NodeId& node, const std::string& label) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || !it->second.reported) return nullptr;
  for (const auto& f : it->second.report.floors) {
    if (f.label == label) return &f.generation;
  }
  return nullptr;
}

void Coordinator::OnReport(const Address& from, const coord_wire::Report& report) {
  auto id = NodeAt(from);
  if (!id) return;
  NodeState& ns = nodes_[*id];
  if (ns.reported && std::make_pair(report.incarnation, report.seq) <
                         std::make_pair(ns.report.incarnation, ns.report.seq)) {
    return;  // overtaken by a newer one
  }
  ns.report = report;
  ns.reported = true;
  if (phase_ == Phase::kCollecting) {
    MaybeReady();
  } else {
    Reconcile();
  }
}

void Coordinator::OnAck(const Address& from, const coord_wire::Ack& ack) {
  auto id = NodeAt(from);
  if (!id) return;
  if (ack.op == coord_wire::Command::Op::kStop) {
    auto it = stops_.find({*id, ack.label});
    if (it != stops_.end() && it->second.request_id == ack.request_id) stops_.erase(it);
    Reconcile();
    return;
  }
  auto it = entries_.find(ack.label);
  if (it == entries_.end() || !it->second.spawn ||
      it->second.spawn->request_id != ack.request_id || ack.generation < it->second.generation) {
    ++stats_.stale_acks;  // the fence on this side: acks of older generations change nothing
    return;
  }
  Entry& e = it->second;
  e.spawn.reset();
  if (ack.code == ErrorCode::kOk) {
    e.acked = {ack.incarnation, ack.report_seq};
    e.failures = 0;
    e.last_error.clear();
  } else {
    ++e.failures;
    e.last_error = "spawn on " + id->substr(0, 8) + " failed: " + ack.message;
    const int shift = std::min(e.failures - 1, 10);
    e.retry_at = env_.NowMs() + std::min<std::int64_t>(30'000, options_.retry_ms << shift);
    // The node knows a newer generation than ours: re-read the source first.
    if (ack.code == ErrorCode::kStaleGeneration) e.placed_before = true;
  }
  Reconcile();
}

std::size_t Coordinator::PendingCommands() const {
  std::size_t n = stops_.size();
  for (const auto& [label, e] : entries_) n += e.spawn ? 1 : 0;
  return n;
}

std::vector<SpecStatus> Coordinator::Statuses() const {
  std::vector<SpecStatus> out;
  for (const auto& [label, e] : entries_) {
    out.push_back({label, e.kind, e.state, e.owner, e.generation, e.reason});
  }
  return out;
}

ClusterView Coordinator::View() const {
  ClusterView v;
  v.leader = options_.self_id;
  for (const auto& [id, ns] : nodes_) {
    NodeView n;
    n.id = id;
    n.address = ns.member.address;
    n.incarnation = ns.member.incarnation;
    n.state = ns.member.state;
    n.alive = ns.live;
    n.node_class = ns.member.node_class;
    n.metadata = ns.member.metadata;
    if (ns.reported) n.actor_types = ns.report.actor_types;
    for (const auto& [label, e] : entries_) {
      if (e.owner == id && !e.abandoned) n.running.push_back(label);
    }
    v.alive_count += n.alive ? 1 : 0;
    ++v.total_count;
    v.nodes.push_back(std::move(n));
  }
  return v;
}

void Coordinator::PushDirectory(bool force) {
  std::vector<coord_wire::DirectoryEntry> entries;
  for (const auto& [label, e] : entries_) {
    coord_wire::DirectoryEntry d;
    d.label = label;
    d.kind = e.kind;
    d.state = e.state;
    if (e.owner) {
      d.owner = *e.owner;
      auto it = nodes_.find(*e.owner);
      if (it != nodes_.end()) d.owner_address = it->second.member.address;
    }
    d.generation = e.generation;
    d.reason = e.reason;
    d.spec = e.encoded;
    entries.push_back(std::move(d));
  }
  std::set<NodeId> targets;
  for (const auto& [id, ns] : nodes_) {
    if (ns.live) targets.insert(id);
  }
  const std::int64_t now = env_.NowMs();
  const bool newcomers = !std::includes(pushed_to_.begin(), pushed_to_.end(), targets.begin(),
                                        targets.end());
  if (!force && entries == pushed_ && !newcomers &&
      now - pushed_at_ < options_.directory_interval_ms) {
    return;
  }
  ++directory_version_;
  std::vector<coord_wire::Directory> chunks(1);
  std::size_t bytes = 0;
  for (auto& d : entries) {
    const std::size_t size = d.label.size() + d.spec.size() + d.reason.size() + 128;
    if (bytes + size > kDirectoryChunkBytes && !chunks.back().entries.empty()) {
      chunks.emplace_back();
      bytes = 0;
    }
    bytes += size;
    chunks.back().entries.push_back(d);
  }
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].leader = options_.self_id;
    chunks[i].reign = reign_;
    chunks[i].version = directory_version_;
    chunks[i].chunk = static_cast<std::uint32_t>(i);
    chunks[i].chunks = static_cast<std::uint32_t>(chunks.size());
    auto [type, payload] = coord_wire::Encode(chunks[i]);
    for (const auto& id : targets) env_.Send(nodes_[id].member.address, type, payload);
  }
  pushed_ = std::move(entries);
  pushed_at_ = now;
  pushed_to_ = std::move(targets);
  ++stats_.directory_pushes;
}

}  // namespace pynenc_cpp::cluster
