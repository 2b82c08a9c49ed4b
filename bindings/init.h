// One registration function per subsystem; module.cc calls each once.
#pragma once

#include <pybind11/pybind11.h>

namespace pynenc_cpp::bindings {
void InitCore(pybind11::module_& m);
void InitStructs(pybind11::module_& m);
void InitBroker(pybind11::module_& m);
void InitClientDataStore(pybind11::module_& m);
void InitOrchestrator(pybind11::module_& m);
void InitStateBackend(pybind11::module_& m);
void InitTrigger(pybind11::module_& m);
void InitLifecycle(pybind11::module_& m);
void InitStorage(pybind11::module_& m);
void InitRunner(pybind11::module_& m);
void InitCoordinator(pybind11::module_& m);
void InitCluster(pybind11::module_& m);
void InitReport(pybind11::module_& m);
}  // namespace pynenc_cpp::bindings
