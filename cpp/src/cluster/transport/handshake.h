// The transport handshake (pure, no I/O): message codecs and the HMAC-SHA256
// proofs. Four transport-internal frames open every connection:
//
//   client -> server  kHello      version, cluster name, client listen address, client nonce
//   server -> client  kChallenge  version, server listen address, server nonce
//   client -> server  kAuth       client proof = HMAC(secret, kClientLabel | transcript)
//   server -> client  kAccept     server proof = HMAC(secret, kServerLabel | transcript)
//
// The transcript binds the protocol version, the cluster name, both listen
// addresses and both nonces; the two labels differ, so a proof reflected back
// to its sender never verifies. The server proves itself only after the client
// has, so an unauthenticated client never obtains a proof. Byte layouts are in
// docs/cluster/transport.md.
//
// Thread safety: pure functions and value types.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster::transport {

// Frame types (< kFirstProtocolType, never delivered to a Receiver).
inline constexpr std::uint8_t kHello = 1;
inline constexpr std::uint8_t kChallenge = 2;
inline constexpr std::uint8_t kAuth = 3;
inline constexpr std::uint8_t kAccept = 4;

// 2: every frame after the handshake is a sealed record (record.h). A version-1
// peer is refused at HELLO/CHALLENGE with a clear "protocol version" log line.
inline constexpr std::uint16_t kProtocolVersion = 2;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;
inline constexpr std::size_t kMaxClusterNameBytes = 255;
inline constexpr std::size_t kMaxAddressBytes = 255;
// Frame body limit before a connection is authenticated (every handshake
// message fits in it).
inline constexpr std::size_t kMaxHandshakeBodyBytes = 1024;

inline constexpr std::string_view kClientLabel = "pynenc-cpp/transport/v1/client-proof";
inline constexpr std::string_view kServerLabel = "pynenc-cpp/transport/v1/server-proof";

using Nonce = std::array<unsigned char, kNonceBytes>;
using Mac = std::array<unsigned char, kMacBytes>;

struct Hello {
  std::uint16_t version = kProtocolVersion;
  std::string cluster_name;
  Address client_address;
  Nonce client_nonce{};
};

struct Challenge {
  std::uint16_t version = kProtocolVersion;
  Address server_address;
  Nonce server_nonce{};
};

// kAuth and kAccept bodies are exactly one MAC.
struct Proof {
  Mac mac{};
};

std::string EncodeHello(const Hello& m);
std::string EncodeChallenge(const Challenge& m);
std::string EncodeProof(const Proof& m);

// Each parser returns false (and leaves `out` unspecified) unless the body is
// exactly one well-formed message: fields within their limits, no trailing bytes.
bool ParseHello(std::string_view body, Hello& out);
bool ParseChallenge(std::string_view body, Challenge& out);
bool ParseProof(std::string_view body, Proof& out);

// Everything both proofs cover, as both ends know it after kChallenge.
struct Transcript {
  std::uint16_t version = kProtocolVersion;
  std::string cluster_name;
  Address client_address;
  Address server_address;
  Nonce client_nonce{};
  Nonce server_nonce{};
};

// HMAC-SHA256(secret, Str(label) | U16 version | Str(cluster) | Str(client
// address) | Str(server address) | client nonce | server nonce), where Str is a
// u32 big-endian length followed by the bytes. `label` is kClientLabel or
// kServerLabel. nullopt for an empty secret (there is no empty key: anyone
// could compute it) or if OpenSSL fails; callers then refuse the handshake.
std::optional<Mac> ComputeProof(std::string_view secret, std::string_view label,
                                const Transcript& t);
// Constant-time comparison (CRYPTO_memcmp).
bool ProofsEqual(const Mac& a, const Mac& b);

// Fills `out` from the OS CSPRNG (OpenSSL RAND_bytes). Returns false if it failed.
bool RandomNonce(Nonce& out);

}  // namespace pynenc_cpp::cluster::transport
