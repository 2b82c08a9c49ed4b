// ClusterNode: the production runtime. Threads:
//  * the AsioEnv loop thread runs NodeCore (created, fed and destroyed there);
//  * one callback thread runs the user's work start/stop and membership event
//    callbacks one at a time, in the order NodeCore asked for them;
//  * the caller's threads only read snapshots (Status/Members, under mu_) and
//    call Stop().
// Standalone mode (no host, no seeds) has no loop: the callback thread runs
// start at once and stop at Stop().
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "cluster/membership/persistence.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "cluster/node/activation_log.h"
#include "cluster/node/cluster_node_impl.h"
#include "cluster/node/node_core.h"
#include "cluster/node/options.h"
#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/cluster/transport.h"

namespace pynenc_cpp::cluster {

namespace {

NodeId RandomNodeId() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  NodeId id;
  for (int i = 0; i < 8; ++i) {
    std::uint32_t v = rd();
    for (int k = 0; k < 4; ++k) {
      id.push_back(kHex[(v >> (8 * k + 4)) & 0xf]);
      id.push_back(kHex[(v >> (8 * k)) & 0xf]);
    }
  }
  return id;
}

bool DebugLogging() {
  static const bool debug = std::getenv("PYNENC_CPP_CLUSTER_DEBUG") != nullptr;
  return debug;
}

void StderrSink(LogLevel level, std::string_view msg) {
  if (level < LogLevel::kWarning && !DebugLogging()) return;
  std::fprintf(stderr, "pynenc-cpp cluster: %.*s\n", static_cast<int>(msg.size()), msg.data());
}

}  // namespace

void ClusterNodeImpl::Log(LogLevel level, std::string_view msg) {
  if (!log_cb_) return StderrSink(level, msg);
  if (level < LogLevel::kInfo && !DebugLogging()) return;
  if (pending_logs_.fetch_add(1) >= kMaxPendingLogLines) {
    pending_logs_.fetch_sub(1);
    dropped_logs_.fetch_add(1);
    return;
  }
  callbacks_->Push([this, level, line = std::string(msg)] {
    pending_logs_.fetch_sub(1);
    if (const std::uint64_t dropped = dropped_logs_.exchange(0)) {
      log_cb_(LogLevel::kWarning, std::to_string(dropped) +
                                      " log lines dropped (more than " +
                                      std::to_string(kMaxPendingLogLines) + " pending)");
    }
    log_cb_(level, line);
  });
}

Result<std::unique_ptr<GenerationSource>> ClusterNodeImpl::NewGenerationSource() const {
  const auto named = [](const pynenc_cpp::Status& s) {
    return pynenc_cpp::Status::FromCode(s.code(), "generation_source: " + s.message());
  };
  if (options_.storage == nullptr) {
    auto source = OpenGenerationSource(
        BackendConfig{options_.generation_source, options_.cluster_name, nullptr});
    if (!source.ok()) return named(source.status());
    return source;
  }
  const BackendConfig& config = options_.storage->config();
  if (config.uri != options_.generation_source) {
    return pynenc_cpp::Status::BadConfig("generation_source: the storage given is on '" +
                                         RedactUri(config.uri) + "', not on '" +
                                         RedactUri(options_.generation_source) + "'");
  }
  if (config.app_id != options_.cluster_name) {
    return pynenc_cpp::Status::BadConfig("generation_source: the storage given is namespaced '" +
                                         config.app_id + "', not the cluster name '" +
                                         options_.cluster_name + "'");
  }
  auto source = options_.storage->NewGenerationSource();
  if (!source.ok()) return named(source.status());
  return source;
}

