#include "cluster/node/options.h"

#include <set>
#include <utility>

#include "cluster/membership/messages.h"
#include "cluster/transport/address.h"

namespace pynenc_cpp::cluster {

namespace {
Status Bad(const std::string& msg) { return Status::BadConfig(msg); }
std::string N(std::int64_t v) { return std::to_string(v); }
}  // namespace

bool IsStandalone(const ClusterOptions& o) { return o.host.empty() && o.seeds.empty(); }

namespace {
bool ValidExplicitId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}
}  // namespace

Status ValidateClusterOptions(const ClusterOptions& o) {
  if (!o.node_id.empty()) {
    if (!ValidExplicitId(o.node_id)) {
      return Bad("node_id: '" + o.node_id.substr(0, 64) +
                 "' must be 1..128 characters of [A-Za-z0-9._:-]");
    }
    if (!o.state_dir.empty()) {
      return Bad("node_id: cannot be combined with state_dir (which keeps its own id)");
    }
  }
  if (IsStandalone(o)) return Status::Ok();  // nothing below is used
  if (o.cluster_name.empty()) return Bad("cluster_name: must not be empty");
  if (o.host.empty()) return Bad("host: required when seeds are given");
  if (!transport::ParseAddress(transport::FormatAddress(o.host, 1)).ok()) {
    return Bad("host: malformed host '" + o.host + "'");
  }
  if (o.secret.empty()) {
    // No empty key, on loopback either: every local process could compute it.
    return Bad("secret: required (there is no empty key; the Python API reads a per-user "
               "secret file when none is given)");
  }
  for (const auto& seed : o.seeds) {
    auto parsed = transport::ParseAddress(seed);
    if (!parsed.ok() || parsed.value().port == 0) {
      return Bad("seeds: bad address '" + seed + "' (want host:port, port 1..65535)");
    }
  }
  // Upper bounds first: deadlines (and the checks below) computed from these
  // never overflow.
  for (const auto& [name, value] :
       {std::pair<const char*, std::int64_t>{"heartbeat_ms", o.heartbeat_ms},
        {"suspect_timeout_ms", o.suspect_timeout_ms},
        {"stabilize_ms", o.stabilize_ms},
        {"lease_ms", o.lease_ms},
        {"request_timeout_ms", o.request_timeout_ms},
        {"spawn_timeout_ms", o.spawn_timeout_ms},
        {"leave_timeout_ms", o.leave_timeout_ms},
        {"actor_resend_ms", o.actor_resend_ms}}) {
    if (value > kMaxTimeoutMs) {
      return Bad(std::string(name) + ": at most " + N(kMaxTimeoutMs) + " (one day), got " +
                 N(value));
    }
  }
  if (o.heartbeat_ms <= 0) return Bad("heartbeat_ms: must be > 0 (got " + N(o.heartbeat_ms) + ")");
  if (o.suspect_timeout_ms < 2 * o.heartbeat_ms) {
    return Bad("suspect_timeout_ms: must be >= 2 * heartbeat_ms (got " + N(o.suspect_timeout_ms) +
               " with heartbeat_ms " + N(o.heartbeat_ms) + ")");
  }
  if (o.stabilize_ms < 0) return Bad("stabilize_ms: must be >= 0 (got " + N(o.stabilize_ms) + ")");
  if (o.lease_ms < 0 || (o.lease_ms > 0 && o.lease_ms < 2 * o.heartbeat_ms)) {
    return Bad("lease_ms: must be 0 (suspect_timeout_ms) or >= 2 * heartbeat_ms (got " +
               N(o.lease_ms) + ")");
  }
  if (o.quorum < 0) return Bad("quorum: must be >= 0 (got " + N(o.quorum) + ")");
  if (o.indirect_probes < 0) {
    return Bad("indirect_probes: must be >= 0 (got " + N(o.indirect_probes) + ")");
  }
  if (o.max_frame_bytes < 1024) {
    return Bad("max_frame_bytes: must be >= 1024 (got " +
               N(static_cast<std::int64_t>(o.max_frame_bytes)) + ")");
  }
  if (o.send_queue_bound == 0) return Bad("send_queue_bound: must be > 0");
  if (o.refusal_logs_per_second < 1) return Bad("refusal_logs_per_second: must be >= 1");
  if (o.request_timeout_ms <= 0) return Bad("request_timeout_ms: must be > 0");
  if (o.spawn_timeout_ms < 0) return Bad("spawn_timeout_ms: must be >= 0");
  if (o.leave_timeout_ms < 0) return Bad("leave_timeout_ms: must be >= 0");
  if (o.actor_buffer_limit == 0) return Bad("actor_buffer_limit: must be > 0");
  if (o.actor_inbox_limit == 0) return Bad("actor_inbox_limit: must be > 0");
  if (o.actor_resend_ms <= 0) return Bad("actor_resend_ms: must be > 0");
  // Our own member record must fit what every peer's decoder accepts, or peers
  // would silently drop every message we send.
  if (o.node_class.size() > membership::kMaxClassBytes) {
    return Bad("node_class: at most " + N(membership::kMaxClassBytes) + " bytes");
  }
  if (o.metadata.size() > membership::kMaxMetadataEntries) {
    return Bad("metadata: at most " + N(membership::kMaxMetadataEntries) + " entries (got " +
               N(static_cast<std::int64_t>(o.metadata.size())) + ")");
  }
  for (const auto& [key, value] : o.metadata) {
    if (key.empty() || key.size() > membership::kMaxMetadataKeyBytes ||
        value.size() > membership::kMaxMetadataValueBytes) {
      return Bad("metadata: key '" + key.substr(0, 64) + "' must be 1.." +
                 N(membership::kMaxMetadataKeyBytes) + " bytes and its value at most " +
                 N(membership::kMaxMetadataValueBytes) + " bytes");
    }
  }
  if (!o.election_class.empty() && o.election != ElectionKind::kOldestNode) {
    return Bad("election_class: only valid with the oldest-node election");
  }
  return Status::Ok();
}

int EffectiveQuorum(const ClusterOptions& o, const Address& self) {
  if (o.quorum > 0) return o.quorum;
  std::set<Address> distinct(o.seeds.begin(), o.seeds.end());
  distinct.insert(self);
  return static_cast<int>(distinct.size()) / 2 + 1;
}

std::vector<Address> MergeSeeds(const std::vector<Address>& seeds,
                                const std::vector<Address>& cached, const Address& self) {
  std::vector<Address> out;
  std::set<Address> seen{self};
  for (const auto* list : {&seeds, &cached}) {
    for (const auto& a : *list) {
      if (seen.insert(a).second) out.push_back(a);
    }
  }
  return out;
}

}  // namespace pynenc_cpp::cluster
