// The cluster node (cpp/include/pynenc_cpp/cluster/node.h) exposed to Python:
// registrations and conversions only. The Python API is pynenc_cpp.cluster.
//
// Callbacks (work start/stop, membership events) arrive on the node's C++
// callback thread. That thread gets ONE persistent Python thread state, created
// the first time it calls Python and deleted when the thread exits; each call
// takes the GIL, runs the Python callable and releases the GIL. No Python
// exception ever escapes into C++: it is reported with PyErr_WriteUnraisable
// (sys.unraisablehook). At interpreter exit every node still running is stopped
// and then no Python code is called (python_gate.h).
//
// GIL discipline: Start, Stop, Status and Members run with the GIL released
// (Start and Stop wait for callbacks that need it), and so does destroying a
// node (its destructor joins the callback thread).
#include <Python.h>

#include <openssl/crypto.h>

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>
#include <vector>
#include <stdexcept>
#include <string>
#include <utility>

#include "conversions.h"
#include "init.h"
#include "python_thread.h"
#include "pynenc_cpp/cluster/node.h"

namespace pynenc_cpp::bindings {
namespace {

using cluster::Activation;
using cluster::ClusterNode;
using cluster::ClusterOptions;
using cluster::ElectionKind;
using cluster::Member;
using cluster::MemberEvent;
using cluster::NodeStatus;

// The Python callables of one node. Destroyed by whichever thread drops the
// last copy of the C++ callbacks: with the GIL when possible, else leaked (the
// process is exiting).
struct PyCallbacks {
  py::object start, stop, on_event, on_log;

  ~PyCallbacks() { DropPyObjects({&start, &stop, &on_event, &on_log}); }
};

// A Python object kept alive by C++ (a factory), dropped with the GIL.
struct PyHolder {
  py::object obj;
  explicit PyHolder(py::object o) : obj(std::move(o)) {}
  ~PyHolder() { DropPyObjects({&obj}); }
};

// An ActorInstance backed by the Python object a factory returned. Optional
// methods: stop(reason), on_generation(generation), on_message(bytes) -> bytes.
// Called on the node's callback thread (CallPythonOrThrow takes the GIL).
class PyActorInstance final : public cluster::ActorInstance {
 public:
  explicit PyActorInstance(py::object obj) : obj_(std::move(obj)) {}
  ~PyActorInstance() override { DropPyObjects({&obj_}); }

  void Stop(std::string_view reason) override {
    CallPythonOrThrow([&] {
      if (py::hasattr(obj_, "stop")) obj_.attr("stop")(py::str(reason.data(), reason.size()));
    });
  }
  void OnGeneration(Generation generation) override {
    CallPythonOrThrow([&] {
      if (py::hasattr(obj_, "on_generation")) obj_.attr("on_generation")(generation);
    });
  }
  Result<std::string> OnMessage(const std::string& payload) override {
    return CallPythonOrThrow([&]() -> Result<std::string> {
      if (!py::hasattr(obj_, "on_message")) {
        return Status::InvalidArgument("this actor takes no messages (no on_message method)");
      }
      py::object r = obj_.attr("on_message")(py::bytes(payload));
      if (r.is_none()) return std::string();
      if (!py::isinstance<py::bytes>(r)) {
        return Status::InvalidArgument("on_message must return bytes or None, got " +
                                       std::string(py::str(r.get_type().attr("__name__"))));
      }
      return r.cast<std::string>();
    });
  }