pynenc_cpp::Status ClusterNodeImpl::LoadIdentity() {
  if (!options_.node_id.empty()) {
    id_ = options_.node_id;
    // Nothing persisted: the wall clock orders this process's incarnation after
    // any earlier process with the same id.
    incarnation_ = static_cast<std::uint64_t>(WallNowMs());
    return pynenc_cpp::Status::Ok();
  }
  if (options_.state_dir.empty()) {
    id_ = RandomNodeId();
    return pynenc_cpp::Status::Ok();
  }
  auto id = membership::LoadOrCreateNodeId(options_.state_dir);
  if (!id.ok()) return id.status();
  id_ = id.value();
  if (standalone_) return pynenc_cpp::Status::Ok();
  auto inc = membership::LoadIncarnation(options_.state_dir);
  if (!inc.ok()) return inc.status();
  incarnation_ = inc.value() + 1;  // every start announces a higher incarnation
  if (auto s = membership::StoreIncarnation(options_.state_dir, incarnation_); !s.ok()) return s;
  auto peers = membership::LoadPeers(options_.state_dir);
  if (peers.ok()) cached_peers_ = std::move(peers).value();  // a cache: unreadable = empty
  auto floor = membership::LoadTermFloor(options_.state_dir);
  if (!floor.ok()) return floor.status();
  term_floor_ = floor.value();
  return pynenc_cpp::Status::Ok();
}

pynenc_cpp::Status ClusterNodeImpl::Init() {
  if (auto s = ValidateClusterOptions(options_); !s.ok()) return s;
  standalone_ = IsStandalone(options_);
  if (auto s = LoadIdentity(); !s.ok()) return s;
  if (!options_.activation_log.empty()) {
    auto log = ActivationLog::Open(options_.activation_log, id_);
    if (!log.ok()) return log.status();
    log_ = std::move(log).value();
  }
  if (standalone_) {
    const Activation a{id_, 0, 0, true};
    {
      MutexLock lock(mu_);  // no other thread yet; the analysis wants it all the same
      status_ = NodeStatus{};
      status_.id = id_;
      status_.leader = id_;
      status_.has_quorum = true;
      status_.state = SupervisorState::kMaster;
      status_.standalone = true;
    }
    callbacks_ = std::make_unique<CallbackThread>();
    callbacks_->Push([this, a] {
      Record("start", 0, MonotonicNowMs(), 0, "standalone");
      if (work_.start) work_.start(a);
    });
    started_ = true;
    return pynenc_cpp::Status::Ok();
  }

  auto source = NewGenerationSource();
  if (!source.ok()) return source.status();
  source_ = std::shared_ptr<GenerationSource>(std::move(source).value());

  TransportOptions t;
  t.cluster_name = options_.cluster_name;
  t.secret = options_.secret;
  t.host = options_.host;
  t.port = options_.port;
  t.max_frame_bytes = options_.max_frame_bytes;
  t.refusal_logs_per_second = options_.refusal_logs_per_second;
  t.send_queue_bound = options_.send_queue_bound;
  // Before the transport exists: its loop thread may log at once.
  callbacks_ = std::make_unique<CallbackThread>();
  runtime_ = std::make_unique<InstanceRuntime>(
      [this](InstanceRuntime::Job job) { callbacks_->Push(std::move(job)); },
      [this](InstanceRuntime::Job job) {
        OnLoop([job = std::move(job)](NodeCore&) { job(); });
      });
  auto inbox = Inbox::Create(options_.actor_inbox_limit);
  if (!inbox.ok()) return inbox.status();
  inbox_ = std::move(inbox).value();
  auto env = MakeAsioEnv(t, [this](LogLevel level, std::string_view msg) { Log(level, msg); });
  if (!env.ok()) return env.status();
  env_ = std::move(env).value();
  // Nothing below fails.
  const Address self = env_->LocalAddress();
  const int quorum = EffectiveQuorum(options_, self);
  if (options_.quorum == 0 && quorum == 1) {
    Log(LogLevel::kWarning,
        "quorum is 1 (no seeds and no quorum option): this node may be master on its own; "
        "give every node the same seeds or set quorum to a majority");
  }
  std::promise<void> ready;
  env_->Post([&] {
    StartCore(self, incarnation_, MergeSeeds(options_.seeds, cached_peers_, self), quorum);
    ready.set_value();
  });
  ready.get_future().wait();
  started_ = true;
  return pynenc_cpp::Status::Ok();
}

