// How C++ threads of the cluster node (its callback thread) call Python: each
// keeps ONE persistent Python thread state, created the first time it calls
// Python and deleted when the thread exits; each call takes the GIL, runs the
// callable and releases the GIL. Each call passes the Python gate
// (python_gate.h): once the interpreter exits, no Python code is called.
#pragma once

#include <Python.h>
#include <cxxabi.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "conversions.h"

namespace pynenc_cpp::bindings {

// The persistent thread state of a C++ thread that calls Python. A thread that
// already had one (a Python thread) is left alone.
struct ThreadStateKeeper {
  bool kept = false;
  PyGILState_STATE outer = PyGILState_UNLOCKED;
  PyThreadState* saved = nullptr;

  // REQUIRES: GIL not held by this thread.
  void EnsureKept() {
    if (kept || PyGILState_GetThisThreadState() != nullptr) return;
    outer = PyGILState_Ensure();  // creates the thread state (counter 1)
    saved = PyEval_SaveThread();  // keeps it, releases the GIL
    kept = true;
  }

  ~ThreadStateKeeper() {
    if (!kept) return;
    PythonEntry entry;
    if (!entry) return;  // exiting: leak it
    PyEval_RestoreThread(saved);
    PyGILState_Release(outer);  // counter 0: clears and deletes it, releases the GIL
  }
};
inline thread_local ThreadStateKeeper tls_keeper;

// Runs `fn` with the GIL. Throws nothing of its own; a Python exception is
// reported as unraisable with `what` as context. Not noexcept: should the thread
// still be ended by the interpreter's exit (pthread_exit), that unwinding must
// pass (a noexcept frame would turn it into std::terminate).
template <typename Fn>
inline void CallPython(const char* what, Fn&& fn) {
  PythonEntry entry;
  if (!entry) return;
  tls_keeper.EnsureKept();
  PyGILState_STATE state = PyGILState_Ensure();
  try {
    fn();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable(what);
  } catch (const std::exception& e) {
    PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s: %s", what, e.what());
    if (PyErr_Occurred()) PyErr_WriteUnraisable(nullptr);
  } catch (const abi::__forced_unwind&) {
    throw;  // the thread is being ended (pthread_exit): let it unwind
  } catch (...) {
    PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s: unknown C++ exception", what);
    if (PyErr_Occurred()) PyErr_WriteUnraisable(nullptr);
  }
  PyGILState_Release(state);
}

// Runs `fn` with the GIL and lets its failure escape as a C++ exception (a
// std::runtime_error carrying the Python exception's type and message), for
// callers that turn failures into error values (instance factories, messages).
template <typename Fn>
auto CallPythonOrThrow(Fn&& fn) -> decltype(fn()) {
  PythonEntry entry;
  if (!entry) throw std::runtime_error("the Python interpreter is shutting down");
  tls_keeper.EnsureKept();
  py::gil_scoped_acquire gil;
  try {
    return fn();
  } catch (py::error_already_set& e) {
    throw std::runtime_error(e.what());  // e (fetched, not set) is dropped with the GIL held
  }
}

}  // namespace pynenc_cpp::bindings
