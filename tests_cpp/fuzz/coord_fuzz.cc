// fuzz-sources: cpp/src/cluster/coordinator/messages.cc cpp/src/cluster/coordinator/spec_codec.cc
// (the decoders use only header-only parts of specs.h and core/error.h; keep the
// line above within 100 columns so that clang-format leaves it whole.)
// libFuzzer target for the coordinator wire (frame types 48..57 and 64..68) and
// the spec / statuses / view codecs. The first byte picks the message type (a
// valid type byte is used as is, any other byte picks one of the 15 types); the
// rest is the payload. Malformed input must be rejected as a value (never a
// crash, never an out-of-bounds read); a decoded message is re-encoded and must
// decode to the same message (and, for frames, to the same bytes). The whole
// input and the payload are also fed to DecodeSpec, DecodeStatuses and
// DecodeView under the same rule.
// Build: see scripts/fuzz.sh (clang++ -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster/coordinator/messages.h"
#include "cluster/coordinator/spec_codec.h"

namespace {

namespace cw = pynenc_cpp::cluster::coord_wire;
namespace codec = pynenc_cpp::cluster::codec;

constexpr std::uint8_t kTypes[] = {cw::kCommand,       cw::kAck,          cw::kReport,
                                   cw::kReportRequest, cw::kLeaseRequest, cw::kLeaseReply,
                                   cw::kLeaseRelease,  cw::kDirectory,    cw::kClientRequest,
                                   cw::kClientReply,   cw::kActorMessage, cw::kActorReply,
                                   cw::kPathMessage,   cw::kLabelEnvelope, cw::kLabelAck};
constexpr std::size_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);

void CheckMessage(std::uint8_t type, std::string_view payload) {
  auto decoded = cw::Decode(type, payload);
  if (!decoded.ok()) return;
  auto [t, bytes] = cw::Encode(decoded.value());
  if (t != type || bytes != payload) std::abort();  // the wire encoding is canonical
  auto again = cw::Decode(t, bytes);
  if (!again.ok() || !(again.value() == decoded.value())) std::abort();
}

void CheckCodecs(std::string_view bytes) {
  if (auto spec = codec::DecodeSpec(bytes); spec.ok()) {
    auto again = codec::DecodeSpec(codec::EncodeSpec(spec.value()));
    if (!again.ok() || !(again.value() == spec.value())) std::abort();
  }
  if (auto st = codec::DecodeStatuses(bytes); st.ok()) {
    auto again = codec::DecodeStatuses(codec::EncodeStatuses(st.value()));
    if (!again.ok() || !(again.value() == st.value())) std::abort();
  }
  if (auto view = codec::DecodeView(bytes); view.ok()) {
    auto again = codec::DecodeView(codec::EncodeView(view.value()));
    if (!again.ok() || !(again.value() == view.value())) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::string_view payload = all.substr(1);
  const std::uint8_t raw = data[0];
  const bool valid = cw::IsCoordinatorType(raw) || cw::IsActorType(raw);
  if (!valid) {
    // An unknown type is refused whatever the payload.
    if (cw::Decode(raw, payload).ok()) std::abort();
  }
  CheckMessage(valid ? raw : kTypes[raw % kTypeCount], payload);
  CheckCodecs(all);
  CheckCodecs(payload);
  return 0;
}
