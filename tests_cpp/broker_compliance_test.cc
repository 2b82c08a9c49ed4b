// Broker and client data store compliance, on every backend (backend_fixture.h):
// ordering, counts, blocking retrieval and interruption, concurrent producers
// and consumers, app isolation; durability and cross-process pops for the
// durable backends; Redis: reliable dequeue (redelivery after a consumer dies),
// restarts and an unreachable server.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <thread>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/client_data_store.h"
#include "redis/redis_broker.h"
#include "redis/redis_client.h"
#include "sqlite/sqlite_broker.h"

namespace pynenc_cpp {
namespace {

using testing::BackendNames;
using testing::RedisBackend;
using testing::RedisServer;
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
TYPED_TEST_SUITE(BrokerCompliance, testing::AllBackends, BackendNames);

template <typename B>
class ClientDataStoreCompliance : public testing::BackendTest<B> {};
TYPED_TEST_SUITE(ClientDataStoreCompliance, testing::AllBackends, BackendNames);

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

// The spin before the sleep (core/spin_wait.h): a route that comes at once is seen
// while spinning, one that comes later by the sleep; a retrieve that timed out idle
// (its wait point then sleeps at once) is still woken by the next route.
TYPED_TEST(BrokerCompliance, BlockingRetrieveWakesDuringTheSpinAndAfterAnIdleTimeout) {
  auto b = this->NewBroker();
  std::optional<InvocationId> got;
  std::thread waiter([&] { got = Pop(*b, "q", 10'000); });
  ASSERT_TRUE(b->Route({InvocationId("soon")}, "q", 0).ok());
  waiter.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->str(), "soon");
  EXPECT_FALSE(Pop(*b, "q", 100).has_value());  // timed out idle
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(b->Route({InvocationId("late")}, "q", 0).ok());
  });
  const auto start = std::chrono::steady_clock::now();
  got = Pop(*b, "q", 10'000);
  late.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->str(), "late");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
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
  const auto interrupted = std::chrono::steady_clock::now();
  b->Interrupt();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(returned.load(), 3);
  // Woken by the interrupt, not by the end of a wait slice (3 s on Redis, 5 s for
  // SQLite's safety poll): a generous bound that a slice would still miss.
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted, std::chrono::milliseconds(2'500));
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

template <typename B>
class BrokerDurable : public testing::BackendTest<B> {};
TYPED_TEST_SUITE(BrokerDurable, testing::DurableBackends, BackendNames);

// A temporary directory for files written by child processes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pynenc-bt-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

TYPED_TEST(BrokerDurable, QueuedIdsSurviveReopening) {
  {
    auto b = NewBroker(this->backend_.Config());
    ASSERT_TRUE(b->Route({InvocationId("x"), InvocationId("y")}, "q", 1).ok());
    auto s = OpenClientDataStore(this->backend_.Config());
    ASSERT_TRUE(s.value()->Store("k", "v").ok());
  }
  auto again = NewBroker(this->backend_.Config());
  EXPECT_EQ(again->Count({"q"}).value(), 2);
  EXPECT_EQ(Pop(*again, "q")->str(), "x");
  EXPECT_EQ(OpenClientDataStore(this->backend_.Config()).value()->Retrieve("k").value(), "v");
}

// Forks `children` processes that each run `pop` (Retrieve on a fresh broker
// until it returns nullopt) and returns every id they popped.
// `after_fork` runs in the parent once every child is forked (threads are
// started only then, so no child inherits a lock held by another thread).
template <typename B>
std::multiset<std::string> PopInChildren(
    const B& backend, int children, std::int64_t timeout_ms,
    const std::function<void()>& after_fork = [] {}) {
  TempDir tmp;
  std::vector<std::pair<pid_t, std::string>> kids;
  for (int c = 0; c < children; ++c) {
    std::string out = tmp.File("child" + std::to_string(c));
    pid_t pid = fork();
    EXPECT_GE(pid, 0);
    if (pid == 0) {
      auto b = OpenBroker(backend.Config());
      FILE* f = fopen(out.c_str(), "w");
      if (!b.ok() || f == nullptr) {
        fprintf(stderr, "child open failed: %s\n", b.status().ToString().c_str());
        _exit(2);
      }
      while (true) {
        auto id = b.value()->Retrieve("q", timeout_ms);
        if (!id.ok()) {
          fprintf(stderr, "child retrieve failed: %s\n", id.status().ToString().c_str());
          _exit(3);
        }
        if (!id.value()) break;
        fprintf(f, "%s\n", id.value()->str().c_str());
      }
      fclose(f);
      _exit(0);
    }
    kids.emplace_back(pid, out);
  }
  after_fork();
  std::multiset<std::string> seen;
  for (auto& [pid, out] : kids) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) seen.insert(line);
  }
  return seen;
}

// Several processes pop from one queue: every id is delivered exactly once.
TYPED_TEST(BrokerDurable, ProcessesNeverPopTheSameId) {
  constexpr int kIds = 300, kChildren = 3;
  {
    auto b = NewBroker(this->backend_.Config());
    std::vector<InvocationId> ids;
    for (int i = 0; i < kIds; ++i) ids.emplace_back("id-" + std::to_string(i));
    ASSERT_TRUE(b->Route(ids, "q", 0).ok());
  }
  std::multiset<std::string> seen = PopInChildren(this->backend_, kChildren, 0);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kIds));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size());
}

