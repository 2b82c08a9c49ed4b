// Compliance suite of the FencedStore port, run against every backend of
// testing::AllBackends (cross-object and durability cases on DurableBackends).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/fenced_store.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp {
namespace {

template <typename B>
constexpr bool kIsMem = std::is_same_v<B, testing::MemBackend>;

std::uint64_t G(std::uint32_t term, std::uint32_t seq) { return Generation{term, seq}.Packed(); }

std::optional<FencedValue> FV(const std::string& value, std::uint64_t generation) {
  return FencedValue{value, generation};
}

template <typename B>
class FencedStoreCompliance : public testing::BackendTest<B> {
 protected:
  std::unique_ptr<FencedStore> Open(const std::string& app_id = "fenced-app") {
    auto opened = OpenFencedStore(this->backend_.Config(nullptr, app_id));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  void SetUp() override {
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }
  std::optional<FencedValue> Read(const std::string& key) {
    auto r = store_->Read(key);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : std::nullopt;
  }
  std::unique_ptr<FencedStore> store_;
};
TYPED_TEST_SUITE(FencedStoreCompliance, testing::AllBackends, testing::BackendNames);

template <typename B>
class FencedStoreDurable : public FencedStoreCompliance<B> {};
TYPED_TEST_SUITE(FencedStoreDurable, testing::DurableBackends, testing::BackendNames);

TYPED_TEST(FencedStoreCompliance, WriteThenRead) {
  EXPECT_EQ(this->Read("k"), std::nullopt);
  ASSERT_TRUE(this->store_->Write("k", "v1", G(1, 0)).ok());
  EXPECT_EQ(this->Read("k"), FV("v1", G(1, 0)));
  EXPECT_EQ(this->Read("other"), std::nullopt);
}

TYPED_TEST(FencedStoreCompliance, EqualAndHigherGenerationsAreAccepted) {
  ASSERT_TRUE(this->store_->Write("k", "v1", G(2, 3)).ok());
  ASSERT_TRUE(this->store_->Write("k", "v2", G(2, 3)).ok());
  EXPECT_EQ(this->Read("k"), FV("v2", G(2, 3)));
  ASSERT_TRUE(this->store_->Write("k", "v3", G(2, 4)).ok());  // higher seq
  EXPECT_EQ(this->Read("k"), FV("v3", G(2, 4)));
  ASSERT_TRUE(this->store_->Write("k", "v4", G(3, 0)).ok());  // higher term, lower seq
  EXPECT_EQ(this->Read("k"), FV("v4", G(3, 0)));
}

TYPED_TEST(FencedStoreCompliance, LowerGenerationIsRejectedAndChangesNothing) {
  ASSERT_TRUE(this->store_->Write("k", "current", G(2, 3)).ok());
  Status lower_seq = this->store_->Write("k", "stale", G(2, 2));
  EXPECT_EQ(lower_seq.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(lower_seq.message(), "stale generation 2.2 for key 'k': stored 2.3");
  Status lower_term = this->store_->Write("k", "stale", G(1, UINT32_MAX));
  EXPECT_EQ(lower_term.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(lower_term.message(), "stale generation 1.4294967295 for key 'k': stored 2.3");
  EXPECT_EQ(this->store_->Write("k", "stale", 0).code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Read("k"), FV("current", G(2, 3)));
}

TYPED_TEST(FencedStoreCompliance, DeleteIsFenced) {
  ASSERT_TRUE(this->store_->Write("k", "v", G(2, 1)).ok());
  Status stale = this->store_->Delete("k", G(2, 0));
  EXPECT_EQ(stale.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(stale.message(), "stale generation 2.0 for key 'k': stored 2.1");
  EXPECT_EQ(this->Read("k"), FV("v", G(2, 1)));
  ASSERT_TRUE(this->store_->Delete("k", G(2, 1)).ok());  // equal
  EXPECT_EQ(this->Read("k"), std::nullopt);
  ASSERT_TRUE(this->store_->Delete("k", G(2, 1)).ok());  // again, on the tombstone
  ASSERT_TRUE(this->store_->Delete("k", G(5, 0)).ok());  // raises the tombstone
  // The tombstone fences deletes too.
  Status stale_again = this->store_->Delete("k", G(4, 9));
  EXPECT_EQ(stale_again.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(stale_again.message(), "stale generation 4.9 for key 'k': stored 5.0");
  EXPECT_EQ(this->Read("k"), std::nullopt);
}

TYPED_TEST(FencedStoreCompliance, ReadReturnsNulloptAfterDelete) {
  ASSERT_TRUE(this->store_->Write("k", "v", G(1, 0)).ok());
  ASSERT_TRUE(this->store_->Write("empty", "", G(1, 0)).ok());
  ASSERT_TRUE(this->store_->Delete("k", G(1, 0)).ok());
  ASSERT_TRUE(this->store_->Delete("empty", G(2, 0)).ok());
  EXPECT_EQ(this->Read("k"), std::nullopt);
  EXPECT_EQ(this->Read("empty"), std::nullopt);  // a tombstone is not an empty value
}

// A stale ex-owner cannot resurrect a key its successor deleted.
TYPED_TEST(FencedStoreCompliance, LowerGenerationCannotWriteAfterDelete) {
  ASSERT_TRUE(this->store_->Write("k", "old owner", G(2, 1)).ok());
  ASSERT_TRUE(this->store_->Delete("k", G(3, 0)).ok());
  Status stale = this->store_->Write("k", "resurrected", G(2, 1));
  EXPECT_EQ(stale.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(stale.message(), "stale generation 2.1 for key 'k': stored 3.0");
  EXPECT_EQ(this->store_->Write("k", "resurrected", G(2, UINT32_MAX)).code(),
            ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->store_->Write("k", "resurrected", 0).code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Read("k"), std::nullopt);
}

TYPED_TEST(FencedStoreCompliance, EqualOrHigherGenerationWritesAfterDelete) {
  ASSERT_TRUE(this->store_->Write("k", "v1", G(2, 1)).ok());
  ASSERT_TRUE(this->store_->Delete("k", G(3, 0)).ok());
  ASSERT_TRUE(this->store_->Write("k", "same owner", G(3, 0)).ok());  // equal
  EXPECT_EQ(this->Read("k"), FV("same owner", G(3, 0)));
  ASSERT_TRUE(this->store_->Delete("k", G(3, 0)).ok());
  ASSERT_TRUE(this->store_->Write("k", "successor", G(3, 1)).ok());  // higher
  EXPECT_EQ(this->Read("k"), FV("successor", G(3, 1)));
  // The write replaced the tombstone's generation: the fence is the write's.
  EXPECT_EQ(this->store_->Write("k", "stale", G(3, 0)).code(), ErrorCode::kStaleGeneration);
}

// An owner can fence a key it never wrote by deleting it.
TYPED_TEST(FencedStoreCompliance, DeleteOfAbsentKeyFencesIt) {
  ASSERT_TRUE(this->store_->Delete("never", G(3, 0)).ok());
  EXPECT_EQ(this->Read("never"), std::nullopt);
  Status stale = this->store_->Write("never", "stale", G(2, 9));
  EXPECT_EQ(stale.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(stale.message(), "stale generation 2.9 for key 'never': stored 3.0");
  EXPECT_EQ(this->store_->Delete("never", G(2, 9)).code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Read("never"), std::nullopt);
  ASSERT_TRUE(this->store_->Write("never", "mine", G(3, 0)).ok());
  EXPECT_EQ(this->Read("never"), FV("mine", G(3, 0)));
  // Only that key is fenced.
  ASSERT_TRUE(this->store_->Write("other", "v", G(1, 0)).ok());
}

TYPED_TEST(FencedStoreCompliance, ValuesAndKeysAreBinarySafe) {
  const std::string value("a\0b\xff\r\n\0", 7);
  const std::string key("key with:colons\x01", 16);
  ASSERT_TRUE(this->store_->Write(key, value, G(1, 0)).ok());
  ASSERT_TRUE(this->store_->Write("empty", "", G(1, 0)).ok());
  EXPECT_EQ(this->Read(key), FV(value, G(1, 0)));
  EXPECT_EQ(this->Read("empty"), FV("", G(1, 0)));
  const std::string big(1 << 20, '\0');
  ASSERT_TRUE(this->store_->Write("big", big, G(1, 0)).ok());
  EXPECT_EQ(this->Read("big")->value.size(), big.size());
}

TYPED_TEST(FencedStoreCompliance, LargestGenerationRoundTrips) {
  const std::uint64_t largest = (std::uint64_t{1} << 63) - 1;
  ASSERT_TRUE(this->store_->Write("k", "top", largest).ok());
  EXPECT_EQ(this->Read("k"), FV("top", largest));
  EXPECT_EQ(this->store_->Write("k", "below", largest - 1).code(), ErrorCode::kStaleGeneration);
  ASSERT_TRUE(this->store_->Delete("k", largest).ok());
  EXPECT_EQ(this->Read("k"), std::nullopt);
}

TYPED_TEST(FencedStoreCompliance, InvalidArgumentsChangeNothing) {
  const std::uint64_t too_big = std::uint64_t{1} << 63;
  ASSERT_TRUE(this->store_->Write("k", "v", G(1, 0)).ok());
  EXPECT_EQ(this->store_->Write("", "v", G(1, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Write("k", "x", too_big).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Write("k", "x", UINT64_MAX).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Delete("", G(1, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Delete("k", too_big).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Read("").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->Read("k"), FV("v", G(1, 0)));
}

TYPED_TEST(FencedStoreCompliance, AppIdsAreIsolated) {
  auto other = this->Open("other-app");
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(this->store_->Write("k", "mine", G(5, 0)).ok());
  EXPECT_EQ(other->Read("k").value(), std::nullopt);
  ASSERT_TRUE(other->Write("k", "theirs", G(1, 0)).ok());  // not fenced by the other app
  ASSERT_TRUE(other->Delete("k", G(1, 0)).ok());
  EXPECT_EQ(this->Read("k"), FV("mine", G(5, 0)));
}

TYPED_TEST(FencedStoreCompliance, OpenRejectsBadConfig) {
  for (const BackendConfig& bad :
       {BackendConfig{"nope", "a", nullptr}, BackendConfig{"ftp://x", "a", nullptr},
        this->backend_.Config(nullptr, "")}) {
    EXPECT_EQ(OpenFencedStore(bad).status().code(), ErrorCode::kBadConfig) << bad.uri;
  }
}

// Writers with different generations race on one key (through two objects on
// the same storage when it is shared): the highest generation's last write
// stays, and every refusal is kStaleGeneration.
TYPED_TEST(FencedStoreCompliance, RacingWritersEndWithTheHighestGeneration) {
  constexpr int kWriters = 6, kEach = 40;
  std::unique_ptr<FencedStore> second = kIsMem<TypeParam> ? nullptr : this->Open();
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    FencedStore* store = (w % 2 == 1 && second) ? second.get() : this->store_.get();
    // Writers 0..5 hold 1.0, 1.1, 2.0, 2.1, 3.0, 3.1.
    const std::uint64_t generation = G(1 + w / 2, w % 2);
    threads.emplace_back([store, generation, w] {
      for (int i = 0; i < kEach; ++i) {
        Status s = store->Write("k", "w" + std::to_string(w) + "-" + std::to_string(i), generation);
        if (!s.ok()) EXPECT_EQ(s.code(), ErrorCode::kStaleGeneration) << s.ToString();
        Status d = store->Delete("k-deleted", generation);
        if (!d.ok()) EXPECT_EQ(d.code(), ErrorCode::kStaleGeneration) << d.ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(this->Read("k"), FV("w5-" + std::to_string(kEach - 1), G(3, 1)));
  EXPECT_EQ(this->Read("k-deleted"), std::nullopt);
  // Its tombstone carries the highest generation that deleted it.
  EXPECT_EQ(this->store_->Write("k-deleted", "late", G(3, 0)).code(), ErrorCode::kStaleGeneration);
}

TYPED_TEST(FencedStoreDurable, DataAndFenceSurviveReopening) {
  ASSERT_TRUE(this->store_->Write("k", std::string("v\0", 2), G(4, 2)).ok());
  ASSERT_TRUE(this->store_->Write("gone", "x", G(1, 0)).ok());
  ASSERT_TRUE(this->store_->Delete("gone", G(1, 0)).ok());
  this->store_.reset();
  this->store_ = this->Open();
  ASSERT_NE(this->store_, nullptr);
  EXPECT_EQ(this->Read("k"), FV(std::string("v\0", 2), G(4, 2)));
  EXPECT_EQ(this->Read("gone"), std::nullopt);
  EXPECT_EQ(this->store_->Write("k", "stale", G(4, 1)).code(), ErrorCode::kStaleGeneration);
  ASSERT_TRUE(this->store_->Write("k", "next", G(5, 0)).ok());
  EXPECT_EQ(this->Read("k"), FV("next", G(5, 0)));
}

TYPED_TEST(FencedStoreDurable, TombstonesSurviveReopening) {
  ASSERT_TRUE(this->store_->Write("k", "v", G(2, 0)).ok());
  ASSERT_TRUE(this->store_->Delete("k", G(3, 0)).ok());
  ASSERT_TRUE(this->store_->Delete("never", G(4, 0)).ok());
  this->store_.reset();
  this->store_ = this->Open();
  ASSERT_NE(this->store_, nullptr);
  EXPECT_EQ(this->Read("k"), std::nullopt);
  EXPECT_EQ(this->Read("never"), std::nullopt);
  EXPECT_EQ(this->store_->Write("k", "stale", G(2, 5)).code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->store_->Write("never", "stale", G(3, 9)).code(), ErrorCode::kStaleGeneration);
  ASSERT_TRUE(this->store_->Write("k", "next", G(3, 0)).ok());
  EXPECT_EQ(this->Read("k"), FV("next", G(3, 0)));
}

// Processes with generations 1..n write one key: the highest one's value stays.
TYPED_TEST(FencedStoreDurable, WritersInSeveralProcessesEndWithTheHighest) {
  constexpr int kChildren = 4, kEach = 25;
  std::vector<pid_t> children;
  for (int k = 0; k < kChildren; ++k) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = OpenFencedStore(this->backend_.Config(nullptr, "fenced-app"));
      if (!store.ok()) _exit(2);
      for (int i = 0; i < kEach; ++i) {
        Status s = store.value()->Write("k", "p" + std::to_string(k), G(k + 1, 0));
        if (!s.ok() && s.code() != ErrorCode::kStaleGeneration) _exit(1);
        if (k == kChildren - 1 && !s.ok()) _exit(3);  // the highest is never refused
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_EQ(this->Read("k"), FV("p" + std::to_string(kChildren - 1), G(kChildren, 0)));
}

TEST(RedisFencedStore, UnreachableServerIsABackendFailureNamingIt) {
  const int closed = testing::RedisServer::FreePort();
  auto opened = OpenFencedStore(
      {"redis://127.0.0.1:" + std::to_string(closed) + "/0?connect_timeout_ms=300", "a", nullptr});
  ASSERT_EQ(opened.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(opened.status().message().find("127.0.0.1:" + std::to_string(closed)),
            std::string::npos)
      << opened.status().ToString();

  testing::RedisServer server;
  auto store = OpenFencedStore(
      {"redis://127.0.0.1:" + std::to_string(server.port()) + "/0?connect_timeout_ms=300", "a",
       nullptr});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(store.value()->Write("k", "v", G(1, 0)).ok());
  server.Stop(SIGKILL);
  EXPECT_EQ(store.value()->Write("k", "v", G(1, 0)).code(), ErrorCode::kBackendFailure);
  EXPECT_EQ(store.value()->Read("k").status().code(), ErrorCode::kBackendFailure);
  EXPECT_EQ(store.value()->Delete("k", G(1, 0)).code(), ErrorCode::kBackendFailure);
}

}  // namespace
}  // namespace pynenc_cpp
