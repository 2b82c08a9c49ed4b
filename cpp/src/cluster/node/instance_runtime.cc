#include "cluster/node/instance_runtime.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <cstdio>
#include <exception>
#include <utility>

namespace pynenc_cpp::cluster {

namespace {
std::string What(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace

InstanceRuntime::InstanceRuntime(std::function<void(Job)> to_callbacks,
                                 std::function<void(Job)> to_loop)
    : to_callbacks_(std::move(to_callbacks)), to_loop_(std::move(to_loop)) {}

Status InstanceRuntime::RegisterType(const std::string& actor_type, ActorFactory factory) {
  if (actor_type.empty() || actor_type.size() > kMaxActorTypeBytes) {
    return Status::InvalidArgument("actor_type: must be 1.." + std::to_string(kMaxActorTypeBytes) +
                                   " bytes");
  }
  if (!factory) return Status::InvalidArgument("factory: must be callable");
  MutexLock lock(mu_);
  types_[actor_type] = std::move(factory);
  return Status::Ok();
}

Status InstanceRuntime::UnregisterType(const std::string& actor_type) {
  MutexLock lock(mu_);
  if (types_.erase(actor_type) == 0) {
    return Status::NotFound("actor type '" + actor_type + "' is not registered on this node");
  }
  return Status::Ok();
}

Status InstanceRuntime::RegisterFamily(const AgentFamily& family, ActorFactory factory) {
  if (auto s = ValidateAgentFamily(family); !s.ok()) return s;
  if (!factory) return Status::InvalidArgument("factory: must be callable");
  MutexLock lock(mu_);
  families_[family.scheme] = {family, std::move(factory)};
  return Status::Ok();
}

std::set<std::string> InstanceRuntime::Types() const {
  MutexLock lock(mu_);
  std::set<std::string> out;
  for (const auto& [name, f] : types_) out.insert(name);
  return out;
}

std::vector<AgentFamily> InstanceRuntime::Families() const {
  MutexLock lock(mu_);
  std::vector<AgentFamily> out;
  for (const auto& [scheme, entry] : families_) out.push_back(entry.first);
  return out;
}

ActorFactory InstanceRuntime::FactoryFor(const InstanceContext& ctx) const {
  MutexLock lock(mu_);
  if (ctx.kind == SpecKind::kAgent) {
    auto it = families_.find(ctx.actor_type);
    return it == families_.end() ? ActorFactory() : it->second.second;
  }
  auto it = types_.find(ctx.actor_type);
  return it == types_.end() ? ActorFactory() : it->second;
}

void InstanceRuntime::Start(const InstanceContext& ctx, std::function<void(Status)> done) {
  to_callbacks_([this, ctx, done = std::move(done)]() mutable {
    Status status;
    ActorFactory factory = FactoryFor(ctx);
    if (!factory) {
      status = Status::NotFound("actor type '" + ctx.actor_type + "' was unregistered");
    } else {
      try {
        std::unique_ptr<ActorInstance> inst = factory(ctx);
        if (!inst) {
          status = Status::BackendFailure("the factory of '" + ctx.actor_type +
                                          "' returned no instance");
        } else {
          instances_[ctx.label] = std::move(inst);
        }
      } catch (...) {
        status = Status::BackendFailure("the factory of '" + ctx.actor_type +
                                        "' raised: " + What(std::current_exception()));
      }
    }
    to_loop_([done = std::move(done), status] { done(status); });
  });
}

void InstanceRuntime::Stop(const std::string& label, const std::string& reason,
                           std::function<void()> done) {
  to_callbacks_([this, label, reason, done = std::move(done)]() mutable {
    auto it = instances_.find(label);
    if (it != instances_.end()) {
      std::unique_ptr<ActorInstance> inst = std::move(it->second);
      instances_.erase(it);
      try {
        inst->Stop(reason);
      } catch (...) {
        // Reported, then the instance is gone all the same: its lifetime ended.
        std::fprintf(stderr, "pynenc-cpp cluster: stopping '%s' raised: %s\n", label.c_str(),
                     What(std::current_exception()).c_str());
      }
    }
    to_loop_(std::move(done));
  });
}

void InstanceRuntime::Regrant(const std::string& label, Generation generation) {
  to_callbacks_([this, label, generation] {
    auto it = instances_.find(label);
    if (it == instances_.end()) return;
    try {
      it->second->OnGeneration(generation);
    } catch (...) {
      std::fprintf(stderr, "pynenc-cpp cluster: OnGeneration of '%s' raised: %s\n", label.c_str(),
                   What(std::current_exception()).c_str());
    }
  });
}

void InstanceRuntime::Deliver(const std::string& label, std::string payload,
                              std::function<void(Result<std::string>)> reply) {
  to_callbacks_([this, label, payload = std::move(payload), reply = std::move(reply)]() mutable {
    Result<std::string> result = Status::Unavailable("'" + label + "' is not running here");
    auto it = instances_.find(label);
    if (it != instances_.end()) {
      try {
        result = it->second->OnMessage(payload);
      } catch (...) {
        result = Status::BackendFailure("'" + label + "' raised: " +
                                        What(std::current_exception()));
      }
    }
    to_loop_([reply = std::move(reply), result = std::move(result)]() mutable {
      reply(std::move(result));
    });
  });
}

}  // namespace pynenc_cpp::cluster
