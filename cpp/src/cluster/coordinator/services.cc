#include "cluster/coordinator/services.h"

#include <algorithm>
#include <utility>

namespace pynenc_cpp::cluster {

Services::Services(Env& env, const NodeId& self_id, std::int64_t heartbeat_ms,
                   std::int64_t lease_ms, std::int64_t stabilize_ms, ServicesOptions options,
                   ServicesHooks hooks)
    : env_(env), self_id_(self_id), options_(std::move(options)) {
  if (!options_.source) {
    auto mem = OpenGenerationSource(BackendConfig{"memory://", "cluster", nullptr});
    options_.source = std::shared_ptr<GenerationSource>(std::move(mem).value());
  }
  if (options_.report_interval_ms <= 0) options_.report_interval_ms = 10 * heartbeat_ms;
  options_.coordinator.self_id = self_id;
  options_.coordinator.heartbeat_ms = heartbeat_ms;
  options_.coordinator.lease_ms = lease_ms;
  leases_ = std::make_unique<OwnerLeases>(env, OwnerLeaseOptions{self_id, heartbeat_ms, lease_ms, 0},
                                          std::move(hooks.owner_lease_extended));
  host_ = std::make_unique<Host>(env, *leases_,
                                 HostOptions{self_id, stabilize_ms, options_.report_interval_ms,
                                             std::max<std::int64_t>(1, heartbeat_ms / 2)},
                                 std::move(hooks.host));
  // Messages reach only instances active here; the owner's hook answers them.
  auto deliver = std::move(hooks.router.deliver);
  RouterHooks rh;
  rh.deliver = [this, deliver = std::move(deliver)](const std::string& label, std::string payload,
                                                    RouterHooks::ReplyFn reply) {
    if (!host_->ActiveGeneration(label) || !deliver) {
      return reply(Status::Unavailable("'" + label + "' does not run on node " +
                                       self_id_.substr(0, 8)));
    }
    deliver(label, std::move(payload), std::move(reply));
  };
  router_ = std::make_unique<Router>(env, RouterOptions{self_id, options_.request_timeout_ms},
                                     std::move(rh));
  mailer_ = std::make_unique<Mailer>(env, *router_, *host_, options_.inbox, options_.mailer);
}

Services::~Services() {
  router_->SetCoordinator(nullptr);
  coordinator_.reset();
  mailer_.reset();
  router_.reset();
  host_.reset();
  leases_.reset();
}

void Services::Start() {
  leases_->Start();
  host_->Start();
}

void Services::OnFrame(const Address& from, std::uint8_t type, const std::string& payload) {
  auto decoded = coord_wire::Decode(type, payload);
  if (!decoded.ok()) {
    ++malformed_;
    env_.Log(LogLevel::kWarning, "dropped a malformed frame from " + from + ": " +
                                     decoded.status().message());
    return;
  }
  auto& m = decoded.value();
  if (auto* c = std::get_if<coord_wire::Command>(&m)) {
    host_->OnCommand(from, *c);
  } else if (auto* a = std::get_if<coord_wire::Ack>(&m)) {
    if (coordinator_) coordinator_->OnAck(from, *a);
  } else if (auto* r = std::get_if<coord_wire::Report>(&m)) {
    if (coordinator_) coordinator_->OnReport(from, *r);
  } else if (std::get_if<coord_wire::ReportRequest>(&m)) {
    host_->OnReportRequest(from);
  } else if (auto* lr = std::get_if<coord_wire::LeaseRequest>(&m)) {
    leases_->OnRequest(from, *lr);
  } else if (auto* lp = std::get_if<coord_wire::LeaseReply>(&m)) {
    leases_->OnReply(*lp);
  } else if (auto* rel = std::get_if<coord_wire::LeaseRelease>(&m)) {
    leases_->OnRelease(*rel);
  } else if (auto* d = std::get_if<coord_wire::Directory>(&m)) {
    router_->OnDirectory(from, *d);
  } else if (auto* cr = std::get_if<coord_wire::ClientRequest>(&m)) {
    router_->OnClientRequest(from, *cr);
  } else if (auto* rp = std::get_if<coord_wire::ClientReply>(&m)) {
    router_->OnClientReply(*rp);
  } else if (auto* am = std::get_if<coord_wire::ActorMessage>(&m)) {
    router_->OnActorMessage(from, *am);
  } else if (auto* ar = std::get_if<coord_wire::ActorReply>(&m)) {
    router_->OnActorReply(*ar);
  } else if (auto* pm = std::get_if<coord_wire::PathMessage>(&m)) {
    mailer_->OnPath(*pm);
  } else if (auto* le = std::get_if<coord_wire::LabelEnvelope>(&m)) {
    mailer_->OnEnvelope(from, *le);
  } else if (auto* la = std::get_if<coord_wire::LabelAck>(&m)) {
    mailer_->OnAck(*la);
  }
}

void Services::SetView(const ServicesView& view) {
  leases_->SetView(view.live, view.quorum);
  std::optional<Address> leader_address;
  if (view.leader) {
    for (const auto& m : view.live) {
      if (m.id == *view.leader) leader_address = m.address;
    }
  }
  router_->SetLeader(view.leader, leader_address);
  host_->SetView(view.has_quorum, leader_address, view.incarnation);
  if (view.members != members_) {
    members_ = view.members;
    if (coordinator_) coordinator_->SetMembers(members_);
  }
}

void Services::Lead(bool leading) {
  if (leading == (coordinator_ != nullptr)) return;
  if (!leading) {
    router_->SetCoordinator(nullptr);
    coordinator_.reset();
    return;
  }
  Router* router = router_.get();
  coordinator_ = std::make_unique<Coordinator>(env_, options_.source, options_.coordinator,
                                               [router] { return router->Entries(); });
  router_->SetCoordinator(coordinator_.get());
  coordinator_->Start(members_);
}

void Services::Shutdown() {
  Lead(false);
  host_->Shutdown();
}

}  // namespace pynenc_cpp::cluster
