// Lease unit tests: the codec, the grant rule, quorum counting and expiry, over
// a minimal hand-stepped environment (the simulator scenarios are in
// sim_mastership_test.cc).
#include "pynenc_cpp/cluster/lease.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/lease/lease_codec.h"

namespace pynenc_cpp::cluster {
namespace {

namespace lw = lease_wire;

// ---- codec ----

TEST(LeaseCodec, RoundTripsEveryMessage) {
  const lw::Message msgs[] = {lw::Request{42, 0xdeadbeefcafef00dULL, "node-a"},
                              lw::Grant{42, true, "node-b"}, lw::Grant{7, false, ""},
                              lw::Release{"node-a"}};
  for (const auto& m : msgs) {
    auto [type, payload] = lw::Encode(m);
    auto back = lw::Decode(type, payload);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back.value(), m);
  }
}

TEST(LeaseCodec, RejectsEveryTruncationAndTrailingByte) {
  const lw::Message msgs[] = {lw::Request{1, 2, "abc"}, lw::Grant{3, true, "def"},
                              lw::Release{"ghi"}};
  for (const auto& m : msgs) {
    auto [type, payload] = lw::Encode(m);
    for (std::size_t n = 0; n < payload.size(); ++n) {
      EXPECT_FALSE(lw::Decode(type, payload.substr(0, n)).ok()) << int(type) << " len " << n;
    }
    EXPECT_FALSE(lw::Decode(type, payload + "x").ok());
  }
}

TEST(LeaseCodec, RejectsGarbage) {
  EXPECT_FALSE(lw::Decode(lw::kRequest + 10, "").ok());  // unknown type
  // granted byte other than 0/1
  std::string g = lw::Encode(lw::Grant{1, true, "a"}).second;
  g[8] = 2;
  EXPECT_FALSE(lw::Decode(lw::kGrant, g).ok());
  // an id longer than the limit, and a length larger than the input
  EXPECT_FALSE(
      lw::Decode(lw::kRelease, lw::Encode(lw::Release{std::string(200, 'x')}).second).ok());
  EXPECT_FALSE(lw::Decode(lw::kRelease, std::string("\xff\xff\xff\xff", 4)).ok());
}

// ---- a hand-stepped network of Envs ----

class Net;
class FakeEnv : public Env {
 public:
  FakeEnv(Net& net, Address addr) : net_(net), addr_(std::move(addr)) {}
  std::int64_t NowMs() override;
  std::int64_t WallMs() override { return NowMs(); }
  std::uint64_t Random() override { return 4; }
  TimerId After(std::int64_t delay_ms, std::function<void()> fn) override;
  void Cancel(TimerId id) override;
  void Send(const Address& to, std::uint8_t type, std::string payload) override;
  void SetReceiver(Receiver r) override { receiver_ = std::move(r); }
  Address LocalAddress() const override { return addr_; }
  void Log(LogLevel, std::string_view) override {}
  Receiver receiver_;

