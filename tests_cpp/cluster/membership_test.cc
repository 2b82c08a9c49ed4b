// Membership unit tests: message codec, persistence helpers, and single-node
// protocol rules driven by hand-made frames.
#include "pynenc_cpp/cluster/membership.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cluster/membership/messages.h"
#include "cluster/membership/persistence.h"
#include "sim/sim.h"

namespace pynenc_cpp::cluster {
namespace {

using membership::DecodeMessage;
using membership::EncodeMessage;
using membership::Message;

Member Rec(std::string id, std::uint64_t inc = 0, MemberState st = MemberState::kAlive) {
  Member m;
  m.id = std::move(id);
  m.address = "10.0.0.9:" + std::to_string(m.id.size());
  m.incarnation = inc;
  m.state = st;
  m.started_at_ms = 1234567;
  m.node_class = "worker";
  m.metadata = {{"zone", "eu-1"}, {"v", ""}};
  return m;
}

std::vector<Message> Samples() {
  std::vector<Message> out;
  for (auto t :
       {MembershipMessage::kPing, MembershipMessage::kAck, MembershipMessage::kPingReq,
        MembershipMessage::kJoin, MembershipMessage::kJoinAck, MembershipMessage::kGossip}) {
    Message m;
    m.type = t;
    m.cluster_name = "prod";
    m.sender = Rec("sender", 3);
    m.gossip = {Rec("g1", 1, MemberState::kSuspect), Rec("g2", 7, MemberState::kLeft)};
    if (t == MembershipMessage::kPing || t == MembershipMessage::kAck ||
        t == MembershipMessage::kPingReq) {
      m.seq = 0x0102030405060708ull;
      m.target_id = "target";
    }
    if (t == MembershipMessage::kPingReq) m.target_address = "10.1.1.1:99";
    if (t == MembershipMessage::kJoinAck) m.members = {Rec("m1"), Rec("m2", 2, MemberState::kDead)};
    out.push_back(m);
  }
  return out;
}

TEST(MembershipCodec, RoundTripsEveryMessageType) {
  for (const auto& m : Samples()) {
    const std::string bytes = EncodeMessage(m);
    auto back = DecodeMessage(static_cast<std::uint8_t>(m.type), bytes);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back.value(), m);
  }
}

TEST(MembershipCodec, RejectsEveryTruncationAndTrailingBytes) {
  for (const auto& m : Samples()) {
    const std::string bytes = EncodeMessage(m);
    const auto type = static_cast<std::uint8_t>(m.type);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_FALSE(DecodeMessage(type, std::string_view(bytes).substr(0, n)).ok()) << n;
    }
    EXPECT_FALSE(DecodeMessage(type, bytes + '\0').ok());
  }
}

TEST(MembershipCodec, RejectsBadFieldsAndGarbage) {
  Message m = Samples()[0];
  EXPECT_FALSE(DecodeMessage(15, EncodeMessage(m)).ok());
  EXPECT_FALSE(DecodeMessage(32, EncodeMessage(m)).ok());
  m.sender.state = static_cast<MemberState>(9);
  EXPECT_FALSE(DecodeMessage(16, EncodeMessage(m)).ok());
  m = Samples()[0];
  m.sender.id.clear();
  EXPECT_FALSE(DecodeMessage(16, EncodeMessage(m)).ok());
  m = Samples()[0];
  m.gossip.assign(membership::kMaxGossip + 1, Rec("x"));
  EXPECT_FALSE(DecodeMessage(16, EncodeMessage(m)).ok());
  m = Samples()[0];
  m.cluster_name.assign(membership::kMaxClusterNameBytes + 1, 'c');
  EXPECT_FALSE(DecodeMessage(16, EncodeMessage(m)).ok());
  // A count claiming more records than the bytes could hold.
  Message ack = Samples()[4];
  ASSERT_EQ(ack.type, MembershipMessage::kJoinAck);
  ack.members.clear();
  ack.gossip.clear();
  std::string huge = EncodeMessage(ack);  // ends with [u32 members = 0][u32 gossip = 0]
  ASSERT_TRUE(DecodeMessage(20, huge).ok());
  huge[huge.size() - 7] = 0x0f;  // members = 0x0f00 = 3840 (under kMaxMembers), no bytes
  EXPECT_FALSE(DecodeMessage(20, huge).ok());
  huge[huge.size() - 8] = 0x7f;  // far over kMaxMembers
  EXPECT_FALSE(DecodeMessage(20, huge).ok());
  std::mt19937_64 rng(99);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng() % 200, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    accepted += DecodeMessage(static_cast<std::uint8_t>(16 + rng() % 6), junk).ok();
  }
  EXPECT_EQ(accepted, 0);
  // Random single-byte corruptions of valid messages never crash (ASan checks reads).
  for (const auto& s : Samples()) {
    const std::string bytes = EncodeMessage(s);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ 0xff);
      (void)DecodeMessage(static_cast<std::uint8_t>(s.type), b);
    }
  }
}

class PersistenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("swim_state_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir() const { return (dir_ / "nested" / "state").string(); }
  std::filesystem::path dir_;
};

TEST_F(PersistenceTest, NodeIdIsCreatedOnceAndReadBack) {
  auto a = membership::LoadOrCreateNodeId(dir());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(membership::IsValidNodeId(a.value()));
  auto b = membership::LoadOrCreateNodeId(dir());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.value(), b.value());
  std::filesystem::remove_all(dir_);
  auto c = membership::LoadOrCreateNodeId(dir());
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c.value(), a.value());
  // No temporary files left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(PersistenceTest, CorruptNodeIdAndUnwritableDirAreBadConfig) {
  std::filesystem::create_directories(dir());
  std::ofstream(std::filesystem::path(dir()) / "node_id") << "not-an-id\n";
  auto r = membership::LoadOrCreateNodeId(dir());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
  // A regular file where the state dir should be.
  const std::string file = (dir_ / "plain").string();
  std::ofstream(file) << "x";
  auto w = membership::LoadOrCreateNodeId(file + "/sub");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(w.status().message().find("state dir not writable"), std::string::npos)
      << w.status().message();
  EXPECT_EQ(membership::StoreIncarnation(file, 3).code(), ErrorCode::kBadConfig);
}

TEST_F(PersistenceTest, IncarnationAndPeersRoundTrip) {
  auto none = membership::LoadIncarnation(dir());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), 0u);
  ASSERT_TRUE(membership::StoreIncarnation(dir(), 41).ok());
  ASSERT_TRUE(membership::StoreIncarnation(dir(), 42).ok());
  EXPECT_EQ(membership::LoadIncarnation(dir()).value(), 42u);
  std::ofstream(std::filesystem::path(dir()) / "incarnation") << "12x\n";
  EXPECT_EQ(membership::LoadIncarnation(dir()).status().code(), ErrorCode::kBadConfig);
  std::ofstream(std::filesystem::path(dir()) / "incarnation") << "99999999999999999999999\n";
  EXPECT_FALSE(membership::LoadIncarnation(dir()).ok());

  EXPECT_TRUE(membership::LoadPeers(dir()).value().empty());
  ASSERT_TRUE(membership::StorePeers(dir(), {"a:1", "b:2", "a:1", "bad", "c d:3"}).ok());
  EXPECT_EQ(membership::LoadPeers(dir()).value(), (std::vector<Address>{"a:1", "b:2"}));
  std::ofstream(std::filesystem::path(dir()) / "peers") << "x:1\n\n garbage\ny:2\r\n";
  EXPECT_EQ(membership::LoadPeers(dir()).value(), (std::vector<Address>{"x:1", "y:2"}));
}

