// A cluster of full NodeCores (membership, election, lease, supervisor and the
// coordinator layer) on a SimWorld, for coordinator and singleton scenarios.
// Node i listens at "10.0.2.<i+1>:7000" with id "c<i>" padded to 32 chars;
// every node seeds with every address. All nodes share one in-memory
// GenerationSource (standing in for an external store every node reaches) and
// one in-memory FencedStore.
//
// Instances are plain records: a start hook records a lifetime and answers
// Started (at once, or after factory_ms; failing while `fail_factory` says
// so); a stop hook answers Stopped (after stop_ms). Lifetimes end at the stop
// answer, at a failed start, or when the node crashes.
//
// Thread safety: not thread-safe (single test thread, like SimWorld).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/actors/inbox.h"
#include "cluster/node/node_core.h"
#include "pynenc_cpp/ports/fenced_store.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "sim/sim.h"

namespace pynenc_cpp::cluster::sim {

struct SimNodeSpec {
  std::string node_class;
  std::map<std::string, std::string> metadata;
  std::set<std::string> actor_types = {"worker"};
  std::vector<AgentFamily> families;
};

struct CoordParams {
  int quorum = 0;  // 0: majority of the nodes
  std::int64_t heartbeat_ms = 100;
  std::int64_t suspect_timeout_ms = 500;
  std::int64_t stabilize_ms = 200;
  ElectionKind election = ElectionKind::kOldestNode;
  std::int64_t factory_ms = 0;
  std::int64_t stop_ms = 0;
  // Instances are run by a simulated actor runtime through each node's Inbox
  // (like the Python runtime): start/stop hooks queue kStart/kStop items and
  // RunWithRuntime hands every drained item to the runtime function.
  bool with_inbox = false;
};

struct Lifetime {
  std::string label;
  int node = 0;
  int life = 0;  // the node's boot count at the time
  Generation generation;
  std::int64_t start = 0;
  std::int64_t stop = -1;  // -1: still running
  // The owner lease under which it ran: the end of the authorized interval
  // (a paused node cannot stop on time; its lease still ends).
  std::int64_t lease_until = 0;
  std::string reason;
  bool failed = false;
};

class CoordCluster {
 public:
  CoordCluster(std::uint64_t seed, std::vector<SimNodeSpec> nodes, CoordParams params = {});
  ~CoordCluster();

  SimWorld& world() { return world_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  const NodeId& id(int i) const { return nodes_[i].id; }
  const Address& address(int i) const { return nodes_[i].address; }
  bool up(int i) const { return nodes_[i].core != nullptr; }
  NodeCore& core(int i) { return *nodes_[i].core; }
  GenerationSource& source() { return *source_; }
  FencedStore& fenced() { return *fenced_; }
  int IndexOf(const NodeId& id) const;

  void StartAll();
  void Boot(int i);
  // SIGKILL: the node vanishes; its open lifetimes end now.
  void Crash(int i);
  // A restarted process: same id, higher incarnation, nothing running.
  void Restart(int i);
  // Graceful leave, as ClusterNode::Stop: with `hand_over`, BeginLeave and wait
  // (virtual time, at most 10 s) until the leader moved the node's instances
  // away; then Shutdown, wait for what is left to stop, Leave; the node is gone.
  void Leave(int i, bool hand_over = true);
  void Pause(int i) { world_.Pause(nodes_[i].address); }
  void Resume(int i) { world_.Resume(nodes_[i].address); }

  // The node whose supervisor is master (the Coordinator's), if exactly one.
  std::optional<int> Leader() const;
  bool RunUntil(const std::function<bool()>& pred, std::int64_t max_ms) {
    return world_.RunUntil(pred, max_ms);
  }

  // Client requests through node i's router; runs the world until answered
  // (at most 30 s of virtual time).
  Status SubmitActor(int i, const ActorSpec& spec);
  Status SubmitSingleton(int i, const SingletonSpec& spec);
  Status Remove(int i, const std::string& label);
  Result<std::vector<SpecStatus>> Statuses(int i);
  Result<ClusterView> View(int i);
  Result<std::string> Ask(int i, const std::string& label, const std::string& payload);

  // with_inbox: the runtime that handles each node's inbox items. It answers
  // kStart with AnswerStarted, kStop with AnswerStopped, kLabel with Ack.
  using Runtime = std::function<void(int node, const InboxItem& item)>;
  void SetRuntime(Runtime runtime) { runtime_ = std::move(runtime); }
  // Runs the world for `ms`, draining every inbox after each event.
  void RunWithRuntime(std::int64_t ms);
  bool RunUntilWithRuntime(const std::function<bool()>& pred, std::int64_t max_ms);
  void AnswerStarted(int i, const std::string& label, Generation gen);
  void AnswerStopped(int i, const std::string& label, Generation gen);
  void Ack(int i, std::uint64_t token, LabelOutcome outcome);
  // Sends a label message from node i (Mailer::Enqueue + Pump).
  Result<std::uint64_t> SendLabel(int i, const std::string& label, std::string payload);
  Inbox& inbox(int i) { return *nodes_[i].inbox; }

  // Make the factory of `label` fail the next `times` starts.
  void FailFactory(const std::string& label, int times) { fail_[label] = times; }

  const std::vector<Lifetime>& lifetimes() const { return lifetimes_; }
  // Labels -> node indices of the instances running now (started, not stopped).
  std::map<std::string, std::vector<int>> Running() const;
  int Starts(const std::string& label) const;
  // No two lifetimes of one label overlap: [start, stop) (authorized: [start,
  // min(stop, lease_until)) when `authorized`), crashed ones end at the crash.
  bool NoOverlap(std::string* why, bool authorized = false) const;
  // In start order, every label's generations strictly increase.
  bool GenerationsIncrease(std::string* why) const;
  // Every label in `labels` has exactly one running instance and the leader's
  // statuses say running.
  bool Converged(const std::vector<std::string>& labels);
  // The leader coordinator's stats (zero if none).
  CoordinatorStats LeaderStats() const;

 private:
  struct Node {
    SimNodeSpec spec;
    Address address;
    NodeId id;
    std::unique_ptr<NodeCore> core;
    std::uint64_t incarnation = 0;
    int boots = 0;
    std::map<std::string, int> open;  // label -> index in lifetimes_
    std::unique_ptr<Inbox> inbox;     // with_inbox
  };
  void DrainInboxes();
  void SetRecordingHooks(NodeCoreHooks& h, int i, int life, Env& env);
  Runtime runtime_;
  template <typename T>
  Result<T> Wait(int i, coord_wire::ClientOp op, std::string body,
                 std::function<Result<T>(std::string)> decode);
  void EndOpen(int i, const std::string& reason);

  SimWorld world_;
  CoordParams p_;
  std::vector<Node> nodes_;
  std::shared_ptr<GenerationSource> source_;
  std::unique_ptr<FencedStore> fenced_;
  std::vector<Lifetime> lifetimes_;
  std::map<std::string, int> fail_;
};

}  // namespace pynenc_cpp::cluster::sim
