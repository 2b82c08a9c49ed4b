// ClusterNodeImpl: the production ClusterNode (declared here so its lifecycle,
// cluster_node.cc, and its coordinator API, cluster_node_coord.cc, can live in
// two files). Threads and ownership: see cluster_node.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/actors/inbox.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "cluster/actors/inbox_instance.h"
#include "cluster/coordinator/spec_codec.h"
#include "cluster/node/activation_log.h"
#include "cluster/node/callback_thread.h"
#include "cluster/node/instance_runtime.h"
#include "cluster/node/node_core.h"
#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/cluster/transport.h"

namespace pynenc_cpp::cluster {

class ClusterNodeImpl final : public ClusterNode {
 public:
  ClusterNodeImpl(ClusterOptions options, WorkCallbacks work, EventCallback events,
                  LogCallback log)
      : options_(std::move(options)),
        work_(std::move(work)),
        events_(std::move(events)),
        log_cb_(std::move(log)) {}
  ~ClusterNodeImpl() override { Stop(); }

  pynenc_cpp::Status Init();
  void Stop() override;
  NodeStatus Status() const override {
    NodeStatus s;
    {
      MutexLock lock(mu_);
      s = status_;
    }
    // env_ is set once in Init (before the node is handed out) and never reset.
    if (env_) s.transport = env_->Stats();
    return s;
  }
  std::vector<Member> Members() const override {
    MutexLock lock(mu_);
    return members_;
  }

  // The coordinator layer (cluster_node_coord.cc).
  pynenc_cpp::Status RegisterActorType(const std::string& actor_type, ActorFactory factory) override;
  pynenc_cpp::Status UnregisterActorType(const std::string& actor_type) override;
  pynenc_cpp::Status RegisterAgentFamily(const AgentFamily& family, ActorFactory factory) override;
  std::future<pynenc_cpp::Status> SubmitActor(const ActorSpec& spec, std::int64_t timeout_ms) override;
  std::future<pynenc_cpp::Status> SubmitSingleton(const SingletonSpec& spec, std::int64_t timeout_ms) override;
  std::future<pynenc_cpp::Status> RemoveSpec(const std::string& label, std::int64_t timeout_ms) override;
  std::future<Result<ClusterView>> QueryView(std::int64_t timeout_ms) override;
  std::future<Result<std::vector<SpecStatus>>> QueryStatuses(std::int64_t timeout_ms) override;
  std::optional<LabelPlacement> Lookup(const std::string& label) const override;
  std::vector<LabelPlacement> Directory() const override;
  std::future<Result<std::string>> Ask(const std::string& label, std::string payload,
                                       std::int64_t timeout_ms) override;
  pynenc_cpp::Status Tell(const std::string& label, std::string payload) override;

  // The actor runtime's port (cluster_node_actors.cc).
  int InboxFd() const override { return inbox_ ? inbox_->fd() : -1; }
  std::vector<InboxItem> DrainInbox(std::size_t max) override;
  pynenc_cpp::Status RegisterInboxActorType(const std::string& actor_type,
                                            std::int64_t stop_timeout_ms) override;
  void InstanceStopped(const std::string& label, Generation generation) override;
  void RaiseGenerationFloor(const std::string& label, Generation floor) override;
  Result<std::uint64_t> SendToLabel(const std::string& label, std::string payload) override;
  void AckLabel(std::uint64_t token, LabelOutcome outcome) override;
  void SendToPath(const Address& node_address, const std::string& path,
                  std::string payload) override;
  ActorMailStats MailStats() const override;

