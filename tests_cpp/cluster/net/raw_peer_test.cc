// A hand-driven TCP client against a real AsioEnv: oversize headers (before and
// after an authenticated handshake), garbage, malformed handshakes and the
// handshake timeout. Each must close that connection and leave the env working.
#include <gtest/gtest.h>

#include "net/net_test_util.h"

namespace pynenc_cpp::cluster {
namespace {

using nettest::Collector;
using nettest::Options;
using nettest::RawClient;
using nettest::WaitUntil;
namespace tp = transport;

std::string LengthOnly(std::uint32_t length) {
  std::string h;
  for (int i = 3; i >= 0; --i) h.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  return h;
}

class RawPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto o = Options("raw-secret", "raw");
    o.max_frame_bytes = 4096;
    o.handshake_timeout_ms = 2'000;
    auto r = MakeAsioEnv(o, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().message();
    env_ = std::move(r).value();
    env_->SetReceiver(got_.AsReceiver());
    port_ = nettest::PortOf(env_->LocalAddress());
  }

  // The env still authenticates and delivers for a well-behaved peer.
  void ExpectStillServes() {
    RawClient ok(port_);
    ASSERT_TRUE(ok.connected());
    ASSERT_TRUE(ok.Handshake("raw-secret", "raw", "127.0.0.1:9"));
    const std::size_t before = got_.Count();
    ASSERT_FALSE(ok.SendSealed(16, "still here").empty());
    ASSERT_TRUE(WaitUntil([&] { return got_.Count() == before + 1; }));
    EXPECT_EQ(got_.Snapshot().back().payload, "still here");
  }

  std::unique_ptr<AsioEnv> env_;
  Collector got_;
  std::uint16_t port_ = 0;
};

TEST_F(RawPeer, OversizeHeaderBeforeTheHandshakeClosesWithoutTheBody) {
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  // Announce a 1 GiB frame: send the 4 length bytes and nothing else, ever.
  ASSERT_TRUE(c.Send(LengthOnly(1u << 30)));
  EXPECT_TRUE(c.WaitClosed()) << "closed on the header alone";
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().frames_oversize == 1; }));
  EXPECT_EQ(env_->Stats().handshakes_rejected, 1u);
  ExpectStillServes();
}

TEST_F(RawPeer, OversizeHeaderAfterAnAuthenticatedHandshakeClosesWithoutTheBody) {
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Handshake("raw-secret", "raw", "127.0.0.1:7777"));
  ASSERT_FALSE(c.SendSealed(30, "hello").empty());
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  // `from` is the address the handshake authenticated, not the socket's port.
  EXPECT_EQ(got_.Snapshot()[0].from, "127.0.0.1:7777");
  EXPECT_EQ(got_.Snapshot()[0].type, 30);
  // max_frame_bytes is 4096; announce 1 GiB and never send the body.
  ASSERT_TRUE(c.Send(LengthOnly(1u << 30)));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().frames_oversize == 1; }));
  EXPECT_EQ(env_->Stats().handshakes_rejected, 0u);
  EXPECT_EQ(got_.Count(), 1u);
  ExpectStillServes();
}

TEST_F(RawPeer, FrameJustOverTheLimitAfterTheHandshakeIsRejected) {
  RawClient c(port_);
  ASSERT_TRUE(c.Handshake("raw-secret", "raw", "127.0.0.1:7778"));
  ASSERT_FALSE(c.SendSealed(16, std::string(4096, 'a')).empty());
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  (void)c.SendSealed(16, std::string(4097, 'b'));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().frames_oversize == 1; }));
  EXPECT_EQ(got_.Count(), 1u);
}

TEST_F(RawPeer, GarbageIsRefused) {
  const std::vector<std::string> inputs = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",                     // length 0x47455420: oversize
      std::string("\x00\x00\x00\x01", 4),                      // length 1: malformed
      std::string("\x00\x00\x00\x05\x07", 5),                  // version 7
      tp::EncodeFrame(16, "protocol frame before handshake"),  // wrong type
      tp::EncodeFrame(tp::kHello, "short"),                    // bad hello body
      tp::EncodeFrame(tp::kAuth, std::string(32, 'x')),        // auth before hello
  };
  std::uint64_t refused = 0;
  for (const auto& bytes : inputs) {
    RawClient c(port_);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(bytes));
    EXPECT_TRUE(c.WaitClosed()) << "input #" << refused;
    ++refused;
    EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == refused; }));
  }
  const auto s = env_->Stats();
  EXPECT_EQ(s.frames_oversize, 1u);
  EXPECT_EQ(s.frames_malformed, inputs.size() - 1);
  EXPECT_EQ(got_.Count(), 0u);
  ExpectStillServes();
}

TEST_F(RawPeer, WrongProofIsRefusedAndTheServerNeverProvesItselfFirst) {
  RawClient c(port_);
  tp::Hello h;
  h.cluster_name = "raw";
  h.client_address = "127.0.0.1:1";
  ASSERT_TRUE(tp::RandomNonce(h.client_nonce));
  ASSERT_TRUE(c.Send(tp::EncodeFrame(tp::kHello, tp::EncodeHello(h))));
  auto ch = c.ReadFrame();
  ASSERT_TRUE(ch.has_value());
  ASSERT_EQ(ch->type, tp::kChallenge);
  tp::Challenge parsed;
  ASSERT_TRUE(tp::ParseChallenge(ch->body, parsed));
  EXPECT_EQ(parsed.server_address, env_->LocalAddress());
  // A proof made with another secret.
  tp::Transcript t;
  t.cluster_name = "raw";
  t.client_address = h.client_address;
  t.server_address = parsed.server_address;
  t.client_nonce = h.client_nonce;
  t.server_nonce = parsed.server_nonce;
  ASSERT_TRUE(c.Send(tp::EncodeFrame(
      tp::kAuth, tp::EncodeProof(tp::Proof{*tp::ComputeProof("guess", tp::kClientLabel, t)}))));
  EXPECT_FALSE(c.ReadFrame().has_value()) << "no kAccept (and no server proof) for a bad client";
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == 1; }));
  ExpectStillServes();
}

