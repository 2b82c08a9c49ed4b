// Factory of the in-memory generation source (memory://).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp {
// Thread-safe. The data lives in the returned object only: Shared() is false.
std::unique_ptr<GenerationSource> NewMemGenerationSource(const BackendConfig& config);
}  // namespace pynenc_cpp
