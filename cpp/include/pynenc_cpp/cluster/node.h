// A cluster node: membership (SWIM), an agreed epoch, an election with quorum,
// a lease on the monotonic clock and the master/standby supervisor, running on
// the Asio environment. It drives a user start/stop pair so the work runs only
// on the master. With no seeds and no host it runs the work in-process at once,
// with no cluster at all.
//
// The master also runs the Coordinator (docs/cluster/coordinator.md): specs
// submitted from any node are placed on the nodes that register their actor
// types, singletons on their anchor's node, agents of families evenly; every
// node runs what it is told under an owner lease and a generation fence
// (docs/cluster/singletons.md), and routes messages to any label.
//
// Thread safety: every public method is safe from any thread. Callbacks (work
// start/stop and membership events) run one at a time on the node's callback
// thread, never on the network loop, so they may block without stalling the
// protocol (a slow stop delays only the Stopping -> Standby step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/cluster/actors.h"
#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/cluster/instance.h"
#include "pynenc_cpp/cluster/specs.h"
#include "pynenc_cpp/cluster/transport.h"
#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/storage.h"

namespace pynenc_cpp::cluster {

enum class ElectionKind : std::uint8_t { kOldestNode = 0, kHrw = 1, kLowestAddress = 2 };

struct ClusterOptions {
  std::string cluster_name = "pynenc-cpp";
  std::string host;         // empty together with no seeds: standalone (no cluster)
  std::uint16_t port = 0;   // 0: ephemeral
  std::vector<Address> seeds;
  std::string secret;       // required, never empty (kBadConfig otherwise)
  int quorum = 0;           // 0: majority of the distinct addresses in seeds plus self
  std::int64_t heartbeat_ms = 200;
  std::int64_t suspect_timeout_ms = 1'000;
  std::int64_t stabilize_ms = 500;
  std::int64_t lease_ms = 0;  // 0: suspect_timeout_ms
  int indirect_probes = 3;
  std::string state_dir;    // node id, incarnation, peers cache; empty: nothing persisted
  // This node's id (1..128 of [A-Za-z0-9._:-]); empty: a random one, or the one
  // kept in state_dir. Not with state_dir. A restarted process with the same id
  // announces a higher incarnation (taken from the wall clock), so it rejoins.
  std::string node_id;
  std::string node_class;
  std::map<std::string, std::string> metadata;
  std::size_t max_frame_bytes = 256 * 1024;
  // Warnings about refused connections per second, at most (TransportOptions).
  int refusal_logs_per_second = 10;
  std::size_t send_queue_bound = 1024;
  ElectionKind election = ElectionKind::kOldestNode;
  std::string election_class;  // OldestNode only: restrict candidates to this node class
  std::string activation_log;  // JSON-lines file of start/stop/lease records; empty: none
  // The coordinator layer.
  // Where generations and specs live: memory:// (this process only: a leader in
  // another process rebuilds from the nodes' directory copies), sqlite:///path
  // (processes of one machine), redis://host:port/db. Namespaced by cluster_name.
  std::string generation_source = "memory://";
  // The storage the generation source is taken from, shared with the process's
  // other cluster ports (fenced stores, journals); it must be opened on
  // generation_source with cluster_name as its app id (else the start fails with
  // kBadConfig). Null: the node opens a storage of its own on generation_source.
  std::shared_ptr<Storage> storage;
  StrategyChoice placement{StrategyChoice::Kind::kLeastLoaded, 0, {}};  // the default strategy
  std::int64_t request_timeout_ms = 5'000;  // default deadline of Submit/Query/Ask
  std::int64_t spawn_timeout_ms = 0;        // 0: max(5000, 3 * lease); then the spawn is re-sent
  // The actor runtime's messages (docs/cluster/actors.md).
  std::size_t actor_buffer_limit = 1'000;  // per label: messages sent, not yet acknowledged
  std::size_t actor_inbox_limit = 100'000;  // messages waiting for the runtime; beyond: refused
  std::int64_t actor_resend_ms = 2'000;     // an unacknowledged label message is sent again
  // A graceful Stop first lets the leader move this node's instances to other
  // nodes (each drained), waiting at most this long; 0: no hand-over.
  std::int64_t leave_timeout_ms = 10'000;
};

enum class SupervisorState : std::uint8_t { kStandby = 0, kActivating = 1, kMaster = 2, kStopping = 3 };
std::string_view SupervisorStateName(SupervisorState s);

// Handed to the work callbacks.
struct Activation {
  NodeId node;
  std::uint64_t epoch = 0;
  std::int64_t lease_until_mono_ms = 0;  // CLOCK_MONOTONIC ms; 0 in standalone mode
  bool standalone = false;
};

struct WorkCallbacks {
  std::function<void(const Activation&)> start;
  std::function<void(const Activation&, std::string_view reason)> stop;
};

using EventCallback = std::function<void(const MemberEvent&)>;

// Receives the node's log lines (refused handshakes, dropped frames, persistence
// errors, warnings; Debug lines only with PYNENC_CPP_CLUSTER_DEBUG set). Runs on the
// callback thread like the other callbacks, never on the network loop. At most
// kMaxPendingLogLines wait there; beyond that lines are dropped and the next
// delivered line is preceded by a Warning that counts them. Empty: lines of
// Warning and above go to stderr.
using LogCallback = std::function<void(LogLevel, std::string_view)>;
inline constexpr int kMaxPendingLogLines = 1000;

struct NodeStatus {
  NodeId id;
  Address address;  // empty in standalone mode
  std::uint64_t incarnation = 0;
  std::uint64_t epoch = 0;
  std::optional<NodeId> leader;
  bool has_quorum = false;
  SupervisorState state = SupervisorState::kStandby;
  std::int64_t lease_until_mono_ms = 0;
  bool standalone = false;
  TransportStats transport;  // all zero in standalone mode
  // Instances on this node (any phase: acquiring, starting, active, stopping).
  struct Hosted {
    std::string label;
    SpecKind kind = SpecKind::kActor;
    Generation generation;
    std::string phase;
  };
  std::vector<Hosted> hosted;
};

class ClusterNode {
 public:
  virtual ~ClusterNode() = default;  // implies Stop()
  ClusterNode() = default;
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // Validates options, creates/reads the state dir, binds, joins the seeds.
  // Errors: kBadConfig (bad option, unwritable state dir, non-loopback host without
  // secret), kBackendFailure (address in use). Nothing is started on error.
  static Result<std::unique_ptr<ClusterNode>> Start(const ClusterOptions& options,
                                                    WorkCallbacks work, EventCallback events,
                                                    LogCallback log = {});