 private:
  py::object obj_;
};

cluster::ActorFactory MakeFactory(py::object factory) {
  if (!PyCallable_Check(factory.ptr())) throw py::type_error("factory must be callable");
  auto holder = std::make_shared<PyHolder>(std::move(factory));
  return [holder](const cluster::InstanceContext& ctx) {
    return CallPythonOrThrow([&]() -> std::unique_ptr<cluster::ActorInstance> {
      py::object obj = holder->obj(ctx);
      if (obj.is_none()) throw std::runtime_error("the factory returned None");
      return std::make_unique<PyActorInstance>(std::move(obj));
    });
  };
}

// Waits for a node future with the GIL released; raises its error.
template <typename T>
T Await(std::future<T> f) {
  GilRelease release;
  return f.get();
}

// Every node a Python object still owns. At interpreter exit (before the
// Python gate closes) each is stopped: a node left running would keep calling
// Python and OpenSSL while the process tears both down.
class LiveNodes {
 public:
  static LiveNodes& Get() {
    static auto* live = new LiveNodes();  // leaked: used during exit
    return *live;
  }
  void Add(const std::shared_ptr<ClusterNode>& node) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(nodes_, [](const std::weak_ptr<ClusterNode>& w) { return w.expired(); });
    nodes_.push_back(node);
  }
  // REQUIRES: GIL not held (Stop waits for callbacks that need it).
  void StopAll() {
    std::vector<std::shared_ptr<ClusterNode>> running;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& w : nodes_) {
        if (auto node = w.lock()) running.push_back(std::move(node));
      }
      nodes_.clear();
    }
    for (const auto& node : running) node->Stop();  // idempotent
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<ClusterNode>> nodes_;
};

// The Python object: owns the node; never destroys it with the GIL held.
class PyClusterNode {
 public:
  explicit PyClusterNode(std::unique_ptr<ClusterNode> node) : node_(std::move(node)) {
    LiveNodes::Get().Add(node_);
  }
  PyClusterNode(const PyClusterNode&) = delete;
  PyClusterNode& operator=(const PyClusterNode&) = delete;

  // REQUIRES: GIL held (pybind11 deallocation).
  ~PyClusterNode() {
    if (!node_) return;
    if (PythonGate::Get().closed() || PythonFinalizing()) {
      // The process is exiting (the node was stopped at exit): joining its
      // threads now could wait on one that finalization ended.
      new std::shared_ptr<ClusterNode>(std::move(node_));  // leaked on purpose
      return;
    }
    GilRelease release;
    node_.reset();
  }

  void Stop() {
    GilRelease release;
    node_->Stop();
  }
  NodeStatus Status() const {
    GilRelease release;
    return node_->Status();
  }
  std::vector<Member> Members() const {
    GilRelease release;
    return node_->Members();
  }

  // The coordinator layer.
  void RegisterActorType(const std::string& name, py::object factory) {
    ThrowIfError(node_->RegisterActorType(name, MakeFactory(std::move(factory))));
  }
  void UnregisterActorType(const std::string& name) {
    ThrowIfError(node_->UnregisterActorType(name));
  }
  void RegisterAgentFamily(const cluster::AgentFamily& family, py::object factory) {
    ThrowIfError(node_->RegisterAgentFamily(family, MakeFactory(std::move(factory))));
  }
  void SubmitActor(const cluster::ActorSpec& spec, std::int64_t timeout_ms) {
    ThrowIfError(Await(node_->SubmitActor(spec, timeout_ms)));
  }
  void SubmitSingleton(const cluster::SingletonSpec& spec, std::int64_t timeout_ms) {
    ThrowIfError(Await(node_->SubmitSingleton(spec, timeout_ms)));
  }
  void RemoveSpec(const std::string& label, std::int64_t timeout_ms) {
    ThrowIfError(Await(node_->RemoveSpec(label, timeout_ms)));
  }
  cluster::ClusterView QueryView(std::int64_t timeout_ms) {
    return Unwrap(Await(node_->QueryView(timeout_ms)));
  }
  std::vector<cluster::SpecStatus> QueryStatuses(std::int64_t timeout_ms) {
    return Unwrap(Await(node_->QueryStatuses(timeout_ms)));
  }
  std::optional<cluster::LabelPlacement> Lookup(const std::string& label) const {
    return node_->Lookup(label);
  }
  std::vector<cluster::LabelPlacement> Directory() const { return node_->Directory(); }
  py::bytes Ask(const std::string& label, const py::bytes& payload, std::int64_t timeout_ms) {
    std::string p = payload;
    return py::bytes(Unwrap(Await(node_->Ask(label, std::move(p), timeout_ms))));
  }
  void Tell(const std::string& label, const py::bytes& payload) {
    ThrowIfError(node_->Tell(label, std::string(payload)));
  }

