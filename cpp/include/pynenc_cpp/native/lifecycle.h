// Lifecycle: the composite operations of native mode. Each method is one call
// from Python (made with the GIL released) that performs every storage step
// pynenc's BaseOrchestrator performs for one step of an invocation's life:
// the status transition, the history row, waiter release, the auto-purge mark,
// routing, result / exception storage, and the "does any trigger condition
// watch this task?" check that lets Python skip pynenc's trigger reporting
// when it could not match anything.
//
// A Lifecycle is built over the port objects of one app (orchestrator, state
// backend, broker and, optionally, trigger store), so it works on every
// backend. How atomic each operation is depends on the backend:
//   * sqlite://  every operation is ONE `BEGIN IMMEDIATE` transaction when the
//                components share one Database (they do when opened on the same
//                path): the port calls join the composite's transaction.
//   * memory://  each step is atomic under its component's lock; the steps of
//                one operation are not atomic together (another thread may see
//                the transition before the history row). Same as pynenc's
//                MemOrchestrator + MemStateBackend.
//   * redis://   Claim, ClaimAndStart and FinishSuccess / FinishFailure are ONE Lua script
//                (one round trip) in their common case (redis/redis_lifecycle.cc,
//                redis_lifecycle_writes.cc);
//                otherwise, and for every other operation, each step is atomic
//                and one round trip (the transition is a read plus a Lua
//                compare-and-set), so an operation is several round trips.
// The status transition is always the first write of an operation that changes
// a status, so an illegal or lost transition changes nothing.
//
// History rows are written exactly as pynenc's BaseStateBackend writes them
// (InvocationHistory.to_json(): same keys, same isoformat timestamps); their
// timestamp is the new status record's.
//
// Thread safety: thread-safe (the ports are); SetTaskRunsFreely is guarded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/ids.h"
#include "pynenc_cpp/core/status.h"
#include "pynenc_cpp/ports/backend_config.h"
#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/orchestrator.h"
#include "pynenc_cpp/ports/state_backend.h"
#include "pynenc_cpp/ports/trigger_store.h"

