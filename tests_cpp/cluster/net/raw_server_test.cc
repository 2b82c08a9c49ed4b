// A hand-driven server against a real AsioEnv's outbound link: the client side
// must authenticate the server before sending any protocol frame.
#include <gtest/gtest.h>

#include "net/net_test_util.h"

namespace pynenc_cpp::cluster {
namespace {

using nettest::Options;
using nettest::RawClient;
using nettest::RawListener;
using nettest::WaitUntil;
namespace tp = transport;

class RawServer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto o = Options("srv-secret", "srv");
    o.handshake_timeout_ms = 1'000;
    auto r = MakeAsioEnv(o, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().message();
    env_ = std::move(r).value();
    ASSERT_NE(listener_.port(), 0);
  }

  // Reads the env's HELLO and answers CHALLENGE; returns the transcript so far.
  static std::optional<tp::Transcript> Challenge(RawClient& c, const Address& server_address) {
    auto hello = c.ReadFrame();
    tp::Hello h;
    if (!hello || hello->type != tp::kHello || !tp::ParseHello(hello->body, h)) return std::nullopt;
    tp::Transcript t;
    t.cluster_name = h.cluster_name;
    t.client_address = h.client_address;
    t.client_nonce = h.client_nonce;
    t.server_address = server_address;
    if (!tp::RandomNonce(t.server_nonce)) return std::nullopt;
    tp::Challenge ch;
    ch.server_address = server_address;
    ch.server_nonce = t.server_nonce;
    if (!c.Send(tp::EncodeFrame(tp::kChallenge, tp::EncodeChallenge(ch)))) return std::nullopt;
    return t;
  }

  // The env's link to the listener, accepted (a frame queued makes it dial).
  std::unique_ptr<RawClient> Dialed() {
    env_->Send(listener_.address(), 16, "x");
    return listener_.Accept();
  }

  // After a CHALLENGE naming `server_address`, the client sends no AUTH: it closes
  // the connection, counts a refused handshake and has sent nothing.
  void ExpectRefusedBeforeAnyProof(RawClient& c, const Address& server_address) {
    ASSERT_TRUE(Challenge(c, server_address).has_value());
    EXPECT_FALSE(c.ReadFrame(std::chrono::milliseconds(500)).has_value()) << "no AUTH";
    EXPECT_TRUE(c.WaitClosed());
    EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected >= 1; }));
    EXPECT_EQ(env_->Stats().frames_sent, 0u);
  }

  std::unique_ptr<AsioEnv> env_;
  RawListener listener_;
};

TEST_F(RawServer, HelloCarriesOurClusterAndAdvertisedAddress) {
  env_->Send(listener_.address(), 16, "a plain-text payload");
  auto c = listener_.Accept();
  ASSERT_TRUE(c);
  auto t = Challenge(*c, listener_.address());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->cluster_name, "srv");
  EXPECT_EQ(t->client_address, env_->LocalAddress());
  // The client's AUTH verifies with the shared secret.
  auto auth = c->ReadFrame();
  ASSERT_TRUE(auth && auth->type == tp::kAuth);
  tp::Proof p;
  ASSERT_TRUE(tp::ParseProof(auth->body, p));
  EXPECT_TRUE(tp::ProofsEqual(p.mac, *tp::ComputeProof("srv-secret", tp::kClientLabel, *t)));
  // Completing the handshake releases the queued frame.
  ASSERT_TRUE(c->Send(tp::EncodeFrame(
      tp::kAccept, tp::EncodeProof({*tp::ComputeProof("srv-secret", tp::kServerLabel, *t)}))));
  // It arrives sealed with this connection's key, at sequence number 0.
  auto data = c->ReadFrame();
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->type, tp::kSealed);
  EXPECT_EQ(data->body.find("plain-text"), std::string::npos) << "the payload is not in clear";
  tp::RecordOpener opener(*tp::DeriveClientRecordKey("srv-secret", *t));
  auto opened = opener.Open(*data);
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(opened->type, 16);
  EXPECT_EQ(opened->body, "a plain-text payload");
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().frames_sent == 1; }));
}

