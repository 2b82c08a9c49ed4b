// The consumed queues of a runner's heartbeat row, stored as one string of
// netstring-like items "<byte length>:<bytes>" back to back, so that any queue
// name round-trips (Redis and SQLite orchestrators).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::queue_codec {

std::string Encode(const std::vector<std::string>& queues);
// The queues of `text`; when it is not a whole sequence of items,
// kBackendFailure "<malformed> '<text>'" (`malformed` names the row).
Result<std::vector<std::string>> Decode(const std::string& text, std::string_view malformed);

}  // namespace pynenc_cpp::queue_codec
