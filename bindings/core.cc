// Core types: the status machine table and a transition check, exposed so that
// tests can compare them with pynenc's own table.
#include "conversions.h"
#include "init.h"

namespace pynenc_cpp::bindings {

void InitCore(py::module_& m) {
  m.def(
      "status_names",
      [] {
        py::list out;
        for (InvocationStatus s : AllStatuses()) out.append(py::cast(s));
        return out;
      },
      "Every invocation status the engine knows, as pynenc's string values.");

  m.def(
      "status_table",
      [] {
        py::dict table;
        auto describe = [](const StatusDefinition& d) {
          py::dict row;
          row["allowed_transitions"] = py::cast(d.Allowed());
          row["is_final"] = d.is_final;
          row["available_for_run"] = d.available_for_run;
          row["requires_ownership"] = d.requires_ownership;
          row["acquires_ownership"] = d.acquires_ownership;
          row["releases_ownership"] = d.releases_ownership;
          row["overrides_ownership"] = d.overrides_ownership;
          return row;
        };
        table[py::none()] = describe(Definition(std::nullopt));
        for (InvocationStatus s : AllStatuses()) table[py::cast(s)] = describe(Definition(s));
        return table;
      },
      "The status machine as a dict: status (None = not registered yet) -> definition dict\n"
      "with allowed_transitions and the ownership flags, shaped like pynenc's StatusDefinition.");

  m.def(
      "apply_transition",
      [](std::optional<InvocationStatus> current, std::optional<std::string> current_owner,
         InvocationStatus to, std::optional<std::string> runner_id) {
        std::optional<StatusRecord> record;
        if (current) record = StatusRecord{*current, current_owner, 0};
        StatusRecord next = Unwrap(ApplyTransition(record, to, runner_id, 0));
        return py::make_tuple(py::cast(next.status), py::cast(next.runner_id));
      },
      py::arg("current"), py::arg("current_owner"), py::arg("to"), py::arg("runner_id"),
      "Applies the status machine to one transition without storing anything.\n"
      "Returns (new_status, new_owner); raises IllegalTransition or OwnershipViolation.");
}

}  // namespace pynenc_cpp::bindings