TEST_F(PersistenceTest, TermFloorRoundTripsAndRefusesCorruptContents) {
  EXPECT_EQ(membership::LoadTermFloor(dir()).value(), 0u);
  ASSERT_TRUE(membership::StoreTermFloor(dir(), 7).ok());
  ASSERT_TRUE(membership::StoreTermFloor(dir(), 0xffffffffu).ok());
  EXPECT_EQ(membership::LoadTermFloor(dir()).value(), 0xffffffffu);
  for (const char* bad : {"", "x\n", "-1\n", "4294967296\n", "1.0\n", "12345678901\n"}) {
    std::ofstream(std::filesystem::path(dir()) / "term_floor") << bad;
    auto r = membership::LoadTermFloor(dir());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
    EXPECT_NE(r.status().message().find("remove the file"), std::string::npos);
  }
}

// One Membership on a SimWorld, fed frames by hand from a fake peer.
class OneNode : public ::testing::Test {
 protected:
  OneNode()
      : world_(3), env_(world_.AddNode("10.0.0.1:7000")), peer_(world_.AddNode("10.0.0.2:7000")) {
    MembershipOptions o;
    o.cluster_name = "c";
    o.self.id = "self";
    o.self.address = "10.0.0.1:7000";
    o.self.incarnation = 5;
    o.heartbeat_ms = 100;
    o.suspect_timeout_ms = 300;
    o.dead_retention_ms = 2000;
    m_ = std::make_unique<Membership>(env_, o,
                                      [this](const MemberEvent& e) { events_.push_back(e); });
    m_->SetOnIncarnation([this](std::uint64_t v) { incarnations_.push_back(v); });
    env_.SetReceiver(
        [this](const Address& f, std::uint8_t t, std::string p) { m_->OnFrame(f, t, p); });
    peer_.SetReceiver([this](const Address&, std::uint8_t t, std::string p) {
      auto d = DecodeMessage(t, p);
      if (d.ok()) to_peer_.push_back(d.value());
    });
  }
  void Feed(MembershipMessage t, Member sender, std::vector<Member> gossip = {},
            std::string cluster = "c") {
    Message msg;
    msg.type = t;
    msg.cluster_name = std::move(cluster);
    msg.sender = std::move(sender);
    msg.gossip = std::move(gossip);
    m_->OnFrame("10.0.0.2:7000", static_cast<std::uint8_t>(t), EncodeMessage(msg));
  }
  Member Peer(std::uint64_t inc, MemberState st = MemberState::kAlive) {
    Member p = Rec("peer", inc, st);
    p.address = "10.0.0.2:7000";
    return p;
  }

  sim::SimWorld world_;
  Env& env_;
  Env& peer_;
  std::unique_ptr<Membership> m_;
  std::vector<MemberEvent> events_;
  std::vector<std::uint64_t> incarnations_;
  std::vector<Message> to_peer_;
};

TEST_F(OneNode, IgnoresForeignClusterAndMalformedFrames) {
  Feed(MembershipMessage::kGossip, Peer(0), {}, "other");
  m_->OnFrame("10.0.0.2:7000", 16, "\x01\x02");
  m_->OnFrame("10.0.0.2:7000", 40, "whatever");  // not a membership type: silently ignored
  EXPECT_EQ(m_->Members().size(), 1u);
  EXPECT_EQ(m_->Stats().foreign_cluster, 1u);
  EXPECT_EQ(m_->Stats().messages_rejected, 1u);
  EXPECT_TRUE(events_.empty());
}

