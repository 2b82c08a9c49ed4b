// ClusterNodeImpl's coordinator layer: the host's hooks (instances built,
// stopped and messaged on the callback thread through InstanceRuntime), the
// spawn registry, client requests to the Coordinator and the directory.
#include <utility>

#include "cluster/coordinator/spec_codec.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "cluster/membership/persistence.h"
#include "cluster/node/cluster_node_impl.h"

namespace pynenc_cpp::cluster {

namespace {

// A promise that is always kept: if the last copy of the holder goes away
// unset (the job that would have set it was dropped because the node
// stopped), it is set to kUnavailable.
template <typename T>
class Kept {
 public:
  Kept() : state_(std::make_shared<State>()) {}
  std::future<T> future() { return state_->promise.get_future(); }
  void Set(T value) const {
    MutexLock lock(state_->mu);
    if (state_->set) return;
    state_->set = true;
    state_->promise.set_value(std::move(value));
  }

 private:
  struct State {
    Mutex mu;
    bool set = false;
    std::promise<T> promise;
    ~State() {
      if (!set) promise.set_value(T(Status::Unavailable("the node stopped before answering")));
    }
  };
  std::shared_ptr<State> state_;
};

LabelPlacement ToPlacement(const coord_wire::DirectoryEntry& e) {
  LabelPlacement p;
  p.label = e.label;
  p.kind = e.kind;
  p.state = e.state;
  if (!e.owner.empty()) p.node = e.owner;
  p.address = e.owner_address;
  p.generation = e.generation;
  p.reason = e.reason;
  return p;
}

Status StandaloneError() {
  return Status::Unavailable("standalone node: no cluster (give host and seeds)");
}

Status TooLarge(std::size_t bytes, std::size_t max_frame_bytes) {
  return Status::InvalidArgument("message of " + std::to_string(bytes) +
                                 " bytes is over the limit: max_frame_bytes is " +
                                 std::to_string(max_frame_bytes) +
                                 " including the label and the frame's header");
}

Status TimeoutTooLong(std::int64_t timeout_ms) {
  return Status::InvalidArgument("timeout_ms: at most " + std::to_string(kMaxTimeoutMs) +
                                 " (one day), got " + std::to_string(timeout_ms));
}

}  // namespace

bool ClusterNodeImpl::OnLoop(std::function<void(NodeCore&)> fn) {
  if (standalone_ || !env_) return false;
  env_->Post([this, fn = std::move(fn)] {
    if (core_) core_->Run([&] { fn(*core_); });
  });
  return true;
}

void ClusterNodeImpl::WireServices(NodeCoreOptions& o, NodeCoreHooks& h) {
  o.services.source = source_;
  o.services.request_timeout_ms = options_.request_timeout_ms;
  o.services.coordinator.default_strategy = options_.placement;
  o.services.coordinator.spawn_timeout_ms = options_.spawn_timeout_ms;
  o.services.inbox = inbox_.get();
  o.services.mailer.buffer_limit = options_.actor_buffer_limit;
  o.services.mailer.resend_ms = options_.actor_resend_ms;
  h.services.host.start = [this](const InstanceContext& ctx) {
    runtime_->Start(ctx, [this, label = ctx.label, gen = ctx.generation](pynenc_cpp::Status s) {
      core_->services().host().Started(label, gen, s);
    });
  };
  h.services.host.stop = [this](const std::string& label, Generation gen,
                                const std::string& reason) {
    runtime_->Stop(label, reason,
                   [this, label, gen] { core_->services().host().Stopped(label, gen); });
  };
  h.services.host.regrant = [this](const std::string& label, Generation gen) {
    runtime_->Regrant(label, gen);
  };
  h.services.host.record = [this](const InstanceRecord& r) {
    if (r.event == "instance_start" || r.event == "instance_regrant") {
      RememberGeneration(r.generation);
    }
    if (log_) {
      log_->WriteInstance(r.event, r.label, r.generation.term, r.generation.seq, r.mono_ms,
                          r.lease_until_mono_ms, r.reason);
    }
  };
  // Write-ahead records of every owner-lease extension: with them the activation
  // logs prove that two nodes never held one label at once (a killed node's
  // authority ends at its last record's lease_until_mono_ms).
  h.services.owner_lease_extended = [this](const std::string& label, std::int64_t until) {
    if (!log_ || !core_) return;
    const Generation g = core_->services().leases().WantedGeneration(label);
    log_->WriteInstance("instance_lease", label, g.term, g.seq, MonotonicNowMs(), until, "");
  };
  h.services.router.deliver = [this](const std::string& label, std::string payload,
                                     RouterHooks::ReplyFn reply) {
    runtime_->Deliver(label, std::move(payload), std::move(reply));
  };
}

void ClusterNodeImpl::RememberGeneration(Generation g) {
  if (options_.state_dir.empty() || g.term <= term_floor_) return;
  term_floor_ = g.term;
  MutexLock lock(peers_mu_);
  term_floor_to_store_ = term_floor_;
  if (term_floor_store_queued_) return;
  term_floor_store_queued_ = true;
  callbacks_->Push([this] {
    std::uint32_t latest = 0;
    {
      MutexLock l(peers_mu_);
      latest = term_floor_to_store_;
      term_floor_store_queued_ = false;
    }
    if (auto s = membership::StoreTermFloor(options_.state_dir, latest); !s.ok()) {
      env_->Log(LogLevel::kWarning, "cannot persist the term floor: " + s.message());
    }
  });
}

void ClusterNodeImpl::PushRegistry() {
  if (!core_) return;
  core_->Run([this] {
    core_->services().host().SetActorTypes(runtime_->Types());
    core_->services().host().SetFamilies(runtime_->Families());
  });
}

void ClusterNodeImpl::SnapshotServices(NodeStatus& status) {
  for (const auto& i : core_->services().host().Instances()) {
    status.hosted.push_back(
        {i.label, i.kind, i.generation, std::string(coord_wire::InstancePhaseName(i.phase))});
  }
  const Router& router = core_->services().router();
  if (router.directory_updates() == directory_version_) return;
  directory_version_ = router.directory_updates();
  std::vector<LabelPlacement> dir;
  for (const auto& e : router.Entries()) dir.push_back(ToPlacement(e));
  MutexLock lock(mu_);
  directory_ = std::move(dir);
}

pynenc_cpp::Status ClusterNodeImpl::RegisterActorType(const std::string& actor_type, ActorFactory factory) {
  if (standalone_) return StandaloneError();
  if (auto s = runtime_->RegisterType(actor_type, std::move(factory)); !s.ok()) return s;
  OnLoop([this](NodeCore&) { PushRegistry(); });
  return Status::Ok();
}

pynenc_cpp::Status ClusterNodeImpl::UnregisterActorType(const std::string& actor_type) {
  if (standalone_) return StandaloneError();
  if (auto s = runtime_->UnregisterType(actor_type); !s.ok()) return s;
  OnLoop([this](NodeCore&) { PushRegistry(); });
  return Status::Ok();
}

pynenc_cpp::Status ClusterNodeImpl::RegisterAgentFamily(const AgentFamily& family, ActorFactory factory) {
  if (standalone_) return StandaloneError();
  if (auto s = runtime_->RegisterFamily(family, std::move(factory)); !s.ok()) return s;
  OnLoop([this](NodeCore&) { PushRegistry(); });
  return Status::Ok();
}

void ClusterNodeImpl::Request(coord_wire::ClientOp op, std::string body, std::int64_t timeout_ms,
                              std::function<void(Result<std::string>)> done) {
  if (timeout_ms <= 0) timeout_ms = options_.request_timeout_ms;
  if (timeout_ms > kMaxTimeoutMs) {
    done(TimeoutTooLong(timeout_ms));
    return;
  }
  if (!OnLoop([op, body = std::move(body), timeout_ms, done](NodeCore& core) mutable {
        core.services().router().Request(op, std::move(body), timeout_ms, std::move(done));
      })) {
    done(StandaloneError());
  }
}

std::future<pynenc_cpp::Status> ClusterNodeImpl::Submit(const pynenc_cpp::Status& valid,
                                                        coord_wire::ClientOp op,
                                                        const codec::StoredSpec& stored,
                                                        std::int64_t timeout_ms) {
  Kept<pynenc_cpp::Status> kept;
  auto f = kept.future();
  if (!valid.ok()) {
    kept.Set(valid);
    return f;
  }
  Request(op, codec::EncodeSpec(stored), timeout_ms,
          [kept](Result<std::string> r) { kept.Set(r.status()); });
  return f;
}

std::future<pynenc_cpp::Status> ClusterNodeImpl::SubmitActor(const ActorSpec& spec,
                                                             std::int64_t timeout_ms) {
  codec::StoredSpec stored;
  stored.kind = SpecKind::kActor;
  stored.actor = spec;
  return Submit(ValidateActorSpec(spec), coord_wire::ClientOp::kSubmitActor, stored, timeout_ms);
}

std::future<pynenc_cpp::Status> ClusterNodeImpl::SubmitSingleton(const SingletonSpec& spec,
                                                                 std::int64_t timeout_ms) {
  codec::StoredSpec stored;
  stored.kind = SpecKind::kSingleton;
  stored.singleton = spec;
  return Submit(ValidateSingletonSpec(spec), coord_wire::ClientOp::kSubmitSingleton, stored,
                timeout_ms);
}

std::future<pynenc_cpp::Status> ClusterNodeImpl::RemoveSpec(const std::string& label,
                                                std::int64_t timeout_ms) {
  Kept<pynenc_cpp::Status> kept;
  auto f = kept.future();
  Request(coord_wire::ClientOp::kRemove, label, timeout_ms,
          [kept](Result<std::string> r) { kept.Set(r.status()); });
  return f;
}

std::future<Result<ClusterView>> ClusterNodeImpl::QueryView(std::int64_t timeout_ms) {
  Kept<Result<ClusterView>> kept;
  auto f = kept.future();
  Request(coord_wire::ClientOp::kView, "", timeout_ms, [kept](Result<std::string> r) {
    kept.Set(r.ok() ? codec::DecodeView(r.value()) : Result<ClusterView>(r.status()));
  });
  return f;
}

std::future<Result<std::vector<SpecStatus>>> ClusterNodeImpl::QueryStatuses(
    std::int64_t timeout_ms) {
  Kept<Result<std::vector<SpecStatus>>> kept;
  auto f = kept.future();
  Request(coord_wire::ClientOp::kStatuses, "", timeout_ms, [kept](Result<std::string> r) {
    kept.Set(r.ok() ? codec::DecodeStatuses(r.value())
                    : Result<std::vector<SpecStatus>>(r.status()));
  });
  return f;
}

std::optional<LabelPlacement> ClusterNodeImpl::Lookup(const std::string& label) const {
  MutexLock lock(mu_);
  for (const auto& p : directory_) {
    if (p.label == label) return p;
  }
  return std::nullopt;
}

std::vector<LabelPlacement> ClusterNodeImpl::Directory() const {
  MutexLock lock(mu_);
  return directory_;
}

std::future<Result<std::string>> ClusterNodeImpl::Ask(const std::string& label,
                                                      std::string payload,
                                                      std::int64_t timeout_ms) {
  Kept<Result<std::string>> kept;
  auto f = kept.future();
  if (timeout_ms <= 0) timeout_ms = options_.request_timeout_ms;
  if (timeout_ms > kMaxTimeoutMs) {
    kept.Set(TimeoutTooLong(timeout_ms));
    return f;
  }
  if (payload.size() + label.size() + 64 > options_.max_frame_bytes) {
    kept.Set(TooLarge(payload.size(), options_.max_frame_bytes));
    return f;
  }
  if (!OnLoop([label, payload = std::move(payload), timeout_ms, kept](NodeCore& core) mutable {
        core.services().router().Ask(label, std::move(payload), true, timeout_ms,
                                     [kept](Result<std::string> r) { kept.Set(std::move(r)); });
      })) {
    kept.Set(StandaloneError());
  }
  return f;
}

pynenc_cpp::Status ClusterNodeImpl::Tell(const std::string& label, std::string payload) {
  if (standalone_) return StandaloneError();
  if (payload.size() + label.size() + 64 > options_.max_frame_bytes) {
    return TooLarge(payload.size(), options_.max_frame_bytes);
  }
  auto where = Lookup(label);
  if (!where || where->state != SpecState::kRunning) {
    return Status::Unavailable("'" + label + "' is not running (per this node's directory)");
  }
  OnLoop([label, payload = std::move(payload)](NodeCore& core) mutable {
    core.services().router().Ask(label, std::move(payload), false, 0, [](Result<std::string>) {});
  });
  return Status::Ok();
}

}  // namespace pynenc_cpp::cluster
