#include "pynenc_cpp/ports/client_data_store.h"

#include "conversions.h"
#include "init.h"

namespace pynenc_cpp::bindings {

void InitClientDataStore(py::module_& m) {
  py::class_<ClientDataStore, std::shared_ptr<ClientDataStore>>(m, "ClientDataStore",
                              "Key -> serialized value store for large task data (thread-safe).")
      .def(OpenFromUri(&OpenClientDataStore), py::arg("uri") = "memory://",
           py::arg("app_id") = "pynenc",
           "Opens the store named by `uri` for `app_id`. Raises BadConfig for an unusable URI.")
      .def(
          "store",
          [](ClientDataStore& s, std::string key, std::string value) {
            WithoutGil([&] { return s.Store(key, value); });
          },
          py::arg("key"), py::arg("value"), "Stores `value` under `key`, replacing any old value.")
      .def(
          "retrieve",
          [](ClientDataStore& s, std::string key) {
            return WithoutGil([&] { return s.Retrieve(key); });
          },
          py::arg("key"), "The value under `key`; raises InvocationNotFound (a KeyError) if none.")
      .def(
          "purge", [](ClientDataStore& s) { WithoutGil([&] { return s.Purge(); }); },
          "Removes every key.");
}

}  // namespace pynenc_cpp::bindings