  // The actor runtime's port. drain_inbox returns tuples (no per-item objects:
  // it is on the message path).
  int InboxFd() const { return node_->InboxFd(); }
  py::list DrainInbox(std::size_t max) {
    std::vector<cluster::InboxItem> items;
    {
      GilRelease release;
      items = node_->DrainInbox(max);
    }
    py::list out;
    for (auto& i : items) {
      out.append(py::make_tuple(static_cast<int>(i.kind), py::str(i.label), i.generation,
                                std::string(cluster::SpecKindName(i.spec_kind)), i.actor_type,
                                py::bytes(i.payload), i.token));
    }
    return out;
  }
  void RegisterInboxActorType(const std::string& name, std::int64_t stop_timeout_ms) {
    ThrowIfError(node_->RegisterInboxActorType(name, stop_timeout_ms));
  }
  void InstanceStopped(const std::string& label, Generation generation) {
    node_->InstanceStopped(label, generation);
  }
  void RaiseGenerationFloor(const std::string& label, Generation floor) {
    node_->RaiseGenerationFloor(label, floor);
  }
  std::uint64_t SendToLabel(const std::string& label, const py::bytes& payload) {
    std::string p = payload;
    return Unwrap(node_->SendToLabel(label, std::move(p)));
  }
  void AckLabel(std::uint64_t token, int outcome) {
    if (outcome < 0 || outcome > 3) throw py::value_error("outcome must be 0..3");
    node_->AckLabel(token, static_cast<cluster::LabelOutcome>(outcome));
  }
  void SendToPath(const std::string& address, const std::string& path, const py::bytes& payload) {
    node_->SendToPath(address, path, std::string(payload));
  }
  py::dict MailStats() const {
    const cluster::ActorMailStats s = node_->MailStats();
    py::dict d;
    d["label_sent"] = s.label_sent;
    d["label_resent"] = s.label_resent;
    d["label_acked"] = s.label_acked;
    d["label_overflowed"] = s.label_overflowed;
    d["label_duplicates"] = s.label_duplicates;
    d["path_sent"] = s.path_sent;
    d["path_dropped"] = s.path_dropped;
    d["inbox_overflowed"] = s.inbox_overflowed;
    d["buffered"] = s.buffered;
    return d;
  }

 private:
  std::shared_ptr<ClusterNode> node_;
};

std::string ElectionName(ElectionKind k) {
  switch (k) {
    case ElectionKind::kOldestNode:
      return "oldest";
    case ElectionKind::kHrw:
      return "hrw";
    case ElectionKind::kLowestAddress:
      return "lowest_address";
  }
  return "oldest";
}

ElectionKind ParseElection(const std::string& name) {
  if (name == "oldest") return ElectionKind::kOldestNode;
  if (name == "hrw") return ElectionKind::kHrw;
  if (name == "lowest_address") return ElectionKind::kLowestAddress;
  throw py::value_error("election must be one of 'oldest', 'hrw', 'lowest_address', got '" + name +
                        "'");
}

std::unique_ptr<PyClusterNode> StartNode(const ClusterOptions& options, py::object start,
                                         py::object stop, py::object on_event,
                                         py::object on_log) {
  if (!PyCallable_Check(start.ptr())) throw py::type_error("start must be callable");
  if (!PyCallable_Check(stop.ptr())) throw py::type_error("stop must be callable");
  if (!on_event.is_none() && !PyCallable_Check(on_event.ptr())) {
    throw py::type_error("on_event must be callable or None");
  }
  if (!on_log.is_none() && !PyCallable_Check(on_log.ptr())) {
    throw py::type_error("on_log must be callable or None");
  }
  auto cb = std::make_shared<PyCallbacks>();
  cb->start = std::move(start);
  cb->stop = std::move(stop);
  cb->on_event = std::move(on_event);
  cb->on_log = std::move(on_log);
  cluster::WorkCallbacks work;
  work.start = [cb](const Activation& a) {
    CallPython("pynenc_cpp cluster start callback", [&] { cb->start(py::cast(a)); });
  };
  work.stop = [cb](const Activation& a, std::string_view reason) {
    CallPython("pynenc_cpp cluster stop callback",
               [&] { cb->stop(py::cast(a), py::str(reason.data(), reason.size())); });
  };
  cluster::EventCallback events;
  if (!cb->on_event.is_none()) {
    events = [cb](const MemberEvent& e) {
      CallPython("pynenc_cpp cluster event callback", [&] { cb->on_event(py::cast(e)); });
    };
  }
  cluster::LogCallback log;
  if (!cb->on_log.is_none()) {
    log = [cb](cluster::LogLevel level, std::string_view line) {
      CallPython("pynenc_cpp cluster log callback", [&] {
        cb->on_log(static_cast<int>(level), py::str(line.data(), line.size()));
      });
    };
  }
  auto node = WithoutGil([&] {
    return ClusterNode::Start(options, std::move(work), std::move(events), std::move(log));
  });
  return std::make_unique<PyClusterNode>(std::move(node));
}

