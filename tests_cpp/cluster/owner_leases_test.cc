// Owner lease unit tests on the deterministic simulator: 3 (or 5) nodes, each
// an OwnerLeases on its own SimEnv, the receivers decoding coordinator frames
// and dispatching the lease messages. Covers the restart guard, renewal, the
// generation fence, stopping holders, release, the grantor's view checks,
// quorum under cut links and the exact lease expiry.
#include "cluster/singletons/owner_leases.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "sim/sim.h"

namespace pynenc_cpp::cluster {
namespace {

namespace cw = coord_wire;

constexpr std::int64_t kHeartbeat = 100;
constexpr std::int64_t kLeaseMs = 1000;
constexpr std::int64_t kMargin = 10;  // the default: lease_ms / 100
constexpr std::int64_t kDelay = 3;    // every frame takes exactly this long
const std::string kLabel = "actor-1";

struct Extension {
  std::string label;
  std::int64_t until = 0;
  std::int64_t at = 0;
};

struct LeaseNode {
  NodeId id;
  Address address;
  Env* env = nullptr;
  std::unique_ptr<OwnerLeases> leases;
  std::vector<Extension> extensions;
  std::vector<cw::LeaseReply> replies;  // every reply this node received
  int malformed = 0;

  std::vector<Extension> For(const std::string& label) const {
    std::vector<Extension> out;
    for (const auto& e : extensions) {
      if (e.label == label) out.push_back(e);
    }
    return out;
  }
};

class OwnerLeasesTest : public ::testing::Test {
 protected:
  // n nodes, all live in every view, `quorum` grants per lease; started at
  // t=0, so grants are refused until t=kLeaseMs.
  void Boot(int n, int quorum, std::int64_t margin_ms = 0) {
    world_.SetFaults({0, 0, 0, kDelay, kDelay});
    for (int i = 0; i < n; ++i) {
      auto node = std::make_unique<LeaseNode>();
      node->id = "o" + std::to_string(i) + std::string(31, '0');
      node->address = "10.0.3." + std::to_string(i + 1) + ":7000";
      node->env = &world_.AddNode(node->address);
      LeaseNode* self = node.get();
      OwnerLeaseOptions o;
      o.self_id = node->id;
      o.heartbeat_ms = kHeartbeat;
      o.lease_ms = kLeaseMs;
      o.margin_ms = margin_ms;
      node->leases = std::make_unique<OwnerLeases>(
          *node->env, o, [self](const std::string& label, std::int64_t until) {
            // Write-ahead: called before Until() moves, and only to extend it.
            EXPECT_LT(self->leases->Until(label), until);
            self->extensions.push_back({label, until, self->env->NowMs()});
          });
      node->env->SetReceiver([self](const Address& from, std::uint8_t type, std::string payload) {
        auto m = cw::Decode(type, payload);
        if (!m.ok()) {
          ++self->malformed;
          return;
        }
        if (auto* req = std::get_if<cw::LeaseRequest>(&m.value())) {
          self->leases->OnRequest(from, *req);
        } else if (auto* rep = std::get_if<cw::LeaseReply>(&m.value())) {
          self->replies.push_back(*rep);
          self->leases->OnReply(*rep);
        } else if (auto* rel = std::get_if<cw::LeaseRelease>(&m.value())) {
          self->leases->OnRelease(*rel);
        }
      });
      nodes_.push_back(std::move(node));
    }
    for (auto& node : nodes_) node->leases->SetView(Members(), quorum);
    for (auto& node : nodes_) node->leases->Start();
  }

  std::vector<Member> Members() const {
    std::vector<Member> out;
    for (const auto& n : nodes_) out.push_back(Member{n->id, n->address});
    return out;
  }

  LeaseNode& N(int i) { return *nodes_[i]; }
  OwnerLeases& L(int i) { return *nodes_[i]->leases; }
  std::int64_t Now() const { return world_.Now(); }
  bool Holds(int i, const std::string& label = kLabel) { return L(i).Until(label) > Now(); }

  // Runs `ms` in heartbeat-sized steps checking that node i holds the lease
  // after every step.
  void ExpectHeldFor(int i, std::int64_t ms) {
    for (std::int64_t t = 0; t < ms; t += kHeartbeat / 2) {
      world_.RunFor(kHeartbeat / 2);
      ASSERT_TRUE(Holds(i)) << "node " << i << " lost the lease at " << Now();
    }
  }

