// fuzz-sources: cpp/src/cluster/transport/record.cc cpp/src/cluster/transport/handshake.cc cpp/src/cluster/transport/frame.cc
// fuzz-libs: -lcrypto
//
// The sealed record layer on arbitrary input. Input: [u8 mode][u8 position][bytes...].
// Beyond "no crash, no sanitizer report":
//   mode even: the bytes, decoded as a stream of frames, are opened in order by
//     one connection's opener; none may open (nobody without the key can seal).
//   mode odd: the bytes are a payload sealed and opened again (it must round
//     trip exactly), then the record is altered at `position` and must not open.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/transport/frame.h"
#include "cluster/transport/record.h"

namespace tp = pynenc_cpp::cluster::transport;

namespace {
const tp::RecordKey& Key() {
  static const tp::RecordKey key = [] {
    tp::Transcript t;
    t.cluster_name = "fuzz";
    t.client_address = "127.0.0.1:1";
    t.server_address = "127.0.0.1:2";
    return *tp::DeriveClientRecordKey("fuzz-secret", t);
  }();
  return key;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t mode = data[0];
  const std::size_t position = data[1];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  if (mode % 2 == 0) {
    tp::FrameDecoder decoder(4096 + tp::kRecordOverhead);
    auto frames = decoder.Feed(bytes);
    if (!frames.ok()) return 0;
    tp::RecordOpener opener(Key());
    for (auto& f : frames.value()) {
      if (opener.Open(std::move(f)).has_value()) __builtin_trap();
    }
    return 0;
  }
  tp::RecordSealer sealer(Key());
  const std::uint8_t type = static_cast<std::uint8_t>(16 + mode / 2);
  const std::string wire = sealer.Seal(type, bytes);
  if (wire.size() != tp::kFrameHeaderBytes + tp::kRecordOverhead + bytes.size()) __builtin_trap();
  tp::Frame sealed{tp::kSealed, wire.substr(tp::kFrameHeaderBytes)};
  tp::RecordOpener opener(Key());
  auto opened = opener.Open(sealed);
  if (!opened || opened->type != type || opened->body != bytes) __builtin_trap();
  tp::Frame altered = sealed;
  const std::size_t at = position % altered.body.size();
  altered.body[at] = static_cast<char>(altered.body[at] ^ (1 + mode % 255));
  tp::RecordOpener fresh(Key());
  if (fresh.Open(altered).has_value()) __builtin_trap();
  return 0;
}
