#include "pynenc_cpp/ports/storage.h"

#include "conversions.h"
#include "init.h"

namespace pynenc_cpp::bindings {

namespace {

const char* KindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kRedis:
      return "redis";
    case BackendKind::kSqlite:
      return "sqlite";
    case BackendKind::kMemory:
      break;
  }
  return "memory";
}

}  // namespace

void InitStorage(py::module_& m) {
  py::class_<Storage, std::shared_ptr<Storage>>(
      m, "Storage",
      "One app's storage (thread-safe): the Redis connection pool, the SQLite database or\n"
      "the process memory of one (URI, app id), and the ports and Lifecycles over it. Each\n"
      "port accessor returns the same object on every call; two Storages share nothing\n"
      "but what their server or file holds.")
      .def(
          py::init([](std::string uri, std::string app_id) {
            return Unwrap(Storage::Open(BackendConfig{std::move(uri), std::move(app_id), nullptr}));
          }),
          py::arg("uri") = "memory://", py::arg("app_id") = "pynenc",
          "Opens the storage named by `uri` for `app_id` (on redis:// a new connection\n"
          "pool, checked with PING; on sqlite:// the file, created if missing). Raises\n"
          "BadConfig for an unusable URI or app id, BackendConnectionError for an unreachable "
          "server.")
      .def_property_readonly(
          "uri", [](const Storage& s) { return RedactUri(s.config().uri); },
          "The URI, its password redacted.")
      .def_property_readonly(
          "app_id", [](const Storage& s) { return s.config().app_id; }, "The app id.")
      .def_property_readonly(
          "kind", [](const Storage& s) { return KindName(s.kind()); },
          "'memory', 'sqlite' or 'redis'.")
      .def(
          "broker", [](Storage& s) { return Unwrap(s.broker()); },
          "This storage's broker (the same object on every call).")
      .def(
          "state_backend", [](Storage& s) { return Unwrap(s.state_backend()); },
          "This storage's state backend (the same object on every call).")
      .def(
          "orchestrator", [](Storage& s) { return Unwrap(s.orchestrator()); },
          "This storage's orchestrator (the same object on every call).")
      .def(
          "trigger_store", [](Storage& s) { return Unwrap(s.trigger_store()); },
          "This storage's trigger store (the same object on every call).")
      .def(
          "client_data_store", [](Storage& s) { return Unwrap(s.client_data_store()); },
          "This storage's client-data store (the same object on every call).")
      .def(
          "lifecycle",
          [](Storage& s, bool with_trigger, std::string status_context, std::string result_context,
             std::string exception_context) {
            return Unwrap(s.NewLifecycle(
                with_trigger,
                TriggerContextNames{std::move(status_context), std::move(result_context),
                                    std::move(exception_context)}));
          },
          py::arg("with_trigger"), py::arg("status_context"), py::arg("result_context"),
          py::arg("exception_context"),
          "A new Lifecycle over this storage's orchestrator, state backend, broker and, if\n"
          "`with_trigger`, trigger store (without it every watched flag is True). The\n"
          "*_context names are the context types trigger conditions are registered under.");
}

}  // namespace pynenc_cpp::bindings