void InitValueTypes(py::module_& m) {
  py::class_<Member>(m, "ClusterMember", "One member as this node sees it (read-only snapshot).")
      .def_readonly("id", &Member::id, "Node id (lowercase hex; persistent with a state dir).")
      .def_readonly("address", &Member::address, "'host:port' the member listens on.")
      .def_readonly("incarnation", &Member::incarnation, "SWIM incarnation number.")
      .def_property_readonly(
          "state", [](const Member& x) { return std::string(MemberStateName(x.state)); },
          "'alive', 'suspect', 'dead' or 'left'.")
      .def_readonly("started_at_ms", &Member::started_at_ms,
                    "Wall-clock ms at which the member's process started (join order).")
      .def_readonly("node_class", &Member::node_class, "The member's node class.")
      .def_readonly("metadata", &Member::metadata, "The member's key-value metadata.");

  py::class_<MemberEvent>(m, "ClusterMemberEvent", "A membership change seen by this node.")
      .def_property_readonly(
          "kind", [](const MemberEvent& e) { return std::string(MemberEventName(e.kind)); },
          "'joined', 'suspected', 'alive_again', 'dead' or 'left'.")
      .def_readonly("member", &MemberEvent::member, "The member record after the change.");

  py::class_<Activation>(m, "ClusterActivation", "What the work start/stop callbacks receive.")
      .def_readonly("node", &Activation::node, "This node's id.")
      .def_readonly("epoch", &Activation::epoch, "The agreed membership epoch of the election.")
      .def_readonly("lease_until_mono_ms", &Activation::lease_until_mono_ms,
                    "End of the mastership lease, CLOCK_MONOTONIC ms (0 in standalone mode).")
      .def_readonly("standalone", &Activation::standalone, "True without a cluster.");

  py::class_<NodeStatus::Hosted>(m, "ClusterHostedInstance", "An instance this node hosts.")
      .def_readonly("label", &NodeStatus::Hosted::label)
      .def_property_readonly(
          "kind",
          [](const NodeStatus::Hosted& h) { return std::string(cluster::SpecKindName(h.kind)); },
          "'actor', 'singleton' or 'agent'.")
      .def_readonly("generation", &NodeStatus::Hosted::generation)
      .def_readonly("phase", &NodeStatus::Hosted::phase,
                    "'acquiring', 'starting', 'active' or 'stopping'.");

  py::class_<NodeStatus>(m, "ClusterNodeStatus", "A snapshot of this node's view.")
      .def_readonly("id", &NodeStatus::id, "This node's id.")
      .def_readonly("address", &NodeStatus::address, "'host:port' (empty in standalone mode).")
      .def_readonly("incarnation", &NodeStatus::incarnation, "This node's incarnation.")
      .def_readonly("epoch", &NodeStatus::epoch, "The agreed epoch of the current view.")
      .def_readonly("leader", &NodeStatus::leader, "The elected node id, or None.")
      .def_readonly("has_quorum", &NodeStatus::has_quorum, "Whether live members reach quorum.")
      .def_property_readonly(
          "state",
          [](const NodeStatus& s) { return std::string(cluster::SupervisorStateName(s.state)); },
          "Supervisor state: 'standby', 'activating', 'master' or 'stopping'.")
      .def_readonly("lease_until_mono_ms", &NodeStatus::lease_until_mono_ms,
                    "This node's lease end, CLOCK_MONOTONIC ms (0: none).")
      .def_readonly("standalone", &NodeStatus::standalone, "True without a cluster.")
      .def_readonly("hosted", &NodeStatus::hosted, "Instances this node hosts, any phase.")
      .def_property_readonly(
          "transport",
          [](const NodeStatus& s) {
            const cluster::TransportStats& t = s.transport;
            py::dict d;
            d["frames_sent"] = t.frames_sent;
            d["frames_received"] = t.frames_received;
            d["frames_local"] = t.frames_local;
            d["frames_dropped"] = t.frames_dropped;
            d["sends_oversize"] = t.sends_oversize;
            d["handshakes_rejected"] = t.handshakes_rejected;
            d["frames_oversize"] = t.frames_oversize;
            d["frames_malformed"] = t.frames_malformed;
            d["records_rejected"] = t.records_rejected;
            d["connections_established"] = t.connections_established;
            d["reconnect_attempts"] = t.reconnect_attempts;
            d["links_expired"] = t.links_expired;
            return d;
          },
          "Transport counters (monotonic; all 0 in standalone mode): frames_sent, "
          "frames_received (socket traffic), frames_local (to itself), frames_dropped, sends_oversize, handshakes_rejected, "
          "frames_oversize, frames_malformed, records_rejected (sealed frames that did not open), "
          "connections_established, reconnect_attempts, links_expired.");
}