  void TearDown() override {
    for (auto& n : nodes_) EXPECT_EQ(n->malformed, 0) << n->id;
  }

  sim::SimWorld world_{17};
  std::vector<std::unique_ptr<LeaseNode>> nodes_;
};

TEST_F(OwnerLeasesTest, GrantsAreRefusedForLeaseMsAfterStart) {
  Boot(3, 2);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kLeaseMs - 1);
  EXPECT_FALSE(Holds(0));
  EXPECT_TRUE(N(0).extensions.empty());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(L(i).stats().grants_given, 0u) << i;
    EXPECT_GT(L(i).stats().grants_refused, 0u) << i;
    EXPECT_FALSE(L(i).SlotFor(kLabel).has_value()) << i;
  }
  // The refused requests still raised the highest generation seen.
  EXPECT_EQ(L(1).HighestSeen(kLabel), (Generation{1, 0}));

  world_.RunFor(kHeartbeat + 2 * kDelay + 1);
  EXPECT_TRUE(Holds(0));
  ASSERT_FALSE(N(0).extensions.empty());
  EXPECT_GE(N(0).extensions.front().at, kLeaseMs);
}

TEST_F(OwnerLeasesTest, UntilIsSendTimePlusLeaseMinusMargin) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  const std::int64_t sent = Now();
  L(0).Acquire(kLabel, {1, 0});  // asks at once (a 0 ms timer)
  EXPECT_EQ(L(0).Until(kLabel), 0);
  world_.RunFor(2 * kDelay - 1);
  EXPECT_EQ(L(0).Until(kLabel), 0);  // the self-grant alone is not a quorum
  world_.RunFor(1);
  EXPECT_EQ(L(0).Until(kLabel), sent + kLeaseMs - kMargin);
  EXPECT_EQ(L(0).margin_ms(), kMargin);
  ASSERT_EQ(N(0).extensions.size(), 1u);
  EXPECT_EQ(N(0).extensions[0].at, sent + 2 * kDelay);
  EXPECT_EQ(N(0).extensions[0].until, sent + kLeaseMs - kMargin);

  // Each later round moves it to its own send time (a round's grants all arrive
  // 2 * kDelay after it left); rounds come at least once per heartbeat.
  world_.RunFor(3 * kHeartbeat);
  ASSERT_GE(N(0).extensions.size(), 4u);
  for (std::size_t k = 1; k < N(0).extensions.size(); ++k) {
    const auto& e = N(0).extensions[k];
    EXPECT_EQ(e.until, e.at - 2 * kDelay + kLeaseMs - kMargin) << k;
    EXPECT_GT(e.at, N(0).extensions[k - 1].at) << k;
    EXPECT_LE(e.at - N(0).extensions[k - 1].at, kHeartbeat) << k;
  }
  // Grantors promise from when they received the request (kDelay after it left).
  auto slot = L(1).SlotFor(kLabel);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->holder, N(0).id);
  EXPECT_EQ(slot->generation, (Generation{1, 0}));
  EXPECT_EQ(slot->until_ms, N(0).extensions.back().at - kDelay + kLeaseMs);
}

TEST_F(OwnerLeasesTest, GrantsForAnOlderGenerationDoNotCount) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(1);  // the round for 1.0 left at kLeaseMs
  const std::int64_t newer_at = Now();
  L(0).Acquire(kLabel, {1, 1});  // its own round leaves now
  world_.RunFor(2 * kDelay);
  // The replies for 1.0 arrived first and were not counted for 1.1.
  ASSERT_EQ(N(0).extensions.size(), 1u);
  EXPECT_EQ(N(0).extensions[0].at, newer_at + 2 * kDelay);
  EXPECT_EQ(N(0).extensions[0].until, newer_at + kLeaseMs - kMargin);
}

TEST_F(OwnerLeasesTest, ExplicitMarginIsUsed) {
  Boot(3, 2, /*margin_ms=*/25);
  world_.RunFor(kLeaseMs);
  const std::int64_t sent = Now();
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(2 * kDelay);
  EXPECT_EQ(L(0).margin_ms(), 25);
  EXPECT_EQ(L(0).Until(kLabel), sent + kLeaseMs - 25);
}

