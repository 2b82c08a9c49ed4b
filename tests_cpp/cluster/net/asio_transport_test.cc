// Real loopback sockets: two AsioEnvs talking, refusals, queueing, limits,
// timers and lifecycle.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "net/net_test_util.h"

namespace pynenc_cpp::cluster {
namespace {

using nettest::Collector;
using nettest::LogCollector;
using nettest::Options;
using nettest::WaitUntil;

std::unique_ptr<AsioEnv> Make(const TransportOptions& o, LogSink sink = nullptr) {
  auto r = MakeAsioEnv(o, std::move(sink));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(AsioTransport, TwoEnvsExchangeFramesBothWaysWithAuthenticatedFrom) {
  auto a = Make(Options());
  auto b = Make(Options());
  ASSERT_TRUE(a && b);
  Collector ca, cb;
  a->SetReceiver(ca.AsReceiver());
  b->SetReceiver(cb.AsReceiver());
  for (int i = 0; i < 20; ++i) {
    a->Send(b->LocalAddress(), 16, "a" + std::to_string(i));
    b->Send(a->LocalAddress(), 17, "b" + std::to_string(i));
  }
  ASSERT_TRUE(WaitUntil([&] { return ca.Count() == 20 && cb.Count() == 20; }));
  const auto at_b = cb.Snapshot();
  const auto at_a = ca.Snapshot();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(at_b[i].from, a->LocalAddress());
    EXPECT_EQ(at_b[i].type, 16);
    EXPECT_EQ(at_b[i].payload, "a" + std::to_string(i)) << "in Send order";
    EXPECT_EQ(at_a[i].from, b->LocalAddress());
    EXPECT_EQ(at_a[i].type, 17);
    EXPECT_EQ(at_a[i].payload, "b" + std::to_string(i));
  }
  EXPECT_TRUE(WaitUntil([&] { return a->Stats().frames_sent == 20; }));
  EXPECT_EQ(b->Stats().frames_received, 20u);
  EXPECT_EQ(a->Stats().handshakes_rejected, 0u);
  // One outbound connection each way.
  EXPECT_EQ(a->Stats().connections_established, 2u);
}

void ExpectNeverConnect(const TransportOptions& oa, const TransportOptions& ob) {
  LogCollector la, lb;
  auto a = Make(oa, la.Sink());
  auto b = Make(ob, lb.Sink());
  ASSERT_TRUE(a && b);
  Collector ca, cb;
  a->SetReceiver(ca.AsReceiver());
  b->SetReceiver(cb.AsReceiver());
  // Keep sending so that both sides retry (reconnect with backoff) a few times.
  ASSERT_TRUE(WaitUntil([&] {
    a->Send(b->LocalAddress(), 16, "from a");
    b->Send(a->LocalAddress(), 16, "from b");
    return a->Stats().handshakes_rejected >= 2 && b->Stats().handshakes_rejected >= 2 &&
           a->Stats().reconnect_attempts >= 1 && b->Stats().reconnect_attempts >= 1;
  }));
  a->Shutdown(0);
  b->Shutdown(0);
  EXPECT_EQ(ca.Count(), 0u);
  EXPECT_EQ(cb.Count(), 0u);
  EXPECT_EQ(a->Stats().frames_received + b->Stats().frames_received, 0u);
  EXPECT_EQ(a->Stats().frames_sent + b->Stats().frames_sent, 0u) << "no frame left either side";
  // Refusals are logged at Warning with the remote endpoint.
  EXPECT_TRUE(la.Contains(LogLevel::kWarning, "refused connection from 127.0.0.1:"));
  EXPECT_TRUE(lb.Contains(LogLevel::kWarning, "refused connection from 127.0.0.1:"));
}

TEST(AsioTransport, DifferentSecretsNeverExchangeAFrame) {
  ExpectNeverConnect(Options("secret-one"), Options("secret-two"));
}

TEST(AsioTransport, DifferentClusterNamesAreRefused) {
  ExpectNeverConnect(Options("same", "cluster-a"), Options("same", "cluster-b"));
}

TEST(AsioTransport, SendQueueDropsOldestAndDeliversTheNewestAfterReconnect) {
  // Find a free port, then leave it unbound while frames are queued to it.
  std::uint16_t port = 0;
  {
    auto probe = Make(Options());
    ASSERT_TRUE(probe);
    port = nettest::PortOf(probe->LocalAddress());
  }
  auto o = Options();
  o.send_queue_bound = 10;
  auto a = Make(o);
  ASSERT_TRUE(a);
  const Address target = "127.0.0.1:" + std::to_string(port);
  for (int i = 0; i < 50; ++i) a->Send(target, 16, std::to_string(i));
  ASSERT_TRUE(WaitUntil([&] { return a->Stats().frames_dropped >= 40; }));
  EXPECT_EQ(a->Stats().frames_dropped, 40u) << "exactly N - bound dropped";
  // A few failed attempts happen with backoff while the peer is down.
  ASSERT_TRUE(WaitUntil([&] { return a->Stats().reconnect_attempts >= 2; }));

  auto ob = Options();
  ob.port = port;
  auto b = Make(ob);
  ASSERT_TRUE(b) << "the probed port was taken meanwhile";
  Collector cb;
  b->SetReceiver(cb.AsReceiver());
  ASSERT_TRUE(WaitUntil([&] { return cb.Count() >= 10; }));
  const auto got = cb.Snapshot();
  ASSERT_EQ(got.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[i].payload, std::to_string(40 + i));
  EXPECT_EQ(got[0].from, a->LocalAddress());
}

// A free loopback port, left unbound.
std::uint16_t UnboundPort() {
  auto probe = Make(Options());
  return probe ? nettest::PortOf(probe->LocalAddress()) : 0;
}

TEST(AsioTransport, DataFramesNeverEvictControlFramesAndControlGoesFirst) {
  const std::uint16_t port = UnboundPort();
  ASSERT_NE(port, 0);
  auto o = Options();
  o.send_queue_bound = 10;
  auto a = Make(o);
  ASSERT_TRUE(a);
  const Address target = "127.0.0.1:" + std::to_string(port);
  a->Send(target, kLeaseTypeBase, "grant");  // a lease grant, then a burst of actor traffic
  for (int i = 0; i < 50; ++i) a->Send(target, kActorTypeBase, std::to_string(i));
  a->Send(target, kMembershipTypeBase, "ping");
  ASSERT_TRUE(WaitUntil([&] { return a->Stats().frames_dropped >= 40; }));
  EXPECT_EQ(a->Stats().frames_dropped, 40u) << "only data frames were dropped";

  auto ob = Options();
  ob.port = port;
  auto b = Make(ob);
  ASSERT_TRUE(b) << "the probed port was taken meanwhile";
  Collector cb;
  b->SetReceiver(cb.AsReceiver());
  ASSERT_TRUE(WaitUntil([&] { return cb.Count() >= 12; }));
  const auto got = cb.Snapshot();
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(got[0].type, kLeaseTypeBase);
  EXPECT_EQ(got[0].payload, "grant");
  EXPECT_EQ(got[1].payload, "ping");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[2 + i].payload, std::to_string(40 + i));
}

TEST(AsioTransport, ALinkToAGoneAddressExpiresWithItsQueue) {
  const std::uint16_t port = UnboundPort();
  ASSERT_NE(port, 0);
  auto o = Options();
  o.outbound_expiry_ms = 300;
  LogCollector logs;
  auto a = Make(o, logs.Sink());
  ASSERT_TRUE(a);
  const Address target = "127.0.0.1:" + std::to_string(port);
  for (int i = 0; i < 5; ++i) a->Send(target, kActorTypeBase, std::to_string(i));
  ASSERT_TRUE(WaitUntil([&] { return a->Stats().links_expired >= 1; }));
  EXPECT_EQ(a->Stats().links_expired, 1u);
  EXPECT_EQ(a->Stats().frames_dropped, 5u);
  EXPECT_TRUE(logs.Contains(LogLevel::kInfo, "expired"));
  // No timer keeps retrying a forgotten link.
  const auto attempts = a->Stats().reconnect_attempts;
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(a->Stats().reconnect_attempts, attempts);

  // The address comes back: a later Send starts a new link and is delivered.
  auto ob = Options();
  ob.port = port;
  auto b = Make(ob);
  ASSERT_TRUE(b) << "the probed port was taken meanwhile";
  Collector cb;
  b->SetReceiver(cb.AsReceiver());
  a->Send(target, kActorTypeBase, "again");
  ASSERT_TRUE(WaitUntil([&] { return cb.Count() >= 1; }));
  EXPECT_EQ(cb.Snapshot()[0].payload, "again");
}

TEST(AsioTransport, AnOldFailureWithNothingQueuedDoesNotExpireALaterLink) {
  // A connection lost while nothing was queued, then quiet for longer than the
  // expiry: the next Send's first failed attempt starts a new streak, so the link
  // backs off and delivers once the peer is back instead of expiring at once.
  const std::uint16_t port = UnboundPort();
  ASSERT_NE(port, 0);
  auto o = Options();
  o.outbound_expiry_ms = 2'000;
  LogCollector logs;
  auto a = Make(o, logs.Sink());
  ASSERT_TRUE(a);
  const Address target = "127.0.0.1:" + std::to_string(port);
  auto ob = Options();
  ob.port = port;
  {
    auto b = Make(ob);
    ASSERT_TRUE(b) << "the probed port was taken meanwhile";
    Collector cb;
    b->SetReceiver(cb.AsReceiver());
    a->Send(target, kActorTypeBase, "first");
    ASSERT_TRUE(WaitUntil([&] { return cb.Count() >= 1; }));
    b->Shutdown();
  }
  ASSERT_TRUE(WaitUntil([&] { return logs.Contains(LogLevel::kInfo, "connection lost"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(2'300));

  a->Send(target, kActorTypeBase, "second");  // refused: the peer is still down
  ASSERT_TRUE(WaitUntil([&] { return a->Stats().reconnect_attempts >= 1; }));
  auto b = Make(ob);
  ASSERT_TRUE(b) << "the probed port was taken meanwhile";
  Collector cb;
  b->SetReceiver(cb.AsReceiver());
  ASSERT_TRUE(WaitUntil([&] { return cb.Count() >= 1; }));
  EXPECT_EQ(cb.Snapshot()[0].payload, "second");
  EXPECT_EQ(a->Stats().links_expired, 0u);
}

TEST(AsioTransport, OutboundExpiryOutOfRangeIsBadConfig) {
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{86'400'001}}) {
    auto o = Options();
    o.outbound_expiry_ms = bad;
    auto r = MakeAsioEnv(o, nullptr);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
  }
}

TEST(AsioTransport, OversizePayloadIsDroppedAtSendAndTheLimitIsInclusive) {
  auto o = Options();
  o.max_frame_bytes = 1000;
  auto a = Make(o);
  auto b = Make(o);
  ASSERT_TRUE(a && b);
  Collector cb;
  b->SetReceiver(cb.AsReceiver());
  a->Send(b->LocalAddress(), 16, std::string(1001, 'x'));
  a->Send(b->LocalAddress(), 16, std::string(1000, 'y'));
  ASSERT_TRUE(WaitUntil([&] { return cb.Count() == 1; }));
  EXPECT_EQ(cb.Snapshot()[0].payload, std::string(1000, 'y'));
  EXPECT_EQ(a->Stats().sends_oversize, 1u);
  EXPECT_EQ(b->Stats().frames_oversize, 0u) << "never put on the wire";
}

TEST(AsioTransport, SendToSelfIsDeliveredThroughTheLoop) {
  auto a = Make(Options());
  ASSERT_TRUE(a);
  Collector ca;
  a->SetReceiver(ca.AsReceiver());
  a->Send(a->LocalAddress(), 20, "me");
  ASSERT_TRUE(WaitUntil([&] { return ca.Count() == 1; }));
  EXPECT_EQ(ca.Snapshot()[0].from, a->LocalAddress());
  EXPECT_EQ(a->Stats().connections_established, 0u);
}

TEST(AsioTransport, AReceiverThatThrowsDoesNotStopDelivery) {
  auto a = Make(Options());
  auto b = Make(Options());
  ASSERT_TRUE(a && b);
  std::atomic<int> calls{0};
  b->SetReceiver([&](const Address&, std::uint8_t, std::string p) {
    ++calls;
    if (p == "boom") throw std::runtime_error("boom");
  });
  a->Send(b->LocalAddress(), 16, "boom");
  a->Send(b->LocalAddress(), 16, "fine");
  EXPECT_TRUE(WaitUntil([&] { return calls.load() == 2; }));
}

TEST(AsioTransport, NoSecretIsBadConfigOnEveryHost) {
  for (const char* host : {"0.0.0.0", "10.1.2.3", "::", "127.0.0.1", "localhost", "::1"}) {
    auto o = Options("");
    o.host = host;
    auto r = MakeAsioEnv(o, nullptr);
    ASSERT_FALSE(r.ok()) << host;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig) << host;
  }
  auto bad = Options();
  bad.cluster_name = "";
  EXPECT_EQ(MakeAsioEnv(bad, nullptr).status().code(), ErrorCode::kBadConfig);
  bad = Options();
  bad.max_frame_bytes = 0;
  EXPECT_EQ(MakeAsioEnv(bad, nullptr).status().code(), ErrorCode::kBadConfig);
  bad = Options();
  bad.host = "no-such-host.invalid";
  bad.secret = "x";
  EXPECT_EQ(MakeAsioEnv(bad, nullptr).status().code(), ErrorCode::kBadConfig);
}

TEST(AsioTransport, PortInUseIsBackendFailureNamingTheAddress) {
  auto a = Make(Options());
  ASSERT_TRUE(a);
  auto o = Options();
  o.port = nettest::PortOf(a->LocalAddress());
  auto r = MakeAsioEnv(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBackendFailure);
  EXPECT_EQ(r.status().message(), "address already in use: " + a->LocalAddress());
}

TEST(AsioTransport, TimersFireInOrderOnTheLoopThreadAndCancelWorks) {
  auto a = Make(Options());
  ASSERT_TRUE(a);
  std::promise<std::thread::id> loop_id;
  a->Post([&] { loop_id.set_value(std::this_thread::get_id()); });
  const auto loop = loop_id.get_future().get();
  EXPECT_NE(loop, std::this_thread::get_id());

  std::mutex mu;
  std::vector<int> order;
  bool all_on_loop = true;
  auto mark = [&](int v) {
    return [&, v] {
      std::lock_guard<std::mutex> l(mu);
      order.push_back(v);
      all_on_loop = all_on_loop && std::this_thread::get_id() == loop;
    };
  };
  std::atomic<bool> scheduled{false};
  a->Post([&] {
    a->After(300, mark(3));
    a->After(100, mark(1));
    const auto cancelled = a->After(150, mark(99));
    a->After(200, mark(2));
    a->Cancel(cancelled);
    a->Cancel(123456);  // unknown: a no-op
    a->After(400, mark(4));
    scheduled = true;
  });
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> l(mu);
    return order.size() == 4;
  }));
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(all_on_loop);
  EXPECT_TRUE(scheduled);
}

