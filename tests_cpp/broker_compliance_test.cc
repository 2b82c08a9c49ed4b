// Broker and client data store compliance, on every backend (backend_fixture.h):
// ordering, counts, blocking retrieval and interruption, concurrent producers
// and consumers, app isolation; durability and cross-process pops for SQLite.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <fstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/client_data_store.h"

namespace pynenc_cpp {
namespace {

using testing::AllBackends;
using testing::BackendNames;
using testing::SqliteBackend;

std::unique_ptr<Broker> NewBroker(const BackendConfig& config) {
  auto r = OpenBroker(config);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

template <typename B>
class BrokerCompliance : public testing::BackendTest<B> {
 protected:
  std::unique_ptr<Broker> NewBroker(const std::string& app_id = "compliance-app") {
    return pynenc_cpp::NewBroker(this->backend_.Config(nullptr, app_id));
  }
};
TYPED_TEST_SUITE(BrokerCompliance, AllBackends, BackendNames);

template <typename B>
class ClientDataStoreCompliance : public testing::BackendTest<B> {};
TYPED_TEST_SUITE(ClientDataStoreCompliance, AllBackends, BackendNames);

std::optional<InvocationId> Pop(Broker& b, const std::string& q, std::int64_t timeout_ms = 0) {
  auto r = b.Retrieve(q, timeout_ms);
  EXPECT_TRUE(r.ok());
  return r.value();
}

TYPED_TEST(BrokerCompliance, FifoWithinPriorityHigherPriorityFirst) {
  auto b = this->NewBroker();
  ASSERT_TRUE(b->Route({InvocationId("a"), InvocationId("b")}, "q", 0).ok());
  ASSERT_TRUE(b->Route({InvocationId("hi")}, "q", 10).ok());
  ASSERT_TRUE(b->Route({InvocationId("c")}, "q", 0).ok());
  ASSERT_TRUE(b->Route({InvocationId("neg")}, "q", -1.5).ok());
  EXPECT_EQ(Pop(*b, "q")->str(), "hi");
  EXPECT_EQ(Pop(*b, "q")->str(), "a");
  EXPECT_EQ(Pop(*b, "q")->str(), "b");
  EXPECT_EQ(Pop(*b, "q")->str(), "c");
  EXPECT_EQ(Pop(*b, "q")->str(), "neg");
  EXPECT_FALSE(Pop(*b, "q").has_value());
}

TYPED_TEST(BrokerCompliance, QueuesAreIndependentAndCounted) {
  auto b = this->NewBroker();
  ASSERT_TRUE(b->Route({InvocationId("1"), InvocationId("2")}, "x", 0).ok());
  ASSERT_TRUE(b->Route({InvocationId("3")}, "y", 1).ok());
  EXPECT_EQ(b->Count({"x"}).value(), 2);
  EXPECT_EQ(b->Count({"y"}).value(), 1);
  EXPECT_EQ(b->Count({"x", "y", "unknown"}).value(), 3);
  EXPECT_EQ(b->Count({}).value(), 0);
  EXPECT_FALSE(Pop(*b, "unknown").has_value());
  EXPECT_EQ(Pop(*b, "y")->str(), "3");
  ASSERT_TRUE(b->Purge().ok());
  EXPECT_EQ(b->Count({"x", "y"}).value(), 0);
  EXPECT_FALSE(Pop(*b, "x").has_value());
}

TYPED_TEST(BrokerCompliance, EmptyRouteIsANoOp) {
  auto b = this->NewBroker();
  ASSERT_TRUE(b->Route({}, "q", 0).ok());
  EXPECT_EQ(b->Count({"q"}).value(), 0);
}

TYPED_TEST(BrokerCompliance, BlockingRetrieveWakesWhenWorkArrives) {
  auto b = this->NewBroker();
  std::optional<InvocationId> got;
  auto start = std::chrono::steady_clock::now();
  std::thread waiter([&] { got = Pop(*b, "q", 10'000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(b->Route({InvocationId("late")}, "q", 0).ok());
  waiter.join();
  auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->str(), "late");
  // Woken by the route, far before the 10 s timeout.
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TYPED_TEST(BrokerCompliance, BlockingRetrieveIgnoresOtherQueuesAndTimesOut) {
  auto b = this->NewBroker();
  std::optional<InvocationId> got = InvocationId("sentinel");
  std::thread waiter([&] { got = Pop(*b, "q", 150); });
  ASSERT_TRUE(b->Route({InvocationId("other")}, "other-queue", 0).ok());
  waiter.join();
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(b->Count({"other-queue"}).value(), 1);
}

TYPED_TEST(BrokerCompliance, InterruptWakesWaiters) {
  auto b = this->NewBroker();
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      EXPECT_FALSE(Pop(*b, "q", 30'000).has_value());
      returned.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  b->Interrupt();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(returned.load(), 3);
  // Later calls wait normally again.
  ASSERT_TRUE(b->Route({InvocationId("after")}, "q", 0).ok());
  EXPECT_EQ(Pop(*b, "q", 1000)->str(), "after");
}

TYPED_TEST(BrokerCompliance, ConcurrentProducersAndConsumersLoseNothing) {
  auto b = this->NewBroker();
  constexpr int kProducers = 4, kPerProducer = 500, kConsumers = 4;
  std::mutex mu;
  std::multiset<std::string> seen;
  std::atomic<int> consumed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      while (consumed.load() < kProducers * kPerProducer) {
        auto id = Pop(*b, "q", 50);
        if (!id) continue;
        consumed.fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        seen.insert(id->str());
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        ASSERT_TRUE(
            b->Route({InvocationId(std::to_string(p) + "-" + std::to_string(i))}, "q", i % 3).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen.size(), static_cast<size_t>(kProducers * kPerProducer));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size());  // no dupes
  EXPECT_EQ(b->Count({"q"}).value(), 0);
}

TYPED_TEST(ClientDataStoreCompliance, StoreRetrieveReplacePurge) {
  auto r = OpenClientDataStore(this->backend_.Config());
  ASSERT_TRUE(r.ok());
  auto& s = *r.value();
  EXPECT_EQ(s.Retrieve("k").status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(s.Store("k", "v1").ok());
  EXPECT_EQ(s.Retrieve("k").value(), "v1");
  ASSERT_TRUE(s.Store("k", std::string("v2\0bin", 6)).ok());
  EXPECT_EQ(s.Retrieve("k").value(), std::string("v2\0bin", 6));
  ASSERT_TRUE(s.Purge().ok());
  EXPECT_FALSE(s.Retrieve("k").ok());
}

TYPED_TEST(BrokerCompliance, AppsAreIsolated) {
  auto a = this->NewBroker("app-a");
  auto b = this->NewBroker("app-b");
  ASSERT_TRUE(a->Route({InvocationId("only-a")}, "q", 0).ok());
  EXPECT_EQ(b->Count({"q"}).value(), 0);
  EXPECT_FALSE(Pop(*b, "q").has_value());
  ASSERT_TRUE(b->Purge().ok());
  EXPECT_EQ(Pop(*a, "q")->str(), "only-a");
}

TYPED_TEST(ClientDataStoreCompliance, AppsAreIsolated) {
  auto a = OpenClientDataStore(this->backend_.Config(nullptr, "app-a"));
  auto b = OpenClientDataStore(this->backend_.Config(nullptr, "app-b"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a.value()->Store("k", "from-a").ok());
  EXPECT_EQ(b.value()->Retrieve("k").status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(b.value()->Purge().ok());
  EXPECT_EQ(a.value()->Retrieve("k").value(), "from-a");
}

TEST(SqliteBroker, QueuedIdsSurviveReopening) {
  SqliteBackend backend;
  {
    auto b = NewBroker(backend.Config());
    ASSERT_TRUE(b->Route({InvocationId("x"), InvocationId("y")}, "q", 1).ok());
    auto s = OpenClientDataStore(backend.Config());
    ASSERT_TRUE(s.value()->Store("k", "v").ok());
  }
  auto again = NewBroker(backend.Config());
  EXPECT_EQ(again->Count({"q"}).value(), 2);
  EXPECT_EQ(Pop(*again, "q")->str(), "x");
  EXPECT_EQ(OpenClientDataStore(backend.Config()).value()->Retrieve("k").value(), "v");
}

// Several processes pop from one queue: every id is delivered exactly once.
TEST(SqliteBroker, ProcessesNeverPopTheSameId) {
  SqliteBackend backend;
  constexpr int kIds = 300, kChildren = 3;
  {
    auto b = NewBroker(backend.Config());
    std::vector<InvocationId> ids;
    for (int i = 0; i < kIds; ++i) ids.emplace_back("id-" + std::to_string(i));
    ASSERT_TRUE(b->Route(ids, "q", 0).ok());
  }
  std::vector<std::pair<pid_t, std::string>> children;
  for (int c = 0; c < kChildren; ++c) {
    std::string out = backend.Path() + ".child" + std::to_string(c);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto b = OpenBroker(backend.Config());
      FILE* f = fopen(out.c_str(), "w");
      if (!b.ok() || f == nullptr) _exit(2);
      while (true) {
        auto id = b.value()->Retrieve("q", 0);
        if (!id.ok()) _exit(3);
        if (!id.value()) break;
        fprintf(f, "%s\n", id.value()->str().c_str());
      }
      fclose(f);
      _exit(0);
    }
    children.emplace_back(pid, out);
  }
  std::multiset<std::string> seen;
  for (auto& [pid, out] : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) seen.insert(line);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kIds));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size());
}

TEST(BackendConfig, UrisAreCheckedWithClearErrors) {
  EXPECT_TRUE(ParseBackendUri("memory://").ok());
  auto sqlite = ParseBackendUri("sqlite:///tmp/x.db");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite.value().kind, BackendKind::kSqlite);
  EXPECT_EQ(sqlite.value().location, "/tmp/x.db");
  for (const char* bad : {"", "memory", "memory://x", "ftp://host", "sqlite://", "redis://"}) {
    auto r = ParseBackendUri(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig) << bad;
  }
  auto no_app = OpenBroker(BackendConfig{"memory://", "", nullptr});
  EXPECT_EQ(OpenBroker(BackendConfig{"sqlite://", "a", nullptr}).status().code(),
            ErrorCode::kBadConfig);
  EXPECT_EQ(no_app.status().code(), ErrorCode::kBadConfig);
  auto not_built = OpenClientDataStore(BackendConfig{"redis://localhost:6379/0", "a", nullptr});
  EXPECT_EQ(not_built.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(not_built.status().message().find("redis://localhost:6379/0"), std::string::npos);
}

}  // namespace
}  // namespace pynenc_cpp