namespace pynenc_cpp {

// The components of one app a Lifecycle works on.
struct LifecycleParts {
  std::shared_ptr<Orchestrator> orchestrator;   // required
  std::shared_ptr<StateBackend> state_backend;  // required
  std::shared_ptr<Broker> broker;               // required
  std::shared_ptr<TriggerStore> trigger;        // null: every "watched" flag is true
};

// The context-type names trigger conditions are registered under (the Python
// adapter's `module.QualName` of pynenc's StatusContext, ResultContext,
// ExceptionContext).
struct TriggerContextNames {
  std::string status;
  std::string result;
  std::string exception;
};

// Who performs an operation: the owner id used by the status machine and the
// runner-context id stored in history rows.
struct Actor {
  std::optional<std::string> runner_id;
  std::string runner_context_id;
};

// One new invocation for RegisterAndRoute.
struct NewRoutedInvocation {
  InvocationRecord record;  // the state-backend row (task and call ids inside)
  std::string queue;        // broker queue of its task
  double priority = 0.0;    // broker priority of its task
};

struct ChangeOutcome {
  StatusRecord record;          // the new status record
  bool status_watched = false;  // a StatusContext condition watches the task
};

// What GatedChange does with an invocation another one blocks: pynenc's
// deferral, made in the same operation so that no process dies between the
// deferral and the reroute (pynenc itself sets CONCURRENCY_CONTROLLED, and
// reroutes later in another call). Each status of `path` in turn, each with its
// history row (a final one also releases waiters if `release_waiters`, and is
// marked for auto purge), then, with `route`, the id is routed to (queue, priority).
struct Deferral {
  std::vector<InvocationStatus> path;  // {CONCURRENCY_CONTROLLED, REROUTED} or {.._FINAL}
  std::optional<std::pair<std::string, double>> route;
  bool release_waiters = true;
};

// What GatedChange did: the change (its record, history row written) when no
// other invocation blocked it, else the blocker (nothing changed but the index,
// and the deferral's changes, if one was asked for: `deferred`, in order).
struct GatedChangeOutcome {
  std::optional<ChangeOutcome> change;
  std::optional<InvocationId> blocker;
  StatusRecord record;  // the new record, or (blocked) the current one
  std::vector<ChangeOutcome> deferred;
};

struct FinishOutcome {
  ChangeOutcome change;
  bool payload_watched = false;  // a Result/ExceptionContext condition watches the task
};

enum class ClaimKind : unsigned char {
  kClaimed,       // moved to PENDING by the actor (history written)
  kNotAvailable,  // its status is not available for run: left untouched
  kNeedsCheck,    // available, but its task may have running concurrency control:
                  // left untouched; the caller checks and calls ChangeStatus
  kStarted,       // ClaimAndStart only: moved to PENDING, then on to RUNNING, by the
                  // actor (both history rows)
};

struct ClaimOutcome {
  ClaimKind kind = ClaimKind::kNotAvailable;
  StatusRecord record;  // the new record (kClaimed: PENDING, kStarted: RUNNING) or
                        // the current one
  std::optional<InvocationRecord> invocation;  // set unless kNotAvailable
  bool status_watched = false;  // kClaimed, kStarted: a StatusContext condition watches
                                // the task (the same answer for PENDING and RUNNING)
};

// An id TakeAndStart took from a queue, and its claim: `claim` (as
// ClaimAndStart's) when `claim_status` is Ok, else the claim's error. The id has
// left the queue either way.
struct TakenClaim {
  InvocationId id;
  Status claim_status;
  ClaimOutcome claim;
  // False when the take knows the queue held nothing more after it (on Redis):
  // a take made ahead with the finish would then most likely find nothing.
  bool backlog = true;
};

// What FinishThenTake did: the finish (its outcome or error), and the invocation
// it took and started with it (none when the queue was empty, or the storage
// cannot do both at once). What was taken is the caller's to run even when the
// finish failed.
struct FinishedAndTaken {
  Result<FinishOutcome> finish;
  std::optional<TakenClaim> next;
};

// What ReadFinal read: the status record and, for a SUCCESS invocation whose
// stored result is at most the size asked for, that result.
struct FinalRead {
  StatusRecord record;
  std::optional<std::string> result;
};

// What ReadFinalAhead read: ReadFinal of the id asked for and of the ids read
// ahead that were final, in the order asked.
struct FinalReads {
  FinalRead first;
  std::vector<std::pair<InvocationId, FinalRead>> ahead;
};

// What WaitAnyFinal saw: the first id found final and, when the wait could read it
// in the same operation, what ReadFinal would have read.
struct FinalWait {
  InvocationId id;
  std::optional<FinalRead> read;
};

enum class RecoveryKind : unsigned char {
  kPending,  // PENDING for longer than the limit -> PENDING_RECOVERY
  kRunning,  // RUNNING owned by a runner without a recent heartbeat -> RUNNING_RECOVERY
};

struct Recovered {
  InvocationId id;
  ChangeOutcome change;
};

class Lifecycle {
 public:
  Lifecycle() = default;
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;
  virtual ~Lifecycle() = default;

  // True when no operation waits on I/O, a server or another process: storage in
  // this process's memory (memory://). A caller may then keep its own lock around
  // an operation that does not wait by design (the bindings keep the GIL for
  // those: a release would hand the GIL to another thread and make this one wait
  // to take it back, for a call that takes microseconds). TakeAndStart with a
  // timeout and the waits for a final status still wait.
  virtual bool InProcess() const { return false; }

  // pynenc's register_new_invocations: upserts the rows in the state backend,
  // registers them (REGISTERED, owned by the actor), writes one REGISTERED
  // history row each (registered_by = its parent), and routes them, grouped by
  // (queue, priority) in first-seen order. `status_watched` is true if any of
  // their tasks is watched. kInvalidArgument for an empty id.
  virtual Result<ChangeOutcome> RegisterAndRoute(const std::vector<NewRoutedInvocation>& batch,
                                                 const Actor& actor) = 0;

