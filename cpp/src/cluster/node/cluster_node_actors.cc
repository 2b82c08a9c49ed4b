// ClusterNodeImpl's port for the process's actor runtime: the inbox, inbox
// actor types, and messages to labels and node-local paths (Mailer).
#include <utility>

#include "cluster/node/cluster_node_impl.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp::cluster {

namespace {
pynenc_cpp::Status NoCluster() {
  return pynenc_cpp::Status::Unavailable("standalone node: no cluster (give host and seeds)");
}
}  // namespace

std::vector<InboxItem> ClusterNodeImpl::DrainInbox(std::size_t max) {
  if (!inbox_) return {};
  return inbox_->Drain(max);
}

pynenc_cpp::Status ClusterNodeImpl::RegisterInboxActorType(const std::string& actor_type,
                                                           std::int64_t stop_timeout_ms) {
  if (standalone_) return NoCluster();
  if (stop_timeout_ms <= 0 || stop_timeout_ms > kMaxDrainTimeoutMs + 60'000) {
    return pynenc_cpp::Status::InvalidArgument("stop_timeout_ms: must be > 0 and <= " +
                                               std::to_string(kMaxDrainTimeoutMs + 60'000));
  }
  return RegisterActorType(actor_type, MakeInboxFactory(*inbox_, stop_latch_, stop_timeout_ms));
}

void ClusterNodeImpl::InstanceStopped(const std::string& label, Generation generation) {
  stop_latch_.Done(label, generation);
}

void ClusterNodeImpl::RaiseGenerationFloor(const std::string& label, Generation floor) {
  OnLoop([label, floor](NodeCore& core) { core.services().host().RaiseFloor(label, floor); });
}

Result<std::uint64_t> ClusterNodeImpl::SendToLabel(const std::string& label, std::string payload) {
  if (standalone_) return NoCluster();
  if (label.empty() || label.size() > kMaxLabelBytes) {
    return pynenc_cpp::Status::InvalidArgument("label: must be 1.." +
                                               std::to_string(kMaxLabelBytes) + " bytes");
  }
  if (payload.size() + label.size() + 64 > options_.max_frame_bytes) {
    return pynenc_cpp::Status::InvalidArgument(
        "message of " + std::to_string(payload.size()) + " bytes is over max_frame_bytes " +
        std::to_string(options_.max_frame_bytes));
  }
  Result<std::uint64_t> seq = pynenc_cpp::Status::Unavailable("the node stopped");
  {
    MutexLock lock(mailer_mu_);
    if (mailer_) seq = mailer_->Enqueue(label, std::move(payload));
  }
  if (seq.ok()) {
    OnLoop([label](NodeCore& core) { core.services().mailer().Pump(label); });
  }
  return seq;
}

void ClusterNodeImpl::AckLabel(std::uint64_t token, LabelOutcome outcome) {
  OnLoop([token, outcome](NodeCore& core) { core.services().mailer().AckToken(token, outcome); });
}

void ClusterNodeImpl::SendToPath(const Address& node_address, const std::string& path,
                                 std::string payload) {
  OnLoop([node_address, path, payload = std::move(payload)](NodeCore& core) mutable {
    core.services().mailer().SendPath(node_address, path, std::move(payload));
  });
}

ActorMailStats ClusterNodeImpl::MailStats() const {
  MutexLock lock(mailer_mu_);
  return mailer_ ? mailer_->Stats() : ActorMailStats{};
}

}  // namespace pynenc_cpp::cluster
