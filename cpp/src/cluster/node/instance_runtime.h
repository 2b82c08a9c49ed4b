// InstanceRuntime: the production side of Host's hooks. Keeps the node's spawn
// registry (actor types and agent families with their factories) and the live
// ActorInstance objects, and runs every user call (factory, Stop,
// OnGeneration, OnMessage) on the node's callback thread, then hands the
// outcome back to the loop thread.
//
// Thread safety: Register*/Unregister*/Types/Families are safe from any thread
// (one mutex). Start/Stop/Regrant/Deliver are called on the loop thread; they
// only queue jobs. The instances themselves are touched only on the callback
// thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/cluster/instance.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

class InstanceRuntime {
 public:
  using Job = std::function<void()>;
  // `to_callbacks` queues a job on the callback thread; `to_loop` runs a job on
  // the loop thread as one node event (or drops it once the node stopped).
  InstanceRuntime(std::function<void(Job)> to_callbacks, std::function<void(Job)> to_loop);

  Status RegisterType(const std::string& actor_type, ActorFactory factory);
  Status UnregisterType(const std::string& actor_type);
  Status RegisterFamily(const AgentFamily& family, ActorFactory factory);
  std::set<std::string> Types() const;
  std::vector<AgentFamily> Families() const;

  // Builds the instance; `done(status)` runs on the loop thread.
  void Start(const InstanceContext& ctx, std::function<void(Status)> done);
  // Stops it; `done()` runs on the loop thread once Stop returned (or threw).
  void Stop(const std::string& label, const std::string& reason, std::function<void()> done);
  void Regrant(const std::string& label, Generation generation);
  // Hands `payload` to the instance; `reply` runs on the loop thread.
  void Deliver(const std::string& label, std::string payload,
               std::function<void(Result<std::string>)> reply);

  // Callback thread only: how many instances are alive (tests).
  std::size_t LiveInstances() const { return instances_.size(); }

 private:
  ActorFactory FactoryFor(const InstanceContext& ctx) const;

  std::function<void(Job)> to_callbacks_;
  std::function<void(Job)> to_loop_;
  mutable Mutex mu_;
  std::map<std::string, ActorFactory> types_ PYNENC_GUARDED_BY(mu_);
  std::map<std::string, std::pair<AgentFamily, ActorFactory>> families_ PYNENC_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<ActorInstance>> instances_;  // callback thread
};

}  // namespace pynenc_cpp::cluster
