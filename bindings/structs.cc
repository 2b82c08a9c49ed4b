#include "structs.h"

#include "init.h"
#include "records.h"

namespace pynenc_cpp::bindings {
namespace {

// Made once by InitStructs (a module is initialised once per process); never freed.
PyTypeObject* g_status_record = nullptr;
PyTypeObject* g_claim = nullptr;
PyTypeObject* g_change = nullptr;
PyTypeObject* g_finish = nullptr;

// Field tables: PyStructSequence_NewType keeps pointers into them.
PyStructSequence_Field kStatusRecordFields[] = {
    {"status", "pynenc's status value"},
    {"runner_id", "the owner's runner id, or None"},
    {"timestamp_us", "when the storage made the change, in microseconds since the epoch"},
    {nullptr, nullptr}};
PyStructSequence_Field kClaimFields[] = {
    {"kind", "'claimed' (now PENDING), 'started' (now RUNNING), 'not_available' or "
             "'needs_check' (its task may have running concurrency control: nothing changed)"},
    {"record", "the StatusRecord after the claim"},
    {"invocation", "the invocation's record dict, or None when not available"},
    {"status_watched", "whether a trigger condition watches the new status"},
    {nullptr, nullptr}};
PyStructSequence_Field kChangeFields[] = {
    {"record", "the StatusRecord after the change"},
    {"status_watched", "whether a trigger condition watches the new status"},
    {nullptr, nullptr}};
PyStructSequence_Field kFinishFields[] = {
    {"record", "the StatusRecord after the change"},
    {"status_watched", "whether a trigger condition watches the final status"},
    {"outcome_watched", "whether a trigger condition watches the result or the exception"},
    {nullptr, nullptr}};

PyTypeObject* NewType(py::module_& m, const char* name, const char* qualified, const char* doc,
                      PyStructSequence_Field* fields, int size) {
  PyStructSequence_Desc desc{qualified, doc, fields, size};
  PyTypeObject* type = PyStructSequence_NewType(&desc);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type));
  return type;
}

// A new struct of `type` holding `items` (each reference stolen).
py::object Make(PyTypeObject* type, std::initializer_list<PyObject*> items) {
  PyObject* s = PyStructSequence_New(type);
  Py_ssize_t i = 0;
  if (s == nullptr) {
    for (PyObject* item : items) Py_XDECREF(item);
    throw py::error_already_set();
  }
  for (PyObject* item : items) PyStructSequence_SetItem(s, i++, item);
  return py::reinterpret_steal<py::object>(s);
}

PyObject* Bool(bool b) { return py::bool_(b).release().ptr(); }

}  // namespace

StatusRecordObj StatusRecordOf(const StatusRecord& r) {
  return {Make(g_status_record, {py::cast(r.status).release().ptr(),
                                 py::cast(r.runner_id).release().ptr(),
                                 py::int_(r.timestamp_us).release().ptr()})};
}

ClaimObj ClaimOf(const ClaimOutcome& out) {
  const char* kind = "not_available";
  switch (out.kind) {
    case ClaimKind::kClaimed:
      kind = "claimed";
      break;
    case ClaimKind::kNotAvailable:
      break;
    case ClaimKind::kNeedsCheck:
      kind = "needs_check";
      break;
    case ClaimKind::kStarted:
      kind = "started";
      break;
  }
  py::object inv =
      out.invocation ? py::object(InvocationToDict(*out.invocation)) : py::object(py::none());
  return {Make(g_claim, {py::str(kind).release().ptr(), StatusRecordOf(out.record).obj.release().ptr(),
                         inv.release().ptr(), Bool(out.status_watched)})};
}

ChangeObj ChangeOf(const ChangeOutcome& out) {
  return {Make(g_change,
               {StatusRecordOf(out.record).obj.release().ptr(), Bool(out.status_watched)})};
}

FinishObj FinishOf(const FinishOutcome& out) {
  return {Make(g_finish, {StatusRecordOf(out.change.record).obj.release().ptr(),
                          Bool(out.change.status_watched), Bool(out.payload_watched)})};
}

void InitStructs(py::module_& m) {
  g_status_record = NewType(m, "StatusRecord", "pynenc_cpp._core.StatusRecord",
                            "An invocation's status record as the storage holds it.",
                            kStatusRecordFields, 3);
  g_claim = NewType(m, "Claim", "pynenc_cpp._core.Claim",
                    "The outcome of a claim (Lifecycle.claim, the runner's takes).", kClaimFields,
                    4);
  g_change = NewType(m, "Change", "pynenc_cpp._core.Change",
                     "The outcome of a status change (Lifecycle.change_status, retry, ...).",
                     kChangeFields, 2);
  g_finish = NewType(m, "Finish", "pynenc_cpp._core.Finish",
                     "The outcome of a finish (Lifecycle.finish_success / finish_failure).",
                     kFinishFields, 3);
}

}  // namespace pynenc_cpp::bindings
