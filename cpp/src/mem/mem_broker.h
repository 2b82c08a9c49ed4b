// Factory of the in-memory broker (concrete class stays in mem_broker.cc).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/broker.h"

namespace pynenc_cpp {
// Thread-safe; blocking Retrieve wakes on Route or Interrupt.
std::unique_ptr<Broker> NewMemBroker(const BackendConfig& config);
}  // namespace pynenc_cpp