void ClusterNodeImpl::StartCore(const Address& self, std::uint64_t incarnation,
                                std::vector<Address> seeds, int quorum) {
  NodeCoreOptions o;
  o.membership.cluster_name = options_.cluster_name;
  o.membership.self.id = id_;
  o.membership.self.address = self;
  o.membership.self.incarnation = incarnation;
  o.membership.self.started_at_ms = env_->WallMs();
  o.membership.self.node_class = options_.node_class;
  o.membership.self.metadata = options_.metadata;
  o.membership.seeds = std::move(seeds);
  o.membership.heartbeat_ms = options_.heartbeat_ms;
  o.membership.suspect_timeout_ms = options_.suspect_timeout_ms;
  o.membership.indirect_probes = options_.indirect_probes;
  o.quorum = quorum;
  o.election = options_.election;
  o.election_class = options_.election_class;
  o.stabilize_ms = options_.stabilize_ms;
  o.lease_ms = options_.lease_ms;

  NodeCoreHooks h;
  h.start_work = [this](const Activation& a) {
    callbacks_->Push([this, a] {
      Record("start", a.epoch, MonotonicNowMs(), a.lease_until_mono_ms, "");
      try {
        if (work_.start) work_.start(a);
      } catch (...) {
        env_->Post([this] {
          if (core_) core_->WorkStarted();
        });
        throw;  // reported by the callback thread
      }
      env_->Post([this] {
        if (core_) core_->WorkStarted();
      });
    });
  };
  h.stop_work = [this](const Activation& a, const std::string& reason) {
    callbacks_->Push([this, a, reason] {
      auto done = [this] {
        env_->Post([this] {
          if (!core_) return;
          core_->WorkStopped();
          CheckWorkDone();
        });
      };
      try {
        if (work_.stop) work_.stop(a, reason);
      } catch (...) {
        Record("stop", a.epoch, MonotonicNowMs(), a.lease_until_mono_ms, reason);
        done();
        throw;
      }
      Record("stop", a.epoch, MonotonicNowMs(), a.lease_until_mono_ms, reason);
      done();
    });
  };
  h.member_event = [this](const MemberEvent& e) {
    if (!options_.state_dir.empty() && core_) {
      std::vector<Address> peers;
      for (const auto& m : core_->LiveMembers()) {
        if (m.id != id_) peers.push_back(m.address);
      }
      if (!peers.empty()) {
        MutexLock lock(peers_mu_);
        peers_to_store_ = std::move(peers);
        if (!peers_store_queued_) {
          peers_store_queued_ = true;
          callbacks_->Push([this] {
            std::vector<Address> latest;
            {
              MutexLock l(peers_mu_);
              latest = std::move(peers_to_store_);
              peers_store_queued_ = false;
            }
            if (auto s = membership::StorePeers(options_.state_dir, latest); !s.ok()) {
              env_->Log(LogLevel::kWarning, "cannot persist the peer list: " + s.message());
            }
          });
        }
      }
    }
    if (events_) callbacks_->Push([this, e] { events_(e); });
  };
  h.record = [this](const ActivationRecord& r) {
    Record(r.event, r.epoch, r.mono_ms, r.lease_until_mono_ms, r.reason);
  };
  h.incarnation = [this](std::uint64_t v) {
    if (options_.state_dir.empty()) return;
    if (auto s = membership::StoreIncarnation(options_.state_dir, v); !s.ok()) {
      env_->Log(LogLevel::kError, "cannot persist incarnation: " + s.message());
    }
  };
  h.after_event = [this] {
    Snapshot();
    if (leaving_) CheckDrained();
    if (shutting_down_) CheckWorkDone();
  };
  WireServices(o, h);
  core_ = std::make_unique<NodeCore>(*env_, std::move(o), std::move(h));
  core_->services().host().SetTermFloor(term_floor_);
  core_->Start();
  {
    MutexLock lock(mailer_mu_);
    mailer_ = &core_->services().mailer();
  }
  PushRegistry();
  Snapshot();
}

void ClusterNodeImpl::Snapshot() {
  if (!core_) return;
  NodeStatus s = core_->Status();
  SnapshotServices(s);
  std::vector<Member> members = core_->Members();
  MutexLock lock(mu_);
  status_ = std::move(s);
  members_ = std::move(members);
}