 private:
  // Runs `fn` on the loop thread as one node event; false (nothing runs) in
  // standalone mode or once the node stopped.
  bool OnLoop(std::function<void(NodeCore&)> fn);
  // Sends a client request; `done` gets the reply body or error (on the loop
  // thread; exactly once, kUnavailable if the node stops first).
  void Request(coord_wire::ClientOp op, std::string body, std::int64_t timeout_ms,
               std::function<void(Result<std::string>)> done);
  // SubmitActor / SubmitSingleton: `valid` (the spec's own check) or the
  // coordinator's answer to storing `stored`.
  std::future<pynenc_cpp::Status> Submit(const pynenc_cpp::Status& valid, coord_wire::ClientOp op,
                                         const codec::StoredSpec& stored, std::int64_t timeout_ms);
  // Host and router hooks for the coordinator layer, and the registry push.
  void WireServices(NodeCoreOptions& o, NodeCoreHooks& h);
  void PushRegistry();  // loop thread
  void SnapshotServices(NodeStatus& status);  // loop thread
  pynenc_cpp::Status LoadIdentity();
  // The generation source: from options_.storage if given, else from a storage
  // opened on options_.generation_source. Errors start with "generation_source: ".
  Result<std::unique_ptr<GenerationSource>> NewGenerationSource() const;
  void StartCore(const Address& self, std::uint64_t incarnation, std::vector<Address> seeds,
                 int quorum);
  // The node's log sink, safe from any thread. REQUIRES: callbacks_ exists when
  // log_cb_ is set (it is created before anything can log).
  void Log(LogLevel level, std::string_view msg);
  void Snapshot();       // loop thread
  void CheckWorkDone();  // loop thread
  void CheckDrained();   // loop thread
  void Record(std::string_view event, std::uint64_t epoch, std::int64_t mono,
              std::int64_t lease_until, std::string_view reason) {
    if (log_) log_->Write(event, epoch, mono, lease_until, reason);
  }

  ClusterOptions options_;
  WorkCallbacks work_;
  EventCallback events_;
  LogCallback log_cb_;
  std::atomic<int> pending_logs_{0};
  std::atomic<std::uint64_t> dropped_logs_{0};
  bool standalone_ = false;
  NodeId id_;
  std::uint64_t incarnation_ = 0;
  std::vector<Address> cached_peers_;
  // The live peers to write to the state dir, handed from the loop thread to the
  // callback thread (the fsync stays off the network loop); a write already
  // queued takes the newest list, so a burst of member events is one write.
  Mutex peers_mu_;
  std::vector<Address> peers_to_store_ PYNENC_GUARDED_BY(peers_mu_);
  bool peers_store_queued_ PYNENC_GUARDED_BY(peers_mu_) = false;
  // The highest term an instance started under here (state dir "term_floor"):
  // loaded at start, raised on the loop thread at every instance start or
  // re-grant, written like the peers (coalesced, on the callback thread).
  std::uint32_t term_floor_ = 0;           // loop thread (and Init before it)
  std::uint32_t term_floor_to_store_ PYNENC_GUARDED_BY(peers_mu_) = 0;
  bool term_floor_store_queued_ PYNENC_GUARDED_BY(peers_mu_) = false;
  void RememberGeneration(Generation g);   // loop thread
  std::unique_ptr<ActivationLog> log_;
  std::unique_ptr<AsioEnv> env_;
  std::unique_ptr<NodeCore> core_;  // loop thread only
  bool shutting_down_ = false;      // loop thread only
  bool leaving_ = false;            // loop thread only: BeginLeave was called
  std::unique_ptr<CallbackThread> callbacks_;
  std::unique_ptr<InstanceRuntime> runtime_;
  std::unique_ptr<Inbox> inbox_;  // the actor runtime's; outlives core_
  StopLatch stop_latch_;
  // The core's mailer for callers' threads (its Enqueue is thread-safe); set on
  // the loop thread once the core exists, cleared before the core is destroyed.
  mutable Mutex mailer_mu_;
  Mailer* mailer_ PYNENC_GUARDED_BY(mailer_mu_) = nullptr;
  std::shared_ptr<GenerationSource> source_;
  std::uint64_t directory_version_ = 0;  // loop thread: the last one snapshotted

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::vector<LabelPlacement> directory_ PYNENC_GUARDED_BY(mu_);
  NodeStatus status_ PYNENC_GUARDED_BY(mu_);
  std::vector<Member> members_ PYNENC_GUARDED_BY(mu_);
  bool work_done_ PYNENC_GUARDED_BY(mu_) = false;
  bool drained_ PYNENC_GUARDED_BY(mu_) = false;  // the hand-over before a leave ended

  std::mutex stop_mu_;  // serializes Stop() (try_lock on the callback thread: not annotated)
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace pynenc_cpp::cluster
