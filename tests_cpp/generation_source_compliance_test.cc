// Compliance suite of the GenerationSource port, run against every backend of
// testing::AllBackends (cross-object and durability cases on DurableBackends).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "redis/redis_client.h"
#include "sqlite/sqlite_db.h"

namespace pynenc_cpp {
namespace {

using testing::MemBackend;

template <typename B>
constexpr bool kIsMem = std::is_same_v<B, MemBackend>;

std::optional<Ownership> Own(const std::string& owner, std::uint32_t term, std::uint32_t seq) {
  return Ownership{owner, Generation{term, seq}};
}

template <typename B>
class GenerationSourceCompliance : public testing::BackendTest<B> {
 protected:
  std::unique_ptr<GenerationSource> Open(const std::string& app_id = "gen-app") {
    auto opened = OpenGenerationSource(this->backend_.Config(nullptr, app_id));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  void SetUp() override {
    src_ = Open();
    ASSERT_NE(src_, nullptr);
  }
  std::optional<Ownership> Current(const std::string& label) {
    auto current = src_->Current(label);
    EXPECT_TRUE(current.ok()) << current.status().ToString();
    return current.ok() ? current.value() : std::nullopt;
  }
  std::unique_ptr<GenerationSource> src_;
};
TYPED_TEST_SUITE(GenerationSourceCompliance, testing::AllBackends, testing::BackendNames);

template <typename B>
class GenerationSourceDurable : public GenerationSourceCompliance<B> {
 protected:
  // Overwrites the stored ownership of `label` behind the source's back (white
  // box: the backend's own layout), to reach states too slow to claim into.
  void Seed(const std::string& label, const Ownership& o) {
    const BackendConfig config = this->backend_.Config(nullptr, "gen-app");
    if constexpr (std::is_same_v<B, testing::SqliteBackend>) {
      auto db = sqlite::OpenDatabase(config);
      ASSERT_TRUE(db.ok());
      Status s = db.value()->Write([&](sqlite::Conn& c) -> Status {
        auto q = c.Prepare("UPDATE generation_owner SET owner = ?, generation = ? WHERE label = ?");
        if (!q.ok()) return q.status();
        return q.value()
            ->Bind(1, o.owner)
            .Bind(2, static_cast<std::int64_t>(o.generation.Packed()))
            .Bind(3, label)
            .Run();
      });
      ASSERT_TRUE(s.ok()) << s.ToString();
    } else {
      auto client = redis::OpenClient(config);
      ASSERT_TRUE(client.ok());
      auto r = client.value()->Command({"HSET",
                                        redis::KeyPrefix("gen-app", "generation") + "owners", label,
                                        std::to_string(o.generation.term) + ":" +
                                            std::to_string(o.generation.seq) + ":" + o.owner});
      ASSERT_TRUE(r.ok() && !r.value().is_error());
    }
  }
};
TYPED_TEST_SUITE(GenerationSourceDurable, testing::DurableBackends, testing::BackendNames);

TYPED_TEST(GenerationSourceCompliance, FirstClaimIsTermOneSeqZeroPerLabel) {
  EXPECT_EQ(this->Current("a"), std::nullopt);
  EXPECT_EQ(this->src_->ClaimTerm("a", "n1").value(), (Generation{1, 0}));
  EXPECT_EQ(this->Current("a"), Own("n1", 1, 0));
  EXPECT_EQ(this->src_->ClaimTerm("b", "n2").value(), (Generation{1, 0}));
  EXPECT_EQ(this->Current("b"), Own("n2", 1, 0));
  EXPECT_EQ(this->src_->Shared(), !kIsMem<TypeParam>);
}

TYPED_TEST(GenerationSourceCompliance, ClaimTermIncreasesMovesOwnerAndResetsSeq) {
  EXPECT_EQ(this->src_->ClaimTerm("a", "n1").value(), (Generation{1, 0}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n2").value(), (Generation{2, 0}));
  EXPECT_EQ(this->src_->ClaimSeq("a", "n2", {2, 0}).value(), (Generation{2, 1}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n2").value(), (Generation{3, 0}));
  EXPECT_EQ(this->Current("a"), Own("n2", 3, 0));
}

TYPED_TEST(GenerationSourceCompliance, ClaimTermRespectsMinTerm) {
  EXPECT_EQ(this->src_->ClaimTerm("a", "n1", 10).value(), (Generation{11, 0}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n2", 5).value(), (Generation{12, 0}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n3", 20).value(), (Generation{21, 0}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n3", 21).value(), (Generation{22, 0}));
  EXPECT_EQ(this->Current("a"), Own("n3", 22, 0));
}

TYPED_TEST(GenerationSourceCompliance, ClaimSeqBumpsSeqOnExactMatchOnly) {
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n1").ok());
  EXPECT_EQ(this->src_->ClaimSeq("a", "n1", {1, 0}).value(), (Generation{1, 1}));
  EXPECT_EQ(this->src_->ClaimSeq("a", "n1", {1, 1}).value(), (Generation{1, 2}));
  EXPECT_EQ(this->Current("a"), Own("n1", 1, 2));

  auto wrong_owner = this->src_->ClaimSeq("a", "n2", {1, 2});
  ASSERT_EQ(wrong_owner.status().code(), ErrorCode::kConflict);
  EXPECT_NE(wrong_owner.status().message().find("'n1'"), std::string::npos)
      << wrong_owner.status().ToString();
  EXPECT_NE(wrong_owner.status().message().find("1.2"), std::string::npos)
      << wrong_owner.status().ToString();
  for (Generation stale :
       {Generation{1, 1}, Generation{1, 3}, Generation{2, 2}, Generation{0, 2}}) {
    EXPECT_EQ(this->src_->ClaimSeq("a", "n1", stale).status().code(), ErrorCode::kConflict)
        << stale.ToString();
  }
  EXPECT_EQ(this->Current("a"), Own("n1", 1, 2));  // no conflict changed anything

  auto none = this->src_->ClaimSeq("never", "n1", {0, 0});
  ASSERT_EQ(none.status().code(), ErrorCode::kConflict);
  EXPECT_NE(none.status().message().find("nothing"), std::string::npos) << none.status().ToString();
  EXPECT_EQ(this->Current("never"), std::nullopt);
}

TYPED_TEST(GenerationSourceCompliance, SpecsArePutReplacedRemovedAndListedSorted) {
  EXPECT_TRUE(this->src_->List().value().empty());
  const std::string binary("b\0\xff\n:x", 6);
  ASSERT_TRUE(this->src_->PutSpec("b", binary).ok());
  ASSERT_TRUE(this->src_->PutSpec("c", "spec-c").ok());
  ASSERT_TRUE(this->src_->PutSpec("a", "old").ok());
  ASSERT_TRUE(this->src_->PutSpec("a", "new").ok());
  ASSERT_TRUE(this->src_->ClaimTerm("b", "n1", 4).ok());
  ASSERT_TRUE(this->src_->ClaimTerm("unlisted", "n1").ok());  // an ownership without a spec
  EXPECT_EQ(this->src_->List().value(), (std::vector<SpecRecord>{{"a", "new", std::nullopt},
                                                                 {"b", binary, Own("n1", 5, 0)},
                                                                 {"c", "spec-c", std::nullopt}}));
  ASSERT_TRUE(this->src_->RemoveSpec("c").ok());
  ASSERT_TRUE(this->src_->RemoveSpec("never-put").ok());
  EXPECT_EQ(this->src_->List().value(),
            (std::vector<SpecRecord>{{"a", "new", std::nullopt}, {"b", binary, Own("n1", 5, 0)}}));
}

TYPED_TEST(GenerationSourceCompliance, RemoveSpecKeepsTheGeneration) {
  ASSERT_TRUE(this->src_->PutSpec("a", "s").ok());
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n1").ok());
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n2").ok());
  ASSERT_TRUE(this->src_->ClaimSeq("a", "n2", {2, 0}).ok());
  ASSERT_TRUE(this->src_->RemoveSpec("a").ok());
  EXPECT_TRUE(this->src_->List().value().empty());
  EXPECT_EQ(this->Current("a"), Own("n2", 2, 1));
  ASSERT_TRUE(this->src_->PutSpec("a", "again").ok());
  EXPECT_EQ(this->src_->List().value(), (std::vector<SpecRecord>{{"a", "again", Own("n2", 2, 1)}}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n3").value(), (Generation{3, 0}));
}

TYPED_TEST(GenerationSourceCompliance, AppIdsAreIsolated) {
  auto other = this->Open("other-app");
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n1", 7).ok());
  ASSERT_TRUE(this->src_->PutSpec("a", "mine").ok());
  EXPECT_EQ(other->Current("a").value(), std::nullopt);
  EXPECT_TRUE(other->List().value().empty());
  EXPECT_EQ(other->ClaimTerm("a", "x").value(), (Generation{1, 0}));
  ASSERT_TRUE(other->PutSpec("z", "theirs").ok());
  EXPECT_EQ(this->Current("a"), Own("n1", 8, 0));
  EXPECT_EQ(this->src_->List().value(), (std::vector<SpecRecord>{{"a", "mine", Own("n1", 8, 0)}}));
}

TYPED_TEST(GenerationSourceCompliance, PackedOrderIsGenerationOrder) {
  std::vector<Generation> minted;
  minted.push_back(this->src_->ClaimTerm("a", "n1").value());
  for (std::uint32_t i = 0; i < 3; ++i) {
    minted.push_back(this->src_->ClaimSeq("a", "n1", minted.back()).value());
  }
  minted.push_back(this->src_->ClaimTerm("a", "n2").value());
  minted.push_back(this->src_->ClaimTerm("a", "n2", 1000).value());
  for (std::size_t i = 1; i < minted.size(); ++i) {
    EXPECT_LT(minted[i - 1], minted[i]);
    EXPECT_LT(minted[i - 1].Packed(), minted[i].Packed());
  }
  const Generation samples[] = {
      {0, 0}, {0, 1}, {0, UINT32_MAX}, {1, 0}, {1, 7}, {2, 0}, {kMaxGenerationTerm, UINT32_MAX}};
  for (const Generation& x : samples) {
    EXPECT_EQ(Generation::FromPacked(x.Packed()), x);
    EXPECT_LT(x.Packed(), std::uint64_t{1} << 63);
    for (const Generation& y : samples) EXPECT_EQ(x < y, x.Packed() < y.Packed());
  }
  EXPECT_EQ((Generation{3, 1}).ToString(), "3.1");
}

TYPED_TEST(GenerationSourceCompliance, TermOverflowIsAConflictThatChangesNothing) {
  EXPECT_EQ(this->src_->ClaimTerm("a", "n1", kMaxGenerationTerm - 1).value(),
            (Generation{kMaxGenerationTerm, 0}));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n2").status().code(), ErrorCode::kConflict);
  EXPECT_EQ(this->Current("a"), Own("n1", kMaxGenerationTerm, 0));
  EXPECT_EQ(this->src_->ClaimTerm("b", "n1", kMaxGenerationTerm).status().code(),
            ErrorCode::kConflict);
  EXPECT_EQ(this->src_->ClaimTerm("c", "n1", UINT32_MAX).status().code(), ErrorCode::kConflict);
  EXPECT_EQ(this->Current("b"), std::nullopt);
  EXPECT_EQ(this->Current("c"), std::nullopt);
}

TYPED_TEST(GenerationSourceCompliance, InvalidArgumentsChangeNothing) {
  const std::pair<std::string, Status> cases[] = {
      {"ClaimTerm empty label", this->src_->ClaimTerm("", "n1").status()},
      {"ClaimTerm empty owner", this->src_->ClaimTerm("a", "").status()},
      {"ClaimSeq empty label", this->src_->ClaimSeq("", "n1", {}).status()},
      {"ClaimSeq empty owner", this->src_->ClaimSeq("a", "", {}).status()},
      {"Current empty label", this->src_->Current("").status()},
      {"PutSpec empty label", this->src_->PutSpec("", "s")},
      {"RemoveSpec empty label", this->src_->RemoveSpec("")},
  };
  for (const auto& [what, status] : cases) {
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << what << ": " << status.ToString();
  }
  EXPECT_EQ(this->Current("a"), std::nullopt);
  EXPECT_TRUE(this->src_->List().value().empty());
}

TYPED_TEST(GenerationSourceCompliance, OpenRejectsBadConfig) {
  for (const BackendConfig& bad :
       {BackendConfig{"nope", "a", nullptr}, BackendConfig{"ftp://x", "a", nullptr},
        this->backend_.Config(nullptr, "")}) {
    EXPECT_EQ(OpenGenerationSource(bad).status().code(), ErrorCode::kBadConfig) << bad.uri;
  }
}

// 4 threads x 50 ClaimTerm on one label, through one object (Mem) or two
// objects opened separately on the same storage: 200 distinct terms, 1..200.
TYPED_TEST(GenerationSourceCompliance, ConcurrentClaimTermsAreDistinct) {
  constexpr int kThreads = 4, kEach = 50;
  std::unique_ptr<GenerationSource> second = kIsMem<TypeParam> ? nullptr : this->Open();
  std::vector<std::vector<std::uint32_t>> terms(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    GenerationSource* src = (t % 2 == 1 && second) ? second.get() : this->src_.get();
    threads.emplace_back([&, src, t] {
      for (int i = 0; i < kEach; ++i) {
        auto g = src->ClaimTerm("hot", "n" + std::to_string(t));
        EXPECT_TRUE(g.ok()) << g.status().ToString();
        if (g.ok()) terms[t].push_back(g.value().term);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::uint32_t> all;
  for (const auto& mine : terms) {
    for (std::size_t i = 1; i < mine.size(); ++i) EXPECT_LT(mine[i - 1], mine[i]);
    all.insert(mine.begin(), mine.end());
  }
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), static_cast<std::uint32_t>(kThreads * kEach));
  EXPECT_EQ(this->Current("hot")->generation, (Generation{kThreads * kEach, 0}));
}

// Rounds of 4 threads racing ClaimSeq with the same expected generation: one
// winner per round (a compare-and-set), the losers get kConflict.
TYPED_TEST(GenerationSourceCompliance, RacingClaimSeqHasOneWinnerPerRound) {
  constexpr int kThreads = 4, kRounds = 25;
  std::unique_ptr<GenerationSource> second = kIsMem<TypeParam> ? nullptr : this->Open();
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n1").ok());
  std::atomic<int> wins{0}, conflicts{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    GenerationSource* src = (t % 2 == 1 && second) ? second.get() : this->src_.get();
    threads.emplace_back([&, src] {
      for (std::uint32_t round = 0; round < kRounds; ++round) {
        sync.arrive_and_wait();
        auto g = src->ClaimSeq("a", "n1", {1, round});
        if (g.ok()) {
          ++wins;
          EXPECT_EQ(g.value(), (Generation{1, round + 1}));
        } else {
          EXPECT_EQ(g.status().code(), ErrorCode::kConflict) << g.status().ToString();
          ++conflicts;
        }
        sync.arrive_and_wait();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wins.load(), kRounds);
  EXPECT_EQ(conflicts.load(), kRounds * (kThreads - 1));
  EXPECT_EQ(this->Current("a"), Own("n1", 1, kRounds));
}

TYPED_TEST(GenerationSourceDurable, DataSurvivesReopening) {
  ASSERT_TRUE(this->src_->PutSpec("a", std::string("s\0a", 3)).ok());
  ASSERT_TRUE(this->src_->PutSpec("b", "sb").ok());
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n1", 3).ok());
  ASSERT_TRUE(this->src_->ClaimSeq("a", "n1", {4, 0}).ok());
  ASSERT_TRUE(this->src_->ClaimTerm("gone", "n2").ok());
  const auto listed = this->src_->List().value();
  this->src_.reset();
  this->src_ = this->Open();
  ASSERT_NE(this->src_, nullptr);
  EXPECT_EQ(this->src_->List().value(), listed);
  EXPECT_EQ(this->Current("a"), Own("n1", 4, 1));
  EXPECT_EQ(this->Current("gone"), Own("n2", 1, 0));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n2").value(), (Generation{5, 0}));
}

TYPED_TEST(GenerationSourceDurable, SeqOverflowIsAConflictThatChangesNothing) {
  ASSERT_TRUE(this->src_->ClaimTerm("a", "n1").ok());
  this->Seed("a", Ownership{"n1", {1, UINT32_MAX - 1}});
  EXPECT_EQ(this->src_->ClaimSeq("a", "n1", {1, UINT32_MAX - 1}).value(),
            (Generation{1, UINT32_MAX}));
  auto overflow = this->src_->ClaimSeq("a", "n1", {1, UINT32_MAX});
  EXPECT_EQ(overflow.status().code(), ErrorCode::kConflict) << overflow.status().ToString();
  EXPECT_EQ(this->Current("a"), Own("n1", 1, UINT32_MAX));
  EXPECT_EQ(this->src_->ClaimTerm("a", "n1").value(), (Generation{2, 0}));
}

// Processes sharing the storage claim terms on one label: all distinct.
TYPED_TEST(GenerationSourceDurable, ClaimTermsFromSeveralProcessesAreDistinct) {
  constexpr int kChildren = 3, kEach = 30;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> children;
  for (int k = 0; k < kChildren; ++k) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      auto src = OpenGenerationSource(this->backend_.Config(nullptr, "gen-app"));
      if (!src.ok()) _exit(2);
      for (int i = 0; i < kEach; ++i) {
        auto g = src.value()->ClaimTerm("hot", "p" + std::to_string(k));
        if (!g.ok()) _exit(1);
        if (write(fds[1], &g.value().term, sizeof(std::uint32_t)) != sizeof(std::uint32_t)) {
          _exit(3);
        }
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::multiset<std::uint32_t> terms;
  std::uint32_t term = 0;
  while (read(fds[0], &term, sizeof(term)) == sizeof(term)) terms.insert(term);
  close(fds[0]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ASSERT_EQ(terms.size(), static_cast<std::size_t>(kChildren * kEach));
  EXPECT_EQ(std::set<std::uint32_t>(terms.begin(), terms.end()).size(), terms.size());
  EXPECT_EQ(*terms.rbegin(), static_cast<std::uint32_t>(kChildren * kEach));
}

TEST(RedisGenerationSource, UnreachableServerIsABackendFailureNamingIt) {
  const int closed = testing::RedisServer::FreePort();
  auto opened = OpenGenerationSource(
      {"redis://127.0.0.1:" + std::to_string(closed) + "/0?connect_timeout_ms=300", "a", nullptr});
  ASSERT_EQ(opened.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(opened.status().message().find("127.0.0.1:" + std::to_string(closed)),
            std::string::npos)
      << opened.status().ToString();

  testing::RedisServer server;
  auto src = OpenGenerationSource(
      {"redis://127.0.0.1:" + std::to_string(server.port()) + "/0?connect_timeout_ms=300", "a",
       nullptr});
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_TRUE(src.value()->ClaimTerm("x", "n").ok());
  server.Stop(SIGKILL);
  EXPECT_EQ(src.value()->ClaimTerm("x", "n").status().code(), ErrorCode::kBackendFailure);
  EXPECT_EQ(src.value()->List().status().code(), ErrorCode::kBackendFailure);
}

TEST(SqliteGenerationSource, DirectoryPathIsABadConfig) {
  testing::SqliteBackend backend;
  const std::string dir = backend.Path().substr(0, backend.Path().rfind('/'));
  EXPECT_EQ(OpenGenerationSource({"sqlite://" + dir, "a", nullptr}).status().code(),
            ErrorCode::kBadConfig);
}

}  // namespace
}  // namespace pynenc_cpp
