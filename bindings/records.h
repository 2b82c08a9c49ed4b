// Record conversions shared by more than one binding file (GIL held).
#pragma once

#include "conversions.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "pynenc_cpp/ports/state_backend.h"

namespace pynenc_cpp::bindings {

// The state backend's invocation record <-> the adapter's dict (keys:
// invocation_id, call_id, task_id, arguments_id, serialized_arguments,
// parent_invocation_id, parent_event_id, workflow_id, workflow_type,
// parent_workflow_id). KeyError / TypeError for a missing or mistyped field.
InvocationRecord InvocationFromDict(const py::dict& d);
py::dict InvocationToDict(const InvocationRecord& r);

}  // namespace pynenc_cpp::bindings
