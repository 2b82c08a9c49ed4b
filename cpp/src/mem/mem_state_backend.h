// Factory of the in-memory state backend (concrete class in mem_state_backend.cc)
// and the process-wide app-info registry that memory:// discovery reads.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/ports/state_backend.h"

namespace pynenc_cpp {

// Thread-safe: one reader/writer lock per backend. Every record lives in the
// returned object and dies with it, except app infos, which go to the registry
// shared by the whole process (so that discovery, which has no app, finds them).
std::unique_ptr<StateBackend> NewMemStateBackend(const BackendConfig& config);

// Every (app_id, app_info_json) registered by any memory backend of this
// process, ascending by app id. Thread-safe.
std::vector<std::pair<std::string, std::string>> MemDiscoverAppInfos();

}  // namespace pynenc_cpp
