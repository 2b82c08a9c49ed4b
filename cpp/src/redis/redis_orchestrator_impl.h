// Internal: the Redis orchestrator class, shared by its source files
//   redis_orchestrator.cc          invocations, indexes, auto purge, wait graph, purge
//   redis_orchestrator_runners.cc  heartbeats, recovery queries, atomic-service rows
//   redis_orchestrator_scripts.cc  the Lua scripts (helpers, invocations, wait graph)
//   redis_orchestrator_scripts_runners.cc  the Lua scripts of runners and recovery
// Not a public header; users go through NewRedisOrchestrator.
//
// Key layout, every key under P = KeyPrefix(app_id, "orchestrator"):
//   P seq                 INCR counter: registration sequence numbers
//   P inv:<id>            hash: seq, task, call, st (status name), ts (status us),
//                         own (owner; absent = no owner), retries
//   P task:<t>            sorted set of ids scored by seq (registration order);
//                         a call's ids are those of its task with that call
//                         (pynenc's call key is "<task key>:<args id>")
//   P arg:<len(k)>:<k>=<v> sorted set of ids scored by seq; P args:<id> hash k -> v
//   P stimes:<s>          sorted set of the invocations in status s, scored by
//                         status time, members "<seq, 20 digits><id>": newest
//                         first pages (ties newest seq), counts, recovery scans;
//                         every invocation is in exactly one of them.
//                         Earlier layouts also kept P all and P status:<s> (ids
//                         by seq), P times (every status's page in one), P
//                         ttimes:<t> (per task) and P call:<c> (per call), all
//                         derivable from the above: opening an orchestrator
//                         unlinks them.
//   P purge               auto-purge marks, scored by mark time, same members
//   P wf:<id> / wb:<id>   sets: what <id> waits for / who waits for <id>;
//   P waited              set of ids someone waits for
//   P fw:<id>             set of WaitAnyFinal tokens waiting for <id> to be final
//                         (expires with the longest wait); P note:<token> list
//                         the final ids are pushed on (expires 60 s after a push)
//   P runner:<id>         hash: c (creation), hb, a (0/1), q (encoded queues);
//   P runners             sorted set of runner ids scored by creation
//   P exec:<run>          hash: runner, start, end (absent while running), st,
//                         reason, seq; P execs (set of runs), P exec_running (set),
//                         P exec_seq (INCR counter: insertion order)
// Every write is one script, so each is atomic against every other client.
// Thread safety: the class holds no mutable state; redis::Client is thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "redis/redis_orchestrator.h"

