#include "pynenc_cpp/cluster/agents.h"

#include <algorithm>

#include "cluster/coordinator/spec_checks.h"
#include "pynenc_cpp/cluster/specs.h"  // kMaxActorTypeBytes

namespace pynenc_cpp::cluster {

std::string_view DistributionName(Distribution d) {
  switch (d) {
    case Distribution::kEvenly:
      return "evenly";
    case Distribution::kEvenlyByCapability:
      return "evenly_by_capability";
  }
  return "unknown";
}

Status ValidateAgentFamily(const AgentFamily& f) {
  if (Status s = spec_checks::Name("scheme", f.scheme, kMaxActorTypeBytes); !s.ok()) return s;
  if (f.scheme.find(":/") != std::string::npos || f.scheme.find('/') != std::string::npos) {
    return Status::InvalidArgument("scheme: '" + f.scheme + "' must not contain '/' or ':/'");
  }
  if (Status s = spec_checks::NonEmptyItems("agents", f.agents); !s.ok()) return s;
  if (f.supported) {
    if (Status s = spec_checks::NonEmptyItems("supported", *f.supported); !s.ok()) return s;
  }
  const std::string prefix = f.scheme + "://";
  std::set<std::string> seen;
  for (const auto& a : f.agents) {
    if (a.size() <= prefix.size() || a.compare(0, prefix.size(), prefix) != 0) {
      return Status::InvalidArgument("agents: '" + a + "' does not start with '" + prefix +
                                     "' followed by a name");
    }
    if (!seen.insert(a).second) return Status::InvalidArgument("agents: duplicate '" + a + "'");
  }
  if (f.supported) {
    std::set<std::string> sup;
    for (const auto& a : *f.supported) {
      if (!seen.count(a)) {
        return Status::InvalidArgument("supported: '" + a + "' is not one of the family's agents");
      }
      if (!sup.insert(a).second) return Status::InvalidArgument("supported: duplicate '" + a + "'");
    }
  }
  return spec_checks::DrainTimeout("drain_timeout_s", f.drain_timeout_ms);
}

std::map<std::string, NodeId> DistributeEvenly(const std::vector<std::string>& agents_in,
                                               const std::vector<GridNode>& nodes_in,
                                               const std::map<std::string, NodeId>& current) {
  std::vector<std::string> agents = agents_in;
  std::sort(agents.begin(), agents.end());
  agents.erase(std::unique(agents.begin(), agents.end()), agents.end());
  std::map<NodeId, const GridNode*> nodes;
  for (const auto& n : nodes_in) nodes[n.id] = &n;
  auto candidate = [&](const std::string& agent, const NodeId& node) {
    auto it = nodes.find(node);
    if (it == nodes.end()) return false;
    return !it->second->supported || it->second->supported->count(agent) > 0;
  };

  std::map<std::string, NodeId> out;
  std::map<NodeId, int> load;
  for (const auto& [id, n] : nodes) load[id] = 0;
  // 1. Keep every agent whose node may still run it.
  for (const auto& a : agents) {
    auto it = current.find(a);
    if (it != current.end() && candidate(a, it->second)) {
      out[a] = it->second;
      ++load[it->second];
    }
  }
  // 2. Place the others on their least-loaded candidate.
  for (const auto& a : agents) {
    if (out.count(a)) continue;
    const NodeId* best = nullptr;
    for (const auto& [id, n] : nodes) {  // by id: the first least-loaded wins ties
      if (candidate(a, id) && (!best || load[id] < load[*best])) best = &id;
    }
    if (best) {
      out[a] = *best;
      ++load[*best];
    }
  }
  // 3. Even out: move one agent at a time while a move lowers the spread by 2.
  // Each move strictly lowers the sum of squared loads, so this ends.
  for (;;) {
    struct Move {
      std::string agent;
      NodeId from, to;
    };
    std::optional<Move> best;
    for (const auto& [agent, from] : out) {  // agents in URI order
      for (const auto& [to, n] : nodes) {
        if (to == from || !candidate(agent, to)) continue;
        if (load[from] - load[to] < 2) continue;
        // Most loaded source first, then least loaded target; on a tie the first
        // found (smallest URI, then smallest target id) stays.
        const bool better = !best || load[from] > load[best->from] ||
                            (load[from] == load[best->from] && load[to] < load[best->to]);
        if (better) best = Move{agent, from, to};
      }
    }
    if (!best) break;
    out[best->agent] = best->to;
    --load[best->from];
    ++load[best->to];
  }
  return out;
}

}  // namespace pynenc_cpp::cluster
