// Factory of the in-memory orchestrator (the concrete class is internal:
// mem_orchestrator_impl.h, shared only by the mem_orchestrator*.cc files).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
// Thread-safe: one mutex guards all state; time from ClockOrReal(config).
std::unique_ptr<Orchestrator> NewMemOrchestrator(const BackendConfig& config);
}  // namespace pynenc_cpp
