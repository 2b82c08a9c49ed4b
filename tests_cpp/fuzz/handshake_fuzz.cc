// fuzz-sources: cpp/src/cluster/transport/handshake.cc
// fuzz-libs: -lcrypto
//
// Every handshake message parser on arbitrary bodies. Input: [u8 selector][body].
// Beyond "no crash": a body a parser accepts re-encodes to exactly itself (the
// encoding is canonical, so no two byte strings mean the same message), and the
// proof over what was parsed is computable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/transport/handshake.h"

namespace tp = pynenc_cpp::cluster::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  tp::Transcript t;
  switch (data[0] % 3) {
    case 0: {
      tp::Hello m;
      if (!tp::ParseHello(body, m)) return 0;
      if (tp::EncodeHello(m) != body) __builtin_trap();
      t.cluster_name = m.cluster_name;
      t.client_address = m.client_address;
      t.client_nonce = m.client_nonce;
      t.version = m.version;
      break;
    }
    case 1: {
      tp::Challenge m;
      if (!tp::ParseChallenge(body, m)) return 0;
      if (tp::EncodeChallenge(m) != body) __builtin_trap();
      t.server_address = m.server_address;
      t.server_nonce = m.server_nonce;
      t.version = m.version;
      break;
    }
    default: {
      tp::Proof m;
      if (!tp::ParseProof(body, m)) return 0;
      if (tp::EncodeProof(m) != body) __builtin_trap();
      return 0;
    }
  }
  const auto a = tp::ComputeProof("secret", tp::kClientLabel, t);
  const auto b = tp::ComputeProof("secret", tp::kServerLabel, t);
  if (!a || !b || tp::ProofsEqual(*a, *b)) __builtin_trap();
  return 0;
}
