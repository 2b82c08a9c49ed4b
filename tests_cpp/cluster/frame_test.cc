#include "cluster/transport/frame.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace pynenc_cpp::cluster::transport {
namespace {

std::string Header(std::uint32_t length, int version = 1, int type = 16) {
  std::string h;
  for (int i = 3; i >= 0; --i) h.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  if (version >= 0) h.push_back(static_cast<char>(version));
  if (type >= 0) h.push_back(static_cast<char>(type));
  return h;
}

TEST(FrameCodec, EncodeLayoutIsLengthVersionTypeBody) {
  const std::string f = EncodeFrame(0x21, "abc");
  ASSERT_EQ(f.size(), 9u);
  EXPECT_EQ(f, std::string("\x00\x00\x00\x05\x01\x21", 6) + "abc");
}

TEST(FrameCodec, RoundTripsInOneChunk) {
  FrameDecoder d(1024);
  const std::string bytes =
      EncodeFrame(16, "one") + EncodeFrame(17, "") + EncodeFrame(200, "three");
  auto r = d.Feed(bytes);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), (std::vector<Frame>{{16, "one"}, {17, ""}, {200, "three"}}));
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameCodec, AnyChunkingGivesTheSameFrames) {
  std::mt19937_64 rng(7);
  std::string bytes;
  std::vector<Frame> expected;
  for (int i = 0; i < 50; ++i) {
    std::string body(rng() % 300, static_cast<char>('a' + i % 26));
    expected.push_back({static_cast<std::uint8_t>(16 + i % 40), body});
    bytes += EncodeFrame(expected.back().type, body);
  }
  for (int round = 0; round < 20; ++round) {
    FrameDecoder d(300);
    std::vector<Frame> got;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      const std::size_t n = std::min<std::size_t>(bytes.size() - pos, rng() % 17);
      auto r = d.Feed(std::string_view(bytes).substr(pos, n));
      ASSERT_TRUE(r.ok()) << r.status().message();
      for (auto& f : r.value()) got.push_back(std::move(f));
      pos += n;
    }
    EXPECT_EQ(got, expected);
  }
}

TEST(FrameCodec, OversizeIsRejectedFromTheLengthAlone) {
  FrameDecoder d(1000);
  // 1 GiB announced; only the 4 length bytes are fed.
  auto r = d.Feed(Header(1u << 30, -1, -1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(d.error(), FrameError::kOversize);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameCodec, LimitIsInclusiveOfMaxBody) {
  FrameDecoder ok(10);
  auto r = ok.Feed(EncodeFrame(16, std::string(10, 'x')));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().size(), 1u);
  FrameDecoder over(10);
  EXPECT_FALSE(over.Feed(Header(13)).ok());  // body 11 > 10
  EXPECT_EQ(over.error(), FrameError::kOversize);
}

TEST(FrameCodec, OversizeSplitAcrossChunksIsSeenAtTheFourthByte) {
  FrameDecoder d(100);
  const std::string h = Header(0xffffffffu, -1, -1);
  ASSERT_TRUE(d.Feed(h.substr(0, 3)).ok());
  EXPECT_FALSE(d.Feed(h.substr(3, 1)).ok());
  EXPECT_EQ(d.error(), FrameError::kOversize);
}

TEST(FrameCodec, LengthBelowTwoIsMalformed) {
  for (std::uint32_t len : {0u, 1u}) {
    FrameDecoder d(100);
    EXPECT_FALSE(d.Feed(Header(len, -1, -1)).ok());
    EXPECT_EQ(d.error(), FrameError::kBadLength);
  }
}

TEST(FrameCodec, UnknownVersionIsRejectedBeforeTheBody) {
  FrameDecoder d(100);
  // Version byte 2, body never sent.
  EXPECT_FALSE(d.Feed(Header(50, 2, -1)).ok());
  EXPECT_EQ(d.error(), FrameError::kBadVersion);
}

TEST(FrameCodec, ErrorsAreFinalAndDiscardTheBatch) {
  FrameDecoder d(100);
  auto r = d.Feed(EncodeFrame(16, "fine") + Header(0, -1, -1));
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(d.Feed(EncodeFrame(16, "later")).ok());
  EXPECT_EQ(d.error(), FrameError::kBadLength);
}

TEST(FrameCodec, RaisingTheLimitAppliesToTheNextHeader) {
  FrameDecoder d(4);
  auto r = d.Feed(EncodeFrame(1, "abcd"));
  ASSERT_TRUE(r.ok());
  d.SetMaxBodyBytes(100);
  r = d.Feed(EncodeFrame(16, std::string(50, 'z')));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().size(), 1u);
  EXPECT_EQ(r.value()[0].body.size(), 50u);
}

TEST(FrameCodec, BuffersAtMostOneFrame) {
  FrameDecoder d(1000);
  const std::string f = EncodeFrame(16, std::string(1000, 'q'));
  ASSERT_TRUE(d.Feed(f.substr(0, 500)).ok());
  EXPECT_EQ(d.buffered(), 500u);
  auto r = d.Feed(f.substr(500) + f.substr(0, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().size(), 1u);
  EXPECT_EQ(d.buffered(), 3u);
}

}  // namespace
}  // namespace pynenc_cpp::cluster::transport
