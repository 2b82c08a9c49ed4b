// The fixtures of the native Lifecycle suites (native_lifecycle_test.cc, the
// composite operations; native_take_test.cc, TakeAndStart): real components of
// one app on each backend, opened with a manual clock, and their Lifecycle.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::lifecycle_test {

using S = InvocationStatus;
inline constexpr TimestampUs kStart = 1'700'000'000'000'000;
inline constexpr TimestampUs kSecond = 1'000'000;
inline const TriggerContextNames kNames{"StatusContext", "ResultContext", "ExceptionContext"};
inline const Actor kRunner{std::string("runner-1"), "runner-1"};

// One invocation of `task` to register and route.
inline NewRoutedInvocation NewItem(const std::string& id, const std::string& task = "mod.task",
                                   const std::string& queue = "default", double priority = 0.0,
                                   std::optional<std::string> parent = std::nullopt) {
  NewRoutedInvocation n;
  n.record.invocation_id = InvocationId(id);
  n.record.task_id = TaskId(task);
  n.record.call_id = CallId(task + ":" + id);
  n.record.arguments_id = id;
  n.record.serialized_arguments = "{}";
  if (parent) n.record.parent_invocation_id = InvocationId(*parent);
  n.queue = queue;
  n.priority = priority;
  return n;
}

template <typename B>
class LifecycleCompliance : public testing::BackendTest<B> {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kStart);
    const BackendConfig config = this->backend_.Config(clock_);
    orch_ = std::shared_ptr<Orchestrator>(OpenOrchestrator(config).value());
    state_ = std::shared_ptr<StateBackend>(OpenStateBackend(config).value());
    broker_ = std::shared_ptr<Broker>(OpenBroker(config).value());
    trigger_ = std::shared_ptr<TriggerStore>(OpenTriggerStore(config).value());
    auto opened = OpenLifecycle(LifecycleParts{orch_, state_, broker_, trigger_}, config, kNames);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    life_ = std::move(opened).value();
  }

  static NewRoutedInvocation New(const std::string& id, const std::string& task = "mod.task",
                                 const std::string& queue = "default", double priority = 0.0,
                                 std::optional<std::string> parent = std::nullopt) {
    return NewItem(id, task, queue, priority, std::move(parent));
  }
  void Register(const std::string& id, const std::string& task = "mod.task") {
    auto r = life_->RegisterAndRoute({New(id, task)}, kRunner);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Registered, taken from the queue, PENDING and RUNNING for kRunner.
  void Running(const std::string& id) {
    Register(id);
    ASSERT_TRUE(broker_->Retrieve("default", 0).ok());
    life_->SetTaskRunsFreely(TaskId("mod.task"));
    auto c = life_->Claim(InvocationId(id), kRunner);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ(c.value().kind, ClaimKind::kClaimed);
    auto r = life_->ChangeStatus(InvocationId(id), S::kRunning, kRunner, std::nullopt, true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  S StatusOf(const std::string& id) {
    return orch_->GetStatusRecord(InvocationId(id)).value().status;
  }
  // 4 runners race to claim (start: ClaimAndStart) each of 20 invocations of a
  // free task: each is won exactly once, a lost race is reported as such (never
  // as a failure), and the winner's rows alone are written.
  void RaceForClaims(bool start) {
    life_->SetTaskRunsFreely(TaskId("mod.task"));
    constexpr int kInvocations = 20;
    constexpr int kThreads = 4;
    for (int i = 0; i < kInvocations; ++i) Register("r" + std::to_string(i));
    const ClaimKind won = start ? ClaimKind::kStarted : ClaimKind::kClaimed;
    std::atomic<int> claimed{0};
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const Actor me{"runner-" + std::to_string(t), "runner-" + std::to_string(t)};
        for (int i = 0; i < kInvocations; ++i) {
          const InvocationId id("r" + std::to_string(i));
          auto r = start ? life_->ClaimAndStart(id, me) : life_->Claim(id, me);
          if (r.ok() && r.value().kind == won) {
            ++claimed;
          } else if (!r.ok() && r.status().code() != ErrorCode::kIllegalTransition &&
                     r.status().code() != ErrorCode::kOwnershipViolation) {
            ++failed;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(claimed.load(), kInvocations);
    EXPECT_EQ(failed.load(), 0);
    const std::vector<S> rows = start ? std::vector<S>{S::kRegistered, S::kPending, S::kRunning}
                                      : std::vector<S>{S::kRegistered, S::kPending};
    for (int i = 0; i < kInvocations; ++i) {
      const std::string id = "r" + std::to_string(i);
      EXPECT_EQ(StatusOf(id), rows.back());
      EXPECT_EQ(HistoryOf(id), rows);
    }
  }
  std::vector<S> HistoryOf(const std::string& id) {
    std::vector<S> out;
    for (const HistoryRecord& h : state_->GetHistory(InvocationId(id)).value()) {
      out.push_back(h.status);
    }
    return out;
  }
  std::vector<std::string> Drain(const std::string& queue) {
    std::vector<std::string> out;
    while (true) {
      auto got = broker_->Retrieve(queue, 0);
      if (!got.ok() || !got.value()) return out;
      out.push_back(got.value()->str());
    }
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<Orchestrator> orch_;
  std::shared_ptr<StateBackend> state_;
  std::shared_ptr<Broker> broker_;
  std::shared_ptr<TriggerStore> trigger_;
  std::unique_ptr<Lifecycle> life_;
};

// SQLite only: cases where an operation must be one transaction.
template <typename B>
class LifecycleTransactional : public LifecycleCompliance<B> {};

// Redis only: counts the scripts the server ran (one script is one round trip).
template <typename B>
class LifecycleRoundTrips : public LifecycleCompliance<B> {
 protected:
  // EVALSHA calls the server has processed (a script's own commands are
  // counted under their names; the port-by-port path runs several scripts).
  std::int64_t Scripts() {
    auto client = redis::OpenClient(this->backend_.Config(this->clock_));
    auto info = client.value()->Command({"INFO", "commandstats"});
    const std::string& text = info.value().str;
    const std::string key = "cmdstat_evalsha:calls=";
    const std::size_t at = text.find(key);
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + key.size(), text.find(',', at) - at - key.size()));
  }
};

}  // namespace pynenc_cpp::lifecycle_test