 private:
  Net& net_;
  Address addr_;
};

class Net {
 public:
  struct Frame {
    Address from, to;
    std::uint8_t type;
    std::string payload;
  };
  FakeEnv& Add(const Address& a) {
    return *envs_.emplace(a, std::make_unique<FakeEnv>(*this, a)).first->second;
  }
  // Delivers every queued frame (and what they cause) unless the link is cut.
  void Flush() {
    while (!frames_.empty()) {
      Frame f = std::move(frames_.front());
      frames_.pop_front();
      if (cut_.count(f.from) || cut_.count(f.to)) continue;
      auto& env = *envs_.at(f.to);
      if (env.receiver_) env.receiver_(f.from, f.type, f.payload);
    }
  }
  // Advances the clock to `t`, firing due timers in order and flushing after each.
  void AdvanceTo(std::int64_t t) {
    for (;;) {
      auto it = timers_.begin();
      if (it == timers_.end() || it->first.first > t) break;
      now_ = it->first.first;
      auto fn = std::move(it->second);
      timers_.erase(it);
      fn();
      Flush();
    }
    now_ = t;
  }
  std::int64_t now_ = 1000;
  std::uint64_t next_timer_ = 1;
  std::map<std::pair<std::int64_t, std::uint64_t>, std::function<void()>> timers_;
  std::deque<Frame> frames_;
  std::set<Address> cut_;  // isolated addresses
  std::map<Address, std::unique_ptr<FakeEnv>> envs_;
};

std::int64_t FakeEnv::NowMs() { return net_.now_; }
Env::TimerId FakeEnv::After(std::int64_t d, std::function<void()> fn) {
  const auto id = net_.next_timer_++;
  net_.timers_.emplace(std::make_pair(net_.now_ + d, id), std::move(fn));
  return id;
}
void FakeEnv::Cancel(TimerId id) {
  for (auto it = net_.timers_.begin(); it != net_.timers_.end(); ++it) {
    if (it->first.second == id) {
      net_.timers_.erase(it);
      return;
    }
  }
}
void FakeEnv::Send(const Address& to, std::uint8_t type, std::string payload) {
  net_.frames_.push_back({addr_, to, type, std::move(payload)});
}

constexpr std::int64_t kHeartbeat = 100;
constexpr std::int64_t kLeaseMs = 1000;

struct Node {
  Node(Net& net, const std::string& name) : env(net.Add(name)) {
    lease = std::make_unique<Lease>(env, LeaseOptions{name, kHeartbeat, kLeaseMs, 0},
                                    [this](std::int64_t until) {
                                      // write-ahead: called before the lease moves
                                      EXPECT_LT(lease->LeaseUntil(), until);
                                      extensions.push_back(until);
                                    });
    env.SetReceiver(
        [this](const Address& from, std::uint8_t t, std::string p) { lease->OnFrame(from, t, p); });
  }
  FakeEnv& env;
  std::unique_ptr<Lease> lease;
  std::vector<std::int64_t> extensions;
};

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"a", "b", "c"}) nodes_.emplace(n, std::make_unique<Node>(net_, n));
    for (auto& [_, n] : nodes_) n->lease->Start();
  }
  // Every node's election picks `who` (nullopt: no one); quorum 2 of 3.
  void Elect(const std::optional<std::string>& who, int quorum = 2) {
    for (auto& [name, n] : nodes_) {
      LeaseView v;
      if (who) v.elected = LeaseView::Candidate{*who, *who};
      for (auto& [other, _] : nodes_) {
        if (other != name) v.peers.push_back(other);
      }
      v.quorum = quorum;
      n->lease->SetView(v);
    }
    net_.Flush();
  }
  Lease& L(const std::string& n) { return *nodes_.at(n)->lease; }
  Net net_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
};

TEST_F(LeaseTest, NoGrantsDuringTheBootGrace) {
  Elect("a");
  EXPECT_EQ(L("a").LeaseUntil(), 0);
  EXPECT_GT(L("b").Stats().grants_refused, 0u);
  net_.AdvanceTo(1000 + kLeaseMs - 1);
  EXPECT_EQ(L("a").LeaseUntil(), 0);
}

TEST_F(LeaseTest, QuorumOfGrantsGivesSendTimePlusLeaseMinusMargin) {
  Elect("a");
  net_.AdvanceTo(2000);  // the round sent at t=2000 is the first after the grace
  EXPECT_EQ(L("a").margin_ms(), 10);
  EXPECT_EQ(L("a").LeaseUntil(), 2000 + kLeaseMs - 10);
  EXPECT_EQ(L("b").promise().holder, "a");
  EXPECT_EQ(L("b").promise().until_ms, 2000 + kLeaseMs);
  EXPECT_EQ(L("a").promise().holder, "a");
  EXPECT_EQ(L("b").LeaseUntil(), 0);
  // Renewals extend every heartbeat.
  net_.AdvanceTo(2500);
  EXPECT_EQ(L("a").LeaseUntil(), 2500 + kLeaseMs - 10);
}