TEST(AsioTransport, ClocksAndRandomBehave) {
  auto o = Options();
  o.random_seed = 7;
  auto a = Make(o);
  auto b = Make(o);
  ASSERT_TRUE(a && b);
  const auto t0 = a->NowMs();
  EXPECT_LE(t0, a->NowMs());
  EXPECT_GT(a->WallMs(), 1'600'000'000'000);  // after 2020
  std::promise<std::uint64_t> ra, rb;
  a->Post([&] { ra.set_value(a->Random()); });
  b->Post([&] { rb.set_value(b->Random()); });
  EXPECT_EQ(ra.get_future().get(), rb.get_future().get()) << "same seed, same sequence";
}

TEST(AsioTransport, ShutdownIsIdempotentAndLaterCallsAreHarmless) {
  auto a = Make(Options());
  auto b = Make(Options());
  ASSERT_TRUE(a && b);
  Collector cb;
  b->SetReceiver(cb.AsReceiver());
  a->Send(b->LocalAddress(), 16, "before");
  a->Shutdown(5'000);  // flushes the queued frame first
  a->Shutdown();
  a->Shutdown(0);
  EXPECT_TRUE(WaitUntil([&] { return cb.Count() == 1; })) << "flushed at Shutdown";
  a->Post([] { FAIL() << "runs after Shutdown"; });
  a->Send(b->LocalAddress(), 16, "after");
  EXPECT_EQ(a->Stats().frames_sent, 1u);
  b->Shutdown(0);
  b.reset();  // destructor after Shutdown
  a.reset();
}

TEST(AsioTransport, DestructorShutsDownAnActiveEnv) {
  auto a = Make(Options());
  auto b = Make(Options());
  ASSERT_TRUE(a && b);
  for (int i = 0; i < 100; ++i) a->Send(b->LocalAddress(), 16, std::string(1000, 'z'));
  a->After(1'000'000, [] {});
  a.reset();
  b.reset();
}

}  // namespace
}  // namespace pynenc_cpp::cluster