  // pynenc's route_call for a task with registration concurrency control, as one
  // step: unless an invocation of the item's task whose indexed arguments match
  // every pair of `key_args` (empty: any) is REGISTERED, RegisterAndRoute({item})
  // and the item's `index_args` indexed (Orchestrator::IndexArguments). Returns
  // the REGISTERED one found (nothing written), or none with the registration's
  // outcome. One transaction on sqlite://, one script on redis://; on memory://
  // one step for the callers of this lifecycle (a mutex: other writers in the
  // process, none of them registering, are not held off).
  struct GuardedRegistration {
    std::optional<InvocationId> existing;
    ChangeOutcome registered;
  };
  virtual Result<GuardedRegistration> RegisterGuarded(
      const NewRoutedInvocation& item, const std::map<std::string, std::string>& key_args,
      const std::map<std::string, std::string>& index_args, const Actor& actor) = 0;

  // pynenc's set_invocation_status: transition (compare-and-set), then for a
  // final status the waiter release (if `release_waiters`) and the auto-purge
  // mark, then the history row. `task` (if known) saves a lookup for the
  // watched check. Errors of the transition are returned unchanged.
  virtual Result<ChangeOutcome> ChangeStatus(const InvocationId& id, InvocationStatus to,
                                             const Actor& actor, const std::optional<TaskId>& task,
                                             bool release_waiters) = 0;

  // pynenc's running concurrency control and the change it guards as one step
  // (Orchestrator::GatedTransition), then, when the change was made, its history
  // row and the watched check, as ChangeStatus: the claim of a task with running
  // concurrency control (`to` PENDING, `blocking` {PENDING, RUNNING}) and the start
  // of its run (`to` RUNNING, `blocking` {RUNNING}). One transaction on sqlite://;
  // elsewhere the gate is one atomic step and the history row follows it.
  // Blocked, `deferral` (if any) is applied in the same operation. Transition
  // errors are returned unchanged (the deferral's too: nothing is written then on
  // sqlite://); kInvalidArgument for a final `to`.
  virtual Result<GatedChangeOutcome> GatedChange(
      const InvocationId& id, InvocationStatus to, const Actor& actor, const TaskId& task,
      const std::map<std::string, std::string>& key_args,
      const std::vector<InvocationStatus>& blocking,
      const std::map<std::string, std::string>& index_args,
      const std::optional<Deferral>& deferral) = 0;

  // The per-id body of pynenc's get_additional_invocations_to_run for an id
  // already taken from the broker: status check, invocation lookup, and, when
  // the task is known to run freely (SetTaskRunsFreely), the move to PENDING
  // with its history row. kNotFound for an unknown id; transition errors
  // (another runner won the race) are returned unchanged.
  virtual Result<ClaimOutcome> Claim(const InvocationId& id, const Actor& actor) = 0;

  // Claim, and for an invocation it claims (kClaimed), the move on to RUNNING
  // with its history row in the same operation: kStarted instead. This is
  // pynenc's claim followed by the first storage step of its
  // DistributedInvocation.run, for a task that runs freely (the only kind Claim
  // moves by itself, and one pynenc's run-time concurrency check always
  // authorizes). The RUNNING row's timestamp is not before the PENDING row's
  // (strictly after on redis://). One transaction on sqlite://, one script on
  // redis:// in the common case. Every other outcome and error as Claim.
  virtual Result<ClaimOutcome> ClaimAndStart(const InvocationId& id, const Actor& actor) = 0;

  // The broker's Retrieve(queue, timeout_ms), then ClaimAndStart of the id it
  // took, for a runner that runs what it takes at once. On redis:// the two are
  // one Lua script whenever the queue has an id (the blocking wait stays the
  // broker's); elsewhere the two operations. nullopt when nothing arrived in
  // time (or the broker was interrupted); an error when the retrieval failed
  // (nothing taken). The claim's own error comes back inside TakenClaim.
  virtual Result<std::optional<TakenClaim>> TakeAndStart(const std::string& queue,
                                                         std::int64_t timeout_ms,
                                                         const Actor& actor) = 0;

