// The coordinator layer of ClusterNode over real loopback sockets, with a
// shared SQLite generation source: a singleton and actors placed on three
// nodes in one process, asked from every node, moved by a graceful stop of
// their node and kept (not restarted) across a graceful leader change.
// Deadlines are generous and polled, never fixed sleeps.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/ports/journal.h"
#include "pynenc_cpp/ports/storage.h"

namespace pynenc_cpp::cluster {
namespace {

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

constexpr auto kDeadline = std::chrono::seconds(30);

// Which instances run where, as the instances themselves see it.
struct Registry {
  std::mutex mu;
  std::map<std::string, std::set<std::string>> running;  // label -> node names
  std::map<std::string, int> starts;                    // label -> factory calls
  int overlaps = 0;                                     // a start while another ran
  std::set<std::string> Where(const std::string& label) {
    std::lock_guard<std::mutex> lock(mu);
    return running[label];
  }
  int Starts(const std::string& label) {
    std::lock_guard<std::mutex> lock(mu);
    return starts[label];
  }
};

class Echo final : public ActorInstance {
 public:
  Echo(Registry& reg, std::string node, InstanceContext ctx)
      : reg_(reg), node_(std::move(node)), ctx_(std::move(ctx)) {
    std::lock_guard<std::mutex> lock(reg_.mu);
    if (!reg_.running[ctx_.label].empty()) ++reg_.overlaps;
    reg_.running[ctx_.label].insert(node_);
    ++reg_.starts[ctx_.label];
  }
  void Stop(std::string_view) override {
    std::lock_guard<std::mutex> lock(reg_.mu);
    reg_.running[ctx_.label].erase(node_);
  }
  Result<std::string> OnMessage(const std::string& payload) override {
    return node_ + "/" + ctx_.label + "@" + ctx_.generation.ToString() + ":" + payload;
  }

