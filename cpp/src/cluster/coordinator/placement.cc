#include "pynenc_cpp/cluster/placement.h"

#include <openssl/sha.h>

#include <algorithm>
#include <map>
#include <vector>

namespace pynenc_cpp::cluster {

namespace {

class LeastLoaded final : public PlacementStrategy {
 public:
  double Fitness(const NodeView& node, const ActorSpec&, const ClusterView&) const override {
    return 1.0 / (1.0 + static_cast<double>(node.running.size()));
  }
  std::string Name() const override { return "least_loaded"; }
};

class RandomPlacement final : public PlacementStrategy {
 public:
  explicit RandomPlacement(std::uint64_t seed) : seed_(seed) {}
  double Fitness(const NodeView& node, const ActorSpec& spec, const ClusterView&) const override {
    std::string input = std::to_string(seed_) + "|" + spec.label + "|" + node.id;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
    // (0, 1]: never 0, so every eligible node stays placeable.
    return (static_cast<double>(v >> 11) + 1.0) / 9007199254740992.0;  // 2^53
  }
  std::string Name() const override { return "random"; }

 private:
  std::uint64_t seed_;
};

class Pinned final : public PlacementStrategy {
 public:
  explicit Pinned(NodeId node) : node_(std::move(node)) {}
  double Fitness(const NodeView& node, const ActorSpec&, const ClusterView&) const override {
    return node.id == node_ ? 2.0 : 1.0;
  }
  std::string Name() const override { return "pinned"; }

 private:
  NodeId node_;
};

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string ShortId(const NodeId& id) { return id.substr(0, 8); }

// One hard filter: its name (for reasons) and its test.
struct Filter {
  std::string name;
  bool (*pass)(const ActorSpec&, const NodeView&, const ClusterView&);
};

bool RunsLabel(const NodeView& n, const std::string& label) { return Contains(n.running, label); }

const std::vector<Filter>& Filters() {
  static const std::vector<Filter> filters = {
      {"required_node_id",
       [](const ActorSpec& s, const NodeView& n, const ClusterView&) {
         return !s.constraints.required_node_id || *s.constraints.required_node_id == n.id;
       }},
      {"required_classes",
       [](const ActorSpec& s, const NodeView& n, const ClusterView&) {
         return s.constraints.required_classes.empty() ||
                Contains(s.constraints.required_classes, n.node_class);
       }},
      {"required_metadata",
       [](const ActorSpec& s, const NodeView& n, const ClusterView&) {
         for (const auto& [k, v] : s.constraints.required_metadata) {
           auto it = n.metadata.find(k);
           if (it == n.metadata.end() || it->second != v) return false;
         }
         return true;
       }},
      {"anti_affinity_labels",
       [](const ActorSpec& s, const NodeView& n, const ClusterView&) {
         for (const auto& l : s.constraints.anti_affinity_labels) {
           if (RunsLabel(n, l)) return false;
         }
         return true;
       }},
      {"colocate_with",
       [](const ActorSpec& s, const NodeView& n, const ClusterView&) {
         return !s.constraints.colocate_with || RunsLabel(n, *s.constraints.colocate_with);
       }},
  };
  return filters;
}

std::string Describe(const std::string& name, const ActorSpec& s) {
  const auto& c = s.constraints;
  std::string out = name;
  auto list = [](const std::vector<std::string>& v) {
    std::string r = "[";
    for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + v[i];
    return r + "]";
  };
  if (name == "required_node_id") out += " " + *c.required_node_id;
  if (name == "required_classes") out += " " + list(c.required_classes);
  if (name == "required_metadata") {
    out += " {";
    bool first = true;
    for (const auto& [k, v] : c.required_metadata) {
      out += (first ? "" : ", ") + k + "=" + v;
      first = false;
    }
    out += "}";
  }
  if (name == "anti_affinity_labels") out += " " + list(c.anti_affinity_labels);
  if (name == "colocate_with") out += " " + *c.colocate_with;
  return out;
}

}  // namespace

std::unique_ptr<PlacementStrategy> MakeLeastLoaded() { return std::make_unique<LeastLoaded>(); }
std::unique_ptr<PlacementStrategy> MakeRandomPlacement(std::uint64_t seed) {
  return std::make_unique<RandomPlacement>(seed);
}
std::unique_ptr<PlacementStrategy> MakePinned(NodeId node) {
  return std::make_unique<Pinned>(std::move(node));
}
std::unique_ptr<PlacementStrategy> MakeStrategy(const StrategyChoice& choice) {
  switch (choice.kind) {
    case StrategyChoice::Kind::kLeastLoaded:
      return MakeLeastLoaded();
    case StrategyChoice::Kind::kRandom:
      return MakeRandomPlacement(choice.seed);
    case StrategyChoice::Kind::kPinned:
      return MakePinned(choice.node);
    case StrategyChoice::Kind::kDefault:
      break;
  }
  return nullptr;
}

bool SatisfiesConstraints(const ActorSpec& spec, const NodeView& node, const ClusterView& view) {
  for (const auto& f : Filters()) {
    if (!f.pass(spec, node, view)) return false;
  }
  return true;
}

PlacementResult ChooseNode(const ActorSpec& spec, const ClusterView& view,
                           const PlacementStrategy& strategy, const std::set<NodeId>& excluded) {
  // Candidates: live nodes that can build the actor type.
  std::vector<const NodeView*> nodes;
  int live = 0;
  std::vector<std::string> no_type;
  for (const auto& n : view.nodes) {
    if (!n.alive || excluded.count(n.id)) continue;
    ++live;
    if (!Contains(n.actor_types, spec.actor_type)) {
      no_type.push_back(ShortId(n.id));
      continue;
    }
    nodes.push_back(&n);
  }
  std::string why = "no eligible node for '" + spec.label + "': " + std::to_string(live) +
                    " live node" + (live == 1 ? "" : "s");
  if (!no_type.empty()) {
    why += "; actor type '" + spec.actor_type + "' not registered on " +
           std::to_string(no_type.size());
    why += " (";
    for (std::size_t i = 0; i < no_type.size(); ++i) why += (i ? ", " : "") + no_type[i];
    why += ")";
  }
  for (const auto& f : Filters()) {
    std::vector<const NodeView*> kept;
    std::vector<std::string> out;
    for (const NodeView* n : nodes) {
      if (f.pass(spec, *n, view)) {
        kept.push_back(n);
      } else {
        out.push_back(ShortId(n->id));
      }
    }
    if (!out.empty()) {
      why += "; " + Describe(f.name, spec) + " ruled out " + std::to_string(out.size()) + " (";
      for (std::size_t i = 0; i < out.size(); ++i) why += (i ? ", " : "") + out[i];
      why += ")";
    }
    nodes = std::move(kept);
  }
  const NodeView* best = nullptr;
  double best_score = 0;
  for (const NodeView* n : nodes) {  // view.nodes is sorted by id: the first best wins ties
    const double score = strategy.Fitness(*n, spec, view);
    if (score <= 0) continue;
    if (!best || score > best_score || (score == best_score && n->id < best->id)) {
      best = n;
      best_score = score;
    }
  }
  if (best) return {best->id, ""};
  if (!nodes.empty()) why += "; strategy " + strategy.Name() + " scored every remaining node <= 0";
  return {std::nullopt, why};
}

}  // namespace pynenc_cpp::cluster
