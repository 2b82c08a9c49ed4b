// A man in the middle between two real AsioEnvs: a test-driven TCP proxy sits on
// the address the server advertises (127.0.0.2:<port>; the server listens on
// 127.0.0.1:<port>), relays the handshake untouched (it cannot forge one without
// the secret), then injects, replays, alters or reorders frames of the
// established connection.
// Each must get the connection closed with nothing of it delivered; the frames
// relayed untouched are delivered (so the relay itself is faithful).
#include <gtest/gtest.h>

#include <openssl/rand.h>

#include "net/net_test_util.h"

namespace pynenc_cpp::cluster {
namespace {

using nettest::Collector;
using nettest::Options;
using nettest::RawClient;
using nettest::RawListener;
using nettest::WaitUntil;
namespace tp = transport;

std::string Reencode(const tp::Frame& f) { return tp::EncodeFrame(f.type, f.body); }

class Mitm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server_options = Options("mitm-secret", "mitm");
    server_options.advertise_host = "127.0.0.2";
    auto server = MakeAsioEnv(server_options, nullptr);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    proxy_ = std::make_unique<RawListener>("127.0.0.2", nettest::PortOf(server_->LocalAddress()));
    server_->SetReceiver(got_.AsReceiver());
    auto client = MakeAsioEnv(Options("mitm-secret", "mitm"), client_logs_.Sink());
    ASSERT_TRUE(client.ok()) << client.status().message();
    client_ = std::move(client).value();
    ASSERT_NE(proxy_->port(), 0);
  }

  // The client env dials the proxy; the proxy dials the server and relays the
  // four handshake frames both ways. Returns false if any step failed.
  bool RelayHandshake() {
    from_client_ = proxy_->Accept();
    to_server_ = std::make_unique<RawClient>(nettest::PortOf(server_->LocalAddress()));
    if (!from_client_ || !to_server_->connected()) return false;
    for (int i = 0; i < 2; ++i) {
      auto up = from_client_->ReadFrame();  // HELLO, then AUTH
      if (!up || !to_server_->Send(Reencode(*up))) return false;
      auto down = to_server_->ReadFrame();  // CHALLENGE, then ACCEPT
      if (!down || !from_client_->Send(Reencode(*down))) return false;
    }
    return true;
  }

  // The next frame the client env wrote (sealed), read by the proxy.
  tp::Frame Intercept() {
    auto f = from_client_->ReadFrame();
    EXPECT_TRUE(f.has_value());
    return f.value_or(tp::Frame{});
  }

  // Closes both legs and waits until the client env has seen its link go, so
  // its next Send dials again instead of writing into the dead connection.
  void DropBothLegs() {
    const std::size_t lost = client_logs_.CountContaining("connection lost");
    to_server_.reset();
    from_client_.reset();
    ASSERT_TRUE(WaitUntil([&] { return client_logs_.CountContaining("connection lost") > lost; }));
  }

  // Asserts the server closed the proxied connection and delivered exactly `delivered`.
  void ExpectClosedWith(std::size_t delivered) {
    EXPECT_TRUE(to_server_->WaitClosed()) << "the server closes the tampered connection";
    EXPECT_EQ(got_.Count(), delivered);
    EXPECT_EQ(server_->Stats().frames_received, delivered);
  }

  nettest::LogCollector client_logs_;
  std::unique_ptr<AsioEnv> server_;
  std::unique_ptr<AsioEnv> client_;
  Collector got_;
  std::unique_ptr<RawListener> proxy_;  // on the server's advertised address
  std::unique_ptr<RawClient> from_client_;
  std::unique_ptr<RawClient> to_server_;
};

TEST_F(Mitm, RelayedFramesAreDeliveredAndTheirPayloadIsNotInClear) {
  client_->Send(server_->LocalAddress(), 16, "first plain-text payload");
  ASSERT_TRUE(RelayHandshake());
  const auto rec = Intercept();
  EXPECT_EQ(rec.type, tp::kSealed);
  EXPECT_EQ(rec.body.find("plain-text"), std::string::npos);
  ASSERT_TRUE(to_server_->Send(Reencode(rec)));
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  const auto r = got_.Snapshot()[0];
  EXPECT_EQ(r.type, 16);
  EXPECT_EQ(r.payload, "first plain-text payload");
  EXPECT_EQ(r.from, client_->LocalAddress()) << "the authenticated sender, not the proxy";
}

