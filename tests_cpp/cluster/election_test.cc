// Elections: determinism across nodes, policies, class filter, quorum gate, HRW
// stability and spread, and the documented HRW / epoch bytes.
#include "pynenc_cpp/cluster/election.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <algorithm>
#include <map>
#include <random>

#include "pynenc_cpp/cluster/membership.h"

namespace pynenc_cpp::cluster {
namespace {

Member M(std::string id, std::string addr, std::int64_t started, std::string cls = "",
         MemberState st = MemberState::kAlive) {
  Member m;
  m.id = std::move(id);
  m.address = std::move(addr);
  m.started_at_ms = started;
  m.node_class = std::move(cls);
  m.state = st;
  return m;
}

std::vector<Member> View() {
  return {M("c", "10.0.0.3:7000", 100, "worker"), M("a", "10.0.0.1:7000", 300, "api"),
          M("b", "10.0.0.2:7000", 200, "worker"), M("d", "10.0.0.1:900", 100, "api"),
          M("e", "10.0.0.9:7000", 50, "api", MemberState::kSuspect)};
}

std::vector<std::unique_ptr<Election>> All() {
  std::vector<std::unique_ptr<Election>> v;
  v.push_back(MakeOldestNodeElection());
  v.push_back(MakeOldestNodeElection("worker"));
  v.push_back(MakeHrwElection());
  v.push_back(MakeLowestAddressElection());
  return v;
}

TEST(Election, EveryNodeOfTheSameViewElectsTheSameLeaderWhateverTheOrder) {
  std::mt19937_64 rng(5);
  for (const auto& e : All()) {
    auto view = View();
    const auto want = e->Elect({"c1", ComputeEpoch(view), view, 0});
    ASSERT_TRUE(want.has_value()) << e->Name();
    for (int i = 0; i < 50; ++i) {
      std::shuffle(view.begin(), view.end(), rng);
      EXPECT_EQ(e->Elect({"c1", ComputeEpoch(view), view, 0}), want) << e->Name();
    }
  }
}

TEST(Election, OldestNodeBySmallestStartThenIdWithClassFilter) {
  auto view = View();
  EXPECT_EQ(MakeOldestNodeElection()->Elect({"c", 0, view, 0}), "e");  // suspect still live
  view.pop_back();
  EXPECT_EQ(MakeOldestNodeElection()->Elect({"c", 0, view, 0}), "c");  // c,d tie at 100: c < d
  EXPECT_EQ(MakeOldestNodeElection("worker")->Elect({"c", 0, view, 0}), "c");
  EXPECT_EQ(MakeOldestNodeElection("api")->Elect({"c", 0, view, 0}), "d");
  EXPECT_EQ(MakeOldestNodeElection("none")->Elect({"c", 0, view, 0}), std::nullopt);
  view.push_back(M("z", "x:1", 1, "", MemberState::kDead));  // not live: ignored
  EXPECT_EQ(MakeOldestNodeElection()->Elect({"c", 0, view, 0}), "c");
}

TEST(Election, LowestAddressComparesHostThenNumericPort) {
  std::vector<Member> v = {M("a", "10.0.0.1:7000", 0), M("b", "10.0.0.1:900", 0),
                           M("c", "10.0.0.2:1", 0)};
  EXPECT_EQ(MakeLowestAddressElection()->Elect({"c", 0, v, 0}), "b");
  v.push_back(M("0", "10.0.0.1:900", 0));  // same address: smaller id
  EXPECT_EQ(MakeLowestAddressElection()->Elect({"c", 0, v, 0}), "0");
  v.push_back(M("q", "10.0.0.1:junk", 0));  // malformed port reads as 0
  EXPECT_EQ(MakeLowestAddressElection()->Elect({"c", 0, v, 0}), "q");
}

TEST(Election, QuorumGateCountsLiveMembersOfAllClasses) {
  std::vector<Member> v = {M("a", "h:1", 1, "x"), M("b", "h:2", 2, "y"),
                           M("c", "h:3", 3, "y", MemberState::kDead)};
  for (const auto& e : All()) {
    EXPECT_EQ(e->Elect({"c", 0, v, 3}), std::nullopt) << e->Name();
  }
  EXPECT_EQ(MakeOldestNodeElection("y")->Elect({"c", 0, v, 2}), "b");
  v.push_back(M("d", "h:4", 4, "x", MemberState::kSuspect));
  EXPECT_EQ(MakeOldestNodeElection("y")->Elect({"c", 0, v, 3}), "b");
  EXPECT_EQ(MakeHrwElection()->Elect({"c", 0, {}, 0}), std::nullopt);
}

TEST(Election, HrwWinnerDoesNotMoveWhenANonWinnerLeaves) {
  std::vector<Member> v;
  for (int i = 0; i < 7; ++i) v.push_back(M("n" + std::to_string(i), "h:" + std::to_string(i), i));
  auto hrw = MakeHrwElection();
  for (std::uint64_t epoch = 0; epoch < 200; ++epoch) {
    const auto winner = hrw->Elect({"c", epoch, v, 0});
    ASSERT_TRUE(winner);
    for (std::size_t drop = 0; drop < v.size(); ++drop) {
      if (v[drop].id == *winner) continue;
      auto fewer = v;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(drop));
      EXPECT_EQ(hrw->Elect({"c", epoch, fewer, 0}), winner);
    }
  }
}

TEST(Election, HrwSpreadsLeadershipAcrossEpochs) {
  std::vector<Member> v;
  for (int i = 0; i < 5; ++i) v.push_back(M("n" + std::to_string(i), "h:" + std::to_string(i), i));
  std::map<NodeId, int> wins;
  auto hrw = MakeHrwElection();
  for (std::uint64_t epoch = 0; epoch < 2000; ++epoch) ++wins[*hrw->Elect({"c", epoch, v, 0})];
  ASSERT_EQ(wins.size(), 5u);
  for (const auto& [id, n] : wins) {
    EXPECT_GT(n, 300) << id;  // expected 400 each
    EXPECT_LT(n, 500) << id;
  }
  // The cluster name is part of the score.
  int differ = 0;
  for (std::uint64_t epoch = 0; epoch < 100; ++epoch) {
    differ += hrw->Elect({"c", epoch, v, 0}) != hrw->Elect({"other", epoch, v, 0});
  }
  EXPECT_GT(differ, 50);
}

std::uint64_t Sha8(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[i];
  return v;
}

TEST(Election, HrwScoreAndEpochUseTheDocumentedBytes) {
  const std::string epoch_be("\x00\x00\x00\x00\x00\x00\x01\x02", 8);
  EXPECT_EQ(HrwScore("c1", 0x102, "abc"), Sha8("c1|" + epoch_be + "|abc"));
  const std::vector<Member> v = {M("b", "h:2", 20), M("a", "h:1", 20), M("z", "h:3", 5)};
  EXPECT_EQ(ComputeEpoch(v), Sha8("z|5;a|20;b|20;"));
  EXPECT_EQ(ComputeEpoch({v[2], v[0], v[1]}), ComputeEpoch(v));
  EXPECT_NE(ComputeEpoch({v[0], v[1]}), ComputeEpoch(v));
  auto restarted = v;
  restarted[0].started_at_ms = 99;  // a restarted member changes the epoch
  EXPECT_NE(ComputeEpoch(restarted), ComputeEpoch(v));
}

}  // namespace
}  // namespace pynenc_cpp::cluster
