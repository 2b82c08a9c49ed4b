// The one exception translator. Engine errors become these Python classes:
//   EngineError                      base of all
//   InvocationNotFound(KeyError)     kNotFound; raised as the subclass that
//                                      pynenc_cpp.errors registers at import
//                                      (also pynenc's InvocationNotFoundError)
//   IllegalTransition                kIllegalTransition (.from_status .to_status .allowed)
//   OwnershipViolation               kOwnershipViolation (.from_status .to_status
//                                      .current_owner .attempted_owner .reason)
//   BackendError(RuntimeError)       kBackendFailure
//   BackendConnectionError(BackendError)
//                                    kBackendFailure made by Status::ConnectionLost
//                                      (.maybe_applied)
//   BadConfig(ValueError)            kBadConfig
//   InvalidArgument(ValueError)      kInvalidArgument
//   Conflict                         kConflict (a compare-and-set lost)
//   StaleGeneration(Conflict)        kStaleGeneration (a fenced write or command was stale)
//   Unavailable(ConnectionError)     kUnavailable (no leader, no quorum, node gone)
//   Timeout(TimeoutError)            kTimeout
//   BufferFull                       kResourceExhausted (a bounded buffer is full)
// The Python adapters re-raise the two transition errors as pynenc's own
// InvocationStatusTransitionError / InvocationStatusOwnershipError.
#include "conversions.h"