namespace pynenc_cpp::redis_orchestrator {

// The helpers every orchestrator script starts with (P = ARGV[1], pad, argkey,
// release, forget), for scripts of other modules that write orchestrator keys
// (redis/redis_lifecycle_scripts.cc).
const char* LuaCommon();

const redis::Script& RegisterScript();
const redis::Script& TransitionScript();
const redis::Script& GateScript();
const redis::Script& WaitFinalScript();
const redis::Script& IndexArgumentsScript();
const redis::Script& ExistingScript();
const redis::Script& ListScript();
const redis::Script& CountScript();
const redis::Script& CallInvocationsScript();
const redis::Script& IncrementRetriesScript();
const redis::Script& ScheduleAutoPurgeScript();
const redis::Script& AutoPurgeScript();
const redis::Script& WaitingScript();
const redis::Script& ReleaseScript();
const redis::Script& BlockingScript();
const redis::Script& HeartbeatScript();
const redis::Script& DeregisterScript();
const redis::Script& RunnersScript();
const redis::Script& PendingRecoveryScript();
const redis::Script& OwnerDeadScript();
const redis::Script& ExecutionStartScript();
const redis::Script& ExecutionFinalizeScript();
const redis::Script& ExecutionsScript();
const redis::Script& ExecutionDropScript();
const redis::Script& DropRetiredIndexesScript();

// A final-status note, as notify_final pushes it on a waiter's list:
// "<id length>:<id>" and then whatever the script that set the status added (the
// finish composite adds the status record and a small result:
// redis/redis_lifecycle_writes.cc). A note of an engine from before this format is the
// bare id.
struct FinalNote {
  InvocationId id;
  std::string extra;  // after the id; empty for a bare id or a note with nothing added
};
// `note` read against the ids waited for: nullopt when it names none of them.
std::optional<FinalNote> ParseFinalNote(const std::string& note,
                                        const std::vector<InvocationId>& ids);

// What a wait for a final status saw first: the registration's reply when it was
// not nil (an id was already final), or a note naming one of the ids.
struct FinalWake {
  redis::Value registered;
  std::optional<FinalNote> note;
};
// WaitAnyFinal's registration of a fresh `token` for `ttl_ms` (a script that
// returns nil when no id is final yet and registers the token in P fw:<id>).
using FinalRegistration =
    std::function<Result<redis::Value>(const std::string& token, std::int64_t ttl_ms)>;
// A waiter token registered already for the one id of a wait (by the status read
// that came before it, in the same script: RedisLifecycle's ReadFinalArmed), and
// for how much longer its first block may rely on that registration.
struct ArmedWait {
  std::string token;
  std::int64_t valid_ms = 0;
};
// WaitAnyFinal's loop, for the orchestrator and the lifecycle (which registers
// with a script that also reads the record): registers, then blocks on the
// token's note list (P note:<token>), registering again every 10 s. nullopt when
// `timeout_us` passed (<= 0: a single check). With `armed` (and a timeout), the
// first block is on the armed token's notes, without a registration of its own,
// for at most `valid_ms`; the loop then goes on as usual.
Result<std::optional<FinalWake>> WaitFinal(redis::Client& client, const std::string& prefix,
                                           const std::vector<InvocationId>& ids,
                                           TimestampUs timeout_us, const FinalRegistration& reg,
                                           const ArmedWait* armed = nullptr);
// A fresh waiter token (32 hex digits), unique across threads and processes.
std::string NewWaitToken();

// kBackendFailure for a Redis error reply, naming what was being done.
Status ReplyError(const redis::Value& v, const std::string& what);
// The elements of an array reply of strings; kBackendFailure otherwise.
Result<std::vector<std::string>> Strings(const redis::Value& v, const std::string& what);
// An integer parsed from a stored decimal string; kBackendFailure if malformed.
Result<std::int64_t> ParseInt(const std::string& s, const std::string& what);

class RedisOrchestrator final : public Orchestrator {
 public:
  RedisOrchestrator(std::shared_ptr<redis::Client> client, const BackendConfig& config)
      : client_(std::move(client)),
        clock_(ClockOrReal(config)),
        prefix_(redis::KeyPrefix(config.app_id, redis::keys::kOrchestrator)) {}

  // redis_orchestrator.cc
  Result<StatusRecord> RegisterInvocations(const std::vector<NewInvocation>& invocations,
                                           const std::optional<std::string>& runner_id) override;
  Result<StatusRecord> TransitionStatus(const InvocationId& id, InvocationStatus to,
                                        const std::optional<std::string>& runner_id) override;
  Result<StatusRecord> TransitionStatusFromOwner(
      const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
      const std::optional<std::string>& expected_owner) override;
  // TransitionStatus, and with `expected_owner` (not null) TransitionStatusFromOwner.
  Result<StatusRecord> Transition(const InvocationId& id, InvocationStatus to,
                                  const std::optional<std::string>& runner_id,
                                  const std::optional<std::string>* expected_owner);
  Result<StatusRecord> GetStatusRecord(const InvocationId& id) override;
  Result<std::vector<InvocationId>> FilterByStatus(
      const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) override;
  // Registers a token for every id (or returns the first already final one),
  // then blocks in BLPOP on the token's list, which the script that makes an
  // id final pushes to: one round trip to register, no status polling.
  Result<std::optional<InvocationId>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                   TimestampUs timeout_us) override;
  Status IndexArguments(const InvocationId& id,
                        const std::map<std::string, std::string>& args) override;
  Result<std::vector<InvocationId>> GetExistingInvocations(
      const TaskId& task_id, const std::map<std::string, std::string>& key_args,
      const std::vector<InvocationStatus>& statuses) override;
  Result<GateOutcome> GatedTransition(const GateRequest& gate) override;
  Result<std::vector<InvocationId>> GetTaskInvocations(const TaskId& task_id) override;
  Result<std::vector<InvocationId>> GetCallInvocations(const CallId& call_id) override;
  Result<std::vector<InvocationId>> ListInvocations(const std::optional<TaskId>& task_id,
                                                    const std::vector<InvocationStatus>& statuses,
                                                    std::int64_t limit,
                                                    std::int64_t offset) override;
  Result<std::int64_t> CountInvocations(const std::optional<TaskId>& task_id,
                                        const std::vector<InvocationStatus>& statuses) override;
  Status IncrementRetries(const InvocationId& id) override;
  Result<std::int64_t> GetRetries(const InvocationId& id) override;
  Status ScheduleAutoPurge(const InvocationId& id) override;
  Result<std::vector<InvocationId>> AutoPurge(TimestampUs older_than_us) override;
  Status WaitingForResults(const InvocationId& waiter,
                           const std::vector<InvocationId>& waited) override;
  Status ReleaseWaiters(const InvocationId& waited) override;
  Result<std::vector<InvocationId>> GetBlockingInvocations(std::int64_t max_count) override;
  Status Purge() override;

