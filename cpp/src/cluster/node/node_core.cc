#include "cluster/node/node_core.h"

#include <algorithm>
#include <utility>

namespace pynenc_cpp::cluster {

// The Env handed to Membership and Lease: forwards everything to the real Env
// but runs every timer callback inside NodeCore::Guarded, so the lease expiry is
// checked before, and the view refreshed after, whatever timer fires.
// SetReceiver is ignored (NodeCore owns the real receiver and dispatches).
class NodeCore::GuardedEnv final : public Env {
 public:
  GuardedEnv(Env& base, NodeCore& core) : base_(base), core_(core) {}
  std::int64_t NowMs() override { return base_.NowMs(); }
  std::int64_t WallMs() override { return base_.WallMs(); }
  std::uint64_t Random() override { return base_.Random(); }
  TimerId After(std::int64_t delay_ms, std::function<void()> fn) override {
    return base_.After(delay_ms, [core = &core_, fn = std::move(fn)] { core->Guarded(fn); });
  }
  void Cancel(TimerId id) override { base_.Cancel(id); }
  void Send(const Address& to, std::uint8_t type, std::string payload) override {
    base_.Send(to, type, std::move(payload));
  }
  void SetReceiver(Receiver) override {}
  Address LocalAddress() const override { return base_.LocalAddress(); }
  void Log(LogLevel level, std::string_view message) override { base_.Log(level, message); }
  void RunBlocking(std::function<void()> work, std::function<void()> done) override {
    base_.RunBlocking(std::move(work),
                      [core = &core_, done = std::move(done)] { core->Guarded(done); });
  }

