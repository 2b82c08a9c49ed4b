// describe_backend: a backend's own report for `pynenc-cpp doctor`.
#include "conversions.h"
#include "init.h"
#include "pynenc_cpp/ports/backend_report.h"

namespace pynenc_cpp::bindings {

void InitReport(py::module_& m) {
  m.def(
      "describe_backend",
      [](std::string uri, std::string app_id) {
        BackendReport report = WithoutGil([&] {
          return DescribeBackend(BackendConfig{std::move(uri), std::move(app_id), nullptr});
        });
        py::dict out;
        out["backend"] = report.backend;
        py::list facts;
        for (const auto& [name, value] : report.facts) facts.append(py::make_tuple(name, value));
        out["facts"] = facts;
        out["errors"] = py::cast(report.errors);
        out["warnings"] = py::cast(report.warnings);
        return out;
      },
      py::arg("uri"), py::arg("app_id") = "pynenc",
      "What the backend `uri` names says about itself: {'backend': 'memory' | 'sqlite' |\n"
      "'redis', 'facts': [(name, value), ...], 'errors': [...], 'warnings': [...]}: an\n"
      "error for each setting that loses acknowledged work on an ordinary event (a\n"
      "restart, an eviction), a warning for advice (a loss only if the machine crashes).\n"
      "Never creates an SQLite file; raises\n"
      "BadConfig for a bad URI or a missing file, BackendError when unreachable.");
}

}  // namespace pynenc_cpp::bindings
