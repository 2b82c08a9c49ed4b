// pynenc_cpp._core: the private extension module. Registration only; each
// subsystem lives in its own file.
#include <stdexcept>
#include <string>

#include "conversions.h"
#include "init.h"
#include "python_gate.h"

namespace {

namespace py = pybind11;

// Registers a subsystem in the submodule `name` ("pynenc_cpp._core.<name>",
// importable: it is put in sys.modules) and re-exports its public names from
// the root, so `_core.X` stays the one spelling the package uses while the
// generated stubs come out one file per subsystem (scripts/gen_stubs.sh).
void Submodule(py::module_& m, const char* name, const char* doc, void (*init)(py::module_&)) {
  py::module_ sub = m.def_submodule(name, doc);
  init(sub);
  py::module_::import("sys").attr("modules")[sub.attr("__name__")] = sub;
  for (auto item : py::reinterpret_borrow<py::dict>(sub.attr("__dict__"))) {
    const std::string key = py::str(item.first);
    if (key.rfind("__", 0) == 0) continue;
    if (py::hasattr(m, item.first)) {  // a build error, caught by the first import
      throw std::runtime_error("pynenc_cpp._core: '" + key + "' of submodule '" + name +
                               "' is already defined");
    }
    m.attr(item.first) = item.second;
  }
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  namespace b = pynenc_cpp::bindings;
  m.doc() = "pynenc-cpp engine bindings (private; use the pynenc_cpp package).";
  m.attr("__version__") = PYNENC_CPP_VERSION;
  // First: its atexit hook must run after every pynenc_cpp hook registered later.
  b::InitPythonGate(m);
  // The exceptions and the shared core types stay in the root module.
  b::InitErrors(m);
  b::InitCore(m);
  b::InitStructs(m);
  Submodule(m, "broker", "Brokers and their retrieval.", b::InitBroker);
  Submodule(m, "client_data_store", "Client data stores.", b::InitClientDataStore);
  Submodule(m, "orchestrator", "Orchestrators: statuses, ownership, waits.", b::InitOrchestrator);
  Submodule(m, "state_backend", "State backends: records, results, history.", b::InitStateBackend);
  Submodule(m, "trigger", "Trigger stores.", b::InitTrigger);
  Submodule(m, "lifecycle", "Native mode's composite operations.", b::InitLifecycle);
  Submodule(m, "storage", "One app's storage and the ports over it.", b::InitStorage);
  Submodule(m, "runner", "The C++ runner loop.", b::InitRunner);
  Submodule(m, "coordinator", "Placement, supervision and singletons.", b::InitCoordinator);
  Submodule(m, "cluster", "The cluster core: transport, membership, election.", b::InitCluster);
  Submodule(m, "report", "Backend reports (pynenc-cpp doctor).", b::InitReport);
}
