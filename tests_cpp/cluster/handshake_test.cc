#include "cluster/transport/handshake.h"

#include <gtest/gtest.h>

#include "cluster/transport/address.h"

namespace pynenc_cpp::cluster::transport {
namespace {

Transcript Sample() {
  Transcript t;
  t.cluster_name = "c1";
  t.client_address = "127.0.0.1:1000";
  t.server_address = "127.0.0.1:2000";
  t.client_nonce.fill(1);
  t.server_nonce.fill(2);
  return t;
}

TEST(Handshake, MessagesRoundTrip) {
  Hello h;
  h.cluster_name = "prod";
  h.client_address = "[::1]:7000";
  h.client_nonce.fill(9);
  Hello h2;
  ASSERT_TRUE(ParseHello(EncodeHello(h), h2));
  EXPECT_EQ(h2.cluster_name, "prod");
  EXPECT_EQ(h2.client_address, "[::1]:7000");
  EXPECT_EQ(h2.client_nonce, h.client_nonce);
  EXPECT_EQ(h2.version, kProtocolVersion);

  Challenge c;
  c.server_address = "10.0.0.1:1";
  c.server_nonce.fill(3);
  Challenge c2;
  ASSERT_TRUE(ParseChallenge(EncodeChallenge(c), c2));
  EXPECT_EQ(c2.server_address, c.server_address);
  EXPECT_EQ(c2.server_nonce, c.server_nonce);

  Proof p;
  p.mac.fill(0xab);
  Proof p2;
  ASSERT_TRUE(ParseProof(EncodeProof(p), p2));
  EXPECT_EQ(p2.mac, p.mac);
}

TEST(Handshake, ParsersRejectTruncationTrailingBytesAndOversizeFields) {
  Hello h;
  h.cluster_name = "x";
  h.client_address = "a:1";
  const std::string body = EncodeHello(h);
  Hello out;
  for (std::size_t n = 0; n < body.size(); ++n) EXPECT_FALSE(ParseHello(body.substr(0, n), out));
  EXPECT_FALSE(ParseHello(body + "z", out));
  h.cluster_name = std::string(kMaxClusterNameBytes + 1, 'n');
  EXPECT_FALSE(ParseHello(EncodeHello(h), out));
  Proof p;
  EXPECT_FALSE(ParseProof(std::string(31, 'a'), p));
  EXPECT_FALSE(ParseProof(std::string(33, 'a'), p));
  Challenge c;
  EXPECT_FALSE(ParseChallenge("", c));
}

TEST(Handshake, EveryMessageFitsTheHandshakeFrameLimit) {
  Hello h;
  h.cluster_name = std::string(kMaxClusterNameBytes, 'n');
  h.client_address = std::string(kMaxAddressBytes, 'a');
  EXPECT_LE(EncodeHello(h).size(), kMaxHandshakeBodyBytes);
  Challenge c;
  c.server_address = std::string(kMaxAddressBytes, 'a');
  EXPECT_LE(EncodeChallenge(c).size(), kMaxHandshakeBodyBytes);
}

TEST(Handshake, ProofIsHmacSha256OfTheDocumentedInput) {
  // The proof must change with every transcript field and with the label.
  const Transcript t = Sample();
  const auto base = ComputeProof("secret", kClientLabel, t);
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(ComputeProof("secret", kClientLabel, t), base);
  EXPECT_NE(ComputeProof("secret", kServerLabel, t), base) << "labels must separate directions";
  EXPECT_NE(ComputeProof("other", kClientLabel, t), base);
  auto vary = [&](auto mutate) {
    Transcript u = t;
    mutate(u);
    return ComputeProof("secret", kClientLabel, u);
  };
  EXPECT_NE(vary([](Transcript& u) { u.cluster_name = "c2"; }), base);
  EXPECT_NE(vary([](Transcript& u) { u.client_address = "127.0.0.1:1001"; }), base);
  EXPECT_NE(vary([](Transcript& u) { u.server_address = "127.0.0.1:2001"; }), base);
  EXPECT_NE(vary([](Transcript& u) { u.client_nonce[0] ^= 1; }), base);
  EXPECT_NE(vary([](Transcript& u) { u.server_nonce[31] ^= 1; }), base);
  EXPECT_NE(vary([](Transcript& u) { u.version = 1; }), base);
  // Length prefixes keep field boundaries: moving a byte between two fields changes the proof.
  EXPECT_NE(vary([](Transcript& u) {
              u.cluster_name = "c";
              u.client_address = "1127.0.0.1:1000";
            }),
            base);
  EXPECT_FALSE(ComputeProof("", kClientLabel, t).has_value()) << "there is no empty key";
  EXPECT_FALSE(ComputeProof("", kServerLabel, t).has_value()) << "there is no empty key";
}

TEST(Handshake, ProofMatchesAKnownVector) {
  // Computed independently (Python hmac/hashlib) from the byte layout in
  // docs/cluster/transport.md, so the code and the document cannot drift apart.
  const auto mac = ComputeProof("secret", kClientLabel, Sample());
  ASSERT_TRUE(mac.has_value());
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : *mac) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  EXPECT_EQ(hex, "76aa4f5b8b1ff525d0e87b83168d1b71b0406ac574913e799f90c1a23b0d3bc3");
}

TEST(Handshake, ProofsEqualComparesAllBytes) {
  Mac a{};
  Mac b{};
  EXPECT_TRUE(ProofsEqual(a, b));
  b[31] = 1;
  EXPECT_FALSE(ProofsEqual(a, b));
}

TEST(Handshake, NoncesAreRandom) {
  Nonce a{};
  Nonce b{};
  ASSERT_TRUE(RandomNonce(a));
  ASSERT_TRUE(RandomNonce(b));
  EXPECT_NE(a, b);
}

TEST(TransportAddress, ParsesAndFormats) {
  auto a = ParseAddress("127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().host, "127.0.0.1");
  EXPECT_EQ(a.value().port, 8080);
  auto b = ParseAddress("[::1]:9");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().host, "::1");
  EXPECT_EQ(FormatAddress("::1", 9), "[::1]:9");
  EXPECT_EQ(FormatAddress("node-a", 1), "node-a:1");
  for (const char* bad : {"", "host", ":1", "h:", "h:65536", "h:1x", "::1:5", "[::1:5", "h:-1"}) {
    EXPECT_FALSE(ParseAddress(bad).ok()) << bad;
  }
}

TEST(TransportAddress, LoopbackHosts) {
  for (const char* h : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "128.0.0.1", "::", "example.com", "localhost2"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace pynenc_cpp::cluster::transport