// One id, many blocked processes: exactly one gets it.
TYPED_TEST(BrokerDurable, ContestedPopAcrossProcessesHasOneWinner) {
  std::multiset<std::string> seen = PopInChildren(this->backend_, 4, 1500, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto b = NewBroker(this->backend_.Config());
    ASSERT_TRUE(b->Route({InvocationId("only")}, "q", 0).ok());
  });
  EXPECT_EQ(seen, std::multiset<std::string>{"only"});
}

// --- SQLite: reliable dequeue -------------------------------------------------

std::unique_ptr<Broker> ShortLeaseSqliteBroker(const BackendConfig& config, std::int64_t lease_ms) {
  auto db = sqlite::OpenDatabase(config);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  sqlite::SqliteBrokerOptions options;
  options.lease_ms = lease_ms;
  options.recovery_interval_ms = 50;
  auto b = sqlite::NewSqliteBroker(db.value(), config, options);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

TEST(SqliteBroker, ItemsOfASilentConsumerAreRedeliveredAtTheHead) {
  SqliteBackend backend;
  auto silent = ShortLeaseSqliteBroker(backend.Config(), 200);
  auto other = ShortLeaseSqliteBroker(backend.Config(), 10'000);
  ASSERT_TRUE(other->Route({InvocationId("x"), InvocationId("y"), InvocationId("z")}, "q", 5).ok());
  EXPECT_EQ(Pop(*silent, "q")->str(), "x");
  EXPECT_EQ(other->Count({"q"}).value(), 2) << "x is being processed, not queued";
  // `silent` never calls again: its lease lapses and `x` goes back first in line.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(Pop(*other, "q")->str(), "x");
  EXPECT_EQ(Pop(*other, "q")->str(), "y");
  EXPECT_EQ(Pop(*other, "q")->str(), "z");
  EXPECT_FALSE(Pop(*other, "q").has_value());
}

TEST(SqliteBroker, AcknowledgedDeliveriesAreNotRedelivered) {
  SqliteBackend backend;
  auto first = ShortLeaseSqliteBroker(backend.Config(), 200);
  auto other = ShortLeaseSqliteBroker(backend.Config(), 10'000);
  ASSERT_TRUE(other->Route({InvocationId("x")}, "q", 0).ok());
  EXPECT_EQ(Pop(*first, "q")->str(), "x");
  EXPECT_FALSE(Pop(*first, "q").has_value());  // acknowledges x
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(Pop(*other, "q").has_value());
  // A cleanly closed consumer acknowledges its deliveries too.
  ASSERT_TRUE(other->Route({InvocationId("y")}, "q", 0).ok());
  EXPECT_EQ(Pop(*first, "q")->str(), "y");
  first.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(Pop(*other, "q").has_value());
  // Purge drops processing rows too.
  ASSERT_TRUE(other->Route({InvocationId("z")}, "q", 0).ok());
  EXPECT_EQ(Pop(*other, "q")->str(), "z");
  ASSERT_TRUE(other->Purge().ok());
}

// A broker whose recovery pass is not due in these tests.
std::unique_ptr<Broker> QuietSqliteBroker(const BackendConfig& config, std::int64_t lease_ms) {
  auto db = sqlite::OpenDatabase(config);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  sqlite::SqliteBrokerOptions options;
  options.lease_ms = lease_ms;
  options.recovery_interval_ms = 600'000;
  auto b = sqlite::NewSqliteBroker(db.value(), config, options);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

// Another process's write transaction, held open until Release().
class HeldWriteLock {
 public:
  explicit HeldWriteLock(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ~HeldWriteLock() { Release(); }
  HeldWriteLock(const HeldWriteLock&) = delete;
  HeldWriteLock& operator=(const HeldWriteLock&) = delete;
  void Release() {
    if (db_ == nullptr) return;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
};

// A poller of an empty queue with nothing to acknowledge and a fresh lease does
// not wait for the file's write lock (pynenc's own runners poll in a loop, and
// each poll used to be a write transaction queued behind the real writers).
TEST(SqliteBroker, AnEmptyQueueIsPolledWithoutTheWriteLock) {
  SqliteBackend backend;
  auto poller = QuietSqliteBroker(backend.Config(), 10'000);
  EXPECT_FALSE(Pop(*poller, "q").has_value());  // registers: a write
  HeldWriteLock lock(backend.Path());
  auto polled = std::async(std::launch::async, [&] { return poller->Retrieve("q", 0); });
  ASSERT_EQ(polled.wait_for(std::chrono::seconds(3)), std::future_status::ready)
      << "the poll waited for the write lock";
  auto got = polled.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got.value().has_value());
  // A queue with an item still takes it in a write transaction, once the lock is free.
  lock.Release();
  auto producer = QuietSqliteBroker(backend.Config(), 10'000);
  ASSERT_TRUE(producer->Route({InvocationId("x")}, "q", 0).ok());
  EXPECT_EQ(Pop(*poller, "q")->str(), "x");
  EXPECT_EQ(poller->Count({"q"}).value(), 0);
}

// Polling an idle queue still renews the lease before it lapses: an id taken by
// this consumer (not yet acknowledged) is not recovered by another consumer.
TEST(SqliteBroker, PollingAnIdleQueueStillRenewsTheLease) {
  SqliteBackend backend;
  auto busy = QuietSqliteBroker(backend.Config(), 300);
  auto other = ShortLeaseSqliteBroker(backend.Config(), 10'000);
  ASSERT_TRUE(other->Route({InvocationId("x")}, "work", 0).ok());
  EXPECT_EQ(Pop(*busy, "work")->str(), "x");  // taken on this thread, not acknowledged
  std::thread idle([&] {  // another thread of the same consumer polls an idle queue
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(900);
    while (std::chrono::steady_clock::now() < until) {
      EXPECT_FALSE(Pop(*busy, "idle").has_value());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  idle.join();  // 3 leases long: renewed, `x` stays taken
  EXPECT_FALSE(Pop(*other, "work").has_value()) << "x was recovered from a live consumer";
  EXPECT_FALSE(Pop(*busy, "work").has_value());  // acknowledges x
}

// A process SIGKILLed between its pop and anything else loses nothing: the id
// it took is redelivered once its lease lapses (before, a pop was a plain
// DELETE and the id was gone with the process).
TEST(SqliteBroker, APopOfAProcessKilledAfterItIsRedelivered) {
  SqliteBackend backend;
  auto survivor = ShortLeaseSqliteBroker(backend.Config(), 10'000);
  ASSERT_TRUE(survivor->Route({InvocationId("k"), InvocationId("l")}, "q", 0).ok());
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto b = ShortLeaseSqliteBroker(backend.Config(), 300);
    auto id = b->Retrieve("q", 0);
    const std::string got = id.ok() && id.value() ? id.value()->str() : "";
    (void)!write(fds[1], got.data(), got.size());
    while (true) pause();  // popped, not done: killed here
  }
  char buf[16] = {};
  ASSERT_EQ(read(fds[0], buf, sizeof(buf)), 1);
  EXPECT_EQ(std::string(buf), "k");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(Pop(*survivor, "q")->str(), "l");
  auto recovered = Pop(*survivor, "q", 10'000);  // blocked until the dead lease lapses
  ASSERT_TRUE(recovered.has_value());
  EXPECT_EQ(recovered->str(), "k");
  EXPECT_FALSE(Pop(*survivor, "q").has_value());
}

// --- Redis: reliable dequeue, restarts, unreachable server ---------------------

// A broker with short lease and recovery timings, for redelivery tests.
std::unique_ptr<Broker> ShortLeaseBroker(const BackendConfig& config, std::int64_t lease_ms) {
  auto client = redis::OpenClient(config);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  redis::RedisBrokerOptions options;
  options.lease_ms = lease_ms;
  options.recovery_interval_ms = 50;
  auto b = redis::NewRedisBroker(client.value(), config, options);
  EXPECT_TRUE(b.ok());
  return std::move(b).value();
}

TEST(RedisBroker, ContestedPopAcrossThreadsHasOneWinner) {
  RedisBackend backend;
  for (int round = 0; round < 10; ++round) {
    const std::string q = "q" + std::to_string(round);
    std::vector<std::unique_ptr<Broker>> brokers;
    for (int i = 0; i < 6; ++i) brokers.push_back(NewBroker(backend.Config()));
    std::atomic<int> winners{0};
    std::vector<std::thread> threads;
    for (auto& b : brokers) {
      threads.emplace_back([&, broker = b.get()] {
        if (Pop(*broker, q, 300)) winners.fetch_add(1);
      });
    }
    ASSERT_TRUE(brokers[0]->Route({InvocationId("x")}, q, 0).ok());
    for (auto& t : threads) t.join();
    EXPECT_EQ(winners.load(), 1) << "round " << round;
  }
}

// Calls of `command` since the last CONFIG RESETSTAT, from INFO commandstats.
std::int64_t Calls(redis::Client& client, const std::string& command) {
  auto info = client.Command({"INFO", "commandstats"});
  EXPECT_TRUE(info.ok());
  const std::string needle = "cmdstat_" + command + ":calls=";
  const auto at = info.value().str.find(needle);
  return at == std::string::npos ? 0 : std::stoll(info.value().str.substr(at + needle.size()));
}

TEST(RedisBroker, BatchRouteIsOneScriptCallAndIdleWaitsBlockServerSide) {
  RedisBackend backend;
  auto b = NewBroker(backend.Config());
  auto client = redis::OpenClient(backend.Config()).value();
  ASSERT_TRUE(b->Route({InvocationId("warm-up")}, "q", 0).ok());  // loads the script
  EXPECT_EQ(Pop(*b, "q")->str(), "warm-up");
  ASSERT_TRUE(client->Command({"CONFIG", "RESETSTAT"}).ok());
  std::vector<InvocationId> ids;
  for (int i = 0; i < 2500; ++i) ids.emplace_back("id-" + std::to_string(i));
  ASSERT_TRUE(b->Route(ids, "q", 3).ok());
  EXPECT_EQ(Calls(*client, "evalsha"), 1);
  EXPECT_EQ(b->Count({"q"}).value(), 2500);
  for (int i = 0; i < 2500; ++i) ASSERT_EQ(Pop(*b, "q")->str(), "id-" + std::to_string(i));
  // An idle 1 s wait: one pop attempt, ONE BLPOP for the whole second (a slice is
  // up to 3 s; an Interrupt ends it through the broker's own list, not a short
  // slice), one pop attempt after it.
  ASSERT_TRUE(client->Command({"CONFIG", "RESETSTAT"}).ok());
  EXPECT_FALSE(Pop(*b, "q", 1000).has_value());
  EXPECT_EQ(Calls(*client, "blpop"), 1);
  EXPECT_LE(Calls(*client, "evalsha"), 2);
}

TEST(RedisBroker, ItemsOfASilentConsumerAreRedeliveredAtTheHead) {
  RedisBackend backend;
  auto silent = ShortLeaseBroker(backend.Config(), 200);
  auto other = ShortLeaseBroker(backend.Config(), 10'000);
  ASSERT_TRUE(other->Route({InvocationId("x"), InvocationId("y"), InvocationId("z")}, "q", 5).ok());
  EXPECT_EQ(Pop(*silent, "q")->str(), "x");
  // `silent` never calls again: its lease lapses and `x` goes back first in line.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(Pop(*other, "q")->str(), "x");
  EXPECT_EQ(Pop(*other, "q")->str(), "y");
  EXPECT_EQ(Pop(*other, "q")->str(), "z");
  EXPECT_FALSE(Pop(*other, "q").has_value());
}

TEST(RedisBroker, AcknowledgedDeliveriesAreNotRedelivered) {
  RedisBackend backend;
  auto first = ShortLeaseBroker(backend.Config(), 200);
  auto other = ShortLeaseBroker(backend.Config(), 10'000);
  ASSERT_TRUE(other->Route({InvocationId("x")}, "q", 0).ok());
  EXPECT_EQ(Pop(*first, "q")->str(), "x");
  EXPECT_FALSE(Pop(*first, "q").has_value());  // acknowledges x
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(Pop(*other, "q").has_value());
  // A cleanly closed consumer acknowledges its deliveries too.
  ASSERT_TRUE(other->Route({InvocationId("y")}, "q", 0).ok());
  EXPECT_EQ(Pop(*first, "q")->str(), "y");
  first.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(Pop(*other, "q").has_value());
}

// An entry in a consumer's processing list that no caller received (a pop
// whose reply was lost with the connection) goes back to its queue on close.
TEST(RedisBroker, ClosingRequeuesEntriesNoCallerReceived) {
  RedisBackend backend;
  auto client = redis::OpenClient(backend.Config()).value();
  auto a = NewBroker(backend.Config());
  auto other = NewBroker(backend.Config());
  ASSERT_TRUE(other->Route({InvocationId("real")}, "q", 0).ok());
  EXPECT_EQ(Pop(*a, "q")->str(), "real");
  auto keys = client->Command({"KEYS", "*proc:*"});  // test only: a private server
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys.value().elements.size(), 1u);
  redis::Script ghost(
      "return redis.call('RPUSH', KEYS[1], cmsgpack.pack({'q', '0', "
      "'00000000000000000099:ghost'}))");
  ASSERT_TRUE(client->Eval(ghost, {keys.value().elements[0].str}, {}).ok());
  a.reset();
  EXPECT_EQ(Pop(*other, "q")->str(), "ghost");
  EXPECT_FALSE(Pop(*other, "q").has_value());  // "real" was received: acknowledged
}

TEST(RedisBroker, BlockedRetrieverGetsTheItemOfAConsumerThatDies) {
  RedisBackend backend;
  auto survivor = ShortLeaseBroker(backend.Config(), 10'000);
  ASSERT_TRUE(survivor->Route({InvocationId("k"), InvocationId("l")}, "q", 0).ok());
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto b = ShortLeaseBroker(backend.Config(), 300);
    auto id = b->Retrieve("q", 0);
    const std::string got = id.ok() && id.value() ? id.value()->str() : "";
    (void)!write(fds[1], got.data(), got.size());
    while (true) pause();  // popped, not done: killed here
  }
  char buf[16] = {};
  ASSERT_EQ(read(fds[0], buf, sizeof(buf)), 1);
  EXPECT_EQ(std::string(buf), "k");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(Pop(*survivor, "q")->str(), "l");
  const auto start = std::chrono::steady_clock::now();
  // Blocked until the dead lease (300 ms) lapses and the survivor's next pop
  // attempt, after its wait slice (3 s, a third of its 10 s lease), recovers it.
  auto recovered = Pop(*survivor, "q", 8'000);
  ASSERT_TRUE(recovered.has_value());
  EXPECT_EQ(recovered->str(), "k");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(5'000));
}

// A child forked from a process whose broker it inherits (pynenc's
// MultiThreadRunner forks its worker processes) pops as a consumer of its own:
// killed, what it popped is redelivered although the parent, on the same broker
// object, keeps its own lease alive. (With one consumer id for both, the id
// stayed in the shared processing list for as long as the parent lived.)
TEST(RedisBroker, AForkedChildPopsAsAConsumerOfItsOwn) {
  RedisBackend backend;
  auto shared = ShortLeaseBroker(backend.Config(), 300);
  ASSERT_TRUE(shared->Route({InvocationId("k"), InvocationId("l")}, "q", 0).ok());
  EXPECT_FALSE(Pop(*shared, "empty").has_value());  // the parent is a consumer now
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto id = shared->Retrieve("q", 0);
    const std::string got = id.ok() && id.value() ? id.value()->str() : "";
    (void)!write(fds[1], got.data(), got.size());
    while (true) pause();  // popped, not done: killed here
  }
  char buf[16] = {};
  ASSERT_EQ(read(fds[0], buf, sizeof(buf)), 1);
  EXPECT_EQ(std::string(buf), "k");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(Pop(*shared, "q")->str(), "l");
  // The parent's pops renew its own lease; the child's lapses and is recovered.
  auto recovered = Pop(*shared, "q", 8'000);
  ASSERT_TRUE(recovered.has_value()) << "the dead child's pop was never redelivered";
  EXPECT_EQ(recovered->str(), "k");
}

TEST(RedisBroker, QueuesSurviveAServerRestartWithAppendOnly) {
  RedisServer server(true);
  BackendConfig config{"redis://127.0.0.1:" + std::to_string(server.port()) + "/0", "app", nullptr};
  auto b = NewBroker(config);
  auto s = OpenClientDataStore(config);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(b->Route({InvocationId("x"), InvocationId("y")}, "q", 0).ok());
  ASSERT_TRUE(s.value()->Store("k", "v").ok());
  server.Stop();
  server.Start();
  auto count = b->Count({"q"});
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(count.value(), 2);
  EXPECT_EQ(Pop(*b, "q")->str(), "x");
  EXPECT_EQ(s.value()->Retrieve("k").value(), "v");
}

TEST(RedisBroker, CallsWhileTheServerIsDownFailClearlyThenRecover) {
  RedisServer server;
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  BackendConfig config{"redis://" + where + "/0?connect_timeout_ms=300", "app", nullptr};
  auto b = NewBroker(config);
  auto s = OpenClientDataStore(config);
  ASSERT_TRUE(s.ok());
  server.Stop();
  for (Status st : {b->Route({InvocationId("x")}, "q", 0), b->Count({"q"}).status(),
                    b->Retrieve("q", 200).status(), b->Purge(), s.value()->Store("k", "v"),
                    s.value()->Retrieve("k").status()}) {
    EXPECT_EQ(st.code(), ErrorCode::kBackendFailure) << st.ToString();
    EXPECT_NE(st.message().find(where), std::string::npos) << st.ToString();
  }
  server.Start();
  ASSERT_TRUE(b->Route({InvocationId("x")}, "q", 0).ok());
  EXPECT_EQ(Pop(*b, "q")->str(), "x");
  ASSERT_TRUE(s.value()->Store("k", "v").ok());
}

TEST(RedisBroker, KeysStayUnderTheAppPrefixAndPurgeKeepsOtherApps) {
  RedisBackend backend;
  auto a = NewBroker(backend.Config(nullptr, "a"));
  auto other = NewBroker(backend.Config(nullptr, "b"));
  auto sa = OpenClientDataStore(backend.Config(nullptr, "a"));
  ASSERT_TRUE(a->Route({InvocationId("1"), InvocationId("2")}, "q", 0).ok());
  ASSERT_TRUE(other->Route({InvocationId("3")}, "q", 0).ok());
  ASSERT_TRUE(sa.value()->Store("k", "v").ok());
  EXPECT_EQ(Pop(*a, "q")->str(), "1");
  auto client = redis::OpenClient(backend.Config());
  auto keys = client.value()->Command({"KEYS", "*"});  // test only: a private server
  ASSERT_TRUE(keys.ok());
  for (const auto& k : keys.value().elements) {
    EXPECT_TRUE(k.str.rfind("pynenc:{a}:broker:", 0) == 0 ||
                k.str.rfind("pynenc:{b}:broker:", 0) == 0 ||
                k.str.rfind("pynenc:{a}:client_data:", 0) == 0)
        << k.str;
  }
  ASSERT_TRUE(a->Purge().ok());
  EXPECT_EQ(a->Count({"q"}).value(), 0);
  EXPECT_EQ(other->Count({"q"}).value(), 1);
}

TEST(BackendConfig, PasswordsAreRedactedFromUrisInErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"redis://h:6379/0?password=s3cr3t", "redis://h:6379/0?password=***"},
      {"redis://h:1/0?io_timeout_ms=5&password=s3cr3t&x=1",
       "redis://h:1/0?io_timeout_ms=5&password=***&x=1"},
      {"redis://:s3cr3t@h:6379/0", "redis://:***@h:6379/0"},
      {"redis://user:s3cr3t@h:6379", "redis://user:***@h:6379"},
      {"redis://s3cr3t@h", "redis://***@h"},
      {"rediss://u:p@ss:w0rd@h/1", "rediss://u:***@h/1"},
      {"redis://h:6379/0", "redis://h:6379/0"},
      {"redis://:pa/s3cr3t@h:6379/0", "redis://:***@h:6379/0"},
      {"redis://:pa?s3cr3t@h", "redis://:***@h"},
      {"redis://h:1/0?password=a@s3cr3t", "redis://h:1/0?password=***"},
      {"sqlite:///tmp/a@b.db", "sqlite:///tmp/a@b.db"},
      {"", ""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(RedactUri(in), want) << in;
  // Errors that echo a URI or a part of it never show the password.
  for (const char* bad :
       {"rediss://user:s3cr3t@h:6379", "redis://:s3cr3t@/0", "redis://:s3cr3t@h:x/0",
        "redis://:pa/s3cr3t@h:6379/0", "redis://:pa?s3cr3t@h", "redis://:pa#s3cr3t@h",
        "redis://h:99999?password=s3cr3t", "redis://u:s3cr3t@h:1/0?colour=red",
        "ftp://u:s3cr3t@h"}) {
    auto status = OpenBroker(BackendConfig{bad, "a", nullptr}).status();
    EXPECT_EQ(status.code(), ErrorCode::kBadConfig) << bad << ": " << status.message();
    EXPECT_EQ(status.message().find("s3cr3t"), std::string::npos) << status.message();
  }
}

TEST(BackendConfig, RedisUserInfoIsParsedAsRedisPyDoes) {
  auto pw = redis::ParseRedisLocation(":s3cr3t@h:6380/2");
  ASSERT_TRUE(pw.ok()) << pw.status().ToString();
  EXPECT_EQ(pw.value().host, "h");
  EXPECT_EQ(pw.value().port, 6380);
  EXPECT_EQ(pw.value().db, 2);
  EXPECT_EQ(pw.value().username, "");
  EXPECT_EQ(pw.value().password, "s3cr3t");
  auto acl = redis::ParseRedisLocation("app:p@ss@h");
  ASSERT_TRUE(acl.ok());
  EXPECT_EQ(acl.value().username, "app");
  EXPECT_EQ(acl.value().password, "p@ss");
  EXPECT_EQ(acl.value().host, "h");
  // Percent-encoded user info is decoded (a '/' or '@' in a password).
  auto encoded = redis::ParseRedisLocation("us%65r:p%2Fa%40ss@h:1/3");
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_EQ(encoded.value().username, "user");
  EXPECT_EQ(encoded.value().password, "p/a@ss");
  EXPECT_EQ(encoded.value().db, 3);
  auto user_only = redis::ParseRedisLocation("app@h:1");
  ASSERT_TRUE(user_only.ok());
  EXPECT_EQ(user_only.value().username, "app");
  EXPECT_EQ(user_only.value().password, "");
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
  const std::string closed = "127.0.0.1:" + std::to_string(RedisServer::FreePort());
  for (const auto& cfg :
       {BackendConfig{"redis://" + closed + "/0?connect_timeout_ms=200", "a", nullptr}}) {
    auto store = OpenClientDataStore(cfg);
    EXPECT_EQ(store.status().code(), ErrorCode::kBackendFailure);
    EXPECT_NE(store.status().message().find(closed), std::string::npos);
    auto broker = OpenBroker(cfg);
    EXPECT_EQ(broker.status().code(), ErrorCode::kBackendFailure);
    EXPECT_NE(broker.status().message().find(closed), std::string::npos);
  }
}

}  // namespace
}  // namespace pynenc_cpp
