// In-memory broker and client data store: ordering, counts, blocking retrieval
// and interruption, concurrent producers and consumers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/client_data_store.h"

namespace pynenc_cpp {
namespace {

std::unique_ptr<Broker> NewBroker() {
  auto r = OpenBroker(BackendConfig{});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::optional<InvocationId> Pop(Broker& b, const std::string& q, std::int64_t timeout_ms = 0) {
  auto r = b.Retrieve(q, timeout_ms);
  EXPECT_TRUE(r.ok());
  return r.value();
}

TEST(MemBroker, FifoWithinPriorityHigherPriorityFirst) {
  auto b = NewBroker();
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

TEST(MemBroker, QueuesAreIndependentAndCounted) {
  auto b = NewBroker();
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

TEST(MemBroker, EmptyRouteIsANoOp) {
  auto b = NewBroker();
  ASSERT_TRUE(b->Route({}, "q", 0).ok());
  EXPECT_EQ(b->Count({"q"}).value(), 0);
}

TEST(MemBroker, BlockingRetrieveWakesWhenWorkArrives) {
  auto b = NewBroker();
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

TEST(MemBroker, BlockingRetrieveIgnoresOtherQueuesAndTimesOut) {
  auto b = NewBroker();
  std::optional<InvocationId> got = InvocationId("sentinel");
  std::thread waiter([&] { got = Pop(*b, "q", 150); });
  ASSERT_TRUE(b->Route({InvocationId("other")}, "other-queue", 0).ok());
  waiter.join();
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(b->Count({"other-queue"}).value(), 1);
}

TEST(MemBroker, InterruptWakesWaiters) {
  auto b = NewBroker();
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

TEST(MemBroker, ConcurrentProducersAndConsumersLoseNothing) {
  auto b = NewBroker();
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

TEST(MemClientDataStore, StoreRetrieveReplacePurge) {
  auto r = OpenClientDataStore(BackendConfig{});
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
  EXPECT_EQ(no_app.status().code(), ErrorCode::kBadConfig);
  auto not_built = OpenClientDataStore(BackendConfig{"redis://localhost:6379/0", "a", nullptr});
  EXPECT_EQ(not_built.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(not_built.status().message().find("redis://localhost:6379/0"), std::string::npos);
}

}  // namespace
}  // namespace pynenc_cpp