namespace pynenc_cpp::bindings {
namespace {

PyObject* NewClass(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("pynenc_cpp._core.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

PyObject* g_engine_error = nullptr;
PyObject* g_not_found = nullptr;       // the class raised for kNotFound
PyObject* g_not_found_base = nullptr;  // _core.InvocationNotFound
PyObject* g_illegal = nullptr;
PyObject* g_ownership = nullptr;
PyObject* g_backend = nullptr;
PyObject* g_connection_lost = nullptr;
PyObject* g_bad_config = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_conflict = nullptr;
PyObject* g_stale = nullptr;
PyObject* g_unavailable = nullptr;
PyObject* g_timeout = nullptr;
PyObject* g_buffer_full = nullptr;

py::object StatusOrNone(const std::optional<InvocationStatus>& s) {
  if (!s) return py::none();
  return py::cast(*s);
}

PyObject* StatusClass(const Status& status) {
  PyObject* cls = g_engine_error;
  switch (status.code()) {
    case ErrorCode::kNotFound:
      cls = g_not_found;
      break;
    case ErrorCode::kIllegalTransition:
      cls = g_illegal;
      break;
    case ErrorCode::kOwnershipViolation:
      cls = g_ownership;
      break;
    case ErrorCode::kBackendFailure:
      cls = status.connection_lost() ? g_connection_lost : g_backend;
      break;
    case ErrorCode::kBadConfig:
      cls = g_bad_config;
      break;
    case ErrorCode::kInvalidArgument:
      cls = g_invalid;
      break;
    case ErrorCode::kConflict:
      cls = g_conflict;
      break;
    case ErrorCode::kStaleGeneration:
      cls = g_stale;
      break;
    case ErrorCode::kUnavailable:
      cls = g_unavailable;
      break;
    case ErrorCode::kTimeout:
      cls = g_timeout;
      break;
    case ErrorCode::kResourceExhausted:
      cls = g_buffer_full;
      break;
    case ErrorCode::kOk:
      break;
  }
  return cls;
}

void RaiseStatus(const Status& status) {
  py::object exc = StatusError(status);
  PyErr_SetObject(StatusClass(status), exc.ptr());
}

}  // namespace

py::object StatusError(const Status& status) {
  PyObject* cls = StatusClass(status);
  py::object exc =
      py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", status.message().c_str()));
  if (!exc) throw py::error_already_set();
  if (status.connection_lost()) exc.attr("maybe_applied") = py::bool_(status.maybe_applied());
  if (const auto& info = status.transition()) {
    exc.attr("from_status") = StatusOrNone(info->from);
    exc.attr("to_status") = py::cast(info->to);
    exc.attr("allowed") = py::cast(info->allowed);
    exc.attr("current_owner") = py::cast(info->current_owner);
    exc.attr("attempted_owner") = py::cast(info->attempted_owner);
    exc.attr("reason") = py::str(status.message());
  }
  return exc;
}

void InitErrors(py::module_& m) {
  g_engine_error = NewClass(m, "EngineError", PyExc_Exception,
                            "Base class of every error raised by the pynenc-cpp engine.");
  py::tuple not_found_bases =
      py::make_tuple(py::handle(g_engine_error), py::handle(PyExc_KeyError));
  g_not_found = NewClass(m, "InvocationNotFound", not_found_bases.ptr(),
                         "An invocation, key or record named by the caller does not exist.");
  g_not_found_base = g_not_found;
  m.def(
      "_register_not_found_class",
      [](const py::handle& cls) {
        if (!PyType_Check(cls.ptr()) || PyObject_IsSubclass(cls.ptr(), g_not_found_base) != 1) {
          throw py::type_error("expected a subclass of pynenc_cpp._core.InvocationNotFound");
        }
        PyObject* previous = g_not_found;
        g_not_found = cls.inc_ref().ptr();
        if (previous != g_not_found_base) Py_XDECREF(previous);
      },
      py::arg("cls"),
      "Makes every engine 'not found' error raise ``cls`` (a subclass of ``InvocationNotFound`` "
      "called with the message): pynenc_cpp.errors registers its InvocationNotFound, which is "
      "also pynenc's InvocationNotFoundError, at import. Holds the GIL.");
  g_illegal = NewClass(m, "IllegalTransition", g_engine_error,
                       "The invocation status machine forbids this transition.");
  g_ownership = NewClass(m, "OwnershipViolation", g_engine_error,
                         "The status machine's runner-ownership rules forbid this change.");
  py::tuple backend_bases =
      py::make_tuple(py::handle(g_engine_error), py::handle(PyExc_RuntimeError));
  g_backend = NewClass(m, "BackendError", backend_bases.ptr(),
                       "The storage backend failed (I/O, server, corrupt data).");
  // Not a ConnectionError: pynenc retries a task whose retry_for names
  // ConnectionError when storing its outcome fails, which would run again a
  // body that succeeded.
  g_connection_lost = NewClass(
      m, "BackendConnectionError", g_backend,
      "The connection to the storage server failed (refused, reset, timed out, still loading): "
      "the server may come back. maybe_applied: the command was sent on the lost connection, "
      "so it may or may not have been applied.");
  py::tuple value_bases = py::make_tuple(py::handle(g_engine_error), py::handle(PyExc_ValueError));
  g_bad_config = NewClass(m, "BadConfig", value_bases.ptr(),
                          "A configuration value is missing, malformed or unsupported.");
  g_invalid = NewClass(m, "InvalidArgument", value_bases.ptr(),
                       "An argument is out of range or malformed.");
  g_conflict = NewClass(m, "Conflict", g_engine_error,
                        "A compare-and-set lost: the stored value is not the expected one.");
  g_stale = NewClass(m, "StaleGeneration", g_conflict,
                     "A write or command carries a generation below the one already stored.");
  py::tuple unavailable_bases =
      py::make_tuple(py::handle(g_engine_error), py::handle(PyExc_ConnectionError));
  g_unavailable = NewClass(m, "Unavailable", unavailable_bases.ptr(),
                           "The cluster cannot serve the request now (no leader, no quorum).");
  py::tuple timeout_bases =
      py::make_tuple(py::handle(g_engine_error), py::handle(PyExc_TimeoutError));
  g_timeout = NewClass(m, "Timeout", timeout_bases.ptr(), "No answer within the deadline.");
  g_buffer_full = NewClass(m, "BufferFull", g_engine_error,
                           "A bounded buffer is full: the message was not queued.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const EngineException& e) {
      RaiseStatus(e.status());
    }
  });
}

}  // namespace pynenc_cpp::bindings