 private:
  Env& base_;
  NodeCore& core_;
};

namespace {
std::unique_ptr<Election> MakeElection(ElectionKind kind, const std::string& node_class) {
  switch (kind) {
    case ElectionKind::kHrw:
      return MakeHrwElection();
    case ElectionKind::kLowestAddress:
      return MakeLowestAddressElection();
    case ElectionKind::kOldestNode:
      break;
  }
  return MakeOldestNodeElection(node_class);
}
}  // namespace

NodeCore::NodeCore(Env& env, NodeCoreOptions options, NodeCoreHooks hooks)
    : env_(env),
      options_(std::move(options)),
      hooks_(std::move(hooks)),
      guarded_(std::make_unique<GuardedEnv>(env, *this)),
      election_(MakeElection(options_.election, options_.election_class)),
      supervisor_(SupervisorOptions{options_.stabilize_ms}) {
  if (options_.lease_ms <= 0) options_.lease_ms = options_.membership.suspect_timeout_ms;
  lease_ =
      std::make_unique<Lease>(*guarded_,
                              LeaseOptions{options_.membership.self.id,
                                           options_.membership.heartbeat_ms, options_.lease_ms, 0},
                              [this](std::int64_t until) { OnLeaseExtend(until); });
  membership_ =
      std::make_unique<Membership>(*guarded_, options_.membership, [this](const MemberEvent& e) {
        if (hooks_.member_event) hooks_.member_event(e);
      });
  if (hooks_.incarnation) membership_->SetOnIncarnation(hooks_.incarnation);
  services_ = std::make_unique<Services>(
      *guarded_, options_.membership.self.id, options_.membership.heartbeat_ms, options_.lease_ms,
      options_.stabilize_ms, options_.services, std::move(hooks_.services));
}

NodeCore::~NodeCore() {
  if (wake_timer_) env_.Cancel(*wake_timer_);
  if (started_) env_.SetReceiver(nullptr);
  services_.reset();
  membership_.reset();
  lease_.reset();
}

void NodeCore::Start() {
  if (started_) return;
  started_ = true;
  env_.SetReceiver([this](const Address& from, std::uint8_t type, std::string payload) {
    Guarded([&] { Dispatch(from, type, payload); });
  });
  Guarded([this] {
    membership_->Start();
    lease_->Start();
    services_->Start();
  });
}

template <typename F>
void NodeCore::Guarded(F&& fn) {
  ++depth_;
  if (depth_ == 1) {
    CheckLeaseExpiry();
    services_->CheckExpiry();
  }
  fn();
  if (depth_ == 1) {
    AfterEvent();
    services_->AfterEvent();
    if (hooks_.after_event) hooks_.after_event();
  }
  --depth_;
}

void NodeCore::Dispatch(const Address& from, std::uint8_t type, const std::string& payload) {
  if (IsMembershipType(type)) {
    membership_->OnFrame(from, type, payload);
  } else if (type >= kLeaseTypeBase && type < kLeaseTypeBase + 16) {
    membership_->NoteHeard(from);  // lease traffic is direct contact too
    lease_->OnFrame(from, type, payload);
  } else if (Services::Handles(type)) {
    membership_->NoteHeard(from);
    services_->OnFrame(from, type, payload);
  }
}

void NodeCore::CheckLeaseExpiry() {
  const std::int64_t now = env_.NowMs();
  if (supervisor_.state() != SupervisorState::kMaster || now < supervisor_.lease_until_ms()) return;
  // The supervisor answers with StopWork("lease expired"); Apply records it.
  Feed(supervisor_event::Tick{});
}

void NodeCore::AfterEvent() {
  if (!started_) return;
  const std::vector<Member> live = membership_->LiveMembers();
  const std::uint64_t epoch = membership_->Epoch();
  const int quorum = std::max(1, options_.quorum);
  const std::optional<NodeId> leader =
      election_->Elect({options_.membership.cluster_name, epoch, live, quorum});
  const bool has_quorum = static_cast<int>(live.size()) >= quorum;
  std::vector<Address> peers;
  const Member* leader_member = nullptr;
  for (const auto& m : live) {
    if (m.id != options_.membership.self.id) peers.push_back(m.address);
    if (leader && m.id == *leader) leader_member = &m;
  }
  services_->SetView({membership_->Members(), live, quorum, has_quorum, leader,
                      membership_->Self().incarnation});
  const bool view_changed =
      !view_fed_ || leader != leader_ || has_quorum != has_quorum_ || epoch != epoch_;
  if (view_changed) {
    view_fed_ = true;
    leader_ = leader;
    has_quorum_ = has_quorum;
    epoch_ = epoch;
    Feed(supervisor_event::ViewChanged{leader == options_.membership.self.id, has_quorum, epoch});
  }
  if (view_changed || peers != peers_) {
    peers_ = peers;
    LeaseView view;
    if (leader_member)
      view.elected = LeaseView::Candidate{leader_member->id, leader_member->address};
    view.peers = std::move(peers);
    view.quorum = quorum;
    view.epoch = epoch;
    lease_->SetView(std::move(view));
  }
  if (lease_->LeaseUntil() != fed_lease_until_) {
    fed_lease_until_ = lease_->LeaseUntil();
    Feed(supervisor_event::LeaseChanged{fed_lease_until_});
  }
}

void NodeCore::OnLeaseExtend(std::int64_t new_until) {
  // Write-ahead: the record exists before the supervisor can act on the lease.
  if (hooks_.lease_extended) hooks_.lease_extended(env_.NowMs(), new_until);
  const SupervisorState s = supervisor_.state();
  const bool record = s == SupervisorState::kActivating || s == SupervisorState::kMaster ||
                      (s == SupervisorState::kStopping && !supervisor_.shut_down());
  if (record && hooks_.record) {
    hooks_.record({"lease", epoch_, env_.NowMs(), new_until, ""});
  }
}

void NodeCore::Feed(decltype(SupervisorInput::event) event) {
  pending_.push_back(std::move(event));
  if (feeding_) return;  // re-entered from a hook: the outer loop picks it up
  feeding_ = true;
  while (!pending_.empty()) {
    auto next = std::move(pending_.front());
    pending_.pop_front();
    Apply(supervisor_.Step({env_.NowMs(), std::move(next)}));
  }
  feeding_ = false;
}

void NodeCore::Apply(std::vector<SupervisorEffect> effects) {
  for (auto& effect : effects) {
    if (auto* start = std::get_if<supervisor_effect::StartWork>(&effect)) {
      started_epoch_ = start->epoch;
      services_->Lead(true);
      if (hooks_.start_work) {
        hooks_.start_work(
            Activation{options_.membership.self.id, start->epoch, start->lease_until_ms, false});
      }
    } else if (auto* stop = std::get_if<supervisor_effect::StopWork>(&effect)) {
      services_->Lead(false);
      // Every stop for an expired lease leaves a "lease_expired" record first, also
      // when the expiry is noticed mid-event (a SIGSTOP that landed after this
      // event's entry check) rather than by CheckLeaseExpiry.
      if (stop->reason == std::string_view("lease expired") && hooks_.record) {
        const std::int64_t now = env_.NowMs();
        hooks_.record(
            {"lease_expired", supervisor_.epoch(), now, supervisor_.lease_until_ms(),
             "detected " + std::to_string(now - supervisor_.lease_until_ms()) + " ms after expiry"});
      }
      // The epoch the work started in, and the lease it held last.
      if (hooks_.stop_work) {
        hooks_.stop_work(Activation{options_.membership.self.id, started_epoch_,
                                    supervisor_.lease_until_ms(), false},
                         stop->reason);
      }
    } else if (auto* wake = std::get_if<supervisor_effect::WakeAt>(&effect)) {
      if (wake_timer_ && wake_at_ == wake->at_ms) continue;
      if (wake_timer_) env_.Cancel(*wake_timer_);
      wake_at_ = wake->at_ms;
      wake_timer_ = env_.After(std::max<std::int64_t>(0, wake->at_ms - env_.NowMs()), [this] {
        wake_timer_.reset();
        Guarded([this] { Feed(supervisor_event::Tick{}); });
      });
    } else if (auto* log = std::get_if<supervisor_effect::Log>(&effect)) {
      env_.Log(log->level, log->message);
    }
  }
}

void NodeCore::Run(const std::function<void()>& fn) { Guarded(fn); }

void NodeCore::WorkStarted() {
  Guarded([this] { Feed(supervisor_event::WorkStarted{}); });
}

void NodeCore::WorkStopped() {
  Guarded([this] { Feed(supervisor_event::WorkStopped{}); });
}

void NodeCore::BeginLeave() {
  Guarded([this] { services_->BeginLeave(); });
}

void NodeCore::Shutdown() {
  Guarded([this] {
    lease_->StopRequesting();
    services_->Shutdown();
    Feed(supervisor_event::Shutdown{});
  });
}

void NodeCore::Leave() {
  Guarded([this] {
    // A lease may be released only once no work runs under it; otherwise it
    // simply runs out.
    if (!supervisor_.work_active()) {
      const std::int64_t now = env_.NowMs();
      if (lease_->LeaseUntil() > now && hooks_.record) {
        hooks_.record({"release", epoch_, now, now, "leave"});
      }
      lease_->Release();
    }
    membership_->Leave();
  });
}

NodeStatus NodeCore::Status() const {
  NodeStatus s;
  s.id = options_.membership.self.id;
  s.address = env_.LocalAddress();
  s.incarnation = membership_->Self().incarnation;
  s.epoch = epoch_;
  s.leader = leader_;
  s.has_quorum = has_quorum_;
  s.state = supervisor_.state();
  s.lease_until_mono_ms = lease_->LeaseUntil();
  return s;
}

std::vector<Member> NodeCore::Members() const { return membership_->Members(); }
std::vector<Member> NodeCore::LiveMembers() const { return membership_->LiveMembers(); }

}  // namespace pynenc_cpp::cluster