TEST_F(Mitm, AReplayedFrameClosesTheConnectionAndIsNotDeliveredTwice) {
  client_->Send(server_->LocalAddress(), 16, "pay once");
  ASSERT_TRUE(RelayHandshake());
  const auto rec = Intercept();
  ASSERT_TRUE(to_server_->Send(Reencode(rec)));
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  ASSERT_TRUE(to_server_->Send(Reencode(rec)));
  ExpectClosedWith(1);
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().records_rejected == 1; }));
}

TEST_F(Mitm, AnInjectedPlainFrameIsNeverDecoded) {
  client_->Send(server_->LocalAddress(), 16, "genuine");
  ASSERT_TRUE(RelayHandshake());
  ASSERT_TRUE(to_server_->Send(Reencode(Intercept())));
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  // What an attacker on the path could write before this layer existed.
  ASSERT_TRUE(to_server_->Send(tp::EncodeFrame(16, "injected")));
  ExpectClosedWith(1);
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().frames_malformed == 1; }));
}

TEST_F(Mitm, AForgedSealedFrameDoesNotOpen) {
  client_->Send(server_->LocalAddress(), 16, "genuine");
  ASSERT_TRUE(RelayHandshake());
  const auto rec = Intercept();
  ASSERT_TRUE(to_server_->Send(Reencode(rec)));
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  std::string junk(64, '\0');
  ASSERT_EQ(RAND_bytes(reinterpret_cast<unsigned char*>(junk.data()), 64), 1);
  ASSERT_TRUE(to_server_->Send(tp::EncodeFrame(tp::kSealed, junk)));
  ExpectClosedWith(1);
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().records_rejected == 1; }));
}

TEST_F(Mitm, AnyAlteredBitIsDetected) {
  // One connection per position: a flip in the protocol type, the payload or the tag.
  const std::string payload(40, 'p');
  std::size_t delivered = 0;
  for (std::size_t pos : {std::size_t{0}, std::size_t{20}, 1 + payload.size() + 3}) {
    SCOPED_TRACE("flipped byte " + std::to_string(pos));
    client_->Send(server_->LocalAddress(), 16, payload);
    ASSERT_TRUE(RelayHandshake());
    auto rec = Intercept();
    rec.body[pos] = static_cast<char>(rec.body[pos] ^ 0x01);
    ASSERT_TRUE(to_server_->Send(Reencode(rec)));
    ExpectClosedWith(delivered);
    DropBothLegs();
  }
  EXPECT_EQ(server_->Stats().records_rejected, 3u);
}

TEST_F(Mitm, ReorderedFramesAreRefused) {
  client_->Send(server_->LocalAddress(), 16, "one");
  client_->Send(server_->LocalAddress(), 16, "two");
  ASSERT_TRUE(RelayHandshake());
  const auto one = Intercept();
  const auto two = Intercept();
  ASSERT_TRUE(to_server_->Send(Reencode(two)));
  ExpectClosedWith(0);
  (void)one;
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().records_rejected == 1; }));
}

TEST_F(Mitm, AFrameFromAnEarlierConnectionDoesNotOpenOnANewOne) {
  client_->Send(server_->LocalAddress(), 16, "old");
  ASSERT_TRUE(RelayHandshake());
  const auto old = Intercept();
  ASSERT_TRUE(to_server_->Send(Reencode(old)));
  ASSERT_TRUE(WaitUntil([&] { return got_.Count() == 1; }));
  DropBothLegs();
  client_->Send(server_->LocalAddress(), 16, "new");
  ASSERT_TRUE(RelayHandshake());
  // The first record of the new connection is at sequence number 0, like `old`,
  // but under the new connection's key.
  ASSERT_TRUE(to_server_->Send(Reencode(old)));
  ExpectClosedWith(1);
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().records_rejected == 1; }));
}

