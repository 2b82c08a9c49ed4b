// Client requests the leader serves: submit and remove specs, query the view
// and the statuses. Requests that arrive while the reign is still rebuilding
// wait for it (bounded); mutations are answered only once the generation
// source has them.
#include <utility>

#include "cluster/coordinator/coordinator.h"

namespace pynenc_cpp::cluster {

namespace {
constexpr std::size_t kMaxQueuedRequests = 10'000;
}  // namespace

void Coordinator::HandleClient(const coord_wire::ClientRequest& request, Reply reply) {
  if (phase_ != Phase::kReady) {
    if (queued_.size() >= kMaxQueuedRequests) {
      return reply(Status::Unavailable("the coordinator is rebuilding and has " +
                                       std::to_string(queued_.size()) + " requests queued"),
                   "");
    }
    queued_.emplace_back(request, std::move(reply));
    return;
  }
  Serve(request, std::move(reply));
}

void Coordinator::Serve(const coord_wire::ClientRequest& request, Reply reply) {
  using coord_wire::ClientOp;
  switch (request.op) {
    case ClientOp::kSubmitActor:
    case ClientOp::kSubmitSingleton: {
      auto spec = codec::DecodeSpec(request.body);
      if (!spec.ok()) return reply(spec.status(), "");
      const SpecKind want =
          request.op == ClientOp::kSubmitActor ? SpecKind::kActor : SpecKind::kSingleton;
      if (spec.value().kind != want) {
        return reply(Status::InvalidArgument("request and spec kinds differ"), "");
      }
      Status valid = want == SpecKind::kActor ? ValidateActorSpec(spec.value().actor)
                                              : ValidateSingletonSpec(spec.value().singleton);
      if (!valid.ok()) return reply(valid, "");
      return Submit(std::move(spec).value(), std::move(reply));
    }
    case ClientOp::kRemove:
      return Remove(request.body, std::move(reply));
    case ClientOp::kView:
      return reply(Status::Ok(), codec::EncodeView(View()));
    case ClientOp::kStatuses:
      return reply(Status::Ok(), codec::EncodeStatuses(Statuses()));
  }
  reply(Status::InvalidArgument("unknown request"), "");
}

void Coordinator::Submit(codec::StoredSpec spec, Reply reply) {
  const std::string label = spec.label();
  std::string encoded = codec::EncodeSpec(spec);
  auto it = entries_.find(label);
  if (it != entries_.end()) {
    const Entry& e = it->second;
    if (e.kind == spec.kind && e.encoded == encoded && !e.store_busy) {
      return reply(Status::Ok(), "");  // the same spec again: nothing to do
    }
    if (e.store_busy && e.encoded == encoded) {
      return reply(Status::Unavailable("'" + label + "' is being stored; retry"), "");
    }
    return reply(Status::Conflict("label '" + label + "' is already used by a different " +
                                  std::string(SpecKindName(e.kind)) +
                                  (e.kind == SpecKind::kAgent ? " (family " + e.family + ")" : "")),
                 "");
  }
  Entry e;
  e.kind = spec.kind;
  e.spec = std::move(spec);
  e.encoded = encoded;
  e.store_busy = true;
  SetState(e, SpecState::kPending, "being stored");
  entries_[label] = std::move(e);
  auto source = source_;
  Async<Status>([source, label, encoded] { return source->PutSpec(label, encoded); },
                [this, label, reply = std::move(reply)](Status s) {
                  auto it = entries_.find(label);
                  if (!s.ok()) {
                    ++stats_.store_errors;
                    if (it != entries_.end()) entries_.erase(it);
                    return reply(Status::BackendFailure("cannot store the spec of '" + label +
                                                        "': " + s.ToString()),
                                 "");
                  }
                  if (it != entries_.end()) it->second.store_busy = false;
                  reply(Status::Ok(), "");
                  Reconcile();
                });
}

void Coordinator::Remove(const std::string& label, Reply reply) {
  auto it = entries_.find(label);
  if (it == entries_.end()) return reply(Status::NotFound("no spec labelled '" + label + "'"), "");
  Entry& e = it->second;
  if (e.kind == SpecKind::kAgent) {
    return reply(Status::InvalidArgument("'" + label + "' is an agent of family " + e.family +
                                         ": it goes when no node declares it"),
                 "");
  }
  if (e.store_busy) return reply(Status::Unavailable("'" + label + "' is busy; retry"), "");
  e.store_busy = true;
  auto source = source_;
  Async<Status>([source, label] { return source->RemoveSpec(label); },
                [this, label, reply = std::move(reply)](Status s) {
                  auto it = entries_.find(label);
                  if (!s.ok()) {
                    ++stats_.store_errors;
                    if (it != entries_.end()) it->second.store_busy = false;
                    return reply(Status::BackendFailure("cannot remove the spec of '" + label +
                                                        "': " + s.ToString()),
                                 "");
                  }
                  if (it != entries_.end()) entries_.erase(it);  // its instances are now strays
                  reply(Status::Ok(), "");
                  Reconcile();
                });
}

}  // namespace pynenc_cpp::cluster