TEST_F(OwnerLeasesTest, HolderKeepsRenewingAndStatsCount) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  EXPECT_TRUE(L(0).Wanted(kLabel));
  world_.RunFor(2 * kDelay);
  ASSERT_TRUE(Holds(0));
  ExpectHeldFor(0, 5 * kLeaseMs);
  const auto ext = N(0).For(kLabel);
  ASSERT_GE(ext.size(), 40u);
  for (std::size_t k = 1; k < ext.size(); ++k) EXPECT_GT(ext[k].until, ext[k - 1].until);
  // The node never holds less than lease_ms - heartbeat - margin - delays ahead.
  EXPECT_GE(L(0).Until(kLabel) - Now(), kLeaseMs - kHeartbeat - kMargin - 2 * kDelay);
}

TEST_F(OwnerLeasesTest, StatsCountRoundsGrantsAndExtensions) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);  // the period's timer at kLeaseMs found nothing wanted
  EXPECT_EQ(L(0).stats().rounds, 0u);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(10 * kHeartbeat);
  // A round at once, one more a quarter heartbeat later (no lease yet then), then
  // one per heartbeat; the last one's requests may still be in flight.
  const std::uint64_t rounds = L(0).stats().rounds;
  EXPECT_GE(rounds, 11u);
  EXPECT_LE(rounds, 12u);
  EXPECT_EQ(L(0).stats().grants_given, rounds);  // self-grants are immediate
  for (int i : {1, 2}) {
    EXPECT_GE(L(i).stats().grants_given, rounds - 1) << i;
    EXPECT_LE(L(i).stats().grants_given, rounds) << i;
  }
  EXPECT_EQ(L(0).stats().extensions, N(0).extensions.size());
  EXPECT_GE(L(0).stats().extensions, rounds - 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(L(i).stats().grants_refused, 0u) << i;
    EXPECT_EQ(L(i).stats().malformed, 0u) << i;
  }
  EXPECT_EQ(L(1).stats().rounds, 0u);
  EXPECT_EQ(L(1).stats().extensions, 0u);
}

TEST_F(OwnerLeasesTest, SameGenerationElsewhereNeverGetsIt) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kHeartbeat / 2);
  ASSERT_TRUE(Holds(0));
  L(1).Acquire(kLabel, {1, 0});
  ExpectHeldFor(0, 5 * kLeaseMs);
  EXPECT_FALSE(Holds(1));
  EXPECT_EQ(L(1).Until(kLabel), 0);
  EXPECT_TRUE(N(1).For(kLabel).empty());
  EXPECT_GT(L(2).stats().grants_refused, 40u);
  for (const auto& r : N(1).replies) {
    for (const auto& a : r.answers) EXPECT_FALSE(a.granted) << "from " << r.grantor;
  }
}

TEST_F(OwnerLeasesTest, NewerGenerationFencesTheOldHolder) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(3 * kHeartbeat + kHeartbeat / 2);  // between two rounds
  ASSERT_TRUE(Holds(0));
  const std::int64_t fenced_at = Now();
  L(1).Acquire(kLabel, {2, 0});
  world_.RunFor(3 * kLeaseMs);

  // The old holder's renewals stop as soon as the grantors saw generation 2.
  const auto old_ext = N(0).For(kLabel);
  ASSERT_FALSE(old_ext.empty());
  for (const auto& e : old_ext) EXPECT_LE(e.at, fenced_at + 2 * kDelay) << e.until;
  const std::int64_t old_last_until = old_ext.back().until;
  EXPECT_LT(L(0).Until(kLabel), Now());  // expired
  EXPECT_EQ(L(0).HighestSeen(kLabel), (Generation{2, 0}));

  // The new one holds, but only after the old lease ran out.
  const auto new_ext = N(1).For(kLabel);
  ASSERT_FALSE(new_ext.empty());
  EXPECT_GE(new_ext.front().at, old_last_until);
  // ... and not much later: the grantors' promises end by then.
  EXPECT_LE(new_ext.front().at, old_last_until + kMargin + 2 * kDelay + kHeartbeat + 2 * kDelay);
  EXPECT_TRUE(Holds(1));
  auto slot = L(2).SlotFor(kLabel);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->holder, N(1).id);
  EXPECT_EQ(slot->generation, (Generation{2, 0}));
}

