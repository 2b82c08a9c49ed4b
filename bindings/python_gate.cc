// The atexit hook that stops what still runs and closes the Python gate
// (see python_gate.h).
#include "python_gate.h"

#include <chrono>

namespace pynenc_cpp::bindings {

namespace py = pybind11;

void InitPythonGate(py::module_& m) {
  // How long the hook waits for threads still inside Python (a task body, a
  // callback) before letting the interpreter finalize.
  constexpr std::chrono::milliseconds kExitWait{2000};
  py::cpp_function hook(
      [] {
        GilRelease release;
        PythonGate::Get().RunExitHooksAndClose(kExitWait);
      },
      py::name("_close_python_gate"),
      py::doc("Stops the native threads that call Python, before the interpreter finalizes."));
  m.attr("_close_python_gate") = hook;
  m.def(
      "gil_handovers",
      [] {
        py::dict d;
        d["engine_calls"] = GilCounters().engine_calls.load(std::memory_order_relaxed);
        d["thread_entries"] = GilCounters().thread_entries.load(std::memory_order_relaxed);
        return d;
      },
      "How often this process handed the GIL over so far: ``engine_calls`` (binding calls\n"
      "that released it and took it back) and ``thread_entries`` (engine threads that took\n"
      "it to run Python: a runner worker running an invocation, a callback). Each is one\n"
      "GIL acquisition. For profiling (bench/profile_burst.py); never reset.");
  py::module_::import("atexit").attr("register")(hook);
}

}  // namespace pynenc_cpp::bindings
