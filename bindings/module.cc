// pynenc_cpp._core: the private extension module. Registration only; each
// subsystem lives in its own file.
#include "conversions.h"
#include "init.h"
#include "python_gate.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "pynenc-cpp engine bindings (private; use the pynenc_cpp package).";
  m.attr("__version__") = PYNENC_CPP_VERSION;
  // First: its atexit hook must run after every pynenc_cpp hook registered later.
  pynenc_cpp::bindings::InitPythonGate(m);
  pynenc_cpp::bindings::InitErrors(m);
  pynenc_cpp::bindings::InitCore(m);
  pynenc_cpp::bindings::InitBroker(m);
  pynenc_cpp::bindings::InitClientDataStore(m);
  pynenc_cpp::bindings::InitOrchestrator(m);
  pynenc_cpp::bindings::InitStateBackend(m);
  pynenc_cpp::bindings::InitTrigger(m);
  pynenc_cpp::bindings::InitLifecycle(m);
  pynenc_cpp::bindings::InitRunner(m);
  pynenc_cpp::bindings::InitCoordinator(m);
  pynenc_cpp::bindings::InitCluster(m);
  pynenc_cpp::bindings::InitReport(m);
}