TEST_F(OwnerLeasesTest, StoppingHolderKeepsRenewingDespiteANewerGeneration) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kHeartbeat / 2);
  ASSERT_TRUE(Holds(0));
  L(0).SetStopping(kLabel);
  L(1).Acquire(kLabel, {2, 0});
  const std::size_t before = N(0).extensions.size();
  ExpectHeldFor(0, 4 * kLeaseMs);
  EXPECT_GE(N(0).extensions.size(), before + 30);
  EXPECT_TRUE(N(1).For(kLabel).empty());
  EXPECT_FALSE(Holds(1));

  // Released: the successor gets it within about one heartbeat.
  const std::int64_t dropped_at = Now();
  L(0).Drop(kLabel, /*release=*/true);
  EXPECT_FALSE(L(0).Wanted(kLabel));
  EXPECT_EQ(L(0).Until(kLabel), 0);
  world_.RunFor(kHeartbeat + 4 * kDelay);
  const auto new_ext = N(1).For(kLabel);
  ASSERT_FALSE(new_ext.empty());
  EXPECT_LE(new_ext.front().at, dropped_at + kHeartbeat + 4 * kDelay);
  EXPECT_TRUE(Holds(1));
}

TEST_F(OwnerLeasesTest, ReleaseLetsASameGenerationWaiterIn) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kHeartbeat / 2);
  L(1).Acquire(kLabel, {1, 0});
  world_.RunFor(2 * kLeaseMs);
  ASSERT_TRUE(N(1).For(kLabel).empty());
  const std::int64_t dropped_at = Now();
  L(0).Drop(kLabel, /*release=*/true);
  world_.RunFor(kHeartbeat + 4 * kDelay);
  const auto ext = N(1).For(kLabel);
  ASSERT_FALSE(ext.empty());
  EXPECT_LE(ext.front().at, dropped_at + kHeartbeat + 4 * kDelay);
  for (int i = 0; i < 3; ++i) {
    auto slot = L(i).SlotFor(kLabel);
    ASSERT_TRUE(slot.has_value()) << i;
    EXPECT_EQ(slot->holder, N(1).id) << i;
  }
}

TEST_F(OwnerLeasesTest, DropWithoutReleaseMakesTheSuccessorWaitForExpiry) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kHeartbeat / 2);
  L(1).Acquire(kLabel, {1, 0});
  world_.RunFor(kLeaseMs);
  const std::int64_t last_until = N(0).For(kLabel).back().until;
  L(0).Drop(kLabel, /*release=*/false);
  world_.RunFor(2 * kLeaseMs);
  const auto ext = N(1).For(kLabel);
  ASSERT_FALSE(ext.empty());
  EXPECT_GE(ext.front().at, last_until);
}

TEST_F(OwnerLeasesTest, RequestFromOutsideTheViewIsRefused) {
  Boot(3, 2);
  // Node 2 does not know node 1.
  L(2).SetView({Member{N(0).id, N(0).address}, Member{N(2).id, N(2).address}}, 2);
  world_.RunFor(kLeaseMs);
  L(1).Acquire(kLabel, {1, 0});
  world_.RunFor(3 * kHeartbeat);
  int from2 = 0, from0 = 0;
  for (const auto& r : N(1).replies) {
    for (const auto& a : r.answers) {
      if (r.grantor == N(2).id) {
        ++from2;
        EXPECT_FALSE(a.granted);
      } else if (r.grantor == N(0).id) {
        ++from0;
        EXPECT_TRUE(a.granted);  // a grantor that knows node 1 grants
      }
    }
  }
  EXPECT_GT(from2, 0);
  EXPECT_GT(from0, 0);
  EXPECT_FALSE(L(2).SlotFor(kLabel).has_value());
  EXPECT_TRUE(Holds(1));  // node 0 and itself are a quorum
}

