// Engine outcomes that cross to Python as struct sequences (PyStructSequence, as
// os.stat_result): tuples with named fields. Python unpacks one as the tuple it
// always was, or reads a field by name (`claim.kind`); one is made at a tuple's
// cost (no Python call), which a bound class (py::class_) is not. The types live
// in the root module, _core.StatusRecord, _core.Claim, _core.Change and
// _core.Finish, registered by InitStructs before any submodule.
//
// Each C++ function returns a small wrapper (StatusRecordObj, ...) whose
// type_caster names the Python type, so signatures and the generated stubs say
// `-> Claim`, not `-> tuple`. REQUIRES (every function): the GIL held.
#pragma once

#include "conversions.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp::bindings {

// Hidden, as pybind11's own types are: a struct holding a py::object may not be
// more visible than its field (GCC's -Wattributes, in builds without
// -fvisibility=hidden such as the chaos suite's ASan build).
struct __attribute__((visibility("hidden"))) StatusRecordObj {
  py::object obj;
};
struct __attribute__((visibility("hidden"))) ClaimObj {
  py::object obj;
};
struct __attribute__((visibility("hidden"))) ChangeObj {
  py::object obj;
};
struct __attribute__((visibility("hidden"))) FinishObj {
  py::object obj;
};

// _core.StatusRecord(status, runner_id | None, timestamp_us)
StatusRecordObj StatusRecordOf(const StatusRecord& r);
// _core.Claim(kind, record, invocation dict | None, status_watched); kind is
// "claimed", "started", "not_available" or "needs_check".
ClaimObj ClaimOf(const ClaimOutcome& out);
// _core.Change(record, status_watched)
ChangeObj ChangeOf(const ChangeOutcome& out);
// _core.Finish(record, status_watched, outcome_watched)
FinishObj FinishOf(const FinishOutcome& out);


}  // namespace pynenc_cpp::bindings

namespace pybind11::detail {

#define PYNENC_CPP_STRUCT_CASTER(Cpp, PyName)                                      \
  template <>                                                                       \
  struct type_caster<pynenc_cpp::bindings::Cpp> {                                   \
    PYBIND11_TYPE_CASTER(pynenc_cpp::bindings::Cpp, const_name(PyName));            \
    bool load(handle, bool) { return false; }                                      \
    static handle cast(pynenc_cpp::bindings::Cpp s, return_value_policy, handle) { \
      return s.obj.release();                                                       \
    }                                                                               \
  };
PYNENC_CPP_STRUCT_CASTER(StatusRecordObj, "pynenc_cpp._core.StatusRecord")
PYNENC_CPP_STRUCT_CASTER(ClaimObj, "pynenc_cpp._core.Claim")
PYNENC_CPP_STRUCT_CASTER(ChangeObj, "pynenc_cpp._core.Change")
PYNENC_CPP_STRUCT_CASTER(FinishObj, "pynenc_cpp._core.Finish")
#undef PYNENC_CPP_STRUCT_CASTER

}  // namespace pybind11::detail
