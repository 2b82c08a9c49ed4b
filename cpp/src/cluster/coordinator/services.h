// The coordinator layer of one node, wired for NodeCore: owner leases, the
// host, the router, the mailer (actor messages) and (while this node leads)
// the Coordinator. NodeCore feeds
// it frames of types 48..79, its view after every event, the mastership
// start/stop, and runs CheckExpiry before and AfterEvent after every event.
//
// Thread safety: not thread-safe; lives on the Env loop thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/actors/mailer.h"
#include "cluster/coordinator/coordinator.h"
#include "cluster/singletons/host.h"
#include "cluster/singletons/owner_leases.h"
#include "cluster/coordinator/router.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp::cluster {

struct ServicesOptions {
  std::int64_t report_interval_ms = 0;  // 0: 10 * heartbeat_ms
  std::int64_t request_timeout_ms = 5'000;
  CoordinatorOptions coordinator;  // self_id, heartbeat_ms and lease_ms are filled by NodeCore
  // Where generations and specs live. nullptr: a memory:// source of this node's own.
  std::shared_ptr<GenerationSource> source;
  // The process's actor runtime (null: none; label messages are answered "not
  // here"). Outlives the Services.
  Inbox* inbox = nullptr;
  MailerOptions mailer;
};

struct ServicesHooks {
  HostHooks host;
  // Every owner-lease extension of this node, before it takes effect.
  OwnerLeases::ExtendFn owner_lease_extended;
  RouterHooks router;  // `deliver` is wrapped: it only reaches labels active on this node
};

// The part of the node's view the layer needs.
struct ServicesView {
  std::vector<Member> members;  // every known member, self included
  std::vector<Member> live;
  int quorum = 1;
  bool has_quorum = false;
  std::optional<NodeId> leader;
  std::uint64_t incarnation = 0;
};

class Services {
 public:
  // `timing`: self id, heartbeat, lease and stabilization of the node.
  Services(Env& env, const NodeId& self_id, std::int64_t heartbeat_ms, std::int64_t lease_ms,
           std::int64_t stabilize_ms, ServicesOptions options, ServicesHooks hooks);
  ~Services();
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  void Start();
  static bool Handles(std::uint8_t type) {
    return coord_wire::IsCoordinatorType(type) || coord_wire::IsActorType(type);
  }
  // A frame of a type Handles(); malformed ones are counted and dropped.
  void OnFrame(const Address& from, std::uint8_t type, const std::string& payload);
  void SetView(const ServicesView& view);
  // Mastership began (this node runs the Coordinator) or ended.
  void Lead(bool leading);
  void CheckExpiry() { host_->CheckExpiry(); }
  void AfterEvent() {
    host_->AfterEvent();
    mailer_->AfterEvent();
  }
  // Graceful leave, first step: the leader moves this node's instances away.
  void BeginLeave() { host_->BeginLeave(); }
  void Shutdown();
  bool Idle() const { return host_->Idle(); }

  Host& host() { return *host_; }
  const Host& host() const { return *host_; }
  Router& router() { return *router_; }
  Mailer& mailer() { return *mailer_; }
  OwnerLeases& leases() { return *leases_; }
  Coordinator* coordinator() { return coordinator_.get(); }
  std::uint64_t malformed() const { return malformed_; }

 private:
  Env& env_;
  NodeId self_id_;
  ServicesOptions options_;
  std::unique_ptr<OwnerLeases> leases_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Mailer> mailer_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<Member> members_;
  std::uint64_t malformed_ = 0;
};

}  // namespace pynenc_cpp::cluster
