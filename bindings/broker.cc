#include "pynenc_cpp/ports/broker.h"

#include <algorithm>

#include "conversions.h"
#include "init.h"

namespace pynenc_cpp::bindings {

void InitBroker(py::module_& m) {
  py::class_<Broker, std::shared_ptr<Broker>>(m, "Broker",
                     "Queues of invocation ids by name and priority (thread-safe).\n"
                     "Higher priority first; FIFO within one priority.")
      .def(OpenFromUri(&OpenBroker), py::arg("uri") = "memory://", py::arg("app_id") = "pynenc",
           "Opens the broker named by `uri` for `app_id`. Raises BadConfig for an unusable URI.")
      .def(
          "route",
          [](Broker& b, std::vector<InvocationId> ids, std::string queue, double priority) {
            WithoutGil([&] { return b.Route(ids, queue, priority); });
          },
          py::arg("invocation_ids"), py::arg("queue"), py::arg("priority") = 0.0,
          "Appends the ids, in order, to `queue` at `priority`; wakes waiting retrievers.")
      .def(
          "retrieve",
          [](Broker& b, std::string queue, double timeout_seconds) {
            if (!(timeout_seconds >= 0)) {
              throw EngineException(Status::InvalidArgument("timeout_seconds must be >= 0"));
            }
            // inf waits "for ever": clamped (~31 years) before the integer conversion.
            auto timeout_ms = static_cast<std::int64_t>(std::min(timeout_seconds, 1e9) * 1000.0);
            return WithoutGil([&] { return b.Retrieve(queue, timeout_ms); });
          },
          py::arg("queue"), py::arg("timeout_seconds") = 0.0,
          "Pops the next id of `queue`, waiting up to `timeout_seconds` (GIL released) for one.\n"
          "Returns None if nothing arrived in time or interrupt() was called.")
      .def(
          "count",
          [](Broker& b, std::vector<std::string> queues) {
            return WithoutGil([&] { return b.Count(queues); });
          },
          py::arg("queues"), "Number of ids waiting in `queues`, summed.")
      .def(
          "purge", [](Broker& b) { WithoutGil([&] { return b.Purge(); }); },
          "Drops every queued id.")
      .def(
          "interrupt",
          [](Broker& b) {
            GilRelease release;
            b.Interrupt();
          },
          "Wakes every retrieve() currently waiting; each returns None.");
}

}  // namespace pynenc_cpp::bindings
