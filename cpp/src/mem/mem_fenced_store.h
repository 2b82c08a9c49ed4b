// Factory of the in-memory fenced store (memory://).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/fenced_store.h"

namespace pynenc_cpp {
// Thread-safe. The data lives in the returned object only.
std::unique_ptr<FencedStore> NewMemFencedStore(const BackendConfig& config);
}  // namespace pynenc_cpp