TEST_F(RawServer, ReflectedClientProofIsRejectedAndNothingIsSent) {
  env_->Send(listener_.address(), 16, "secret payload");
  auto c = listener_.Accept();
  ASSERT_TRUE(c);
  ASSERT_TRUE(Challenge(*c, listener_.address()).has_value());
  auto auth = c->ReadFrame();
  ASSERT_TRUE(auth && auth->type == tp::kAuth);
  // A server without the secret echoes the client's own proof as its ACCEPT.
  ASSERT_TRUE(c->Send(tp::EncodeFrame(tp::kAccept, auth->body)));
  EXPECT_TRUE(c->WaitClosed()) << "no protocol frame, just a close";
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == 1; }));
  EXPECT_EQ(env_->Stats().frames_sent, 0u);
}

TEST_F(RawServer, WrongServerProofIsRejected) {
  auto c = Dialed();
  ASSERT_TRUE(c);
  auto t = Challenge(*c, listener_.address());
  ASSERT_TRUE(t.has_value());
  ASSERT_TRUE(c->ReadFrame().has_value());
  ASSERT_TRUE(c->Send(tp::EncodeFrame(
      tp::kAccept, tp::EncodeProof({*tp::ComputeProof("other", tp::kServerLabel, *t)}))));
  EXPECT_TRUE(c->WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().handshakes_rejected == 1; }));
  EXPECT_EQ(env_->Stats().frames_sent, 0u);
}

TEST_F(RawServer, SilentServerTimesOutAndTheLinkRetriesWithBackoff) {
  env_->Send(listener_.address(), 16, "x");
  auto first = listener_.Accept();
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->ReadFrame().has_value());  // HELLO, never answered
  EXPECT_TRUE(first->WaitClosed()) << "closed at handshake_timeout_ms";
  auto second = listener_.Accept();
  ASSERT_TRUE(second) << "reconnected because a frame is still queued";
  EXPECT_GE(env_->Stats().reconnect_attempts, 1u);
  EXPECT_EQ(env_->Stats().frames_sent, 0u);
}

TEST_F(RawServer, GarbageFromTheServerClosesTheLink) {
  auto c = Dialed();
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->ReadFrame().has_value());
  ASSERT_TRUE(c->Send(std::string("\x7f\xff\xff\xff", 4)));  // 2 GiB announced
  EXPECT_TRUE(c->WaitClosed());
  EXPECT_TRUE(WaitUntil([&] { return env_->Stats().frames_oversize == 1; }));
}

// The server's CHALLENGE names the address it advertises. Dialing an IP literal,
// the client goes on only if that is the same IP and port (a relayed connection
// names another node); a host name on either side cannot be compared unresolved.
TEST_F(RawServer, AnotherAdvertisedIpIsRefusedBeforeAnyProof) {
  auto c = Dialed();
  ASSERT_TRUE(c);
  ExpectRefusedBeforeAnyProof(*c, "127.0.0.9:" + std::to_string(listener_.port()));
  EXPECT_EQ(env_->Stats().handshakes_rejected, 1u);
}

TEST_F(RawServer, AnAdvertisedHostNameOrOtherPortIsComparedAsItCanBe) {
  // A host name: accepted (an AUTH comes).
  auto c = Dialed();
  ASSERT_TRUE(c);
  ASSERT_TRUE(Challenge(*c, "localhost:" + std::to_string(listener_.port())).has_value());
  auto auth = c->ReadFrame();
  ASSERT_TRUE(auth && auth->type == tp::kAuth);
  c.reset();  // closed before ACCEPT: the queued frame makes the link dial again
  // The same IP on another port: refused.
  auto again = listener_.Accept();
  ASSERT_TRUE(again);
  ExpectRefusedBeforeAnyProof(*again, "127.0.0.1:" + std::to_string(listener_.port() + 1));
}

}  // namespace
}  // namespace pynenc_cpp::cluster
