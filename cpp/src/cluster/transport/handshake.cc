#include "cluster/transport/handshake.h"

#include <climits>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "cluster/wire.h"

namespace pynenc_cpp::cluster::transport {

namespace {

std::string_view View(const std::array<unsigned char, 32>& a) {
  return {reinterpret_cast<const char*>(a.data()), a.size()};
}

bool ReadArray(wire::ByteReader& r, std::array<unsigned char, 32>& out) {
  std::string s;
  if (!r.Raw(s, out.size())) return false;
  std::copy(s.begin(), s.end(), out.begin());
  return true;
}

}  // namespace

std::string EncodeHello(const Hello& m) {
  wire::ByteWriter w;
  w.U16(m.version);
  w.Str(m.cluster_name);
  w.Str(m.client_address);
  w.Raw(View(m.client_nonce));
  return std::move(w).Take();
}

std::string EncodeChallenge(const Challenge& m) {
  wire::ByteWriter w;
  w.U16(m.version);
  w.Str(m.server_address);
  w.Raw(View(m.server_nonce));
  return std::move(w).Take();
}

std::string EncodeProof(const Proof& m) { return std::string(View(m.mac)); }

bool ParseHello(std::string_view body, Hello& out) {
  wire::ByteReader r(body);
  r.U16(out.version);
  r.Str(out.cluster_name, kMaxClusterNameBytes);
  r.Str(out.client_address, kMaxAddressBytes);
  ReadArray(r, out.client_nonce);
  return r.done();
}

bool ParseChallenge(std::string_view body, Challenge& out) {
  wire::ByteReader r(body);
  r.U16(out.version);
  r.Str(out.server_address, kMaxAddressBytes);
  ReadArray(r, out.server_nonce);
  return r.done();
}

bool ParseProof(std::string_view body, Proof& out) {
  wire::ByteReader r(body);
  ReadArray(r, out.mac);
  return r.done();
}

std::optional<Mac> ComputeProof(std::string_view secret, std::string_view label,
                                const Transcript& t) {
  wire::ByteWriter w;
  w.Str(label);
  w.U16(t.version);
  w.Str(t.cluster_name);
  w.Str(t.client_address);
  w.Str(t.server_address);
  w.Raw(View(t.client_nonce));
  w.Raw(View(t.server_nonce));
  const std::string& msg = w.data();
  // No empty key: anyone can compute a proof with it. nullopt makes every
  // caller refuse the handshake.
  if (secret.empty() || secret.size() > static_cast<std::size_t>(INT_MAX)) return std::nullopt;
  Mac mac{};
  unsigned int len = 0;
  const auto* key = reinterpret_cast<const unsigned char*>(secret.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac.data(),
           &len) == nullptr ||
      len != mac.size()) {
    return std::nullopt;
  }
  return mac;
}

bool ProofsEqual(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool RandomNonce(Nonce& out) { return RAND_bytes(out.data(), static_cast<int>(out.size())) == 1; }

}  // namespace pynenc_cpp::cluster::transport