 private:
  Registry& reg_;
  std::string node_;
  InstanceContext ctx_;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/pynenc_coord_test_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class CoordinatorNodes : public ::testing::Test {
 protected:
  ClusterOptions Options(const std::string& name, const std::vector<Address>& seeds) {
    ClusterOptions o;
    o.cluster_name = "coord-test";
    o.host = "127.0.0.1";
    o.secret = "coord-test-secret";
    o.heartbeat_ms = 100;
    o.suspect_timeout_ms = 1'000;  // no flapping on a loaded, sanitized run
    o.stabilize_ms = 100;
    o.quorum = 2;
    o.seeds = seeds;
    o.node_class = name == "gw" ? "edge" : "worker";
    o.metadata = {{"name", name}};
    o.generation_source = "sqlite://" + dir_.path() + "/generations.db";
    o.activation_log = dir_.path() + "/activation.jsonl";
    return o;
  }
  ClusterNode& Start(const std::string& name) {
    std::vector<Address> seeds;
    for (auto& [n, node] : nodes_) seeds.push_back(node->Status().address);
    auto r = ClusterNode::Start(Options(name, seeds), {}, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    ClusterNode& node = *r.value();
    nodes_[name] = std::move(r).value();
    EXPECT_TRUE(node.RegisterActorType("echo", [this, name](const InstanceContext& ctx) {
                      return std::make_unique<Echo>(reg_, name, ctx);
                    }).ok());
    return node;
  }
  void TearDown() override {
    for (auto& [name, node] : nodes_) node->Stop();
  }

  TempDir dir_;
  Registry reg_;
  std::map<std::string, std::unique_ptr<ClusterNode>> nodes_;
};

TEST_F(CoordinatorNodes, SingletonAndActorsRunOnceAndAnswerFromEveryNode) {
  Start("gw");
  // The gateway leads (the oldest; ties in ms go by id): the move below is
  // then one coordinator's graceful move, 1.0 -> 2.0. Were the owner the
  // leader, its leave would also hand the coordinator over, and a successor
  // that cannot tell whether 2.0 already ran on the new owner re-grants it
  // as 2.1 (by design; see docs/cluster/singletons.md).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Start("w1");
  Start("w2");
  SingletonSpec s;
  s.label = "catalog";
  s.actor_type = "echo";
  s.anchor = SingletonAnchor::Class("worker");
  ActorSpec a;
  a.label = "storage/a";
  a.actor_type = "echo";
  a.constraints.required_classes = {"worker"};
  ASSERT_TRUE(WaitFor(
      [&] {
        auto st = nodes_["gw"]->SubmitSingleton(s, 2'000).get();
        return st.ok();
      },
      kDeadline));
  ASSERT_TRUE(nodes_["w2"]->SubmitActor(a, 5'000).get().ok());
  ASSERT_TRUE(WaitFor([&] { return reg_.Where("catalog").size() == 1; }, kDeadline));
  ASSERT_TRUE(WaitFor([&] { return reg_.Where("storage/a").size() == 1; }, kDeadline));
  const std::string owner = *reg_.Where("catalog").begin();
  EXPECT_TRUE(owner == "w1" || owner == "w2");
  // Asked from every node, the one instance answers.
  for (auto& [name, asked] : nodes_) {
    auto* node = asked.get();  // clang 14 cannot capture a structured binding
    ASSERT_TRUE(WaitFor(
        [&] {
          auto r = node->Ask("catalog", "ping", 2'000).get();
          return r.ok() && r.value().rfind(owner + "/catalog@1.0:ping", 0) == 0;
        },
        kDeadline))
        << name;
  }
  auto statuses = nodes_["gw"]->QueryStatuses(5'000).get();
  ASSERT_TRUE(statuses.ok()) << statuses.status().ToString();
  ASSERT_EQ(statuses.value().size(), 2u);
  auto view = nodes_["w1"]->QueryView(5'000).get();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.value().alive_count, 3);

  // The owner leaves gracefully: the singleton moves to the other worker under
  // a higher term; the two never ran at once.
  ASSERT_EQ(nodes_["gw"]->Status().leader, nodes_["gw"]->Status().id);
  nodes_[owner]->Stop();
  const std::string other = owner == "w1" ? "w2" : "w1";
  ASSERT_TRUE(WaitFor([&] { return reg_.Where("catalog") == std::set<std::string>{other}; },
                      kDeadline));
  std::string last;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = nodes_["gw"]->Ask("catalog", "x", 2'000).get();
        last = r.ok() ? r.value() : r.status().ToString();
        return r.ok() && r.value().rfind(other + "/catalog@2.0:x", 0) == 0;
      },
      kDeadline))
      << "last answer: " << last;
  std::lock_guard<std::mutex> lock(reg_.mu);
  EXPECT_EQ(reg_.overlaps, 0);
}

TEST_F(CoordinatorNodes, ALeaderChangeRestartsNothing) {
  Start("gw");
  // Join order is by start time in ms (ties by id): make the gateway the oldest.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Start("w1");
  Start("w2");
  ActorSpec a;
  a.label = "storage/a";
  a.actor_type = "echo";
  a.constraints.required_classes = {"worker"};
  ASSERT_TRUE(WaitFor([&] { return nodes_["w1"]->SubmitActor(a, 2'000).get().ok(); }, kDeadline));
  ASSERT_TRUE(WaitFor([&] { return reg_.Where("storage/a").size() == 1; }, kDeadline));
  auto leader = nodes_["w1"]->Status().leader;
  ASSERT_TRUE(leader);
  EXPECT_EQ(*leader, nodes_["gw"]->Status().id);  // the oldest
  nodes_["gw"]->Stop();  // the leader leaves; a worker takes over the Coordinator
  ASSERT_TRUE(WaitFor(
      [&] {
        auto st = nodes_["w1"]->QueryStatuses(2'000).get();
        return st.ok() && st.value().size() == 1 && st.value()[0].state == SpecState::kRunning;
      },
      kDeadline));
  EXPECT_EQ(reg_.Starts("storage/a"), 1);
}

// A full cluster restart on memory:// generation sources (terms start again at
// 1.0) while the singleton's journal is fenced at 5.0 by the cluster's earlier
// life: the instance's factory finds the journal fenced above it and reports the
// floor; the leader claims a term above it and the singleton runs (it would
// never run again otherwise: a journal fence only rises).
TEST_F(CoordinatorNodes, AFullRestartOnMemorySourcesClaimsATermAboveTheJournalFence) {
  auto journal = OpenJournal({"sqlite://" + dir_.path() + "/journal.db", "coord-test", nullptr});
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  std::shared_ptr<Journal> j = std::move(journal).value();
  ASSERT_TRUE(j->Fence("ledger", Generation{5, 0}.Packed()).ok());  // the earlier life
  // Shared with the factories, which run on the nodes' callback threads until
  // TearDown stops the nodes (after this body's locals are gone).
  struct Refused {
    std::mutex mu;
    std::vector<Generation> generations;
  };
  auto refused = std::make_shared<Refused>();
  for (const std::string name : {"gw", "w1", "w2"}) {
    std::vector<Address> seeds;
    for (auto& [n, node] : nodes_) seeds.push_back(node->Status().address);
    ClusterOptions o = Options(name, seeds);
    o.generation_source = "memory://";
    auto r = ClusterNode::Start(o, {}, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ClusterNode* node = r.value().get();
    nodes_[name] = std::move(r).value();
    ActorFactory factory = [this, j, refused, node, name](const InstanceContext& ctx) {
      std::unique_ptr<ActorInstance> none;
      if (!j->Fence(ctx.label, ctx.generation.Packed()).ok()) {
        auto fence = j->FenceOf(ctx.label);
        if (fence.ok()) {
          node->RaiseGenerationFloor(ctx.label, Generation::FromPacked(fence.value()));
        }
        std::lock_guard<std::mutex> lock(refused->mu);
        refused->generations.push_back(ctx.generation);
        return none;
      }
      return std::unique_ptr<ActorInstance>(std::make_unique<Echo>(reg_, name, ctx));
    };
    ASSERT_TRUE(node->RegisterActorType("ledger", factory).ok());
  }
  SingletonSpec s;
  s.label = "ledger";
  s.actor_type = "ledger";
  s.anchor = SingletonAnchor::Class("worker");
  ASSERT_TRUE(WaitFor([&] { return nodes_["gw"]->SubmitSingleton(s, 2'000).get().ok(); },
                      kDeadline));
  ASSERT_TRUE(WaitFor([&] { return reg_.Where("ledger").size() == 1; }, kDeadline));
  const std::string owner = *reg_.Where("ledger").begin();
  std::string last;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = nodes_["gw"]->Ask("ledger", "x", 2'000).get();
        last = r.ok() ? r.value() : r.status().ToString();
        return r.ok();
      },
      kDeadline));
  // "<node>/ledger@<term>.<seq>:x", under a term above the journal's 5.
  const auto at = last.find('@');
  ASSERT_NE(at, std::string::npos) << last;
  EXPECT_EQ(last.substr(0, at), owner + "/ledger");
  EXPECT_GT(std::stoul(last.substr(at + 1)), 5u) << last;
  auto fence = j->FenceOf("ledger");
  ASSERT_TRUE(fence.ok());
  EXPECT_GT(Generation::FromPacked(fence.value()), (Generation{5, 0}));
  {
    std::lock_guard<std::mutex> lock(refused->mu);
    ASSERT_FALSE(refused->generations.empty())
        << "the first start (a term from a fresh source) was refused";
    EXPECT_LT(refused->generations.front(), (Generation{5, 0}));
  }
  std::lock_guard<std::mutex> lock(reg_.mu);
  EXPECT_EQ(reg_.overlaps, 0);
}

// A full cluster restart on memory:// generation sources with state dirs: each
// node remembers the generations it ran, so the restarted cluster's terms start
// above them instead of at 1.0 again.
TEST_F(CoordinatorNodes, StateDirsKeepTermsRisingAcrossAFullRestartOnMemorySources) {
  const auto start = [&](const std::string& name) {
    std::vector<Address> seeds;
    for (auto& [n, node] : nodes_) seeds.push_back(node->Status().address);
    ClusterOptions o = Options(name, seeds);
    o.generation_source = "memory://";
    o.state_dir = dir_.path() + "/" + name;
    auto r = ClusterNode::Start(o, {}, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ClusterNode* node = r.value().get();
    nodes_[name] = std::move(r).value();
    ASSERT_TRUE(node->RegisterActorType("echo", [this, name](const InstanceContext& ctx) {
                      return std::make_unique<Echo>(reg_, name, ctx);
                    }).ok());
  };
  SingletonSpec s;
  s.label = "catalog";
  s.actor_type = "echo";
  s.anchor = SingletonAnchor::Class("worker");
  // The term of the answer "<node>/catalog@<term>.<seq>:x".
  const auto answered_term = [&](std::uint32_t& term) {
    return WaitFor(
        [&] {
          auto r = nodes_["gw"]->Ask("catalog", "x", 2'000).get();
          if (!r.ok()) return false;
          const auto at = r.value().find('@');
          term = static_cast<std::uint32_t>(std::stoul(r.value().substr(at + 1)));
          return true;
        },
        kDeadline);
  };
  std::uint32_t first_life = 0;
  for (int life = 0; life < 2; ++life) {
    SCOPED_TRACE("life " + std::to_string(life));
    start("gw");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    start("w1");
    start("w2");
    ASSERT_TRUE(WaitFor([&] { return nodes_["gw"]->SubmitSingleton(s, 2'000).get().ok(); },
                        kDeadline));
    ASSERT_TRUE(WaitFor([&] { return reg_.Where("catalog").size() == 1; }, kDeadline));
    std::uint32_t term = 0;
    ASSERT_TRUE(answered_term(term));
    if (life == 0) {
      // Move it once (a new term) so the history holds more than 1.0.
      const std::string owner = *reg_.Where("catalog").begin();
      nodes_[owner]->Stop();
      ASSERT_TRUE(WaitFor(
          [&] {
            std::uint32_t t = 0;
            return answered_term(t) && t > term && (term = t, true);
          },
          kDeadline));
      first_life = term;
      EXPECT_GE(first_life, 2u);
    } else {
      EXPECT_GT(term, first_life) << "the restarted cluster claimed a term above its history";
    }
    for (auto& [name, node] : nodes_) node->Stop();
    nodes_.clear();
    if (life == 0) {
      // The history the restart relies on: the highest term a worker ran, in its state dir.
      std::string floors;
      for (const char* name : {"w1", "w2"}) {
        std::ifstream in(dir_.path() + "/" + name + "/term_floor");
        floors += std::string(std::istreambuf_iterator<char>(in), {});
      }
      EXPECT_NE(floors.find(std::to_string(first_life) + "\n"), std::string::npos) << floors;
    }
  }
  std::lock_guard<std::mutex> lock(reg_.mu);
  EXPECT_EQ(reg_.overlaps, 0);
}

TEST(CoordinatorNodeErrors, BadGenerationSourceIsBadConfigNamingTheOption) {
  ClusterOptions o;
  o.host = "127.0.0.1";
  o.secret = "s";
  o.generation_source = "postgres://nowhere";
  auto r = ClusterNode::Start(o, {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
  EXPECT_EQ(r.status().message().rfind("generation_source:", 0), 0u) << r.status().message();
}

// A node given the process's Storage claims its generations there: what the
// process's other cluster ports read from that storage is the node's own.
TEST_F(CoordinatorNodes, AGivenStorageHoldsTheNodesGenerations) {
  ClusterOptions o = Options("w1", {});
  o.quorum = 1;
  auto storage = Storage::Open({o.generation_source, o.cluster_name, nullptr});
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  o.storage = storage.value();
  auto r = ClusterNode::Start(o, {}, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  nodes_["w1"] = std::move(r).value();
  ASSERT_TRUE(nodes_["w1"]->RegisterActorType("echo", [this](const InstanceContext& ctx) {
                            return std::make_unique<Echo>(reg_, "w1", ctx);
                          }).ok());
  ActorSpec a;
  a.label = "storage/a";
  a.actor_type = "echo";
  ASSERT_TRUE(WaitFor([&] { return nodes_["w1"]->SubmitActor(a, 2'000).get().ok(); }, kDeadline));
  ASSERT_TRUE(WaitFor([&] { return reg_.Where("storage/a").size() == 1; }, kDeadline));
  auto source = storage.value()->NewGenerationSource();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto current = source.value()->Current("storage/a");
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  ASSERT_TRUE(current.value().has_value());
  EXPECT_EQ(current.value()->owner, nodes_["w1"]->Status().id);
}

TEST(CoordinatorNodeErrors, AGivenStorageMustBeOnTheSourceAndNamespacedByTheCluster) {
  TempDir dir;
  ClusterOptions o;
  o.host = "127.0.0.1";
  o.secret = "s";
  o.cluster_name = "c1";
  o.generation_source = "sqlite://" + dir.path() + "/g.db";
  for (const BackendConfig& config :
       {BackendConfig{"sqlite://" + dir.path() + "/other.db", "c1", nullptr},
        BackendConfig{o.generation_source, "c2", nullptr}}) {
    auto storage = Storage::Open(config);
    ASSERT_TRUE(storage.ok()) << storage.status().ToString();
    o.storage = storage.value();
    auto r = ClusterNode::Start(o, {}, {});
    ASSERT_FALSE(r.ok()) << config.uri << " " << config.app_id;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
    EXPECT_EQ(r.status().message().rfind("generation_source: the storage given", 0), 0u)
        << r.status().message();
  }
}

TEST(CoordinatorNodeErrors, StandaloneNodeRefusesCoordinatorCalls) {
  auto r = ClusterNode::Start(ClusterOptions{}, {}, {});
  ASSERT_TRUE(r.ok());
  ActorSpec a;
  a.label = "x";
  a.actor_type = "t";
  EXPECT_EQ(r.value()->SubmitActor(a).get().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(r.value()->Ask("x", "y").get().status().code(), ErrorCode::kUnavailable);
  // A timeout over a day is refused, not added to a clock (no overflow).
  EXPECT_EQ(r.value()->Ask("x", "y", INT64_MAX).get().status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.value()->QueryView(kMaxTimeoutMs + 1).get().status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.value()->RegisterActorType("t", [](const InstanceContext&) {
                          return std::unique_ptr<ActorInstance>();
                        }).code(),
            ErrorCode::kUnavailable);
  r.value()->Stop();
}

}  // namespace
}  // namespace pynenc_cpp::cluster