TEST_F(LeaseTest, SelfGrantAloneIsNotAQuorum) {
  Elect("a");
  net_.cut_ = {"a"};
  net_.AdvanceTo(3000);
  EXPECT_EQ(L("a").LeaseUntil(), 0);
  EXPECT_EQ(L("a").promise().holder, "a");  // it did grant itself
}

TEST_F(LeaseTest, DuplicateGrantsFromOneNodeCountOnce) {
  Elect("a", 3);
  net_.cut_ = {"c"};
  net_.AdvanceTo(2000);
  // Re-deliver b's grant for the pending round: still only {a, b} < 3.
  const std::uint64_t last_seq = L("a").Stats().requests_sent / 2;  // 2 peers per round
  auto grant = lw::Encode(lw::Grant{last_seq, true, "b"});
  for (int i = 0; i < 3; ++i) L("a").OnFrame("b", grant.first, grant.second);
  EXPECT_EQ(L("a").LeaseUntil(), 0);
  // A third distinct grantor for that same round completes the quorum.
  auto from_c = lw::Encode(lw::Grant{last_seq, true, "c"});
  L("a").OnFrame("c", from_c.first, from_c.second);
  EXPECT_EQ(L("a").LeaseUntil(), 2000 + kLeaseMs - 10);
}

TEST_F(LeaseTest, NewCandidateWaitsForTheOldPromiseToRunOut) {
  Elect("a");
  net_.AdvanceTo(2000);
  const std::int64_t a_until = L("a").LeaseUntil();
  ASSERT_GT(a_until, 0);
  // a disappears; everyone else now elects b.
  net_.cut_ = {"a"};
  Elect("b");
  std::int64_t b_first = 0;
  while (net_.now_ < 5000 && L("b").LeaseUntil() == 0) net_.AdvanceTo(net_.now_ + 1);
  b_first = net_.now_;
  ASSERT_GT(L("b").LeaseUntil(), 0);
  // b held nothing while a's lease could still be valid.
  EXPECT_GE(b_first, a_until);
  EXPECT_EQ(L("c").promise().holder, "b");
}

TEST_F(LeaseTest, RequestFromAnUnelectedNodeIsRefused) {
  Elect("a");
  net_.AdvanceTo(2000);
  auto req = lw::Encode(lw::Request{1, 0, "c"});
  const auto refused = L("b").Stats().grants_refused;
  L("b").OnFrame("c", req.first, req.second);
  EXPECT_EQ(L("b").Stats().grants_refused, refused + 1);
  EXPECT_EQ(L("b").promise().holder, "a");
  // The elected id, but from another address, is refused too.
  auto spoof = lw::Encode(lw::Request{1, 0, "a"});
  L("b").OnFrame("c", spoof.first, spoof.second);
  EXPECT_EQ(L("b").Stats().grants_refused, refused + 2);
}

TEST_F(LeaseTest, ReleaseEndsTheLeaseAndFreesPromises) {
  Elect("a");
  net_.AdvanceTo(2000);
  ASSERT_GT(L("a").LeaseUntil(), 0);
  L("a").Release();
  net_.Flush();
  EXPECT_EQ(L("a").LeaseUntil(), 0);
  EXPECT_EQ(L("b").promise().holder, "");
  Elect("b");
  net_.AdvanceTo(2000 + kHeartbeat);
  EXPECT_GT(L("b").LeaseUntil(), 0);  // no wait for a's lease to run out
  // a never gets a lease again.
  Elect("a");
  net_.AdvanceTo(6000);
  EXPECT_EQ(L("a").LeaseUntil(), 0);
}

TEST_F(LeaseTest, MalformedFramesAreCountedAndIgnored) {
  L("a").OnFrame("b", lw::kGrant, "garbage");
  L("a").OnFrame("b", 47, "");
  EXPECT_EQ(L("a").Stats().malformed, 2u);
}

}  // namespace
}  // namespace pynenc_cpp::cluster