TEST_F(OneNode, RefutesSuspicionOfItselfWithAHigherIncarnation) {
  Feed(MembershipMessage::kGossip, Peer(0), {Rec("self", 5, MemberState::kSuspect)});
  EXPECT_EQ(m_->Self().incarnation, 6u);
  EXPECT_EQ(m_->Self().state, MemberState::kAlive);
  Feed(MembershipMessage::kGossip, Peer(0), {Rec("self", 4, MemberState::kDead)});  // stale
  EXPECT_EQ(m_->Self().incarnation, 6u);
  Feed(MembershipMessage::kGossip, Peer(0), {Rec("self", 9, MemberState::kDead)});
  EXPECT_EQ(m_->Self().incarnation, 10u);
  EXPECT_EQ(incarnations_, (std::vector<std::uint64_t>{6, 10}));
  EXPECT_EQ(m_->Stats().refutations, 2u);
  // The refutation travels on the next message: a Ping is acked with our record.
  Message ping;
  ping.type = MembershipMessage::kPing;
  ping.cluster_name = "c";
  ping.sender = Peer(0);
  ping.seq = 77;
  ping.target_id = "self";
  m_->OnFrame("10.0.0.2:7000", 16, EncodeMessage(ping));
  world_.RunFor(50);
  ASSERT_FALSE(to_peer_.empty());
  EXPECT_EQ(to_peer_.back().type, MembershipMessage::kAck);
  EXPECT_EQ(to_peer_.back().seq, 77u);
  EXPECT_EQ(to_peer_.back().sender.incarnation, 10u);
}

TEST_F(OneNode, DeadMemberComesBackOnlyWithAHigherIncarnation) {
  Feed(MembershipMessage::kGossip, Peer(2));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, MemberEventKind::kJoined);
  EXPECT_EQ(m_->LastHeardMs("peer"), 0);
  Feed(MembershipMessage::kGossip, Rec("third"), {Peer(2, MemberState::kDead)});
  Feed(MembershipMessage::kGossip, Peer(2));  // same incarnation alive: Dead wins
  Feed(MembershipMessage::kGossip, Rec("third"), {Peer(1)});
  std::vector<MemberEventKind> kinds;
  for (const auto& e : events_) {
    if (e.member.id == "peer") kinds.push_back(e.kind);
  }
  EXPECT_EQ(kinds,
            (std::vector<MemberEventKind>{MemberEventKind::kJoined, MemberEventKind::kDead}));
  Feed(MembershipMessage::kGossip, Peer(3));
  EXPECT_EQ(events_.back().kind, MemberEventKind::kJoined);
  EXPECT_EQ(events_.back().member.incarnation, 3u);
  EXPECT_EQ(events_.back().member.metadata.at("zone"), "eu-1");
  EXPECT_EQ(m_->LiveMembers().size(), 3u);
}

TEST_F(OneNode, SuspectBecomesDeadAfterTimeoutAndTombstoneExpires) {
  Feed(MembershipMessage::kGossip, Peer(0), {});
  Feed(MembershipMessage::kGossip, Rec("third"), {Peer(0, MemberState::kSuspect)});
  EXPECT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(299);
  EXPECT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(2);
  EXPECT_EQ(events_.back().kind, MemberEventKind::kDead);
  EXPECT_EQ(events_.back().member.id, "peer");
  // The tombstone is kept for dead_retention_ms (checked each period once
  // started), then forgotten.
  m_->Start();
  world_.RunFor(1500);
  EXPECT_EQ(m_->Members().size(), 3u);  // self, third, peer (Dead)
  world_.RunFor(3000);
  std::vector<NodeId> ids;
  for (const auto& mem : m_->Members()) ids.push_back(mem.id);
  EXPECT_EQ(ids, (std::vector<NodeId>{"self"}));  // third never answered: Dead too, expired
  EXPECT_FALSE(m_->LastHeardMs("peer").has_value());
}

