// The coordinator layer's value types, the GenerationSource, FencedStore and
// Journal ports, exposed to Python: registrations and conversions only. The Python API
// is pynenc_cpp.cluster (specs.py, handle methods) and its dataclasses convert
// to these classes. Enum-like fields travel as their names ("redistribute",
// "leader", "running", ...).
#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/cluster/instance.h"
#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/cluster/specs.h"
#include "pynenc_cpp/ports/fenced_store.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "pynenc_cpp/ports/journal.h"
#include "pynenc_cpp/ports/storage.h"

#include "conversions.h"
#include "init.h"

namespace pynenc_cpp::bindings {
namespace {

using cluster::ActorSpec;
using cluster::AgentFamily;
using cluster::ClusterView;
using cluster::CrashStrategy;
using cluster::Distribution;
using cluster::InstanceContext;
using cluster::LabelPlacement;
using cluster::NodeView;
using cluster::SingletonAnchor;
using cluster::SingletonSpec;
using cluster::SpecKind;
using cluster::SpecState;
using cluster::SpecStatus;
using cluster::StrategyChoice;

template <typename E, typename NameFn>
E ParseName(const std::string& value, E last, NameFn name, const char* what) {
  std::string allowed;
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    const E e = static_cast<E>(i);
    if (name(e) == value) return e;
    allowed += (i ? ", '" : "'") + std::string(name(e)) + "'";
  }
  throw py::value_error(std::string(what) + " must be one of " + allowed + ", got '" + value + "'");
}

py::bytes Bytes(const std::string& s) { return py::bytes(s); }

void InitGeneration(py::module_& m) {
  py::class_<Generation>(m, "Generation",
                         "A singleton/actor generation {term, seq}, ordered term-major; packs into "
                         "one int (term << 32 | seq) for fenced writes.")
      .def(py::init([](std::uint32_t term, std::uint32_t seq) { return Generation{term, seq}; }),
           py::arg("term") = 0, py::arg("seq") = 0, "A generation from its parts.")
      .def_readonly("term", &Generation::term, "Bumps when ownership moves (failover, move).")
      .def_readonly("seq", &Generation::seq, "Bumps on a re-grant to the same owner.")
      .def_property_readonly("packed", &Generation::Packed, "term << 32 | seq.")
      .def_static("from_packed", &Generation::FromPacked, py::arg("packed"),
                  "The generation of a packed value.")
      .def("__eq__", [](const Generation& a, const Generation& b) { return a == b; })
      .def("__lt__", [](const Generation& a, const Generation& b) { return a < b; })
      .def("__le__", [](const Generation& a, const Generation& b) { return a <= b; })
      .def("__gt__", [](const Generation& a, const Generation& b) { return a > b; })
      .def("__ge__", [](const Generation& a, const Generation& b) { return a >= b; })
      .def("__hash__", [](const Generation& g) { return std::hash<std::uint64_t>()(g.Packed()); })
      .def("__str__", &Generation::ToString)
      .def("__repr__", [](const Generation& g) {
        return "Generation(term=" + std::to_string(g.term) + ", seq=" + std::to_string(g.seq) + ")";
      });
}

void InitSpecs(py::module_& m) {
  py::class_<ActorSpec>(m, "ActorSpec", "An actor spec (built by pynenc_cpp.cluster.ActorSpec).")
      .def(py::init<>(), "An empty spec; set the fields, then submit it.")
      .def_readwrite("label", &ActorSpec::label, "Unique label.")
      .def_readwrite("actor_type", &ActorSpec::actor_type, "Registered actor type.")
      .def_property(
          "initial_state", [](const ActorSpec& a) { return Bytes(a.initial_state); },
          [](ActorSpec& a, const py::bytes& b) { a.initial_state = b; }, "State bytes.")
      .def_property(
          "crash_strategy",
          [](const ActorSpec& a) { return std::string(CrashStrategyName(a.crash_strategy.kind)); },
          [](ActorSpec& a, const std::string& v) {
            a.crash_strategy.kind = ParseName(v, CrashStrategy::Kind::kAbandon,
                                              cluster::CrashStrategyName, "crash_strategy");
          },
          "'redistribute', 'wait_for_return' or 'abandon'.")
      .def_property(
          "wait_ms", [](const ActorSpec& a) { return a.crash_strategy.wait_ms; },
          [](ActorSpec& a, std::int64_t v) { a.crash_strategy.wait_ms = v; },
          "wait_for_return: how long to wait for the node, ms.")
      .def_property(
          "required_classes", [](const ActorSpec& a) { return a.constraints.required_classes; },
          [](ActorSpec& a, std::vector<std::string> v) { a.constraints.required_classes = v; },
          "Node classes allowed (empty: any).")
      .def_property(
          "required_metadata", [](const ActorSpec& a) { return a.constraints.required_metadata; },
          [](ActorSpec& a, std::map<std::string, std::string> v) {
            a.constraints.required_metadata = v;
          },
          "Metadata pairs the node must have.")
      .def_property(
          "anti_affinity_labels",
          [](const ActorSpec& a) { return a.constraints.anti_affinity_labels; },
          [](ActorSpec& a, std::vector<std::string> v) { a.constraints.anti_affinity_labels = v; },
          "Labels that must not run on the node.")
      .def_property(
          "colocate_with", [](const ActorSpec& a) { return a.constraints.colocate_with; },
          [](ActorSpec& a, std::optional<std::string> v) { a.constraints.colocate_with = v; },
          "Only the node that runs this label (hard).")
      .def_property(
          "required_node_id", [](const ActorSpec& a) { return a.constraints.required_node_id; },
          [](ActorSpec& a, std::optional<std::string> v) { a.constraints.required_node_id = v; },
          "Exactly this node (hard pin, never relocated).")
      .def_property(
          "strategy", [](const ActorSpec& a) { return std::string(StrategyName(a.strategy.kind)); },
          [](ActorSpec& a, const std::string& v) {
            a.strategy.kind =
                ParseName(v, StrategyChoice::Kind::kPinned, cluster::StrategyName, "strategy");
          },
          "'default', 'least_loaded', 'random' or 'pinned'.")
      .def_property(
          "strategy_seed", [](const ActorSpec& a) { return a.strategy.seed; },
          [](ActorSpec& a, std::uint64_t v) { a.strategy.seed = v; }, "Random's seed.")
      .def_property(
          "strategy_node", [](const ActorSpec& a) { return a.strategy.node; },
          [](ActorSpec& a, std::string v) { a.strategy.node = v; }, "Pinned's preferred node.")
      .def(
          "check", [](const ActorSpec& a) { ThrowIfError(cluster::ValidateActorSpec(a)); },
          "Raises InvalidArgument (a ValueError) with the first of the spec's rules it breaks.")
      .def(
          "check_crash_strategy",
          [](const ActorSpec& a) {
            ThrowIfError(cluster::ValidateCrashStrategy(a.crash_strategy));
          },
          "Raises InvalidArgument if the crash strategy's rule is broken (nothing else is read).")
      .def(
          "check_constraints",
          [](const ActorSpec& a) {
            ThrowIfError(cluster::ValidatePlacementConstraints(a.constraints));
          },
          "Raises InvalidArgument if a placement constraint's rule is broken (nothing else is "
          "read).");

  py::class_<SingletonSpec>(m, "SingletonSpec",
                            "A singleton spec (built by pynenc_cpp.cluster.SingletonSpec).")
      .def(py::init<>(), "An empty spec; set the fields, then submit it.")
      .def_readwrite("label", &SingletonSpec::label, "Unique label.")
      .def_readwrite("actor_type", &SingletonSpec::actor_type, "Registered actor type.")
      .def_property(
          "state", [](const SingletonSpec& s) { return Bytes(s.state); },
          [](SingletonSpec& s, const py::bytes& b) { s.state = b; }, "State bytes.")
      .def_property(
          "anchor", [](const SingletonSpec& s) { return std::string(AnchorName(s.anchor.kind)); },
          [](SingletonSpec& s, const std::string& v) {
            s.anchor.kind =
                ParseName(v, SingletonAnchor::Kind::kNode, cluster::AnchorName, "anchor");
          },
          "'leader', 'class' or 'node'.")
      .def_property(
          "anchor_value", [](const SingletonSpec& s) { return s.anchor.value; },
          [](SingletonSpec& s, std::string v) { s.anchor.value = v; },
          "The class or node id of a class/node anchor.")
      .def_readwrite("drain_timeout_ms", &SingletonSpec::drain_timeout_ms,
                     "How long a graceful move waits for the old owner to stop, ms.")
      .def(
          "check", [](const SingletonSpec& s) { ThrowIfError(cluster::ValidateSingletonSpec(s)); },
          "Raises InvalidArgument (a ValueError) with the first of the spec's rules it breaks.")
      .def(
          "check_anchor",
          [](const SingletonSpec& s) { ThrowIfError(cluster::ValidateSingletonAnchor(s.anchor)); },
          "Raises InvalidArgument if the anchor's rule is broken (nothing else is read).");

  py::class_<AgentFamily>(m, "AgentFamily", "An agent family as this node declares it.")
      .def(py::init<>(), "An empty family; set the fields, then declare it.")
      .def_readwrite("scheme", &AgentFamily::scheme, "URI scheme of its agents.")
      .def_readwrite("agents", &AgentFamily::agents, "Known agent URIs.")
      .def_readwrite("supported", &AgentFamily::supported,
                     "URIs this node can run (None: all it knows).")
      .def_property(
          "distribution",
          [](const AgentFamily& f) { return std::string(DistributionName(f.distribution)); },
          [](AgentFamily& f, const std::string& v) {
            f.distribution = ParseName(v, Distribution::kEvenlyByCapability,
                                       cluster::DistributionName, "distribution");
          },
          "'evenly' or 'evenly_by_capability'.")
      .def_readwrite("drain_timeout_ms", &AgentFamily::drain_timeout_ms,
                     "How long a rebalancing move waits for the old owner, ms.")
      .def(
          "check", [](const AgentFamily& f) { ThrowIfError(cluster::ValidateAgentFamily(f)); },
          "Raises InvalidArgument (a ValueError) with the first of the family's rules it breaks.");
}

void InitResults(py::module_& m) {
  py::class_<InstanceContext>(m, "InstanceContext", "What an actor factory receives.")
      .def_readonly("node", &InstanceContext::node, "This node's id.")
      .def_readonly("label", &InstanceContext::label, "The label (agent: its URI).")
      .def_property_readonly(
          "kind", [](const InstanceContext& c) { return std::string(SpecKindName(c.kind)); },
          "'actor', 'singleton' or 'agent'.")
      .def_readonly("actor_type", &InstanceContext::actor_type, "Actor type (agent: the scheme).")
      .def_property_readonly(
          "state", [](const InstanceContext& c) { return Bytes(c.state); }, "State bytes.")
      .def_readonly("generation", &InstanceContext::generation,
                    "The instance's generation: stamp fenced writes with generation.packed.");

  py::class_<SpecStatus>(m, "SpecStatus", "A managed label's status (leader's view).")
      .def_readonly("label", &SpecStatus::label)
      .def_property_readonly("kind",
                             [](const SpecStatus& s) { return std::string(SpecKindName(s.kind)); })
      .def_property_readonly(
          "state", [](const SpecStatus& s) { return std::string(SpecStateName(s.state)); },
          "'pending', 'running', 'waiting_for_return' or 'unplaced'.")
      .def_readonly("node", &SpecStatus::node, "Current (or last) owner, or None.")
      .def_readonly("generation", &SpecStatus::generation)
      .def_readonly("reason", &SpecStatus::reason, "Why it is not running ('' when running).");

  py::class_<NodeView>(m, "CoordinatorNodeView", "One node as the leader sees it.")
      .def_readonly("id", &NodeView::id)
      .def_readonly("address", &NodeView::address)
      .def_readonly("incarnation", &NodeView::incarnation)
      .def_property_readonly(
          "state", [](const NodeView& n) { return std::string(cluster::MemberStateName(n.state)); })
      .def_readonly("alive", &NodeView::alive)
      .def_readonly("node_class", &NodeView::node_class)
      .def_readonly("metadata", &NodeView::metadata)
      .def_readonly("actor_types", &NodeView::actor_types)
      .def_readonly("running", &NodeView::running, "Labels placed on the node.");

  py::class_<ClusterView>(m, "CoordinatorClusterView", "The leader's view of the cluster.")
      .def_readonly("leader", &ClusterView::leader)
      .def_readonly("nodes", &ClusterView::nodes)
      .def_readonly("alive_count", &ClusterView::alive_count)
      .def_readonly("total_count", &ClusterView::total_count);

  py::class_<LabelPlacement>(m, "LabelPlacement", "Where a label runs (a node's directory copy).")
      .def_readonly("label", &LabelPlacement::label)
      .def_property_readonly(
          "kind", [](const LabelPlacement& p) { return std::string(SpecKindName(p.kind)); })
      .def_property_readonly(
          "state", [](const LabelPlacement& p) { return std::string(SpecStateName(p.state)); })
      .def_readonly("node", &LabelPlacement::node)
      .def_readonly("address", &LabelPlacement::address)
      .def_readonly("generation", &LabelPlacement::generation)
      .def_readonly("reason", &LabelPlacement::reason);
}

// A constructor of a cluster port over a given _core.Storage: its pool or database
// is shared with that storage's other ports; its app id is the port's namespace.
template <typename Port>
auto OverStorage(Result<std::unique_ptr<Port>> (Storage::*make)() const) {
  return py::init([make](const Storage& storage) {
    return std::shared_ptr<Port>(Unwrap((storage.*make)()));
  });
}

void InitStores(py::module_& m) {
  py::class_<GenerationSource, std::shared_ptr<GenerationSource>>(
      m, "GenerationSource", "Mints generations and keeps specs (thread-safe; may block on I/O).")
      .def(OpenFromUri(&OpenGenerationSource), py::arg("uri") = "memory://",
           py::arg("namespace") = "pynenc-cpp",
           "Opens the source named by `uri`; `namespace` (a cluster's name) separates data.")
      .def(OverStorage(&Storage::NewGenerationSource), py::arg("storage"),
           "A source over `storage` (its pool or database; its app id is the namespace).")
      .def(
          "claim_term",
          [](GenerationSource& s, std::string label, std::string owner, std::uint32_t min_term) {
            return WithoutGil([&] { return s.ClaimTerm(label, owner, min_term); });
          },
          py::arg("label"), py::arg("owner"), py::arg("min_term") = 0,
          "A new ownership epoch: term = max(current, min_term) + 1, seq 0.")
      .def(
          "claim_seq",
          [](GenerationSource& s, std::string label, std::string owner, Generation expected) {
            return WithoutGil([&] { return s.ClaimSeq(label, owner, expected); });
          },
          py::arg("label"), py::arg("owner"), py::arg("expected"),
          "Re-grant to the current owner: seq + 1 iff ownership is exactly (owner, expected); "
          "raises Conflict otherwise.")
      .def(
          "current",
          [](GenerationSource& s, std::string label) -> py::object {
            auto r = WithoutGil([&] { return s.Current(label); });
            if (!r) return py::none();
            return py::make_tuple(r->owner, r->generation);
          },
          py::arg("label"), "(owner, Generation) of the label, or None.")
      .def(
          "list",
          [](GenerationSource& s) {
            auto records = WithoutGil([&] { return s.List(); });
            py::list out;
            for (const auto& r : records) {
              out.append(py::make_tuple(
                  r.label, py::bytes(r.spec),
                  r.ownership ? py::object(py::str(r.ownership->owner)) : py::object(py::none()),
                  r.ownership ? py::cast(r.ownership->generation) : py::object(py::none())));
            }
            return out;
          },
          "Every stored spec: (label, spec bytes, owner or None, Generation or None).")
      .def_property_readonly("shared", &GenerationSource::Shared,
                             "True when other processes see the same data (SQLite, Redis).");

  py::class_<FencedStore, std::shared_ptr<FencedStore>>(
      m, "FencedStore",
      "Key -> value store that rejects writes stamped with a generation lower than the "
      "stored one (thread-safe).")
      .def(OpenFromUri(&OpenFencedStore), py::arg("uri") = "memory://",
           py::arg("namespace") = "pynenc-cpp", "Opens the store named by `uri`.")
      .def(OverStorage(&Storage::NewFencedStore), py::arg("storage"),
           "A store over `storage` (its pool or database; its app id is the namespace).")
      .def(
          "write",
          [](FencedStore& s, std::string key, const py::bytes& value, std::uint64_t generation) {
            std::string v = value;
            WithoutGil([&] { return s.Write(key, v, generation); });
          },
          py::arg("key"), py::arg("value"), py::arg("generation"),
          "Stores value under key stamped with the packed generation; raises StaleGeneration "
          "(nothing changed) when the stored generation is higher.")
      .def(
          "read",
          [](FencedStore& s, std::string key) -> py::object {
            auto r = WithoutGil([&] { return s.Read(key); });
            if (!r) return py::none();
            return py::make_tuple(py::bytes(r->value), r->generation);
          },
          py::arg("key"), "(value bytes, packed generation), or None.")
      .def(
          "delete",
          [](FencedStore& s, std::string key, std::uint64_t generation) {
            WithoutGil([&] { return s.Delete(key, generation); });
          },
          py::arg("key"), py::arg("generation"),
          "Removes the value, keeping max(stored, generation) as a tombstone; raises "
          "StaleGeneration when the stored generation is higher.");
}

void InitJournal(py::module_& m) {
  py::class_<Journal, std::shared_ptr<Journal>>(
      m, "Journal",
      "Event log of event-sourced actors, per entity, fenced by generations like FencedStore "
      "(thread-safe; may block on I/O).")
      .def(OpenFromUri(&OpenJournal), py::arg("uri") = "memory://",
           py::arg("namespace") = "pynenc-cpp", "Opens the journal named by `uri`.")
      .def(OverStorage(&Storage::NewJournal), py::arg("storage"),
           "A journal over `storage` (its pool or database; its app id is the namespace).")
      .def(
          "append",
          [](Journal& j, std::string entity, std::uint64_t expected_seq, std::uint64_t generation,
             const std::vector<py::bytes>& events) {
            std::vector<std::string> payloads(events.begin(), events.end());
            return WithoutGil([&] { return j.Append(entity, expected_seq, generation, payloads); });
          },
          py::arg("entity"), py::arg("expected_seq"), py::arg("generation"), py::arg("events"),
          "Appends events as entries expected_seq+1.., all or none; returns the new last seq. "
          "Raises StaleGeneration when generation is below the entity's fence (checked first), "
          "Conflict when the last seq is not expected_seq.")
      .def(
          "fence",
          [](Journal& j, std::string entity, std::uint64_t generation) {
            return WithoutGil([&] { return j.Fence(entity, generation); });
          },
          py::arg("entity"), py::arg("generation"),
          "Raises the entity's fence to generation (a new owner, before replaying); returns the "
          "last seq. Raises StaleGeneration when the fence is already higher.")
      .def(
          "read",
          [](Journal& j, std::string entity, std::uint64_t after_seq, std::size_t limit) {
            auto entries = WithoutGil([&] { return j.Read(entity, after_seq, limit); });
            py::list out;
            for (const JournalEntry& e : entries) {
              out.append(py::make_tuple(e.seq, e.generation, py::bytes(e.payload)));
            }
            return out;
          },
          py::arg("entity"), py::arg("after_seq") = 0, py::arg("limit") = 0,
          "Entries with seq > after_seq in order, at most limit (0: all): "
          "[(seq, packed generation, payload bytes)].")
      .def(
          "last_seq",
          [](Journal& j, std::string entity) {
            return WithoutGil([&] { return j.LastSeq(entity); });
          },
          py::arg("entity"), "The entity's last seq (0: empty).")
      .def(
          "fence_of",
          [](Journal& j, std::string entity) {
            return WithoutGil([&] { return j.FenceOf(entity); });
          },
          py::arg("entity"), "The entity's fence, a packed generation (0: never written).")
      .def(
          "save_snapshot",
          [](Journal& j, std::string entity, std::uint64_t seq, std::uint64_t generation,
             const py::bytes& state) {
            std::string s = state;
            WithoutGil([&] { return j.SaveSnapshot(entity, seq, generation, s); });
          },
          py::arg("entity"), py::arg("seq"), py::arg("generation"), py::arg("state"),
          "Stores the state as of entry seq, fenced like append; ignored when a snapshot with a "
          "higher seq is stored. Raises InvalidArgument when seq is past the last seq.")
      .def(
          "load_snapshot",
          [](Journal& j, std::string entity) -> py::object {
            auto r = WithoutGil([&] { return j.LoadSnapshot(entity); });
            if (!r) return py::none();
            return py::make_tuple(r->seq, r->generation, py::bytes(r->state));
          },
          py::arg("entity"), "(seq, packed generation, state bytes) of the snapshot, or None.");
}

}  // namespace

void InitCoordinator(py::module_& m) {
  InitGeneration(m);
  InitSpecs(m);
  InitResults(m);
  InitStores(m);
  InitJournal(m);
}

}  // namespace pynenc_cpp::bindings
