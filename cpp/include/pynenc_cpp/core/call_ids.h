// pynenc's identifiers of a new call, computed natively, byte for byte as
// pynenc 0.4.0 computes them in Python (pynenc.call.compute_args_id and
// pynenc.identifiers.invocation_id.generate_invocation_id). A submit makes both;
// in Python they are ~15 us of a ~100 us submit
// (bench/results/2026-12-01-stop-47-submit-less-python.md).
//
// Thread safety: both functions are thread-safe and keep no state.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp {

// A new invocation id: a random (version 4, RFC 4122 variant) UUID in its
// 36-character lowercase text form, as str(uuid.uuid4()). The 122 random bits
// come from the kernel (getrandom), as os.urandom's do.
// Errors: kBackendFailure if the kernel gives no random bytes (never on Linux
// once its pool is initialized; an error, not a predictable id).
Result<std::string> NewInvocationId();

// pynenc's args_id of a call's serialized arguments (name -> serialized text,
// both UTF-8): "no_args" for none; else the lowercase hex SHA-256 of, for each
// name in code-point order, JSON(name) "=" JSON(text) ";", JSON being
// json.dumps(s, ensure_ascii=False) (only '"', '\\' and C0 controls escaped).
// REQUIRES: names are distinct (they are a dict's keys) and every string is
// valid UTF-8 (what a Python str without lone surrogates encodes to; the
// caller falls back to pynenc's own function otherwise).
std::string ArgsId(std::vector<std::pair<std::string, std::string>> serialized_arguments);

// json.dumps(s, ensure_ascii=False) of a UTF-8 string: `s` quoted, with '"',
// '\\', \b \f \n \r \t escaped as such and other C0 controls as \u00xx.
std::string JsonStringOf(const std::string& s);

}  // namespace pynenc_cpp
