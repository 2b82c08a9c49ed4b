// Factory of the in-memory journal (memory://).
#pragma once

#include <memory>

#include "pynenc_cpp/ports/journal.h"

namespace pynenc_cpp {
// Thread-safe. The data lives in the returned object only.
std::unique_ptr<Journal> NewMemJournal(const BackendConfig& config);
}  // namespace pynenc_cpp