void InitOptions(py::module_& m) {
  py::class_<ClusterOptions>(m, "ClusterOptions",
                             "Options of ClusterNode.start (pynenc_cpp.cluster.ClusterConfig "
                             "builds them; the engine validates them again).")
      .def(py::init<>(), "The engine's defaults.")
      .def_readwrite("cluster_name", &ClusterOptions::cluster_name, "Cluster name.")
      .def_readwrite("host", &ClusterOptions::host, "Listen host ('' with no seeds: standalone).")
      .def_readwrite("port", &ClusterOptions::port, "Listen port (0: ephemeral).")
      .def_readwrite("seeds", &ClusterOptions::seeds, "Seed addresses 'host:port'.")
      .def_readwrite("secret", &ClusterOptions::secret, "Shared cluster secret.")
      .def_readwrite("quorum", &ClusterOptions::quorum, "Quorum (0: majority of seeds + self).")
      .def_readwrite("heartbeat_ms", &ClusterOptions::heartbeat_ms, "Probe period, ms.")
      .def_readwrite("suspect_timeout_ms", &ClusterOptions::suspect_timeout_ms,
                     "Suspect -> Dead timeout, ms.")
      .def_readwrite("stabilize_ms", &ClusterOptions::stabilize_ms,
                     "Time elected before starting the work, ms.")
      .def_readwrite("lease_ms", &ClusterOptions::lease_ms, "Lease length, ms (0: suspect).")
      .def_readwrite("indirect_probes", &ClusterOptions::indirect_probes,
                     "Members asked to ping-req before suspicion.")
      .def_readwrite("state_dir", &ClusterOptions::state_dir, "Node id / peers dir ('': none).")
      .def_readwrite("node_class", &ClusterOptions::node_class, "This node's class.")
      .def_readwrite("metadata", &ClusterOptions::metadata, "This node's key-value metadata.")
      .def_readwrite("max_frame_bytes", &ClusterOptions::max_frame_bytes, "Frame size limit.")
      .def_readwrite("send_queue_bound", &ClusterOptions::send_queue_bound,
                     "Frames queued per peer before dropping the oldest.")
      .def_property(
          "election", [](const ClusterOptions& o) { return ElectionName(o.election); },
          [](ClusterOptions& o, const std::string& v) { o.election = ParseElection(v); },
          "'oldest', 'hrw' or 'lowest_address'.")
      .def_readwrite("election_class", &ClusterOptions::election_class,
                     "Oldest election only: candidates restricted to this node class.")
      .def_readwrite("activation_log", &ClusterOptions::activation_log,
                     "JSON-lines activation log path ('': none).")
      .def_readwrite("generation_source", &ClusterOptions::generation_source,
                     "memory://, sqlite:///path or redis://host:port/db.")
      .def_readwrite("storage", &ClusterOptions::storage,
                     "The Storage (on generation_source, app id cluster_name) the "
                     "generation source is taken from; None: the node opens its own.")
      .def_property(
          "placement",
          [](const ClusterOptions& o) -> std::string {
            switch (o.placement.kind) {
              case cluster::StrategyChoice::Kind::kRandom:
                return "random:" + std::to_string(o.placement.seed);
              case cluster::StrategyChoice::Kind::kPinned:
                return "pinned:" + o.placement.node;
              default:
                return "least_loaded";
            }
          },
          [](ClusterOptions& o, const std::string& v) {
            if (v == "least_loaded") {
              o.placement = {cluster::StrategyChoice::Kind::kLeastLoaded, 0, {}};
            } else if (v.rfind("random:", 0) == 0) {
              try {
                o.placement = {cluster::StrategyChoice::Kind::kRandom, std::stoull(v.substr(7)),
                               {}};
              } catch (const std::exception&) {
                throw py::value_error("placement: 'random:<seed>' needs an integer seed, got '" +
                                      v + "'");
              }
            } else if (v.rfind("pinned:", 0) == 0 && v.size() > 7) {
              o.placement = {cluster::StrategyChoice::Kind::kPinned, 0, v.substr(7)};
            } else {
              throw py::value_error(
                  "placement must be 'least_loaded', 'random:<seed>' or 'pinned:<node id>', got '" +
                  v + "'");
            }
          },
          "Default placement strategy: 'least_loaded', 'random:<seed>' or 'pinned:<node id>'.")
      .def_readwrite("request_timeout_ms", &ClusterOptions::request_timeout_ms,
                     "Default deadline of coordinator requests and asks, ms.")
      .def_readwrite("spawn_timeout_ms", &ClusterOptions::spawn_timeout_ms,
                     "Spawn ack deadline before a re-send, ms (0: max(5000, 3 * lease)).")
      .def_readwrite("node_id", &ClusterOptions::node_id,
                     "This node's id ('': random, or the state dir's).")
      .def_readwrite("actor_buffer_limit", &ClusterOptions::actor_buffer_limit,
                     "Per label: actor messages sent and not yet acknowledged, at most.")
      .def_readwrite("actor_inbox_limit", &ClusterOptions::actor_inbox_limit,
                     "Messages waiting for this process's actor runtime, at most.")
      .def_readwrite("actor_resend_ms", &ClusterOptions::actor_resend_ms,
                     "An unacknowledged label message is sent again after this, ms.")
      .def_readwrite("leave_timeout_ms", &ClusterOptions::leave_timeout_ms,
                     "How long a graceful stop waits for its instances to be handed over, ms.");
}

}  // namespace