// Dead rule (membership.h): dead_at = max(last_heard + suspect_timeout,
// suspected_at + refute_window); here suspect_timeout 300, refute window
// max(ping_timeout 50, 300 / 3) = 100.
TEST_F(OneNode, SilentSuspectDiesExactlyAtRefuteWindowAfterSuspicion) {
  Feed(MembershipMessage::kGossip, Peer(0));  // last heard at 0
  Feed(MembershipMessage::kGossip, Rec("third"));
  world_.RunFor(1000);
  const std::int64_t suspected_at = world_.Now();
  Feed(MembershipMessage::kGossip, Rec("third"), {Peer(0, MemberState::kSuspect)});
  ASSERT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(99);
  EXPECT_EQ(events_.back().kind, MemberEventKind::kSuspected)
      << "at +" << world_.Now() - suspected_at;
  world_.RunFor(1);
  EXPECT_EQ(events_.back().kind, MemberEventKind::kDead);
  EXPECT_EQ(events_.back().member.id, "peer");
}

TEST_F(OneNode, RecentlyHeardSuspectGetsTheFullSuspectTimeoutFromLastContact) {
  world_.RunFor(1000);
  Feed(MembershipMessage::kGossip, Peer(0));  // last heard at 1000
  world_.RunFor(150);
  Feed(MembershipMessage::kGossip, Rec("third"), {Peer(0, MemberState::kSuspect)});
  ASSERT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(100);  // 1250: past suspected_at + refute window, not last_heard + 300
  EXPECT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(49);  // 1299
  EXPECT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(1);  // 1300 = last_heard + suspect_timeout
  EXPECT_EQ(events_.back().kind, MemberEventKind::kDead);
}

TEST_F(OneNode, NoteHeardPostponesDeathOnlyForAnUnambiguousLiveAddress) {
  Feed(MembershipMessage::kGossip, Peer(0));  // heard at 0
  Feed(MembershipMessage::kGossip, Rec("third"), {Peer(0, MemberState::kSuspect)});
  ASSERT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(250);
  m_->NoteHeard("10.0.0.2:7000");  // lease frame from the suspect at 250
  EXPECT_EQ(m_->LastHeardMs("peer"), 250);
  m_->NoteHeard("10.9.9.9:1");  // unknown address: nothing
  world_.RunFor(299);           // 549: before 250 + 300
  EXPECT_EQ(events_.back().kind, MemberEventKind::kSuspected);
  world_.RunFor(1);  // 550
  EXPECT_EQ(events_.back().kind, MemberEventKind::kDead);
  // Dead member: NoteHeard does not touch it (not live).
  m_->NoteHeard("10.0.0.2:7000");
  EXPECT_EQ(m_->LastHeardMs("peer"), 250);
  // Two live members at one address (restart under a new id): ignored.
  Member a = Rec("a");
  a.address = "10.0.0.3:7000";
  Member b = Rec("b");
  b.address = "10.0.0.3:7000";
  Feed(MembershipMessage::kGossip, Rec("third"), {a, b});
  m_->NoteHeard("10.0.0.3:7000");
  EXPECT_FALSE(m_->LastHeardMs("a").has_value());
  EXPECT_FALSE(m_->LastHeardMs("b").has_value());
}

TEST_F(OneNode, LeaveSendsLeftRecordAndIgnoresLaterFrames) {
  m_->Start();
  Feed(MembershipMessage::kGossip, Peer(0));
  m_->Leave();
  EXPECT_EQ(m_->Self().state, MemberState::kLeft);
  EXPECT_EQ(m_->Self().incarnation, 6u);
  EXPECT_EQ(incarnations_, (std::vector<std::uint64_t>{6}));
  world_.RunFor(50);
  ASSERT_FALSE(to_peer_.empty());
  bool saw_left = false;
  for (const auto& msg : to_peer_) {
    saw_left |= msg.sender.state == MemberState::kLeft && msg.sender.incarnation == 6;
  }
  EXPECT_TRUE(saw_left);
  const auto n = to_peer_.size();
  Feed(MembershipMessage::kGossip, Rec("late"));
  world_.RunFor(5'000);  // no probing after Leave
  EXPECT_EQ(to_peer_.size(), n);
  EXPECT_TRUE(m_->LiveMembers().size() == 1u);  // peer only; self left
}

}  // namespace
}  // namespace pynenc_cpp::cluster