  // redis_orchestrator_runners.cc
  Status RegisterHeartbeats(
      const std::vector<std::string>& runner_ids, bool can_run_atomic_service,
      const std::optional<std::vector<std::string>>& consumed_queues) override;
  Status DeregisterRunners(const std::vector<std::string>& runner_ids) override;
  Result<std::vector<RunnerInfo>> ActiveRunners(
      TimestampUs timeout_us, std::optional<bool> can_run_atomic_service) override;
  Result<std::vector<InvocationId>> PendingForRecovery(TimestampUs max_pending_us) override;
  Result<std::vector<InvocationId>> RunningForRecovery(TimestampUs heartbeat_timeout_us) override;
  Result<std::vector<InvocationId>> PendingOfDeadRunners(TimestampUs heartbeat_timeout_us) override;
  Result<AtomicServiceStart> RecordAtomicServiceStart(const std::string& runner_id,
                                                      const std::string& run_id,
                                                      std::optional<TimestampUs> started_at_us,
                                                      AtomicServiceStatus status,
                                                      const std::string& reason) override;
  Status FinalizeAtomicService(const std::string& runner_id, const std::string& run_id,
                               TimestampUs end_us, AtomicServiceStatus status,
                               const std::string& reason) override;
  Result<std::vector<AtomicServiceExecution>> ActiveAtomicServiceExecutions() override;
  Result<std::vector<AtomicServiceExecution>> AtomicServiceExecutionsInRange(
      TimestampUs start_us, TimestampUs end_us, std::int64_t limit,
      const std::optional<std::string>& runner_id, TimestampUs min_duration_us) override;
  Result<std::int64_t> PurgeAtomicServiceExecutions(const ExecutionPurgePolicy& policy) override;

  // Unlinks the indexes an earlier key layout kept (P all, P status:<s>, P
  // times, P ttimes:<t>, P call:<c>), which nothing reads or updates now; done
  // when the orchestrator is opened.
  Status DropRetiredIndexes();

 private:
  // Runs `script` with ARGV = {prefix, args...}; a Redis error reply becomes
  // kBackendFailure naming `what`.
  Result<redis::Value> Run(const redis::Script& script, std::vector<std::string> args,
                           const std::string& what);
  // Runs a script whose reply is an array of invocation ids.
  Result<std::vector<InvocationId>> RunIds(const redis::Script& script,
                                           std::vector<std::string> args, const std::string& what);
  // Unlinks every key matching the SCAN pattern `match`, one SCAN batch at a
  // time (never KEYS); `what` names the step in errors.
  Status UnlinkMatching(const std::string& match, const std::string& what);
  // The stored record of `id`; nullopt for an unknown id.
  Result<std::optional<StatusRecord>> ReadRecord(const InvocationId& id);
  // Every execution row (only running ones if `running_only`), newest start
  // first, ties newest insertion first; with each row's stored seq.
  Result<std::vector<std::pair<AtomicServiceExecution, std::string>>> Executions(bool running_only);

  const std::shared_ptr<redis::Client> client_;
  const std::shared_ptr<Clock> clock_;
  const std::string prefix_;
};

}  // namespace pynenc_cpp::redis_orchestrator
