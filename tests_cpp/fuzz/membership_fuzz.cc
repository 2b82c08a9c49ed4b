// fuzz-sources: cpp/src/cluster/membership/messages.cc cpp/src/cluster/membership/membership.cc cpp/src/cluster/membership/membership_probe.cc cpp/src/cluster/membership/epoch.cc cpp/src/cluster/types.cc tests_cpp/cluster/sim/sim.cc
// fuzz-libs: -lcrypto
// libFuzzer target for the membership (SWIM) message decoder and for a live
// Membership fed the same bytes: the first input byte picks the message type
// (16..31), the rest is the payload. Malformed input must be rejected as a value
// (never a crash, never an out-of-bounds read); a well-formed one is re-encoded
// and must decode to the same message.
// Build: clang++ -std=c++20 -fsanitize=fuzzer,address,undefined -Icpp/include -Icpp/src
//        -Itests_cpp/cluster <fuzz-sources> tests_cpp/fuzz/membership_fuzz.cc -lcrypto
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "cluster/membership/messages.h"
#include "pynenc_cpp/cluster/membership.h"
#include "sim/sim.h"

using namespace pynenc_cpp::cluster;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t type = static_cast<std::uint8_t>(kMembershipTypeBase + (data[0] % 16));
  const std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);

  auto decoded = membership::DecodeMessage(type, payload);
  if (decoded.ok()) {
    const std::string again = membership::EncodeMessage(decoded.value());
    auto twice = membership::DecodeMessage(type, again);
    if (!twice.ok() || !(twice.value() == decoded.value())) std::abort();
  }

  // The protocol object must survive the same bytes (and whatever it sends back).
  sim::SimWorld world(1);
  Env& env = world.AddNode("10.0.0.1:7000");
  MembershipOptions o;
  o.cluster_name = decoded.ok() ? decoded.value().cluster_name : "c";
  o.self.id = "self";
  o.self.address = "10.0.0.1:7000";
  Membership m(env, o, [](const MemberEvent&) {});
  m.Start();
  m.OnFrame("10.0.0.2:7000", type, payload);
  world.RunFor(5'000);
  (void)m.Epoch();
  return 0;
}
