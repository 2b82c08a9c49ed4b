// fuzz-sources: cpp/src/cluster/lease/lease_codec.cc
// libFuzzer target: arbitrary bytes into the lease message decoder (types
// 32..47). The first byte picks the type; the rest is the payload. A decoded
// message must re-encode to exactly the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster/lease/lease_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t type = static_cast<std::uint8_t>(32 + (data[0] % 16));
  std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  auto decoded = pynenc_cpp::cluster::lease_wire::Decode(type, payload);
  if (decoded.ok()) {
    auto [t, bytes] = pynenc_cpp::cluster::lease_wire::Encode(decoded.value());
    if (t != type || bytes != payload) std::abort();
  }
  return 0;
}
