// The Redis lifecycle's wait for a final status (Lifecycle::WaitAnyFinal,
// redis/redis_lifecycle_reads.cc): the registration script that also reads
// the record of an id already final, and the record a final-status note carries
// (the finish script's, docs/backends/redis.md). Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/native/lifecycle.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::native {

// The longest result a final-status note carries (the finish script's last
// argument): a waiter for a larger one reads it on its own. Each waiter's note
// holds a copy for at most 60 s.
inline constexpr std::size_t kNoteResultBytes = 16 * 1024;

// Runs the registration of a fresh `token` for `ids` (kept at least `ttl_ms`) in
// the app of the orchestrator prefix `po` and state prefix `ps`, reading an id
// already final instead (with a SUCCESS result up to `max_result_bytes`). Its
// reply: nil (registered) or {id, st, ts, own|nil[, result]} (an id already
// final). kBackendFailure for an error reply.
Result<redis::Value> RegisterFinalWait(redis::Client& client, const std::string& po,
                                       const std::string& ps,
                                       const std::vector<InvocationId>& ids,
                                       const std::string& token, std::int64_t ttl_ms,
                                       std::size_t max_result_bytes);

// The registration's reply for an id already final. `read` is empty when the
// stored record is damaged (the caller's own read then reports it).
Result<FinalWait> AlreadyFinal(const redis::Value& reply);

// The record a note carries after the id (ParseFinalNote's `extra`): "<st>:<ts>:"
// then "r" and a SUCCESS result, or "n". nullopt for anything else (a note that
// carries nothing, or one this engine cannot read: the caller reads the record).
std::optional<FinalRead> ParseNoteRecord(const std::string& extra);

}  // namespace pynenc_cpp::native