TEST_F(OwnerLeasesTest, RequestFromTheWrongAddressIsRefused) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  // Node 1's id claimed from node 2's address (answers go to node 2).
  cw::LeaseRequest req{77, N(1).id, {{kLabel, {1, 0}, false}}};
  L(0).OnRequest(N(2).address, req);
  world_.RunFor(2 * kDelay);
  ASSERT_EQ(N(2).replies.size(), 1u);
  EXPECT_EQ(N(2).replies[0].round, 77u);
  EXPECT_EQ(N(2).replies[0].grantor, N(0).id);
  ASSERT_EQ(N(2).replies[0].answers.size(), 1u);
  EXPECT_FALSE(N(2).replies[0].answers[0].granted);
  EXPECT_FALSE(L(0).SlotFor(kLabel).has_value());

  // The same request from the right address is granted.
  L(0).OnRequest(N(1).address, req);
  world_.RunFor(2 * kDelay);
  ASSERT_EQ(N(1).replies.size(), 1u);
  EXPECT_TRUE(N(1).replies[0].answers[0].granted);
  ASSERT_TRUE(L(0).SlotFor(kLabel).has_value());
  EXPECT_EQ(L(0).SlotFor(kLabel)->holder, N(1).id);

  // An unknown id is refused from any address.
  cw::LeaseRequest stranger{78, "nobody", {{"other", {1, 0}, false}}};
  L(0).OnRequest(N(2).address, stranger);
  world_.RunFor(2 * kDelay);
  ASSERT_EQ(N(2).replies.size(), 2u);
  EXPECT_FALSE(N(2).replies[1].answers[0].granted);
  EXPECT_FALSE(L(0).SlotFor("other").has_value());

  // A request carrying the grantor's own id is ignored (no reply).
  cw::LeaseRequest own{79, N(0).id, {{"mine", {1, 0}, false}}};
  L(0).OnRequest(N(2).address, own);
  world_.RunFor(2 * kDelay);
  EXPECT_EQ(N(2).replies.size(), 2u);
}

TEST_F(OwnerLeasesTest, OneCutLinkKeepsTheLeaseIsolationEndsIt) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kHeartbeat / 2);
  world_.CutLink(N(0).address, N(1).address);
  ExpectHeldFor(0, 3 * kLeaseMs);  // itself and node 2

  // Isolated: no grants reach it; it is not renewed and runs out.
  world_.Partition({{N(0).address}, {N(1).address, N(2).address}});
  const std::int64_t isolated_at = Now();
  const std::int64_t until = L(0).Until(kLabel);
  EXPECT_GT(until, Now());
  world_.RunFor(2 * kLeaseMs);
  EXPECT_EQ(L(0).Until(kLabel), until);
  EXPECT_FALSE(Holds(0));
  for (const auto& e : N(0).For(kLabel)) EXPECT_LE(e.at, isolated_at);
  EXPECT_GT(L(0).stats().rounds, 10u);  // it kept asking

  // Healed: it gets it back (its generation is still the highest).
  world_.HealAll();
  world_.RunFor(kHeartbeat + 2 * kDelay);
  EXPECT_TRUE(Holds(0));
}

TEST_F(OwnerLeasesTest, FiveNodesQuorumThree) {
  Boot(5, 3);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {1, 0});
  world_.RunFor(kHeartbeat / 2);
  world_.CutLink(N(0).address, N(1).address);
  world_.CutLink(N(0).address, N(2).address);
  ExpectHeldFor(0, 2 * kLeaseMs);  // 0, 3, 4

  // With only one peer left it is one short of quorum.
  world_.CutLink(N(0).address, N(3).address);
  const std::int64_t cut_at = Now();
  world_.RunFor(2 * kLeaseMs);
  EXPECT_FALSE(Holds(0));
  for (const auto& e : N(0).For(kLabel)) EXPECT_LE(e.at, cut_at);

  // Another node with a newer generation takes over on the majority side.
  L(1).Acquire(kLabel, {2, 0});
  world_.RunFor(kLeaseMs + 2 * kHeartbeat);
  EXPECT_TRUE(Holds(1));
  EXPECT_GE(N(1).For(kLabel).front().at, N(0).For(kLabel).back().until);
}

TEST_F(OwnerLeasesTest, LowerGenerationAcquireIsIgnored) {
  Boot(3, 2);
  world_.RunFor(kLeaseMs);
  L(0).Acquire(kLabel, {2, 0});
  L(0).Acquire(kLabel, {1, 5});
  world_.RunFor(kHeartbeat);
  EXPECT_TRUE(Holds(0));
  EXPECT_EQ(L(1).SlotFor(kLabel)->generation, (Generation{2, 0}));
  // A higher one replaces it at once.
  L(0).Acquire(kLabel, {2, 1});
  world_.RunFor(2 * kDelay);
  EXPECT_EQ(L(1).SlotFor(kLabel)->generation, (Generation{2, 1}));
  EXPECT_EQ(L(2).HighestSeen(kLabel), (Generation{2, 1}));
  EXPECT_TRUE(Holds(0));
}

}  // namespace
}  // namespace pynenc_cpp::cluster
