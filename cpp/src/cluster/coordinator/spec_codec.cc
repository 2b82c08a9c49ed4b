#include "cluster/coordinator/spec_codec.h"

namespace pynenc_cpp::cluster::codec {

using wire::ByteReader;
using wire::ByteWriter;

void PutGeneration(ByteWriter& w, Generation g) { w.U64(g.Packed()); }
bool GetGeneration(ByteReader& r, Generation& g) {
  std::uint64_t v = 0;
  if (!r.U64(v)) return false;
  g = Generation::FromPacked(v);
  return true;
}

void PutStrings(ByteWriter& w, const std::vector<std::string>& v) {
  w.U32(static_cast<std::uint32_t>(v.size()));
  for (const auto& s : v) w.Str(s);
}
bool GetStrings(ByteReader& r, std::vector<std::string>& v, std::size_t max_len) {
  std::uint32_t n = 0;
  if (!r.Count(n, kMaxListEntries)) return false;
  v.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string s;
    if (!r.Str(s, max_len)) return false;
    v.push_back(std::move(s));
  }
  return true;
}

namespace {

void PutMap(ByteWriter& w, const std::map<std::string, std::string>& m) {
  w.U32(static_cast<std::uint32_t>(m.size()));
  for (const auto& [k, v] : m) {
    w.Str(k);
    w.Str(v);
  }
}
bool GetMap(ByteReader& r, std::map<std::string, std::string>& m) {
  std::uint32_t n = 0;
  if (!r.Count(n, kMaxListEntries)) return false;
  m.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!r.Str(k, kMaxMetaBytes) || !r.Str(v, kMaxMetaBytes)) return false;
    m[std::move(k)] = std::move(v);
  }
  return true;
}

void PutOpt(ByteWriter& w, const std::optional<std::string>& s) {
  w.U8(s ? 1 : 0);
  if (s) w.Str(*s);
}
bool GetOpt(ByteReader& r, std::optional<std::string>& s, std::size_t max_len) {
  std::uint8_t has = 0;
  if (!r.U8(has) || has > 1) return false;
  if (!has) {
    s.reset();
    return true;
  }
  std::string v;
  if (!r.Str(v, max_len)) return false;
  s = std::move(v);
  return true;
}

void PutActor(ByteWriter& w, const ActorSpec& a) {
  w.Str(a.label);
  w.Str(a.actor_type);
  w.Str(a.initial_state);
  w.U8(static_cast<std::uint8_t>(a.crash_strategy.kind));
  w.I64(a.crash_strategy.wait_ms);
  const auto& c = a.constraints;
  PutStrings(w, c.required_classes);
  PutMap(w, c.required_metadata);
  PutStrings(w, c.anti_affinity_labels);
  PutOpt(w, c.colocate_with);
  PutOpt(w, c.required_node_id);
  w.U8(static_cast<std::uint8_t>(a.strategy.kind));
  w.U64(a.strategy.seed);
  w.Str(a.strategy.node);
}
bool GetActor(ByteReader& r, ActorSpec& a) {
  auto& c = a.constraints;
  return r.Str(a.label, kMaxLabelBytes) && r.Str(a.actor_type, kMaxActorTypeBytes) &&
         r.Str(a.initial_state, kMaxStateBytes) && GetEnum(r, a.crash_strategy.kind, 2) &&
         r.I64(a.crash_strategy.wait_ms) && GetStrings(r, c.required_classes, kMaxMetaBytes) &&
         GetMap(r, c.required_metadata) && GetStrings(r, c.anti_affinity_labels, kMaxLabelBytes) &&
         GetOpt(r, c.colocate_with, kMaxLabelBytes) && GetOpt(r, c.required_node_id, kMaxIdBytes) &&
         GetEnum(r, a.strategy.kind, 3) && r.U64(a.strategy.seed) &&
         r.Str(a.strategy.node, kMaxIdBytes);
}

void PutSingleton(ByteWriter& w, const SingletonSpec& s) {
  w.Str(s.label);
  w.Str(s.actor_type);
  w.Str(s.state);
  w.U8(static_cast<std::uint8_t>(s.anchor.kind));
  w.Str(s.anchor.value);
  w.I64(s.drain_timeout_ms);
}
bool GetSingleton(ByteReader& r, SingletonSpec& s) {
  return r.Str(s.label, kMaxLabelBytes) && r.Str(s.actor_type, kMaxActorTypeBytes) &&
         r.Str(s.state, kMaxStateBytes) && GetEnum(r, s.anchor.kind, 2) &&
         r.Str(s.anchor.value, kMaxMetaBytes) && r.I64(s.drain_timeout_ms) &&
         s.drain_timeout_ms > 0 && s.drain_timeout_ms <= kMaxDrainTimeoutMs;
}