void ClusterNodeImpl::CheckDrained() {
  if (!core_) return;
  const NodeStatus s = core_->Status();
  // Handed over, or nobody to hand over to (no leader, no quorum).
  if (!core_->services().Idle() && s.leader && s.has_quorum) return;
  {
    MutexLock lock(mu_);
    drained_ = true;
  }
  cv_.notify_all();
}

void ClusterNodeImpl::CheckWorkDone() {
  // Done once the work and every hosted instance stopped.
  if (!shutting_down_ || !core_ || core_->WorkActive() || !core_->services().Idle()) return;
  {
    MutexLock lock(mu_);
    work_done_ = true;
  }
  cv_.notify_all();
}

void ClusterNodeImpl::Stop() {
  std::unique_lock<std::mutex> stop_lock(stop_mu_, std::defer_lock);
  if (callbacks_ && callbacks_->OnThisThread()) {
    // Another thread may be inside Stop() waiting for a callback queued behind
    // this one: return rather than wait for it (it finishes the stop).
    if (!stop_lock.try_lock()) return;
  } else {
    stop_lock.lock();
  }
  if (!started_ || stopped_) return;
  stopped_ = true;
  if (standalone_) {
    callbacks_->Push([this] {
      if (work_.stop) work_.stop(Activation{id_, 0, 0, true}, "shutdown");
      Record("stop", 0, MonotonicNowMs(), 0, "shutdown");
    });
    if (callbacks_->OnThisThread()) {
      while (callbacks_->RunOne()) {
      }
    }
    callbacks_->Finish();
    MutexLock lock(mu_);
    status_.state = SupervisorState::kStopping;
    return;
  }
  // 0. Hand this node's instances over first: the leader moves them to other
  // nodes, each drained. Not from a callback: their stops run on this thread.
  if (options_.leave_timeout_ms > 0 && !callbacks_->OnThisThread()) {
    env_->Post([this] {
      if (!core_) return;
      leaving_ = true;
      core_->BeginLeave();
      CheckDrained();
    });
    UniqueLock lock(mu_);
    cv_.wait_for(lock.native(), std::chrono::milliseconds(options_.leave_timeout_ms),
                 [this]() PYNENC_REQUIRES(mu_) { return drained_; });
  }
  // 1. Stop the work (if this node is the master) and wait for the stop callback.
  env_->Post([this] {
    shutting_down_ = true;
    if (!core_) return;
    core_->Shutdown();
    CheckWorkDone();
  });
  {
    UniqueLock lock(mu_);
    if (callbacks_->OnThisThread()) {
      // Called from a callback: the stop callback is queued behind us, run it here.
      while (!work_done_) {
        lock.Unlock();
        const bool ran = callbacks_->RunOne();
        lock.Lock();
        if (!ran) {
          cv_.wait_for(lock.native(), std::chrono::milliseconds(5),
                       [this]() PYNENC_REQUIRES(mu_) { return work_done_; });
        }
      }
    } else {
      cv_.wait(lock.native(), [this]() PYNENC_REQUIRES(mu_) { return work_done_; });
    }
  }
  // 2. Release the lease, gossip Leaving, destroy the core on its own thread.
  std::promise<void> left;
  env_->Post([&] {
    if (core_) {
      core_->Leave();
      Snapshot();
      {
        MutexLock lock(mailer_mu_);
        mailer_ = nullptr;
      }
      core_.reset();
    }
    left.set_value();
  });
  left.get_future().wait();
  // 3. Flush the Leaving frames and close the transport; 4. drain callbacks;
  // 5. tell the actor runtime nothing more will come.
  env_->Shutdown(200);
  callbacks_->Finish();
  inbox_->Close();
}

Result<std::unique_ptr<ClusterNode>> ClusterNode::Start(const ClusterOptions& options,
                                                        WorkCallbacks work, EventCallback events,
                                                        LogCallback log) {
  auto node = std::make_unique<ClusterNodeImpl>(options, std::move(work), std::move(events),
                                                std::move(log));
  if (auto s = node->Init(); !s.ok()) return s;
  return std::unique_ptr<ClusterNode>(std::move(node));
}

}  // namespace pynenc_cpp::cluster