  // Graceful: first hands the instances this node runs over to other nodes (the
  // leader moves them, drained; at most leave_timeout_ms; skipped without a
  // leader or when called from a callback), then stops the work if running
  // (waits for the stop callback) and whatever instances are left, sends
  // Leaving to every live member, shuts the transport down. Idempotent. May be
  // called from inside a callback (it then runs the stop callback itself); the
  // node must not be destroyed from inside one of its own callbacks.
  virtual void Stop() = 0;
  virtual NodeStatus Status() const = 0;
  // Every known member, self included, dead and left ones too, sorted by id.
  virtual std::vector<Member> Members() const = 0;

  // ---- The coordinator layer. Safe from any thread. Factories, instance
  // stops and messages to instances run on the callback thread. In standalone
  // mode every call below fails with kUnavailable. ----

  // Registers (or replaces) the factory of `actor_type` on this node; the leader
  // learns of it from the node's next report. kInvalidArgument for a bad name.
  virtual pynenc_cpp::Status RegisterActorType(const std::string& actor_type, ActorFactory factory) = 0;
  // This node no longer offers `actor_type` (instances running stay until moved).
  virtual pynenc_cpp::Status UnregisterActorType(const std::string& actor_type) = 0;
  // Declares an agent family; `factory` builds its agents (context.actor_type is
  // the scheme, context.label the agent URI). kInvalidArgument for a bad family.
  virtual pynenc_cpp::Status RegisterAgentFamily(const AgentFamily& family, ActorFactory factory) = 0;