Status Malformed(std::string_view what) {
  return Status::InvalidArgument("malformed " + std::string(what));
}

}  // namespace

std::string EncodeSpec(const StoredSpec& spec) {
  ByteWriter w;
  w.U8(kSpecFormat);
  w.U8(static_cast<std::uint8_t>(spec.kind));
  if (spec.kind == SpecKind::kActor) {
    PutActor(w, spec.actor);
  } else {
    PutSingleton(w, spec.singleton);
  }
  return std::move(w).Take();
}

Result<StoredSpec> DecodeSpec(std::string_view bytes) {
  ByteReader r(bytes);
  std::uint8_t format = 0;
  if (!r.U8(format)) return Malformed("spec (empty)");
  if (format != kSpecFormat) {
    return Status::InvalidArgument("spec format " + std::to_string(format) + " is not " +
                                   std::to_string(kSpecFormat) + " (written by another version?)");
  }
  StoredSpec spec;
  if (!GetEnum(r, spec.kind, 1)) return Malformed("spec kind");
  const bool ok =
      spec.kind == SpecKind::kActor ? GetActor(r, spec.actor) : GetSingleton(r, spec.singleton);
  if (!ok || !r.done()) return Malformed("spec body");
  return spec;
}

std::string EncodeStatuses(const std::vector<SpecStatus>& statuses) {
  ByteWriter w;
  w.U32(static_cast<std::uint32_t>(statuses.size()));
  for (const auto& s : statuses) {
    w.Str(s.label);
    w.U8(static_cast<std::uint8_t>(s.kind));
    w.U8(static_cast<std::uint8_t>(s.state));
    PutOpt(w, s.node);
    PutGeneration(w, s.generation);
    w.Str(s.reason);
  }
  return std::move(w).Take();
}

Result<std::vector<SpecStatus>> DecodeStatuses(std::string_view bytes) {
  ByteReader r(bytes);
  std::uint32_t n = 0;
  if (!r.Count(n, kMaxListEntries)) return Malformed("statuses");
  std::vector<SpecStatus> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    SpecStatus s;
    if (!r.Str(s.label, kMaxLabelBytes) || !GetEnum(r, s.kind, 2) || !GetEnum(r, s.state, 3) ||
        !GetOpt(r, s.node, kMaxIdBytes) || !GetGeneration(r, s.generation) ||
        !r.Str(s.reason, kMaxReasonBytes)) {
      return Malformed("statuses");
    }
    out.push_back(std::move(s));
  }
  if (!r.done()) return Malformed("statuses");
  return out;
}

std::string EncodeView(const ClusterView& view) {
  ByteWriter w;
  PutOpt(w, view.leader);
  w.I64(view.alive_count);
  w.I64(view.total_count);
  w.U32(static_cast<std::uint32_t>(view.nodes.size()));
  for (const auto& n : view.nodes) {
    w.Str(n.id);
    w.Str(n.address);
    w.U64(n.incarnation);
    w.U8(static_cast<std::uint8_t>(n.state));
    w.U8(n.alive ? 1 : 0);
    w.Str(n.node_class);
    PutMap(w, n.metadata);
    PutStrings(w, n.actor_types);
    PutStrings(w, n.running);
  }
  return std::move(w).Take();
}

Result<ClusterView> DecodeView(std::string_view bytes) {
  ByteReader r(bytes);
  ClusterView v;
  std::int64_t alive = 0, total = 0;
  std::uint32_t n = 0;
  if (!GetOpt(r, v.leader, kMaxIdBytes) || !r.I64(alive) || !r.I64(total) ||
      !r.Count(n, kMaxListEntries)) {
    return Malformed("cluster view");
  }
  v.alive_count = static_cast<int>(alive);
  v.total_count = static_cast<int>(total);
  for (std::uint32_t i = 0; i < n; ++i) {
    NodeView node;
    std::uint8_t alive_flag = 0;
    if (!r.Str(node.id, kMaxIdBytes) || !r.Str(node.address, kMaxAddressBytes) ||
        !r.U64(node.incarnation) || !GetEnum(r, node.state, 3) || !r.U8(alive_flag) ||
        alive_flag > 1 || !r.Str(node.node_class, kMaxMetaBytes) || !GetMap(r, node.metadata) ||
        !GetStrings(r, node.actor_types, kMaxActorTypeBytes) ||
        !GetStrings(r, node.running, kMaxLabelBytes)) {
      return Malformed("cluster view");
    }
    node.alive = alive_flag == 1;
    v.nodes.push_back(std::move(node));
  }
  if (!r.done()) return Malformed("cluster view");
  return v;
}

}  // namespace pynenc_cpp::cluster::codec
