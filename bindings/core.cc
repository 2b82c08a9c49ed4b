// Core types: the status machine table and a transition check, exposed so that
// tests can compare them with pynenc's own table.
#include <utility>

#include "pynenc_cpp/core/call_ids.h"
#include "pynenc_cpp/core/spin_wait.h"

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
          for (const auto& [name, flag] : {
                   std::pair{"is_final", &StatusDefinition::is_final},
                   std::pair{"available_for_run", &StatusDefinition::available_for_run},
                   std::pair{"requires_ownership", &StatusDefinition::requires_ownership},
                   std::pair{"acquires_ownership", &StatusDefinition::acquires_ownership},
                   std::pair{"releases_ownership", &StatusDefinition::releases_ownership},
                   std::pair{"overrides_ownership", &StatusDefinition::overrides_ownership},
               }) {
            row[name] = d.*flag;
          }
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

  m.def(
      "engine_metrics",
      [] {
        const metrics::Snapshot s = metrics::Take();
        auto histogram = [](const metrics::HistogramSnapshot& h) {
          py::dict d;
          py::list bounds, buckets;
          for (std::int64_t b : metrics::kBucketBoundsUs) bounds.append(b);
          for (std::uint64_t n : h.buckets) buckets.append(n);
          d["bounds_us"] = bounds;
          d["buckets"] = buckets;
          d["count"] = h.count;
          d["sum_us"] = h.sum_us;
          return d;
        };
        py::dict entered;
        for (InvocationStatus st : AllStatuses()) {
          entered[py::cast(st)] = s.entered[static_cast<std::size_t>(st)];
        }
        py::dict d;
        d["enabled"] = metrics::Enabled();
        d["entered"] = entered;
        d["backend_errors"] = s.backend_errors;
        d["backend_errors_connection"] = s.backend_errors_connection;
        d["redis_connections_opened"] = s.redis_connections_opened;
        d["redis_connections_lost"] = s.redis_connections_lost;
        d["sqlite_busy_waits"] = s.sqlite_busy_waits;
        d["sqlite_busy_wait_us"] = s.sqlite_busy_wait_us;
        d["queue_wait"] = histogram(s.queue_wait);
        d["run_time"] = histogram(s.run_time);
        return d;
      },
      "A snapshot of this process's task-engine metrics (pynenc_cpp.metrics renders it):\n"
      "entered (status -> changes applied into it, registrations included), backend_errors,\n"
      "backend_errors_connection, redis_connections_opened, redis_connections_lost,\n"
      "sqlite_busy_waits, sqlite_busy_wait_us (SQLite lock contention), and the\n"
      "queue_wait / run_time histograms (bounds_us, per-bucket counts with +Inf last, count,\n"
      "sum_us).");
  m.def(
      "set_engine_metrics_enabled", [](bool enabled) { metrics::SetEnabled(enabled); },
      py::arg("enabled"), "Turns the engine's metric counting on or off (on by default).");

  m.def("spin_wait_us", &SpinWaitUs,
        "The process-wide spin budget in microseconds: how long a waiter polls before it\n"
        "sleeps (core/spin_wait.h; 0: never spins).");
  m.def(
      "set_spin_wait_us",
      [](std::int64_t us) {
        if (us < 0 || us > kMaxSpinWaitUs) {
          throw py::value_error("set_spin_wait_us: expected microseconds between 0 and " +
                                std::to_string(kMaxSpinWaitUs) + ", got " + std::to_string(us));
        }
        SetSpinWaitUs(us);
      },
      py::arg("us"),
      "Sets the process-wide spin budget (0 to 10000 us; ValueError otherwise).");
  m.def(
      "new_invocation_id", [] { return Unwrap(NewInvocationId()); },
      "A new invocation id: str(uuid.uuid4())'s form (36 characters, version 4), from the\n"
      "kernel's random bytes. Raises EngineError if the kernel gives none.");
  m.def(
      "args_id",
      [](const py::dict& serialized_arguments) {
        std::vector<std::pair<std::string, std::string>> pairs;
        pairs.reserve(serialized_arguments.size());
        for (auto [name, text] : serialized_arguments) {
          if (!PyUnicode_CheckExact(name.ptr()) || !PyUnicode_CheckExact(text.ptr())) {
            throw py::type_error("args_id: names and serialized texts must be str");
          }
          Py_ssize_t nn = 0, nt = 0;
          const char* n = PyUnicode_AsUTF8AndSize(name.ptr(), &nn);
          if (n == nullptr) throw py::error_already_set();  // a lone surrogate
          const char* t = PyUnicode_AsUTF8AndSize(text.ptr(), &nt);
          if (t == nullptr) throw py::error_already_set();
          pairs.emplace_back(std::string(n, static_cast<std::size_t>(nn)),
                             std::string(t, static_cast<std::size_t>(nt)));
        }
        return ArgsId(std::move(pairs));
      },
      py::arg("serialized_arguments"),
      "pynenc's compute_args_id (pynenc 0.4.0), byte for byte: 'no_args' for an empty dict,\n"
      "else the SHA-256 hex digest of JSON(name)=JSON(text); per name in sorted order.\n"
      "Raises TypeError for a name or text that is not a str, UnicodeEncodeError for one\n"
      "that has no UTF-8 form (a lone surrogate); callers then use pynenc's own function.");
}

}  // namespace pynenc_cpp::bindings
