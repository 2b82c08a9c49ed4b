// fuzz-sources: cpp/src/cluster/transport/frame.cc
//
// Feeds arbitrary bytes to FrameDecoder in input-chosen chunkings and limits.
// Input: [u8 limit selector][u8 chunk seed][stream...]. Checks, beyond "no
// crash, no sanitizer report": the decoder never holds more than one frame's
// worth of bytes, and while it reports no error the frames it returned
// re-encode to exactly the bytes consumed so far.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/transport/frame.h"

using pynenc_cpp::cluster::transport::EncodeFrame;
using pynenc_cpp::cluster::transport::FrameDecoder;
using pynenc_cpp::cluster::transport::FrameError;
using pynenc_cpp::cluster::transport::kFrameHeaderBytes;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  static const std::size_t kLimits[] = {0, 1, 7, 64, 1024, 256 * 1024};
  const std::size_t limit = kLimits[data[0] % 6];
  std::uint32_t seed = data[1] * 2654435761u + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data + 2), size - 2);

  FrameDecoder decoder(limit);
  std::string reencoded;
  std::size_t pos = 0;
  while (pos < stream.size()) {
    seed = seed * 1103515245u + 12345u;
    const std::size_t chunk = 1 + (seed >> 16) % 37;
    const std::size_t n = chunk < stream.size() - pos ? chunk : stream.size() - pos;
    auto r = decoder.Feed(stream.substr(pos, n));
    pos += n;
    if (!r.ok()) {
      if (decoder.error() == FrameError::kNone) __builtin_trap();
      if (decoder.Feed("x").ok()) __builtin_trap();  // errors are final
      return 0;
    }
    for (const auto& f : r.value()) {
      if (f.body.size() > limit) __builtin_trap();
      reencoded += EncodeFrame(f.type, f.body);
    }
    if (decoder.buffered() > limit + kFrameHeaderBytes) __builtin_trap();
    if (reencoded.size() + decoder.buffered() != pos) __builtin_trap();
    if (stream.substr(0, reencoded.size()) != reencoded) __builtin_trap();
  }
  return 0;
}