  // Requests to the Coordinator (on the leader; forwarded from other nodes).
  // timeout_ms <= 0: request_timeout_ms. Errors: kInvalidArgument (bad spec),
  // kConflict (the label is taken by another spec), kNotFound (Remove of an
  // unknown label), kUnavailable (no leader, standalone, node stopped),
  // kTimeout, kBackendFailure (the generation source failed).
  virtual std::future<pynenc_cpp::Status> SubmitActor(const ActorSpec& spec, std::int64_t timeout_ms = 0) = 0;
  virtual std::future<pynenc_cpp::Status> SubmitSingleton(const SingletonSpec& spec,
                                              std::int64_t timeout_ms = 0) = 0;
  virtual std::future<pynenc_cpp::Status> RemoveSpec(const std::string& label, std::int64_t timeout_ms = 0) = 0;
  virtual std::future<Result<ClusterView>> QueryView(std::int64_t timeout_ms = 0) = 0;
  virtual std::future<Result<std::vector<SpecStatus>>> QueryStatuses(
      std::int64_t timeout_ms = 0) = 0;

  // Where `label` runs, from this node's copy of the leader's directory.
  virtual std::optional<LabelPlacement> Lookup(const std::string& label) const = 0;
  virtual std::vector<LabelPlacement> Directory() const = 0;
  // Sends `payload` to the running instance of `label` (ActorInstance::OnMessage)
  // and returns its answer. kUnavailable when it does not run (or not where the
  // directory says), kTimeout, or the instance's own error.
  virtual std::future<Result<std::string>> Ask(const std::string& label, std::string payload,
                                               std::int64_t timeout_ms = 0) = 0;
  // Fire and forget: kUnavailable at once if the directory knows no running instance.
  virtual pynenc_cpp::Status Tell(const std::string& label, std::string payload) = 0;

  // ---- The port of the process's actor runtime (docs/cluster/actors.md). In
  // standalone mode InboxFd() is -1 and the calls fail with kUnavailable. ----

  // Readable while inbox items wait (an eventfd: give it to an event loop).
  virtual int InboxFd() const = 0;
  // Up to `max` waiting items, oldest first.
  virtual std::vector<InboxItem> DrainInbox(std::size_t max) = 0;
  // Offers `actor_type` with instances run by the runtime through the inbox
  // (kStart / kStop / kRegrant items); a stop waits up to stop_timeout_ms for
  // InstanceStopped.
  virtual pynenc_cpp::Status RegisterInboxActorType(const std::string& actor_type,
                                                    std::int64_t stop_timeout_ms) = 0;
  // The runtime finished a kStop item.
  virtual void InstanceStopped(const std::string& label, Generation generation) = 0;
  // The runtime found the storage of `label`'s instance (an event-sourced
  // journal) fenced at `floor`, above the generation it was started under, so
  // that instance cannot run: the node drops it and the leader claims a term
  // above `floor` (docs/cluster/singletons.md, "Generations never go backwards").
  virtual void RaiseGenerationFloor(const std::string& label, Generation floor) = 0;
  // Sends `payload` to the instance of `label`, reliably (docs/cluster/actors.md);
  // returns its sequence number, or kResourceExhausted when actor_buffer_limit
  // messages of the label are still unacknowledged (nothing queued).
  virtual Result<std::uint64_t> SendToLabel(const std::string& label, std::string payload) = 0;
  // The runtime's answer to a kLabel item.
  virtual void AckLabel(std::uint64_t token, LabelOutcome outcome) = 0;
  // Best effort, at most once, to the local actor at `path` of the node at `node_address`.
  virtual void SendToPath(const Address& node_address, const std::string& path,
                          std::string payload) = 0;
  virtual ActorMailStats MailStats() const = 0;
};

}  // namespace pynenc_cpp::cluster
