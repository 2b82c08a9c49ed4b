// The Coordinator: runs on the elected leader (the node holding the mastership
// lease) and only there; a new one is built for every reign and destroyed when
// mastership ends. It decides where every managed label runs (actor specs by
// constraints and strategy, singletons by anchor, agents by their family's
// even distribution), mints generations through the GenerationSource, sends
// spawn/stop commands to the nodes' hosts and reconciles what should run with
// what the nodes report. Semantics: docs/cluster/coordinator.md; the
// singleton guarantees: docs/cluster/singletons.md.
//
// Lifecycle of a reign: kLoading (the GenerationSource's List runs off the
// loop) -> kCollecting (asks every live node for its report; waits for all of
// them or rebuild_timeout_ms) -> kReady (reconciles after every input and every
// heartbeat). Client requests that arrive before kReady wait for it.
//
// Safety does not rest on the Coordinator: hosts refuse stale generations and
// run an instance only under its owner lease (owner_leases.h, host.h), so even
// two coordinators could not make two instances of one label overlap. The
// Coordinator's job is liveness: every spec placed, exactly once, soon.
//
// Thread safety: not thread-safe; lives on the Env loop thread. Store calls run
// through Env::RunBlocking; their results are dropped if the Coordinator was
// destroyed meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "cluster/coordinator/spec_codec.h"
#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/placement.h"
#include "pynenc_cpp/cluster/specs.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp::cluster {

struct CoordinatorOptions {
  NodeId self_id;
  std::int64_t heartbeat_ms = 200;
  std::int64_t lease_ms = 1'000;
  std::int64_t spawn_timeout_ms = 0;       // 0: max(5000, 3 * lease_ms); then the spawn is re-sent
  std::int64_t rebuild_timeout_ms = 0;     // 0: max(1000, 5 * heartbeat_ms)
  std::int64_t retry_ms = 0;               // 0: 5 * heartbeat_ms; doubles per failure up to 30 s
  std::int64_t directory_interval_ms = 0;  // 0: 10 * heartbeat_ms (full re-push)
  StrategyChoice default_strategy{StrategyChoice::Kind::kLeastLoaded, 0, {}};
};

struct CoordinatorStats {
  std::uint64_t spawns_sent = 0;
  std::uint64_t stops_sent = 0;
  std::uint64_t terms_claimed = 0;
  std::uint64_t seqs_claimed = 0;
  std::uint64_t store_errors = 0;
  std::uint64_t stale_acks = 0;  // acks under a generation older than the label's (ignored)
  std::uint64_t directory_pushes = 0;
};

class Coordinator {
 public:
  enum class Phase { kLoading, kCollecting, kReady };
  // Answer to one client request: a code (kOk or an error), a message, a body.
  using Reply = std::function<void(const Status& status, std::string body)>;
  // Entries the directory replica of this node holds (used to rebuild when
  // the source is not shared, e.g. memory://).
  using ReplicaFn = std::function<std::vector<coord_wire::DirectoryEntry>()>;

  Coordinator(Env& env, std::shared_ptr<GenerationSource> source, CoordinatorOptions options,
              ReplicaFn replica = {});
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Starts the reign with the current members (every known one, dead too).
  void Start(const std::vector<Member>& members);
  void SetMembers(const std::vector<Member>& members);

  void OnReport(const Address& from, const coord_wire::Report& report);
  void OnAck(const Address& from, const coord_wire::Ack& ack);
  void HandleClient(const coord_wire::ClientRequest& request, Reply reply);

  Phase phase() const { return phase_; }
  std::vector<SpecStatus> Statuses() const;
  ClusterView View() const;
  const CoordinatorStats& stats() const { return stats_; }
  // Spawn and stop commands sent and not yet answered (each is resolved by its
  // ack, its node's death, a timeout or its label's removal).
  std::size_t PendingCommands() const;

 private:
  struct Pending {
    std::uint64_t request_id = 0;
    NodeId node;
    Generation generation;
    std::int64_t sent_ms = 0;
  };
  struct Entry {
    SpecKind kind = SpecKind::kActor;
    codec::StoredSpec spec;  // actors and singletons
    std::string encoded;     // the stored bytes
    std::string family;      // agents: the scheme
    bool corrupt = false;    // the stored bytes did not decode: never placed