  // A runner's prefetch: up to `max` ids of `queue`, in queue order, each taken
  // and claimed (Claim: PENDING for `actor`, history row) in ONE operation (one
  // transaction on sqlite://, one script on redis://), without waiting. The list
  // ends at the first id that is not claimed by itself (kNotAvailable,
  // kNeedsCheck, a claim error):
  //   * redis://, sqlite://  that id is left in the queue (the script claims an
  //               id before it takes it; the transaction is made again without
  //               it), and on redis:// an id whose history text needs JSON
  //               escapes ends the list the same way;
  //   * memory:// it is taken, and is the last entry, with its claim's outcome
  //               or error, as TakeAndStart hands one.
  // What is listed has left the queue and is the caller's: a claimed one is run by
  // moving it to RUNNING (its run's own status change), or routed back. A claimed
  // invocation the caller never runs (a killed process) is PENDING, which pynenc's
  // pending recovery reroutes after max_pending_seconds.
  // An error: nothing was taken, except on redis:// when the script ran but its
  // reply was lost or unreadable (what it claimed is then PENDING, left to that
  // recovery), and on memory://, where an error of a later step ends the list at
  // the id it concerns. `max` <= 0: an empty list.
  virtual Result<std::vector<TakenClaim>> TakeAndClaim(const std::string& queue, int max,
                                                       const Actor& actor) = 0;

  // The status record (kNotFound for an unknown id, as
  // Orchestrator::GetStatusRecord) and, when the status is SUCCESS and the stored
  // result is at most `max_result_bytes` long, the serialized result: what a
  // client reading a finished invocation's result needs, in one round trip on
  // redis://. A SUCCESS whose result is missing or longer reads as no result
  // (the caller reads it on its own). Writes nothing.
  virtual Result<FinalRead> ReadFinal(const InvocationId& id, std::size_t max_result_bytes) = 0;

  // ReadFinal of `id` and, when its status is final, ReadFinal of each id of
  // `ahead` whose status is final too (unknown ids and the others left out), in
  // one round trip on redis://: a client that reads many finished invocations
  // one after the other reads the next ones with the first. Writes nothing. The
  // default reads `id` only (a read costs no round trip to save).
  virtual Result<FinalReads> ReadFinalAhead(const InvocationId& id,
                                            const std::vector<InvocationId>& ahead,
                                            std::size_t max_result_bytes) {
    (void)ahead;
    Result<FinalRead> first = ReadFinal(id, max_result_bytes);
    if (!first.ok()) return first.status();
    return FinalReads{std::move(first).value(), {}};
  }

  // ReadFinalAhead for a reader that waits for `id` next when it is not final
  // (pynenc's invocation.result reads the status, then waits): on redis:// the
  // read, finding `id` not final, also registers a waiter for it in the same
  // script, and this thread's next WaitAnyFinal of `id` alone (within 5 s)
  // blocks on that registration's note without a registration round trip of its
  // own. Writes nothing but that registration (which expires on its own, and is
  // consumed when `id` becomes final). The default: ReadFinalAhead.
  virtual Result<FinalReads> ReadFinalArmed(const InvocationId& id,
                                            const std::vector<InvocationId>& ahead,
                                            std::size_t max_result_bytes) {
    return ReadFinalAhead(id, ahead, max_result_bytes);
  }

  // The orchestrator's WaitAnyFinal (blocks until one of `ids` is final or
  // `timeout_us` passed; <= 0 is a single check), and ReadFinal of the id it found,
  // in one operation. nullopt on timeout. On redis:// the read costs no round trip
  // of its own: the registration reads the record of an id already final, and the
  // finish composite's note carries the record and a result of at most 16 KiB
  // (and at most `max_result_bytes`). `read` is empty when the id was made final
  // elsewhere (a port status change), or its read failed (the caller reads it
  // itself and sees the error). kInvalidArgument for no ids.
  virtual Result<std::optional<FinalWait>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                        TimestampUs timeout_us,
                                                        std::size_t max_result_bytes) = 0;