TEST_F(RawPeer, WrongSecretFromARawClientIsRefused) {
  RawClient c(port_);
  EXPECT_FALSE(c.Handshake("not-the-secret", "raw", "127.0.0.1:2"));
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == 1; }));
}

TEST_F(RawPeer, EmptyKeyFromARawClientIsRefusedAndNothingIsDelivered) {
  // An outsider on loopback follows the documented handshake with an empty key
  // (the key every local process could compute), then sends a protocol frame.
  RawClient c(port_);
  EXPECT_FALSE(c.Handshake("", "raw", "127.0.0.1:6"));
  (void)c.Send(tp::EncodeFrame(16, "payload"));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == 1; }));
  EXPECT_EQ(env_->Stats().frames_received, 0u);
  EXPECT_EQ(got_.Count(), 0u) << "not a single frame delivered";
}

TEST_F(RawPeer, OutsiderProofMatchesTheEnginesForARealKey) {
  // The outsider's independent HMAC is the documented one: with the real secret
  // it is accepted, so the empty-key refusal above is the key's doing.
  RawClient c(port_);
  EXPECT_TRUE(c.Handshake("raw-secret", "raw", "127.0.0.1:8"));
}

TEST_F(RawPeer, SilentClientIsClosedAtTheHandshakeTimeout) {
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == 1; }));
}

TEST(RawPeerLimits, BeyondThePendingHandshakeLimitTheOldestPendingOneIsEvicted) {
  auto o = Options("raw-secret", "raw");
  o.max_pending_handshakes = 2;
  o.handshake_timeout_ms = 60'000;  // silent clients stay pending for the whole test
  auto r = MakeAsioEnv(o, nullptr);
  ASSERT_TRUE(r.ok());
  auto env = std::move(r).value();
  const auto port = nettest::PortOf(env->LocalAddress());
  // Accepted in connect order: a and b take the two slots; c evicts a.
  RawClient a(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // accepted before b and c
  RawClient b(port);
  RawClient c(port);
  ASSERT_TRUE(a.connected() && b.connected() && c.connected());
  EXPECT_TRUE(a.WaitClosed()) << "the oldest pending handshake is closed";
  EXPECT_TRUE(WaitUntil([&] { return env->Stats().handshakes_rejected == 1; }));
  // A real peer always gets in: it evicts b and completes its handshake.
  RawClient d(port);
  EXPECT_TRUE(d.Handshake("raw-secret", "raw", "127.0.0.1:4"));
  EXPECT_TRUE(b.WaitClosed());
  // An authenticated connection no longer holds a slot.
  RawClient e(port);
  EXPECT_TRUE(e.Handshake("raw-secret", "raw", "127.0.0.1:5"));
}

// A flood of idle sockets, re-opened as fast as they are closed, plus junk
// frames: a peer still completes its handshake every time, frames from it are
// delivered, and the refusal warnings stay within their rate limit.
TEST(RawPeerLimits, AFloodOfIdleSocketsAndJunkKeepsNoPeerOutAndDoesNotFloodTheLog) {
  auto o = Options("raw-secret", "raw");
  o.max_pending_handshakes = 16;
  o.max_pending_handshakes_per_source = 16;
  o.handshake_timeout_ms = 60'000;
  o.refusal_logs_per_second = 5;
  nettest::LogCollector logs;
  auto r = MakeAsioEnv(o, logs.Sink());
  ASSERT_TRUE(r.ok());
  auto env = std::move(r).value();
  nettest::Collector got;
  env->SetReceiver(got.AsReceiver());
  const auto port = nettest::PortOf(env->LocalAddress());
  std::vector<std::unique_ptr<RawClient>> flood;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 40; ++i) {
      flood.push_back(std::make_unique<RawClient>(port));
      if (i % 4 == 0) (void)flood.back()->Send(std::string("\x00\x00\x00\x05\x01\x01junk"));
    }
    RawClient peer(port);
    ASSERT_TRUE(peer.Handshake("raw-secret", "raw", "127.0.0.1:7")) << "round " << round;
    ASSERT_FALSE(peer.SendSealed(16, "through the flood").empty());
    ASSERT_TRUE(WaitUntil([&] { return got.Count() == static_cast<std::size_t>(round + 1); }));
  }
  EXPECT_GE(env->Stats().handshakes_rejected, 150u);
  EXPECT_LE(logs.CountContaining("connection from"), 5u * 4u) << "at most 5 per second";
}

TEST_F(RawPeer, TransportFrameTypeAfterTheHandshakeIsMalformed) {
  RawClient c(port_);
  ASSERT_TRUE(c.Handshake("raw-secret", "raw", "127.0.0.1:3"));
  ASSERT_TRUE(c.Send(tp::EncodeFrame(tp::kHello, "")));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().frames_malformed == 1; }));
  EXPECT_EQ(got_.Count(), 0u);
}

}  // namespace
}  // namespace pynenc_cpp::cluster