    std::optional<NodeId> owner;
    // The owner before a failure reset it: placing the label there again is a
    // re-grant to the same owner (next seq), not a new term.
    std::optional<NodeId> previous_owner;
    std::optional<NodeId> placing;  // a ClaimTerm for this node is in flight
    Generation generation;
    // An instance under `generation` may have run on `owner`: a lost one is
    // replaced under a new generation (every instance lifetime gets its own).
    bool placed_before = false;
    std::optional<Pending> spawn;
    std::pair<std::uint64_t, std::uint64_t> acked{0, 0};  // owner's (incarnation, report seq)
    int failures = 0;
    std::int64_t retry_at = 0;
    std::string last_error;
    std::optional<NodeId> waiting_for;
    std::int64_t waiting_since = 0;
    std::optional<NodeId> moving_to;
    std::int64_t move_deadline = 0;
    bool abandoned = false;
    bool store_busy = false;

    SpecState state = SpecState::kPending;
    std::string reason;
  };
  struct NodeState {
    Member member;
    bool live = false;
    bool reported = false;  // a report arrived during this reign
    coord_wire::Report report;
  };
  struct Target {
    std::optional<NodeId> node;
    std::string reason;
  };

  // Loading and rebuilding.
  void Load();
  void OnLoaded(Result<std::vector<SpecRecord>> result);
  void MergeReplica();
  void MaybeReady();
  void Adopt();
  // Reconciling (coordinator_reconcile.cc).
  void Reconcile();
  void ReconcileEntry(const std::string& label, Entry& e);
  void SyncAgents();
  Target Choose(const std::string& label, const Entry& e);
  // Ownership: the generation claims (ownership.cc).
  void ClaimTerm(const std::string& label, const NodeId& node);
  void ClaimSeq(const std::string& label);
  void SendSpawn(const std::string& label, Entry& e);
  void SendStop(const NodeId& node, const std::string& label, Generation gen,
                const std::string& reason, std::int64_t drain_ms);
  void StopStrays();
  ClusterView PlacementView() const;
  void SetState(Entry& e, SpecState s, std::string reason);
  std::int64_t DrainMs(const Entry& e) const;
  // Client requests (coordinator_requests.cc).
  void Serve(const coord_wire::ClientRequest& request, Reply reply);
  void Submit(codec::StoredSpec spec, Reply reply);
  void Remove(const std::string& label, Reply reply);
  // Directory.
  void PushDirectory(bool force);

  bool Live(const NodeId& id) const;
  // Live and not draining before a graceful leave.
  bool Staying(const NodeId& id) const;
  const coord_wire::InstanceInfo* Reported(const NodeId& node, const std::string& label) const;
  // The storage fence `node` last reported for `label` (GenerationFloor), if any.
  const Generation* ReportedFloor(const NodeId& node, const std::string& label) const;
  std::optional<NodeId> NodeAt(const Address& address) const;
  void Tick();
  // Runs `op` off the loop, then `done` on it unless this Coordinator is gone.
  template <typename T>
  void Async(std::function<T()> op, std::function<void(T)> done);

  Env& env_;
  std::shared_ptr<GenerationSource> source_;
  CoordinatorOptions options_;
  ReplicaFn replica_;
  std::unique_ptr<PlacementStrategy> default_strategy_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  Phase phase_ = Phase::kLoading;
  std::int64_t collect_deadline_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<NodeId, NodeState> nodes_;
  std::map<std::pair<NodeId, std::string>, Pending> stops_;
  std::vector<std::pair<coord_wire::ClientRequest, Reply>> queued_;
  std::uint64_t next_request_ = 1;
  std::optional<Env::TimerId> tick_;
  std::uint64_t reign_ = 0;
  std::uint64_t directory_version_ = 0;
  std::vector<coord_wire::DirectoryEntry> pushed_;
  std::int64_t pushed_at_ = 0;
  std::set<NodeId> pushed_to_;
  bool reconciling_ = false;
  ClusterView pass_view_;  // the view of the current reconcile pass (placements added as made)
  std::map<std::string, Target> agent_targets_;
  CoordinatorStats stats_;
};

template <typename T>
void Coordinator::Async(std::function<T()> op, std::function<void(T)> done) {
  auto result = std::make_shared<std::optional<T>>();
  std::weak_ptr<bool> alive = alive_;
  env_.RunBlocking([op = std::move(op), result] { result->emplace(op()); },
                   [alive, result, done = std::move(done)] {
                     if (alive.lock() && result->has_value()) done(std::move(**result));
                   });
}

}  // namespace pynenc_cpp::cluster
