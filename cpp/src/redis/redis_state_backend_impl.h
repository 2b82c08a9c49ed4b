// Internal to the Redis state backend: what its source files share.
//   redis_state_backend.cc          the backend class, factory, app-info discovery
//   redis_state_backend_codec.cc    record packing, history positions
//   redis_state_backend_scripts.cc  the Lua scripts
// Not a public header; users go through redis_state_backend.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "pynenc_cpp/ports/state_backend.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis::state_impl {

// --- packing of records (redis_state_backend_codec.cc) ----------------------
// Each record is one string of fields, each "N" (absent) or "S<len>:<bytes>".
// Unpack* return nullopt for a malformed string.
std::string PackInvocation(const InvocationRecord& r);
std::optional<InvocationRecord> UnpackInvocation(const std::string& packed);
std::string PackRunner(const RunnerContextRecord& r);
std::optional<RunnerContextRecord> UnpackRunner(const std::string& packed);
std::string PackWorkflow(const WorkflowRecord& w);
std::optional<WorkflowRecord> UnpackWorkflow(const std::string& packed);

// --- history positions (redis_state_backend_codec.cc) -----------------------
// 16 lowercase hex digits; timestamps have their sign bit flipped so that
// negative ones sort first. A position is EncodeTs(ts) + Hex16(sequence).
std::string Hex16(std::uint64_t v);
std::string EncodeTs(TimestampUs ts);
inline constexpr std::size_t kPosLen = 32;
std::optional<HistoryPosition> DecodePos(const std::string& member);
// A history entry's stored value, "<status>|<json>", and its reading back.
std::string PackHistoryValue(const HistoryRecord& r);
std::optional<HistoryRecord> UnpackHistory(const std::string& pos, const std::string& id,
                                           const std::string& value);

// --- Lua scripts (redis_state_backend_scripts.cc; ARGV documented there) ----
const Script& UpsertScript();
const Script& ByWorkflowScript();
const Script& AddHistoriesScript();
const Script& GetHistoryScript();
const Script& HistoryRangeScript();
const Script& IdsInRangeScript();
const Script& StoreRunScript();
const Script& RunsOfTypeScript();
const Script& StoreSubScript();

}  // namespace pynenc_cpp::redis::state_impl
