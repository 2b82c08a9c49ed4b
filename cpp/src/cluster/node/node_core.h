// NodeCore: one cluster node's protocol logic over an Env — Membership (SWIM),
// the agreed epoch, the election with quorum, the Lease and the Supervisor,
// wired together. The same object runs inside the simulator (tests_cpp/cluster/
// sim) and in production (ClusterNode, on the Asio loop thread).
//
// Wiring:
//  * Inbound frames: types 16..31 go to Membership, 32..47 to Lease, 48..79 to
//    the coordinator layer (Services: owner leases, host, router, and the
//    Coordinator while this node is master); others are ignored.
//  * Around every event (frame, timer of any component, WorkStarted/Stopped,
//    Shutdown, a storage result): FIRST the lease expiry is checked — a master
//    whose lease ran out (e.g. woken from SIGSTOP) gets its StopWork before
//    anything else is processed — and so are the owner leases of the instances
//    this node runs; then the event runs, THEN the view (live members, epoch,
//    leader, quorum) is pushed to Services, and to the Supervisor and Lease if
//    it changed, and Services starts what its gating now allows.
//  * The Coordinator runs exactly while the supervisor is master: StartWork
//    creates it (before the owner's start hook), StopWork destroys it. A timer is also armed at every WakeAt the supervisor asks
//    for (in kMaster: at lease_until).
//  * Work start/stop leave through the hooks; the owner reports completion with
//    WorkStarted()/WorkStopped() (immediately from inside the hook is fine).
//
// Thread safety: not thread-safe; every method runs on the Env loop thread.
// Lifecycle: construct, Start(); Shutdown(), wait for WorkStopped if the work
// was running, Leave(); destroy (cancels every timer). The Env outlives it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/coordinator/services.h"
#include "pynenc_cpp/cluster/election.h"
#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/lease.h"
#include "pynenc_cpp/cluster/membership.h"
#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/cluster/supervisor.h"

namespace pynenc_cpp::cluster {

struct NodeCoreOptions {
  MembershipOptions membership;  // self (id, address, incarnation...), seeds, timings
  int quorum = 1;                // live members needed to elect anyone (and lease grants)
  ElectionKind election = ElectionKind::kOldestNode;
  std::string election_class;  // OldestNode only
  std::int64_t stabilize_ms = 500;
  std::int64_t lease_ms = 0;  // 0: membership.suspect_timeout_ms
  ServicesOptions services;   // the coordinator layer (coordinator/services.h)
};

// One activation-log event raised by NodeCore itself ("lease": written before
// the extension takes effect; "lease_expired": when a master finds its lease
// ran out; "release": Leave() ended a live lease early, lease_until = now).
// "start"/"stop" records are the owner's, around its callbacks.
struct ActivationRecord {
  std::string event;
  std::uint64_t epoch = 0;
  std::int64_t mono_ms = 0;
  std::int64_t lease_until_mono_ms = 0;
  std::string reason;
};

struct NodeCoreHooks {
  std::function<void(const Activation&)> start_work;
  std::function<void(const Activation&, const std::string& reason)> stop_work;
  std::function<void(const MemberEvent&)> member_event;
  std::function<void(const ActivationRecord&)> record;
  std::function<void(std::uint64_t incarnation)> incarnation;  // persist it
  // Every lease extension, whatever the supervisor state, before it takes effect
  // (tests check lease intervals with it).
  std::function<void(std::int64_t now_ms, std::int64_t new_until_ms)> lease_extended;
  // At the end of every event, once the view and lease were pushed (status
  // snapshots for other threads).
  std::function<void()> after_event;
  ServicesHooks services;  // instances this node runs, messages to them
};

class NodeCore {
 public:
  NodeCore(Env& env, NodeCoreOptions options, NodeCoreHooks hooks);
  ~NodeCore();
  NodeCore(const NodeCore&) = delete;
  NodeCore& operator=(const NodeCore&) = delete;

  // Installs the receiver on `env`, starts membership (joins the seeds) and the
  // lease. Call once.
  void Start();
  // The owner's start callback returned / stop callback returned.
  void WorkStarted();
  void WorkStopped();
  // Optional first step of a graceful leave: the node reports itself leaving,
  // so the leader (this node too) moves its instances to other nodes, drained.
  // The owner waits until services().Idle() (bounded), then calls Shutdown.
  void BeginLeave();
  // Terminal: stops requesting the lease; a master gets StopWork("shutdown").
  void Shutdown();
  // After Shutdown and once the work stopped: releases the lease (peers may grant
  // a successor at once) and gossips Leaving.
  void Leave();

  NodeStatus Status() const;
  std::vector<Member> Members() const;
  std::vector<Member> LiveMembers() const;
  const Supervisor& supervisor() const { return supervisor_; }
  const Lease& lease() const { return *lease_; }
  const Membership& membership() const { return *membership_; }
  // True while StartWork was issued and WorkStopped not yet reported.
  bool WorkActive() const { return supervisor_.work_active(); }
  // The coordinator layer (host, router, owner leases, the Coordinator). Calls
  // from outside an event (the owner answering Started/Stopped, a client
  // request) go through Run so they are one event like any other.
  Services& services() { return *services_; }
  // Runs `fn` as one event: lease checks before it, the view refresh after.
  void Run(const std::function<void()>& fn);
  const Services& services() const { return *services_; }

 private:
  class GuardedEnv;

  // Runs one event between the expiry check and the view refresh.
  template <typename F>
  void Guarded(F&& fn);
  void CheckLeaseExpiry();
  void AfterEvent();
  void Feed(decltype(SupervisorInput::event) event);
  void Apply(std::vector<SupervisorEffect> effects);
  void Dispatch(const Address& from, std::uint8_t type, const std::string& payload);
  void OnLeaseExtend(std::int64_t new_until);

  Env& env_;
  NodeCoreOptions options_;
  NodeCoreHooks hooks_;
  std::unique_ptr<GuardedEnv> guarded_;
  std::unique_ptr<Election> election_;
  Supervisor supervisor_;
  std::unique_ptr<Lease> lease_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<Services> services_;

  std::deque<decltype(SupervisorInput::event)> pending_;
  bool feeding_ = false;
  int depth_ = 0;  // nesting of Guarded (a hook may call back in)
  std::optional<Env::TimerId> wake_timer_;
  std::int64_t wake_at_ = 0;
  // Last values pushed to the Supervisor / Lease.
  std::optional<NodeId> leader_;
  bool has_quorum_ = false;
  std::uint64_t epoch_ = 0;
  std::vector<Address> peers_;
  std::int64_t fed_lease_until_ = 0;
  bool view_fed_ = false;
  std::uint64_t started_epoch_ = 0;  // epoch of the last StartWork
  bool started_ = false;
};

}  // namespace pynenc_cpp::cluster
