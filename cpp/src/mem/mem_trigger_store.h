// Factory of the in-memory trigger store (the class lives in
// mem_trigger_store_impl.h, private to cpp/src/mem).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/trigger_store.h"

namespace pynenc_cpp {
// Thread-safe; all state guarded by one mutex. Time from ClockOrReal(config).
std::unique_ptr<TriggerStore> NewMemTriggerStore(const BackendConfig& config);
}  // namespace pynenc_cpp
