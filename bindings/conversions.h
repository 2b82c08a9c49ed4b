// Conversions shared by every binding file, and the one way bindings call the
// engine: convert arguments with the GIL held, release it, call, reacquire it,
// then turn an error value into a Python exception (see errors.cc).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/ids.h"
#include "pynenc_cpp/core/metrics.h"
#include "pynenc_cpp/core/status.h"
#include "pynenc_cpp/ports/backend_config.h"
#include "python_gate.h"

namespace pynenc_cpp::bindings {

namespace py = pybind11;

// A C++ exception carrying an engine Status; translated once, in errors.cc.
// The Python exception object (not raised) for a failed `status`: the class the
// translator raises for it, with the same attributes (bindings/errors.cc).
py::object StatusError(const Status& status);

class EngineException : public std::exception {
 public:
  explicit EngineException(Status status) : status_(std::move(status)), what_(status_.ToString()) {
    if (status_.code() == ErrorCode::kBackendFailure) {
      metrics::OnBackendError(status_.connection_lost());
    }
  }
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw EngineException(s);
}

inline void Unwrap(Status s) { ThrowIfError(s); }

template <typename T>
T Unwrap(Result<T> r) {
  if (!r.ok()) throw EngineException(r.status());
  return std::move(r).value();
}

// Runs `fn` (engine work) with the GIL released; raises on error. REQUIRES: GIL held.
template <typename Fn>
auto WithoutGil(Fn&& fn) {
  auto result = [&] {
    GilRelease release;
    return fn();
  }();
  return Unwrap(std::move(result));
}

// A wait's `timeout_sec` from Python in microseconds: negative means no wait,
// longer than ~31 years means "forever" (no overflow). Raises for NaN.
inline TimestampUs TimeoutMicros(double timeout_sec) {
  if (std::isnan(timeout_sec)) throw EngineException(Status::InvalidArgument("timeout_sec is NaN"));
  constexpr double kMaxUs = 1e15;
  return static_cast<TimestampUs>(std::max(std::min(timeout_sec * 1e6, kMaxUs), -1.0));
}

// The constructor every port class exposes: (uri, app_id) -> Open<Port>(config).
// Opening may do I/O but runs with the GIL held (pybind11 #6172: no GIL release
// in factories).
template <typename OpenFn>
auto OpenFromUri(OpenFn open) {
  return py::init([open](std::string uri, std::string app_id) {
    // Shared holders: a native Lifecycle keeps the component objects it works on.
    auto opened = Unwrap(open(BackendConfig{std::move(uri), std::move(app_id), nullptr}));
    using Port = typename decltype(opened)::element_type;
    return std::shared_ptr<Port>(std::move(opened));
  });
}

// Registers the exception classes and the translator. Called once by the module.
void InitErrors(py::module_& m);

// True while the interpreter shuts down: C++ threads must not enter Python then.
inline bool PythonFinalizing() { return InterpreterFinalizing(); }

// Drops Python references held by a C++ object that any thread may destroy: with
// the GIL while the Python gate is open, else leaked (the process is exiting and
// the GIL can no longer be taken safely). REQUIRES: this thread does not hold the GIL, or
// holds it through a thread state PyGILState_Ensure can see.
inline void DropPyObjects(std::initializer_list<py::object*> objects) {
  PythonEntry entry;
  if (!entry) {
    for (py::object* o : objects) (void)o->release();
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  for (py::object* o : objects) *o = py::object();
  PyGILState_Release(g);
}

}  // namespace pynenc_cpp::bindings

namespace pybind11::detail {

// The UTF-8 bytes of a Python str (also of a str subclass such as a StrEnum member);
// false for anything else.
inline bool LoadUtf8(handle src, std::string_view* out) {
  if (!src || !PyUnicode_Check(src.ptr())) return false;
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(src.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    return false;
  }
  *out = std::string_view(data, static_cast<size_t>(size));
  return true;
}

// Engine identifiers travel as plain Python str.
template <typename Tag>
struct type_caster<pynenc_cpp::Id<Tag>> {
  PYBIND11_TYPE_CASTER(pynenc_cpp::Id<Tag>, const_name("str"));
  bool load(handle src, bool) {
    std::string_view text;
    if (!LoadUtf8(src, &text)) return false;
    value = pynenc_cpp::Id<Tag>(std::string(text));
    return true;
  }
  static handle cast(const pynenc_cpp::Id<Tag>& id, return_value_policy, handle) {
    return PyUnicode_FromStringAndSize(id.str().data(), static_cast<Py_ssize_t>(id.str().size()));
  }
};

// Statuses travel as pynenc's string values; pynenc's InvocationStatus is a
// StrEnum, so its members are accepted directly. An unknown name raises ValueError.
template <>
struct type_caster<pynenc_cpp::InvocationStatus> {
  PYBIND11_TYPE_CASTER(pynenc_cpp::InvocationStatus, const_name("str"));
  bool load(handle src, bool) {
    std::string_view text;
    if (!LoadUtf8(src, &text)) return false;
    auto parsed = pynenc_cpp::ParseStatus(text);
    if (!parsed) throw value_error("unknown invocation status '" + std::string(text) + "'");
    value = *parsed;
    return true;
  }
  static handle cast(pynenc_cpp::InvocationStatus s, return_value_policy, handle) {
    auto name = pynenc_cpp::StatusName(s);
    return PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
  }
};

}  // namespace pybind11::detail
