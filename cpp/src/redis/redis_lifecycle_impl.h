// Internal to the Redis lifecycle (NewRedisLifecycle, lifecycle/port_lifecycle.h):
// the class, shared by its source files
//   redis_lifecycle.cc         construction, claims and takes (one script each)
//   redis_lifecycle_reads.cc   final-status reads (plain, ahead, armed) and waits
//   redis_lifecycle_writes.cc  submit, a runner's status change, the finishes
// The scripts and their argument layouts: redis_lifecycle_scripts.cc. Not a
// public header.
//
// Thread safety: thread-safe; the only mutable state is armed_ (armed_mu_);
// redis::Client is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lifecycle/port_lifecycle.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "redis/redis_broker.h"
#include "redis/redis_client.h"
#include "redis/redis_lifecycle_scripts.h"
#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp::native::redis_lifecycle {

using redis::Value;

// kBackendFailure for a script's error reply `v`; `what` names the script.
Status ReplyError(const Value& v, const char* what);
// A stored decimal timestamp; kBackendFailure if malformed.
Result<std::int64_t> ToInt(const std::string& s);

class RedisLifecycle final : public PortLifecycle {
 public:
  // redis_lifecycle.cc
  RedisLifecycle(LifecycleParts parts, TriggerContextNames names,
                 std::shared_ptr<redis::Client> client, const BackendConfig& config);
  Result<ClaimOutcome> Claim(const InvocationId& id, const Actor& actor) override;
  Result<ClaimOutcome> ClaimAndStart(const InvocationId& id, const Actor& actor) override;
  Result<std::optional<TakenClaim>> TakeAndStart(const std::string& queue, std::int64_t timeout_ms,
                                                 const Actor& actor) override;
  Result<std::vector<TakenClaim>> TakeAndClaim(const std::string& queue, int max,
                                               const Actor& actor) override;

  // redis_lifecycle_reads.cc
  Result<FinalReads> ReadFinalAhead(const InvocationId& id, const std::vector<InvocationId>& ahead,
                                    std::size_t max_result_bytes) override;
  Result<FinalReads> ReadFinalArmed(const InvocationId& id, const std::vector<InvocationId>& ahead,
                                    std::size_t max_result_bytes) override;
  Result<FinalRead> ReadFinal(const InvocationId& id, std::size_t max_result_bytes) override;
  static Result<FinalRead> FinalReadOf(const Value& v, const InvocationId& id);
  Result<std::optional<FinalWait>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                TimestampUs timeout_us,
                                                std::size_t max_result_bytes) override;

  // redis_lifecycle_writes.cc
  Result<ChangeOutcome> RegisterAndRoute(const std::vector<NewRoutedInvocation>& batch,
                                         const Actor& actor) override;
  Result<GuardedRegistration> RegisterGuarded(const NewRoutedInvocation& item,
                                              const std::map<std::string, std::string>& key_args,
                                              const std::map<std::string, std::string>& index_args,
                                              const Actor& actor) override;
  std::vector<std::string> SubmitArgs(const std::vector<NewRoutedInvocation>& batch,
                                      const Actor& actor, const StatusRecord& record);
  Result<ChangeOutcome> ChangeStatus(const InvocationId& id, InvocationStatus to,
                                     const Actor& actor, const std::optional<TaskId>& task,
                                     bool release_waiters) override;
  Result<FinishOutcome> FinishSuccess(const InvocationId& id, const std::string& result,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override;
  Result<FinishOutcome> FinishFailure(const InvocationId& id, const std::string& exception,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override;
  FinishedAndTaken FinishThenTake(const InvocationId& id, const std::string& payload, bool success,
                                  const Actor& actor, const TaskId& task, bool release_waiters,
                                  const std::string& queue, const Actor& taker) override;

  bool TakesWithFinish() const override { return true; }

 private:
  // A thread's last ReadFinalArmed that found its id not final: the token it
  // registered, and until when the thread's next wait may rely on it.
  struct Armed {
    InvocationId id;
    std::string token;
    std::chrono::steady_clock::time_point use_by;
  };

  // redis_lifecycle.cc
  static std::string HistoryKey(const StatusRecord& record);
  static std::string HistoryValueOf(const InvocationId& id, const StatusRecord& record,
                                    const Actor& actor,
                                    const std::optional<std::string>& registered_by);
  static void AppendHistory(const InvocationId& id, const StatusRecord& record, const Actor& actor,
                            std::vector<std::string>* args);
  static void CountReplaced(const Value& reply, std::size_t at, const StatusRecord& next);
  static Result<InvocationRecord> Invocation(const Value& packed, const InvocationId& id);
  std::vector<std::string> ClaimArgs(const InvocationId& id, const Actor& actor, bool start,
                                     StatusRecord* next, StatusRecord* running);
  Result<ClaimOutcome> ClaimScripted(const InvocationId& id, const Actor& actor, bool start);
  Result<ClaimOutcome> PortClaim(const InvocationId& id, const Actor& actor, bool start);
  Result<ClaimOutcome> ClaimReply(const Value& v, const InvocationId& id, const Actor& actor,
                                  bool start, const StatusRecord& next,
                                  const StatusRecord& running);
  Result<ClaimOutcome> ClaimedBefore(const InvocationId& id, const Actor& actor);
  TakenClaim TakenOf(const redis::PoppedThen& taken, const Actor& actor, const StatusRecord& next,
                     const StatusRecord& running);

  // redis_lifecycle_reads.cc
  Result<FinalReads> ReadScripted(const InvocationId& id, const std::vector<InvocationId>& ahead,
                                  std::size_t max_result_bytes, const Armed* arm,
                                  const std::optional<Armed>& previous);
  std::optional<redis_orchestrator::ArmedWait> TakeArmed(const std::vector<InvocationId>& ids);

  // redis_lifecycle_writes.cc
  std::optional<redis::Client::EvalCall> FinishCall(const InvocationId& id, InvocationStatus to,
                                                    const std::string& payload, const Actor& actor,
                                                    bool release_waiters, StatusRecord* next);
  static Result<std::optional<FinishOutcome>> FinishReply(const Result<Value>& r,
                                                          const StatusRecord& next);
  Result<std::optional<FinishOutcome>> Finish(const InvocationId& id, InvocationStatus to,
                                              const std::string& payload, const Actor& actor,
                                              bool release_waiters);
  Result<FinishOutcome> FinishOrPort(Result<std::optional<FinishOutcome>> fast,
                                     const InvocationId& id, const std::string& payload,
                                     bool success, const Actor& actor, const TaskId& task,
                                     bool release_waiters);

  const std::shared_ptr<redis::Client> client_;
  const std::shared_ptr<Clock> clock_;
  const std::string po_, ps_, pt_, pb_;
  // The wake-token bound of the broker's default options (only a list trim).
  const std::int64_t wake_token_bound_ = redis::RedisBrokerOptions{}.wake_token_bound;
  std::vector<std::string> available_;  // statuses available for run
  std::vector<std::string> claimable_;  // of those, the ones that may move to PENDING freely
  Mutex armed_mu_;
  std::unordered_map<std::thread::id, Armed> armed_ PYNENC_GUARDED_BY(armed_mu_);
};

}  // namespace pynenc_cpp::native::redis_lifecycle