void InitCluster(py::module_& m) {
  // OpenSSL must not free its tables in exit(): a node leaked at exit may still
  // be hashing on its loop thread then.
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  PythonGate::Get().AddExitHook([] { LiveNodes::Get().StopAll(); });
  InitValueTypes(m);
  InitOptions(m);
  py::class_<PyClusterNode>(m, "ClusterNode",
                            "A running cluster node (use pynenc_cpp.cluster.run_cluster).")
      .def_static("start", &StartNode, py::arg("options"), py::arg("start"), py::arg("stop"),
                  py::arg("on_event") = py::none(), py::arg("on_log") = py::none(),
                  "Validates the options, binds, joins the seeds and returns the running node. "
                  "start(activation) and stop(activation, reason) run on the node's callback "
                  "thread; on_event(event) and on_log(level, line) too (level: 0 debug, 1 info, "
                  "2 warning, 3 error; None: warnings and errors go to stderr). Raises BadConfig "
                  "(bad option, unwritable state dir) or BackendError (address in use).")
      .def("stop", &PyClusterNode::Stop,
           "Graceful: stops the work (waits for the stop callback), sends Leaving, shuts the "
           "transport down. Idempotent.")
      .def("status", &PyClusterNode::Status, "A snapshot of this node's status.")
      .def("members", &PyClusterNode::Members,
           "Every known member, self included, dead and left ones too, sorted by id.")
      .def("register_actor_type", &PyClusterNode::RegisterActorType, py::arg("actor_type"),
           py::arg("factory"),
           "factory(InstanceContext) -> object (optional methods stop(reason), "
           "on_generation(Generation), on_message(bytes) -> bytes), called on the callback "
           "thread. Raises InvalidArgument (bad name) or TypeError.")
      .def("unregister_actor_type", &PyClusterNode::UnregisterActorType, py::arg("actor_type"),
           "This node stops offering the type. Raises InvocationNotFound if not registered.")
      .def("register_agent_family", &PyClusterNode::RegisterAgentFamily, py::arg("family"),
           py::arg("factory"), "Declares an agent family and the factory of its agents.")
      .def("submit_actor", &PyClusterNode::SubmitActor, py::arg("spec"), py::arg("timeout_ms"),
           "Submits an actor spec to the leader; raises InvalidArgument, Conflict, Unavailable, "
           "Timeout or BackendError.")
      .def("submit_singleton", &PyClusterNode::SubmitSingleton, py::arg("spec"),
           py::arg("timeout_ms"), "Submits a singleton spec to the leader.")
      .def("remove_spec", &PyClusterNode::RemoveSpec, py::arg("label"), py::arg("timeout_ms"),
           "Removes a spec (its instance stops); raises InvocationNotFound if unknown.")
      .def("query_view", &PyClusterNode::QueryView, py::arg("timeout_ms"),
           "The leader's cluster view.")
      .def("query_statuses", &PyClusterNode::QueryStatuses, py::arg("timeout_ms"),
           "The leader's statuses of every managed label.")
      .def("lookup", &PyClusterNode::Lookup, py::arg("label"),
           "Where the label runs per this node's directory copy, or None.")
      .def("directory", &PyClusterNode::Directory, "This node's copy of the directory.")
      .def("ask", &PyClusterNode::Ask, py::arg("label"), py::arg("payload"),
           py::arg("timeout_ms"), "Sends bytes to the label's instance and returns its answer.")
      .def("tell", &PyClusterNode::Tell, py::arg("label"), py::arg("payload"),
           "Fire and forget; raises Unavailable if the directory knows no running instance.")
      .def("inbox_fd", &PyClusterNode::InboxFd,
           "The inbox eventfd (readable while items wait); -1 standalone.")
      .def("drain_inbox", &PyClusterNode::DrainInbox, py::arg("max") = 1024,
           "Up to `max` waiting inbox items: (kind, label, generation, spec kind, actor type, "
           "payload, token); kind 0 start, 1 stop, 2 label message, 3 path message, 4 regrant.")
      .def("register_inbox_actor_type", &PyClusterNode::RegisterInboxActorType,
           py::arg("actor_type"), py::arg("stop_timeout_ms"),
           "Offers an actor type whose instances the runtime runs through the inbox.")
      .def("instance_stopped", &PyClusterNode::InstanceStopped, py::arg("label"),
           py::arg("generation"), "The runtime finished a stop item.")
      .def("raise_generation_floor", &PyClusterNode::RaiseGenerationFloor, py::arg("label"),
           py::arg("floor"),
           "The label's storage is fenced at `floor`, above its instance's generation: the "
           "node drops that instance and the leader claims a term above `floor`.")
      .def("send_to_label", &PyClusterNode::SendToLabel, py::arg("label"), py::arg("payload"),
           "Reliable, in-order delivery to the label's instance; returns the message's sequence "
           "number; raises BufferFull when the label's buffer is full.")
      .def("ack_label", &PyClusterNode::AckLabel, py::arg("token"), py::arg("outcome"),
           "Answers a label message: 0 processed, 1 duplicate, 2 not here, 3 rejected.")
      .def("send_to_path", &PyClusterNode::SendToPath, py::arg("address"), py::arg("path"),
           py::arg("payload"), "Best effort to the local actor at `path` of the node at `address`.")
      .def("mail_stats", &PyClusterNode::MailStats,
           "Actor message counters and the messages buffered per label.");
}

}  // namespace pynenc_cpp::bindings
