// The reconnect delay of an outbound link (pure).
//
// Thread safety: a pure function.
#pragma once

#include <algorithm>
#include <cstdint>

namespace pynenc_cpp::cluster::transport {

// After `failures` (>= 1) consecutive failed attempts:
//   d = min(max_ms, initial_ms * 2^(failures - 1)),  delay uniform in [d/2, d]
// using `random` (any 64-bit value) for the jitter. Never overflows.
// REQUIRES: 0 < initial_ms <= max_ms.
inline std::int64_t BackoffDelayMs(std::int64_t initial_ms, std::int64_t max_ms, int failures,
                                   std::uint64_t random) {
  std::int64_t d = initial_ms;
  for (int i = 1; i < failures && d < max_ms; ++i) d = d > max_ms / 2 ? max_ms : d * 2;
  d = std::min(d, max_ms);
  const std::int64_t half = d / 2;
  return half + static_cast<std::int64_t>(random % static_cast<std::uint64_t>(d - half + 1));
}

}  // namespace pynenc_cpp::cluster::transport