// Someone without the secret who receives a connection the client dials (the
// port of a peer that is down, squatted; or a path it sits on) relays the
// client's handshake to a DIFFERENT live node. That node's CHALLENGE names its
// own advertised address, not the one dialed: the client refuses before it
// proves anything, so the node never gets a proof, a record or a frame.
TEST_F(Mitm, AHandshakeRelayedToAnotherNodeIsRefused) {
  RawListener squatted;  // 127.0.0.1:<port>: an address no node advertises
  client_->Send(squatted.address(), 16, "meant for the peer at the squatted address");
  auto victim = squatted.Accept();
  ASSERT_TRUE(victim);
  RawClient to_other(nettest::PortOf(server_->LocalAddress()));
  ASSERT_TRUE(to_other.connected());
  auto hello = victim->ReadFrame();
  ASSERT_TRUE(hello && hello->type == tp::kHello);
  ASSERT_TRUE(to_other.Send(Reencode(*hello)));
  auto challenge = to_other.ReadFrame();
  ASSERT_TRUE(challenge && challenge->type == tp::kChallenge);
  ASSERT_TRUE(victim->Send(Reencode(*challenge)));
  EXPECT_TRUE(victim->WaitClosed()) << "no AUTH: the client closes";
  EXPECT_TRUE(WaitUntil([&] { return client_->Stats().handshakes_rejected >= 1; }));
  EXPECT_TRUE(
      WaitUntil([&] { return client_logs_.Contains(LogLevel::kWarning, "a relayed connection"); }));
  EXPECT_EQ(client_->Stats().connections_established, 0u);
  EXPECT_EQ(client_->Stats().frames_sent, 0u);
  EXPECT_EQ(server_->Stats().frames_received, 0u);
  EXPECT_EQ(got_.Count(), 0u);
}

// The same squatter relays the client's HELLO to the client's OWN server (a
// reflection: both ends then compute the same transcript, so each side's proof
// would satisfy the other). The server refuses a HELLO carrying its own node's
// address and nonce; the client, shown a CHALLENGE naming itself, refuses too.
TEST_F(Mitm, AHandshakeReflectedToItsSenderIsRefusedOnBothSides) {
  RawListener squatted;
  client_->Send(squatted.address(), 16, "reflected");
  auto victim = squatted.Accept();
  ASSERT_TRUE(victim);
  auto hello = victim->ReadFrame();
  ASSERT_TRUE(hello && hello->type == tp::kHello);
  // Server side: the client's own listener closes on its own HELLO.
  RawClient to_self(nettest::PortOf(client_->LocalAddress()));
  ASSERT_TRUE(to_self.connected());
  ASSERT_TRUE(to_self.Send(Reencode(*hello)));
  EXPECT_FALSE(to_self.ReadFrame(std::chrono::milliseconds(2'000)).has_value()) << "no CHALLENGE";
  EXPECT_TRUE(to_self.WaitClosed());
  EXPECT_TRUE(WaitUntil(
      [&] { return client_logs_.Contains(LogLevel::kWarning, "a reflected connection"); }));
  // Client side: a CHALLENGE naming the client itself (as its own server would
  // have sent) gets no AUTH.
  tp::Hello h;
  ASSERT_TRUE(tp::ParseHello(hello->body, h));
  tp::Challenge ch;
  ch.server_address = client_->LocalAddress();
  ASSERT_TRUE(tp::RandomNonce(ch.server_nonce));
  ASSERT_TRUE(victim->Send(tp::EncodeFrame(tp::kChallenge, tp::EncodeChallenge(ch))));
  EXPECT_TRUE(victim->WaitClosed()) << "no AUTH: the client closes";
  EXPECT_TRUE(WaitUntil([&] { return client_->Stats().handshakes_rejected >= 2; }));
  EXPECT_EQ(client_->Stats().connections_established, 0u);
  EXPECT_EQ(client_->Stats().frames_received, 0u);
  EXPECT_EQ(client_->Stats().frames_sent, 0u);
}

}  // namespace
}  // namespace pynenc_cpp::cluster
