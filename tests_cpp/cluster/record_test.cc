// The sealed record layer (cluster/transport/record.h): a known-answer vector
// computed independently (Python's hmac + the `cryptography` package's AESGCM),
// round trips, and every way a record must fail to open.
#include <gtest/gtest.h>

#include <string>

#include "cluster/transport/record.h"

namespace pynenc_cpp::cluster::transport {
namespace {

std::string Hex(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Transcript Pinned() {
  Transcript t;
  t.cluster_name = "c1";
  t.client_address = "127.0.0.1:1000";
  t.server_address = "127.0.0.1:2000";
  t.client_nonce.fill(0x01);
  t.server_nonce.fill(0x02);
  return t;
}

RecordKey KeyFor(const std::string& secret, const Transcript& t) {
  auto k = DeriveClientRecordKey(secret, t);
  EXPECT_TRUE(k.has_value());
  return k.value_or(RecordKey{});
}

// Splits one encoded frame back into a Frame (the decoder's job on a socket).
Frame Decode(const std::string& bytes) {
  FrameDecoder d(1 << 20);
  auto r = d.Feed(bytes);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.value().size(), 1u);
  return r.value().empty() ? Frame{} : r.value()[0];
}

TEST(Record, KeyAndRecordsMatchAKnownVector) {
  const auto k = KeyFor("secret", Pinned());
  EXPECT_EQ(Hex({reinterpret_cast<const char*>(k.key.data()), k.key.size()}),
            "4680a2dbb85234579b639dde0df162e55169bcb1e0339c198724a16e3e7d38a8");
  EXPECT_EQ(Hex({reinterpret_cast<const char*>(k.iv.data()), k.iv.size()}),
            "20538c3ddb96acedf019a5f3");
  RecordSealer sealer(k);
  EXPECT_EQ(Hex(sealer.Seal(16, "abc")), "0000001601055c27ee2ee2b023c94b0031c6a9ba2cfeaebc2357");
  EXPECT_EQ(Hex(sealer.Seal(16, "abc")), "000000160105f6d05ffe8e079d188fce8b15833b41a978db3a57");
  EXPECT_EQ(sealer.next_sequence(), 2u);
}

TEST(Record, NoKeyFromAnEmptySecret) {
  EXPECT_FALSE(DeriveClientRecordKey("", Pinned()).has_value());
}

TEST(Record, EachConnectionHasItsOwnKey) {
  auto t = Pinned();
  const auto a = KeyFor("secret", t);
  t.server_nonce[31] ^= 1;
  const auto b = KeyFor("secret", t);
  EXPECT_NE(a.key, b.key);
  EXPECT_NE(KeyFor("other", Pinned()).key, a.key);
}

TEST(Record, RoundTripsInOrderIncludingEmptyAndLargePayloads) {
  const auto k = KeyFor("secret", Pinned());
  RecordSealer sealer(k);
  RecordOpener opener(k);
  const std::vector<std::string> payloads = {"", "x", std::string(256 * 1024, 'z'), "last"};
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    const std::string wire = sealer.Seal(static_cast<std::uint8_t>(16 + i), payloads[i]);
    ASSERT_EQ(wire.size(), kFrameHeaderBytes + kRecordOverhead + payloads[i].size());
    auto f = opener.Open(Decode(wire));
    ASSERT_TRUE(f.has_value()) << i;
    EXPECT_EQ(f->type, 16 + i);
    EXPECT_EQ(f->body, payloads[i]);
  }
  EXPECT_EQ(opener.next_sequence(), payloads.size());
}

TEST(Record, EveryFlippedBitFailsAndTheOpenerStaysAtItsPosition) {
  const auto k = KeyFor("secret", Pinned());
  RecordSealer sealer(k);
  const Frame good = Decode(sealer.Seal(40, "payload"));
  for (std::size_t byte = 0; byte < good.body.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      RecordOpener opener(k);
      Frame bad = good;
      bad.body[byte] = static_cast<char>(bad.body[byte] ^ (1 << bit));
      EXPECT_FALSE(opener.Open(bad).has_value()) << byte << ":" << bit;
      EXPECT_EQ(opener.next_sequence(), 0u);
    }
  }
  RecordOpener opener(k);
  EXPECT_TRUE(opener.Open(good).has_value());
}

TEST(Record, ReplayReorderTruncationAndOtherTypesFail) {
  const auto k = KeyFor("secret", Pinned());
  RecordSealer sealer(k);
  const Frame first = Decode(sealer.Seal(16, "one"));
  const Frame second = Decode(sealer.Seal(16, "two"));
  {
    RecordOpener opener(k);
    EXPECT_FALSE(opener.Open(second).has_value()) << "reordered";
    ASSERT_TRUE(opener.Open(first).has_value());
    EXPECT_FALSE(opener.Open(first).has_value()) << "replayed";
    EXPECT_TRUE(opener.Open(second).has_value());
  }
  RecordOpener opener(k);
  Frame cut = first;
  cut.body.pop_back();
  EXPECT_FALSE(opener.Open(cut).has_value()) << "truncated";
  Frame retyped = first;
  retyped.type = 16;
  EXPECT_FALSE(opener.Open(retyped).has_value()) << "not a sealed frame";
  EXPECT_FALSE(opener.Open(Frame{kSealed, std::string(kRecordOverhead - 1, 'a')}).has_value());
  EXPECT_FALSE(opener.Open(Frame{kSealed, ""}).has_value());
  RecordOpener stranger(KeyFor("other", Pinned()));
  EXPECT_FALSE(stranger.Open(first).has_value()) << "another key";
}

TEST(Record, SealInPlaceRefusesWhatIsNotAPreparedRecord) {
  RecordSealer sealer(KeyFor("secret", Pinned()));
  std::string not_prepared = EncodeFrame(16, "abc");
  EXPECT_FALSE(sealer.SealInPlace(not_prepared));
  std::string tiny = "abc";
  EXPECT_FALSE(sealer.SealInPlace(tiny));
  EXPECT_EQ(sealer.next_sequence(), 0u);
  std::string ok = PrepareRecord(16, "abc");
  EXPECT_TRUE(sealer.SealInPlace(ok));
  EXPECT_EQ(sealer.next_sequence(), 1u);
}

}  // namespace
}  // namespace pynenc_cpp::cluster::transport
