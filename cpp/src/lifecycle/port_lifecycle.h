// The Lifecycle written once over the ports (not a public header). Backends
// specialise by overriding Atomically() (the scope every operation runs in).
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/native/lifecycle.h"

namespace pynenc_cpp::redis {
class Client;
}
namespace pynenc_cpp::sqlite {
class Database;
}

namespace pynenc_cpp::native {

class PortLifecycle : public Lifecycle {
 public:
  PortLifecycle(LifecycleParts parts, TriggerContextNames names);

  // Marks this lifecycle as one over in-process (memory://) components only
  // (see Lifecycle::InProcess). REQUIRES: before the object is shared.
  void MarkInProcess() { in_process_ = true; }
  bool InProcess() const override { return in_process_; }

  Result<ChangeOutcome> RegisterAndRoute(const std::vector<NewRoutedInvocation>& batch,
                                         const Actor& actor) override;
  Result<GuardedRegistration> RegisterGuarded(const NewRoutedInvocation& item,
                                              const std::map<std::string, std::string>& key_args,
                                              const std::map<std::string, std::string>& index_args,
                                              const Actor& actor) override;
  Result<ChangeOutcome> ChangeStatus(const InvocationId& id, InvocationStatus to,
                                     const Actor& actor, const std::optional<TaskId>& task,
                                     bool release_waiters) override;
  Result<GatedChangeOutcome> GatedChange(const InvocationId& id, InvocationStatus to,
                                         const Actor& actor, const TaskId& task,
                                         const std::map<std::string, std::string>& key_args,
                                         const std::vector<InvocationStatus>& blocking,
                                         const std::map<std::string, std::string>& index_args,
                                         const std::optional<Deferral>& deferral) override;
  Result<ClaimOutcome> Claim(const InvocationId& id, const Actor& actor) override;
  Result<ClaimOutcome> ClaimAndStart(const InvocationId& id, const Actor& actor) override;
  Result<std::optional<TakenClaim>> TakeAndStart(const std::string& queue, std::int64_t timeout_ms,
                                                 const Actor& actor) override;
  Result<std::vector<TakenClaim>> TakeAndClaim(const std::string& queue, int max,
                                               const Actor& actor) override;
  Result<FinalRead> ReadFinal(const InvocationId& id, std::size_t max_result_bytes) override;
  Result<std::optional<FinalWait>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                TimestampUs timeout_us,
                                                std::size_t max_result_bytes) override;
  void SetTaskRunsFreely(const TaskId& task) override;
  Result<FinishOutcome> FinishSuccess(const InvocationId& id, const std::string& result,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override;
  Result<FinishOutcome> FinishFailure(const InvocationId& id, const std::string& exception,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override;
  Result<ChangeOutcome> Retry(const InvocationId& id, const std::string& queue, double priority,
                              const Actor& actor, const TaskId& task) override;
  Result<ChangeOutcome> Reroute(const InvocationId& id, const std::string& queue, double priority,
                                const Actor& actor, const TaskId& task) override;
  Result<std::vector<Recovered>> RecoverStale(RecoveryKind kind, TimestampUs limit_us,
                                              const Actor& actor) override;

 protected:
  bool RunsFreely(const TaskId& task);
  // `id` taken from a queue, with ClaimAndStart's result.
  static TakenClaim Taken(const InvocationId& id, Result<ClaimOutcome> claim);
  // Every task declared with SetTaskRunsFreely.
  std::vector<std::string> FreeTasks();
  const LifecycleParts& parts() const { return parts_; }
  const TriggerContextNames& names() const { return names_; }

  // Runs one operation's steps. Here: directly (each step atomic on its own).
  // `fn` may run more than once (a retried transaction); it must reset what it
  // fills in.
  // The scope of one operation. Here a plain call whose lost connection always
  // counts as maybe applied (earlier steps may have landed); SqliteLifecycle
  // overrides it with one write transaction.
  virtual Status Atomically(const std::function<Status()>& fn);
  // Claim (and, if `start`, ClaimAndStart) with no scope.
  Status ClaimSteps(const InvocationId& id, const Actor& actor, bool start, ClaimOutcome* out);
  // TakeAndClaim's takes and claims with no scope, into `out` (cleared first). A
  // claim that fails or does not claim ends the list as its last entry. A take
  // that fails: its error is returned when `strict` (the caller's scope rolls
  // back) or nothing was taken yet; else it ends the list and the call succeeds,
  // since nothing rolls back what was taken.
  Status TakeClaimSteps(const std::string& queue, int max, const Actor& actor, bool strict,
                        std::vector<TakenClaim>* out);

 private:
  Result<bool> Watched(const TaskId& task, const std::string& context_type);
  // RegisterAndRoute's steps, with no scope (REQUIRES: ids not empty).
  Status RegisterSteps(const std::vector<NewRoutedInvocation>& batch, const Actor& actor,
                       ChangeOutcome* out);
  Result<bool> StatusWatched(const InvocationId& id, const std::optional<TaskId>& task);
  Status AddHistory(const InvocationId& id, const StatusRecord& record, const Actor& actor,
                    const std::optional<std::string>& registered_by);
  // Transition + waiters + auto-purge + history + watched check, no scope. With
  // `expected_owner` (not null) the transition is fenced on that owner
  // (Orchestrator::TransitionStatusFromOwner).
  Result<ChangeOutcome> ChangeSteps(const InvocationId& id, InvocationStatus to, const Actor& actor,
                                    const std::optional<TaskId>& task, bool release_waiters,
                                    const std::optional<std::string>* expected_owner = nullptr);
  Result<FinishOutcome> Finish(const InvocationId& id, const std::string& payload, bool success,
                               const Actor& actor, const TaskId& task, bool release_waiters);
  Result<ChangeOutcome> ChangeAndRoute(const InvocationId& id, InvocationStatus to,
                                       bool count_retry, const std::string& queue, double priority,
                                       const Actor& actor, const TaskId& task);

  const LifecycleParts parts_;
  const TriggerContextNames names_;
  Mutex mu_;
  std::set<std::string> free_tasks_ PYNENC_GUARDED_BY(mu_);
  // Held across RegisterGuarded's look and registration (one step in-process where
  // the storage has no transaction: memory://).
  Mutex register_mu_;
  bool in_process_ = false;  // set before sharing, read-only after
};

// The SQLite Lifecycle: every operation is one BEGIN IMMEDIATE transaction on
// `db`, which the components' own calls join (the Storage's Database).
Result<std::unique_ptr<Lifecycle>> NewSqliteLifecycle(LifecycleParts parts,
                                                      std::shared_ptr<sqlite::Database> db,
                                                      TriggerContextNames names);

// The Redis Lifecycle: Claim and FinishSuccess/FinishFailure are one Lua script
// (one round trip) in their common case, sent through `client` (the Storage's
// pool). REQUIRES: config.uri is redis:// and names `client`'s server.
Result<std::unique_ptr<Lifecycle>> NewRedisLifecycle(LifecycleParts parts,
                                                     std::shared_ptr<redis::Client> client,
                                                     const BackendConfig& config,
                                                     TriggerContextNames names);

}  // namespace pynenc_cpp::native