  // Declares that `task` has running concurrency control disabled, so Claim may
  // move its invocations to PENDING without asking the caller.
  virtual void SetTaskRunsFreely(const TaskId& task) = 0;

  // set_invocation_result: stores the serialized result, then ChangeStatus to
  // SUCCESS. `payload_watched`: a ResultContext condition watches the task.
  virtual Result<FinishOutcome> FinishSuccess(const InvocationId& id, const std::string& result,
                                              const Actor& actor, const TaskId& task,
                                              bool release_waiters) = 0;

  // set_invocation_exception: stores the serialized exception, then ChangeStatus
  // to FAILED. `payload_watched`: an ExceptionContext condition watches the task.
  virtual Result<FinishOutcome> FinishFailure(const InvocationId& id, const std::string& exception,
                                              const Actor& actor, const TaskId& task,
                                              bool release_waiters) = 0;

  // FinishSuccess (`success`) or FinishFailure of `id` with `payload`, then, where
  // the storage makes both one operation (TakesWithFinish: on sqlite:// the same
  // write transaction), a non-blocking TakeAndStart of `queue` for `taker`: a
  // runner's worker finishing one invocation and taking its next at once. The
  // finish's outcome and errors are exactly FinishSuccess's / FinishFailure's; a
  // take that fails is not made: `next` is then empty, and the finish stands
  // alone (on redis:// the finish script and the take script go in one pipeline:
  // the take runs whatever the finish did, and what it took is in `next`). The
  // default finishes only.
  virtual FinishedAndTaken FinishThenTake(const InvocationId& id, const std::string& payload,
                                          bool success, const Actor& actor, const TaskId& task,
                                          bool release_waiters, const std::string& queue,
                                          const Actor& taker) {
    (void)queue;
    (void)taker;
    return FinishedAndTaken{success ? FinishSuccess(id, payload, actor, task, release_waiters)
                                    : FinishFailure(id, payload, actor, task, release_waiters),
                            std::nullopt};
  }
  // True if FinishThenTake takes the next invocation with the finish.
  virtual bool TakesWithFinish() const { return false; }

  // set_invocation_retry: ChangeStatus to RETRY, retries + 1, route again.
  virtual Result<ChangeOutcome> Retry(const InvocationId& id, const std::string& queue,
                                      double priority, const Actor& actor, const TaskId& task) = 0;

  // ChangeStatus to REROUTED, then route again (pynenc's reroute_invocations,
  // one invocation).
  virtual Result<ChangeOutcome> Reroute(const InvocationId& id, const std::string& queue,
                                        double priority, const Actor& actor,
                                        const TaskId& task) = 0;

  // The recovery sweep (pynenc's recover_pending_invocations /
  // recover_running_invocations before their reroute): every stale invocation
  // of `kind` (`limit_us`: max pending time, or heartbeat timeout) is moved to
  // PENDING_RECOVERY / RUNNING_RECOVERY with its history row. An invocation
  // another runner moved meanwhile (illegal transition) is left out.
  virtual Result<std::vector<Recovered>> RecoverStale(RecoveryKind kind, TimestampUs limit_us,
                                                      const Actor& actor) = 0;
};

// Builds the Lifecycle for `parts` opened with `config` (the same URI and app
// id as the components): on sqlite:// the transactional one. kInvalidArgument
// if a required part is null; kBadConfig for an unusable URI.
Result<std::unique_ptr<Lifecycle>> OpenLifecycle(LifecycleParts parts, const BackendConfig& config,
                                                 TriggerContextNames names);

// pynenc's InvocationHistory.to_json() for this row (json.dumps layout,
// datetime.isoformat() timestamps). Exposed for tests.
std::string HistoryJson(const InvocationId& id, const StatusRecord& record,
                        const std::string& runner_context_id,
                        const std::optional<std::string>& registered_by);

// datetime.fromtimestamp(us / 1e6, UTC).isoformat().
std::string IsoFormatUtc(TimestampUs us);

}  // namespace pynenc_cpp
