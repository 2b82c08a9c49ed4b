// Redis Lifecycle: the hottest operations in one round trip each.
//
// Claim, ClaimAndStart and FinishSuccess / FinishFailure each run as ONE Lua
// script that reads and writes the orchestrator's, the state backend's and the
// trigger store's keys of the app (they share one Cluster slot through the {app}
// hash tag; layouts in redis_orchestrator_impl.h, redis_state_backend.h,
// redis_trigger_store_impl.h). The script takes the common case only and is a
// compare-and-set: Claim (and ClaimAndStart) of an invocation whose status may
// move to PENDING without an ownership check, of a task known to run freely;
// Finish of an invocation RUNNING and owned by the caller. Anything else
// (unknown id, illegal transition, foreign owner, a task not known yet) writes
// nothing and falls back to the port-by-port operation, which then returns
// exactly the port's result or error. Every other operation is the port-by-port
// sequence (one round trip per step). The scripts and their argument layouts:
// redis_lifecycle_scripts.cc.
#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "native/port_lifecycle.h"
#include "native/redis_final_wait.h"
#include "native/redis_lifecycle_scripts.h"
#include "pynenc_cpp/core/metrics.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "redis/redis_broker.h"
#include "redis/redis_client.h"
#include "redis/redis_orchestrator_impl.h"
#include "redis/redis_state_backend.h"
#include "redis/redis_trigger_store.h"

namespace pynenc_cpp::native {
namespace {

using redis::Value;
using redis_lifecycle::ChangeScript;
using redis_lifecycle::ClaimScript;
using redis_lifecycle::FinishScript;
using redis_lifecycle::GuardedSubmitScript;
using redis_lifecycle::kArmTtlMs;
using redis_lifecycle::kArmUseMs;
using redis_lifecycle::ReadFinalAheadScript;
using redis_lifecycle::ReadFinalArmedScript;
using redis_lifecycle::ReadFinalScript;
using redis_lifecycle::SubmitScript;
using redis_lifecycle::TakeClaimScript;
using redis_lifecycle::TakeStartScript;

Status ReplyError(const Value& v, const char* what) {
  return Status::BackendFailure(std::string("redis ") + what + " script failed: " + v.str);
}

Result<std::int64_t> ToInt(const std::string& s) {
  try {
    return static_cast<std::int64_t>(std::stoll(s));
  } catch (...) {
    return Status::BackendFailure("redis: malformed stored timestamp '" + s + "'");
  }
}

class RedisLifecycle final : public PortLifecycle {
 public:
  RedisLifecycle(LifecycleParts parts, TriggerContextNames names,
                 std::shared_ptr<redis::Client> client, const BackendConfig& config)
      : PortLifecycle(std::move(parts), std::move(names)),
        client_(std::move(client)),
        clock_(ClockOrReal(config)),
        po_(redis::KeyPrefix(config.app_id, "orchestrator")),
        ps_(redis::KeyPrefix(config.app_id, "state")),
        pt_(redis::KeyPrefix(config.app_id, "trigger")),
        pb_(redis::KeyPrefix(config.app_id, "broker")) {
    for (InvocationStatus s : AllStatuses()) {
      if (!IsAvailableForRun(s)) continue;
      available_.emplace_back(StatusName(s));
      const StatusDefinition& d = Definition(s);
      if (d.Allows(InvocationStatus::kPending) && !d.requires_ownership) {
        claimable_.emplace_back(StatusName(s));
      }
    }
  }

  Result<ClaimOutcome> Claim(const InvocationId& id, const Actor& actor) override {
    return ClaimScripted(id, actor, false);
  }

  Result<ClaimOutcome> ClaimAndStart(const InvocationId& id, const Actor& actor) override {
    if (!pending_runs_) return PortLifecycle::ClaimAndStart(id, actor);
    return ClaimScripted(id, actor, true);
  }

  Result<std::optional<TakenClaim>> TakeAndStart(const std::string& queue, std::int64_t timeout_ms,
                                                 const Actor& actor) override {
    if (!pending_runs_ || !actor.runner_id || actor.runner_id->empty()) {
      return PortLifecycle::TakeAndStart(queue, timeout_ms, actor);
    }
    StatusRecord next, running;  // of the last attempt: the one that took an id
    const redis::PopThen then{&TakeStartScript(), [&] {
                                return ClaimArgs(InvocationId(), actor, true, &next, &running);
                              }};
    Result<std::optional<redis::PoppedThen>> got =
        redis::RetrieveThen(*parts().broker, queue, timeout_ms, then);
    if (!got.ok()) return got.status();
    if (!got.value()) return std::optional<TakenClaim>();
    return std::optional<TakenClaim>(TakenOf(*got.value(), actor, next, running));
  }

  // One script (TakeClaimScript); the port path (the broker's pops, then each
  // claim) for an actor without a runner id.
  Result<std::vector<TakenClaim>> TakeAndClaim(const std::string& queue, int max,
                                               const Actor& actor) override {
    if (!pending_runs_ || !actor.runner_id || actor.runner_id->empty()) {
      return PortLifecycle::TakeAndClaim(queue, max, actor);
    }
    std::vector<TakenClaim> out;
    if (max <= 0) return out;
    StatusRecord next, running;
    std::vector<std::string> args = ClaimArgs(InvocationId(), actor, false, &next, &running);
    args.push_back(pb_);
    args.push_back(queue);
    args.push_back(std::to_string(max));
    Result<Value> r = client_->Eval(TakeClaimScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "take and claim");
    for (const Value& e : v.elements) {
      if (e.elements.size() < 5) return Status::BackendFailure("redis take-and-claim: bad reply");
      InvocationId id(e.elements[0].str);
      Result<InvocationRecord> inv = Invocation(e.elements[1], id);
      if (!inv.ok()) return inv.status();
      ClaimOutcome claim;
      claim.kind = ClaimKind::kClaimed;
      claim.record = next;
      claim.invocation = std::move(inv).value();
      claim.status_watched = e.elements[2].integer != 0;
      CountReplaced(e, 3, next);
      out.push_back(TakenClaim{std::move(id), Status::Ok(), std::move(claim)});
    }
    return out;
  }

  Result<FinalReads> ReadFinalAhead(const InvocationId& id, const std::vector<InvocationId>& ahead,
                                    std::size_t max_result_bytes) override {
    if (ahead.empty()) return PortLifecycle::ReadFinalAhead(id, ahead, max_result_bytes);
    return ReadScripted(id, ahead, max_result_bytes, nullptr, std::nullopt);
  }

  Result<FinalReads> ReadFinalArmed(const InvocationId& id, const std::vector<InvocationId>& ahead,
                                    std::size_t max_result_bytes) override {
    Armed arm{id, redis_orchestrator::NewWaitToken(),
              std::chrono::steady_clock::now() + std::chrono::milliseconds(kArmUseMs)};
    std::optional<Armed> previous;
    {
      MutexLock lock(armed_mu_);
      auto it = armed_.find(std::this_thread::get_id());
      if (it != armed_.end()) {
        previous = std::move(it->second);
        armed_.erase(it);
      }
    }
    Result<FinalReads> r = ReadScripted(id, ahead, max_result_bytes, &arm, previous);
    // (Failed, the script may or may not have run: neither arm is relied on, and
    // a registration left behind expires on its own.)
    if (r.ok() && !IsFinal(r.value().first.record.status)) {
      MutexLock lock(armed_mu_);
      armed_[std::this_thread::get_id()] = std::move(arm);
    }
    return r;
  }

  Result<FinalRead> ReadFinal(const InvocationId& id, std::size_t max_result_bytes) override {
    const std::vector<std::string> args = {po_, ps_, id.str(),
                                           std::string(StatusName(InvocationStatus::kSuccess)),
                                           std::to_string(max_result_bytes)};
    Result<Value> r = client_->Eval(ReadFinalScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "read final");
    // An unknown id: the port's read reports it with the port's error.
    if (v.is_nil()) return PortLifecycle::ReadFinal(id, max_result_bytes);
    return FinalReadOf(v, id);
  }

  // A {st, ts, own|false[, result]} record of ReadFinalScript or
  // ReadFinalAheadScript.
  static Result<FinalRead> FinalReadOf(const Value& v, const InvocationId& id) {
    if (v.type != Value::Type::kArray || v.elements.size() < 3) {
      return Status::BackendFailure("redis read final: bad reply");
    }
    std::optional<InvocationStatus> st = ParseStatus(v.elements[0].str);
    Result<std::int64_t> ts = ToInt(v.elements[1].str);
    if (!st || !ts.ok()) return Status::BackendFailure("redis: corrupt status of " + id.str());
    FinalRead out;
    out.record.status = *st;
    out.record.timestamp_us = ts.value();
    if (v.elements[2].type == Value::Type::kString) out.record.runner_id = v.elements[2].str;
    if (v.elements.size() > 3 && v.elements[3].type == Value::Type::kString) {
      out.result = v.elements[3].str;
    }
    return out;
  }

  Result<std::optional<FinalWait>> WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                TimestampUs timeout_us,
                                                std::size_t max_result_bytes) override {
    if (ids.empty()) {
      return Status::InvalidArgument("WaitAnyFinal needs at least one invocation id");
    }
    std::optional<redis_orchestrator::ArmedWait> armed = TakeArmed(ids);
    Result<std::optional<redis_orchestrator::FinalWake>> wake = redis_orchestrator::WaitFinal(
        *client_, po_, ids, timeout_us,
        [&](const std::string& fresh, std::int64_t ttl_ms) {
          return RegisterFinalWait(*client_, po_, ps_, ids, fresh, ttl_ms, max_result_bytes);
        },
        armed ? &*armed : nullptr);
    if (!wake.ok()) return wake.status();
    if (!wake.value()) return std::optional<FinalWait>();
    const redis_orchestrator::FinalWake& w = *wake.value();
    if (w.note) {
      FinalWait out{w.note->id, ParseNoteRecord(w.note->extra)};
      if (out.read && out.read->result && out.read->result->size() > max_result_bytes) {
        out.read->result.reset();  // longer than this caller keeps: it reads it on its own
      }
      return std::optional<FinalWait>(std::move(out));
    }
    Result<FinalWait> already = AlreadyFinal(w.registered);
    if (!already.ok()) return already.status();
    return std::optional<FinalWait>(std::move(already).value());
  }

  Result<ChangeOutcome> RegisterAndRoute(const std::vector<NewRoutedInvocation>& batch,
                                         const Actor& actor) override {
    bool plain = !batch.empty();
    for (const NewRoutedInvocation& inv : batch) plain = plain && !inv.record.invocation_id.empty();
    if (!plain) return PortLifecycle::RegisterAndRoute(batch, actor);  // its errors, its way
    const StatusRecord record{InvocationStatus::kRegistered, actor.runner_id, clock_->NowMicros()};
    Result<Value> r = client_->Eval(SubmitScript(), {po_ + "seq"}, SubmitArgs(batch, actor, record));
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "submit");
    if (v.elements.size() != 2) return Status::BackendFailure("redis submit script: bad reply");
    metrics::OnEntered(record.status, static_cast<std::uint64_t>(
                                          std::max<std::int64_t>(v.elements[1].integer, 0)));
    return ChangeOutcome{record, v.elements[0].integer != 0};
  }

  // The submit script with the registration guard (GuardedSubmitScript): the look
  // for a REGISTERED invocation of the key and the registration are one script.
  Result<GuardedRegistration> RegisterGuarded(const NewRoutedInvocation& item,
                                              const std::map<std::string, std::string>& key_args,
                                              const std::map<std::string, std::string>& index_args,
                                              const Actor& actor) override {
    if (item.record.invocation_id.empty()) {
      return PortLifecycle::RegisterGuarded(item, key_args, index_args, actor);  // its error
    }
    const StatusRecord record{InvocationStatus::kRegistered, actor.runner_id, clock_->NowMicros()};
    std::vector<std::string> args = SubmitArgs({item}, actor, record);
    const std::size_t guard_at = args.size() + 1;  // Lua's ARGV is 1-based
    args.push_back(item.record.task_id.str());
    args.push_back(std::to_string(key_args.size()));
    for (const auto& [k, v] : key_args) {
      args.push_back(k);
      args.push_back(v);
    }
    args.push_back(std::to_string(index_args.size()));
    for (const auto& [k, v] : index_args) {
      args.push_back(k);
      args.push_back(v);
    }
    args.push_back(std::to_string(guard_at));
    Result<Value> r = client_->Eval(GuardedSubmitScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "guarded submit");
    if (v.elements.size() == 3 && v.elements[2].type == Value::Type::kString) {
      return GuardedRegistration{InvocationId(v.elements[2].str), ChangeOutcome{}};
    }
    if (v.elements.size() != 2) return Status::BackendFailure("redis guarded submit: bad reply");
    metrics::OnEntered(record.status, static_cast<std::uint64_t>(
                                          std::max<std::int64_t>(v.elements[1].integer, 0)));
    return GuardedRegistration{std::nullopt, ChangeOutcome{record, v.elements[0].integer != 0}};
  }

  // SubmitScript's ARGV for `batch` (ids not empty) registered as `record`.
  std::vector<std::string> SubmitArgs(const std::vector<NewRoutedInvocation>& batch,
                                      const Actor& actor, const StatusRecord& record) {
    std::vector<std::string> args = {po_,
                                     ps_,
                                     pt_,
                                     "",
                                     pb_,
                                     std::string(StatusName(record.status)),
                                     std::to_string(record.timestamp_us),
                                     actor.runner_id ? "1" : "0",
                                     actor.runner_id.value_or(""),
                                     redis::HistoryPositionPrefix(record.timestamp_us),
                                     HistoryKey(record),
                                     parts().trigger ? "1" : "0",
                                     names().status,
                                     std::to_string(wake_token_bound_),
                                     std::to_string(batch.size())};
    args.reserve(args.size() + 10 * batch.size() + 8);
    std::vector<std::string> tasks;
    std::vector<std::pair<std::string, double>> route_order;
    std::map<std::pair<std::string, double>, std::vector<std::string>> routes;
    for (const NewRoutedInvocation& inv : batch) {
      const InvocationRecord& r = inv.record;
      args.push_back(r.invocation_id.str());
      args.push_back(r.task_id.str());
      args.push_back(r.call_id.str());
      for (std::string& f : redis::UpsertFields(r)) args.push_back(std::move(f));
      std::optional<std::string> parent;
      if (r.parent_invocation_id) parent = r.parent_invocation_id->str();
      args.push_back(HistoryValueOf(r.invocation_id, record, actor, parent));
      if (std::find(tasks.begin(), tasks.end(), r.task_id.str()) == tasks.end()) {
        tasks.push_back(r.task_id.str());
      }
      auto key = std::make_pair(inv.queue, inv.priority);
      auto [it, inserted] = routes.try_emplace(key);
      if (inserted) route_order.push_back(key);
      it->second.push_back(r.invocation_id.str());
    }
    args.push_back(std::to_string(tasks.size()));
    for (std::string& t : tasks) args.push_back(std::move(t));
    args.push_back(std::to_string(route_order.size()));
    for (const auto& key : route_order) {
      std::vector<std::string>& ids = routes[key];
      args.push_back(key.first);
      args.push_back(redis::BrokerScore(key.second));
      args.push_back(std::to_string(ids.size()));
      for (std::string& id : ids) args.push_back(std::move(id));
    }
    return args;
  }

  Result<ChangeOutcome> ChangeStatus(const InvocationId& id, InvocationStatus to,
                                     const Actor& actor, const std::optional<TaskId>& task,
                                     bool release_waiters) override {
    // Final statuses keep the port path (waiter release, purge mark): a
    // runner's finishes go through FinishSuccess / FinishFailure's own script.
    if (IsFinal(to) || !actor.runner_id || actor.runner_id->empty()) {
      return PortLifecycle::ChangeStatus(id, to, actor, task, release_waiters);
    }
    const StatusDefinition& def = Definition(to);
    // The new owner, known up front (the history row names it): acquire ->
    // the caller, release -> none, keep -> the caller, listing only the
    // from-statuses whose owner must be the caller (others fall back).
    StatusRecord next{to, std::nullopt, clock_->NowMicros()};
    if (!def.releases_ownership) next.runner_id = actor.runner_id;
    const bool keep = !def.acquires_ownership && !def.releases_ownership;
    std::vector<std::string> args = {po_,
                                     ps_,
                                     pt_,
                                     id.str(),
                                     *actor.runner_id,
                                     std::string(StatusName(to)),
                                     std::to_string(next.timestamp_us)};
    AppendHistory(id, next, actor, &args);
    args.push_back(names().status);
    args.push_back(parts().trigger ? "1" : "0");
    args.push_back(task ? task->str() : std::string());
    args.push_back(next.runner_id.value_or(""));
    std::size_t listed = 0;
    for (InvocationStatus from : AllStatuses()) {
      const StatusDefinition& from_def = Definition(from);
      if (!from_def.Allows(to)) continue;
      const bool must_own = from_def.requires_ownership && !def.overrides_ownership;
      if (keep && !must_own) continue;
      args.emplace_back(StatusName(from));
      args.push_back(must_own ? "1" : "0");
      ++listed;
    }
    if (listed == 0) return PortLifecycle::ChangeStatus(id, to, actor, task, release_waiters);
    Result<Value> r = client_->Eval(ChangeScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "status change");
    if (v.elements.empty() || v.elements[0].integer == 0) {
      return PortLifecycle::ChangeStatus(id, to, actor, task, release_waiters);
    }
    CountReplaced(v, 2, next);
    return ChangeOutcome{next, v.elements[1].integer != 0};
  }

  Result<FinishOutcome> FinishSuccess(const InvocationId& id, const std::string& result,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override {
    return FinishOrPort(Finish(id, InvocationStatus::kSuccess, result, actor, release_waiters), id,
                        result, true, actor, task, release_waiters);
  }

  Result<FinishOutcome> FinishFailure(const InvocationId& id, const std::string& exception,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override {
    return FinishOrPort(Finish(id, InvocationStatus::kFailed, exception, actor, release_waiters),
                        id, exception, false, actor, task, release_waiters);
  }

  // The finish script and a non-blocking take-and-start (TakeStartScript) in
  // ONE pipeline (redis::RetrieveThenAfter): one round trip per task instead
  // of two in a burst. The take runs whatever the finish did; what it took is
  // handed out even when the finish failed (its claim is the taker's).
  FinishedAndTaken FinishThenTake(const InvocationId& id, const std::string& payload, bool success,
                                  const Actor& actor, const TaskId& task, bool release_waiters,
                                  const std::string& queue, const Actor& taker) override {
    const InvocationStatus to = success ? InvocationStatus::kSuccess : InvocationStatus::kFailed;
    StatusRecord finished;
    std::optional<redis::Client::EvalCall> finish =
        FinishCall(id, to, payload, actor, release_waiters, &finished);
    if (!finish || !pending_runs_ || !taker.runner_id || taker.runner_id->empty()) {
      return PortLifecycle::FinishThenTake(id, payload, success, actor, task, release_waiters,
                                           queue, taker);
    }
    StatusRecord next, running;
    const redis::PopThen then{&TakeStartScript(), [&] {
                                return ClaimArgs(InvocationId(), taker, true, &next, &running);
                              }};
    Result<redis::AfterAndPopped> both =
        redis::RetrieveThenAfter(*parts().broker, queue, *finish, then);
    if (!both.ok()) return FinishedAndTaken{both.status(), std::nullopt};
    FinishedAndTaken out{FinishOrPort(FinishReply(both.value().before, finished), id, payload,
                                      success, actor, task, release_waiters),
                         std::nullopt};
    // A take that failed is not made (the finish stands alone); one whose reply
    // was lost is resolved by the thread's next take.
    const Result<std::optional<redis::PoppedThen>>& taken = both.value().taken;
    if (taken.ok() && taken.value()) out.next = TakenOf(*taken.value(), taker, next, running);
    return out;
  }
  bool TakesWithFinish() const override { return pending_runs_; }

 private:
  // A thread's last ReadFinalArmed that found its id not final: the token it
  // registered, and until when the thread's next wait may rely on it.
  struct Armed {
    InvocationId id;
    std::string token;
    std::chrono::steady_clock::time_point use_by;
  };

  // ReadFinalAhead's script (with `arm`: ReadFinalArmed's, withdrawing
  // `previous`), its reply read.
  Result<FinalReads> ReadScripted(const InvocationId& id, const std::vector<InvocationId>& ahead,
                                  std::size_t max_result_bytes, const Armed* arm,
                                  const std::optional<Armed>& previous) {
    std::vector<std::string> args = {po_, ps_, std::string(StatusName(InvocationStatus::kSuccess)),
                                     std::to_string(max_result_bytes)};
    if (arm != nullptr) {
      args.push_back(arm->token);
      args.push_back(std::to_string(kArmTtlMs));
      args.push_back(previous ? previous->id.str() : "");
      args.push_back(previous ? previous->token : "");
    }
    args.push_back(id.str());
    args.reserve(args.size() + ahead.size());
    for (const InvocationId& a : ahead) args.push_back(a.str());
    Result<Value> r = client_->Eval(
        arm != nullptr ? ReadFinalArmedScript() : ReadFinalAheadScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "read final ahead");
    // An unknown id: the port's read reports it with the port's error.
    if (v.is_nil()) return PortLifecycle::ReadFinalAhead(id, {}, max_result_bytes);
    if (v.type != Value::Type::kArray || v.elements.empty() || v.elements.size() % 2 != 1) {
      return Status::BackendFailure("redis read final ahead: bad reply");
    }
    Result<FinalRead> first = FinalReadOf(v.elements[0], id);
    if (!first.ok()) return first.status();
    FinalReads out{std::move(first).value(), {}};
    for (std::size_t i = 1; i + 1 < v.elements.size(); i += 2) {
      InvocationId ahead_id(v.elements[i].str);
      Result<FinalRead> read = FinalReadOf(v.elements[i + 1], ahead_id);
      if (!read.ok()) return read.status();
      out.ahead.emplace_back(std::move(ahead_id), std::move(read).value());
    }
    return out;
  }

  // This thread's registration from its last ReadFinalArmed, when `ids` is that
  // read's id alone and the registration may still be relied on (then it is used
  // up; another one stays, to be withdrawn by the thread's next armed read).
  std::optional<redis_orchestrator::ArmedWait> TakeArmed(const std::vector<InvocationId>& ids) {
    MutexLock lock(armed_mu_);
    auto it = armed_.find(std::this_thread::get_id());
    if (it == armed_.end() || ids.size() != 1 || !(ids[0] == it->second.id)) return std::nullopt;
    const std::int64_t valid_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      it->second.use_by - std::chrono::steady_clock::now())
                                      .count();
    std::string token = std::move(it->second.token);
    armed_.erase(it);
    if (valid_ms <= 0) return std::nullopt;
    return redis_orchestrator::ArmedWait{std::move(token), valid_ms};
  }

  // The history entry's replace key ("<ts>:<status>") and stored value, as
  // the state backend's AddHistories writes them.
  static std::string HistoryKey(const StatusRecord& record) {
    return std::to_string(record.timestamp_us) + ":" +
           std::to_string(static_cast<int>(record.status));
  }
  static std::string HistoryValueOf(const InvocationId& id, const StatusRecord& record,
                                    const Actor& actor,
                                    const std::optional<std::string>& registered_by) {
    HistoryRecord h;
    h.invocation_id = id;
    h.timestamp_us = record.timestamp_us;
    h.status = record.status;
    h.history_json = HistoryJson(id, record, actor.runner_context_id, registered_by);
    return redis::HistoryValue(h);
  }
  // Appends history pos prefix, history key and value of `record` to `args`.
  static void AppendHistory(const InvocationId& id, const StatusRecord& record, const Actor& actor,
                            std::vector<std::string>* args) {
    args->push_back(redis::HistoryPositionPrefix(record.timestamp_us));
    args->push_back(HistoryKey(record));
    args->push_back(HistoryValueOf(id, record, actor, std::nullopt));
  }

  // Counts the change a fast-path script applied: the replaced record's status
  // and timestamp are the reply's elements `at` and `at + 1`.
  static void CountReplaced(const Value& reply, std::size_t at, const StatusRecord& next) {
    if (reply.elements.size() < at + 2) return;
    std::optional<InvocationStatus> was = ParseStatus(reply.elements[at].str);
    Result<std::int64_t> since = ToInt(reply.elements[at + 1].str);
    if (was && since.ok()) {
      metrics::OnTransition({*was, std::nullopt, since.value()}, next);
    } else {
      metrics::OnEntered(next.status);
    }
  }

  static Result<InvocationRecord> Invocation(const Value& packed, const InvocationId& id) {
    std::optional<InvocationRecord> r = redis::ParseInvocationRecord(packed.str);
    if (!r) return Status::BackendFailure("redis: corrupt invocation record " + id.str());
    return *std::move(r);
  }

  // ClaimScript's arguments for `id` claimed by `actor`; fills in the PENDING
  // (and, with `start`, RUNNING) record they write.
  // REQUIRES: actor.runner_id is set.
  std::vector<std::string> ClaimArgs(const InvocationId& id, const Actor& actor, bool start,
                                     StatusRecord* next, StatusRecord* running) {
    *next = StatusRecord{InvocationStatus::kPending, actor.runner_id, clock_->NowMicros()};
    // RUNNING strictly after PENDING, so the history rows keep their order.
    *running = StatusRecord{InvocationStatus::kRunning, actor.runner_id,
                            std::max(clock_->NowMicros(), next->timestamp_us + 1)};
    std::vector<std::string> args = {
        po_, ps_, pt_, id.str(), *actor.runner_id, std::to_string(next->timestamp_us)};
    AppendHistory(id, *next, actor, &args);
    args.push_back(names().status);
    args.push_back(parts().trigger ? "1" : "0");
    args.push_back(start ? "1" : "0");
    if (start) {
      args.push_back(std::to_string(running->timestamp_us));
      AppendHistory(id, *running, actor, &args);
    } else {
      args.insert(args.end(), 4, std::string());
    }
    args.push_back(std::to_string(available_.size()));
    args.insert(args.end(), available_.begin(), available_.end());
    args.push_back(std::to_string(claimable_.size()));
    args.insert(args.end(), claimable_.begin(), claimable_.end());
    for (std::string& task : FreeTasks()) args.push_back(std::move(task));
    return args;
  }

  // Claim (start: ClaimAndStart) in one script in the common case; the port
  // path otherwise.
  Result<ClaimOutcome> ClaimScripted(const InvocationId& id, const Actor& actor, bool start) {
    if (!actor.runner_id || actor.runner_id->empty()) return PortClaim(id, actor, start);
    StatusRecord next, running;
    const std::vector<std::string> args = ClaimArgs(id, actor, start, &next, &running);
    Result<Value> r = client_->Eval(ClaimScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return ReplyError(r.value(), "claim");
    return ClaimReply(r.value(), id, actor, start, next, running);
  }

  Result<ClaimOutcome> PortClaim(const InvocationId& id, const Actor& actor, bool start) {
    return start ? PortLifecycle::ClaimAndStart(id, actor) : PortLifecycle::Claim(id, actor);
  }

  // The outcome of ClaimScript's reply `v` (the port path for its {-1}).
  Result<ClaimOutcome> ClaimReply(const Value& v, const InvocationId& id, const Actor& actor,
                                  bool start, const StatusRecord& next,
                                  const StatusRecord& running) {
    if (v.elements.empty()) return Status::BackendFailure("redis claim script: empty reply");
    const std::int64_t kind = v.elements[0].integer;
    if (kind == -1) return PortClaim(id, actor, start);
    ClaimOutcome out;
    if (kind == 2) {
      out.kind = ClaimKind::kClaimed;
      out.record = next;
      Result<InvocationRecord> inv = Invocation(v.elements[1], id);
      if (!inv.ok()) return inv.status();
      out.invocation = std::move(inv).value();
      out.status_watched = v.elements[2].integer != 0;
      CountReplaced(v, 3, next);
      if (start) {
        out.kind = ClaimKind::kStarted;
        out.record = running;
        metrics::OnTransition(next, running);
      }
      return out;
    }
    std::optional<InvocationStatus> st = ParseStatus(v.elements[1].str);
    Result<std::int64_t> ts = ToInt(v.elements[3].str);
    if (!st || !ts.ok()) return Status::BackendFailure("redis: corrupt status of " + id.str());
    out.record.status = *st;
    out.record.timestamp_us = ts.value();
    if (v.elements[2].type == Value::Type::kString) out.record.runner_id = v.elements[2].str;
    out.kind = kind == 0 ? ClaimKind::kNotAvailable : ClaimKind::kNeedsCheck;
    if (kind == 1) {
      Result<InvocationRecord> inv = Invocation(v.elements[4], id);
      if (!inv.ok()) return inv.status();
      out.invocation = std::move(inv).value();
    }
    return out;
  }

  // A TakeAndStart whose reply was lost after its script claimed `id`: the
  // claim, read back. Started by `actor` unless someone moved it since.
  Result<ClaimOutcome> ClaimedBefore(const InvocationId& id, const Actor& actor) {
    Result<StatusRecord> st = parts().orchestrator->GetStatusRecord(id);
    if (!st.ok()) return st.status();
    ClaimOutcome out;
    out.record = st.value();
    if (st.value().status != InvocationStatus::kRunning ||
        st.value().runner_id != actor.runner_id) {
      return out;  // kNotAvailable: no longer this claim's
    }
    Result<InvocationRecord> inv = parts().state_backend->GetInvocation(id);
    if (!inv.ok()) return inv.status();
    out.kind = ClaimKind::kStarted;
    out.invocation = std::move(inv).value();
    out.status_watched = true;  // not known any more: reported (a no-op if unwatched)
    return out;
  }

  // The one-script finish's run; nullopt when it cannot be (no runner id).
  std::optional<redis::Client::EvalCall> FinishCall(const InvocationId& id, InvocationStatus to,
                                                    const std::string& payload, const Actor& actor,
                                                    bool release_waiters, StatusRecord* next) {
    if (!actor.runner_id || actor.runner_id->empty()) return std::nullopt;
    const bool success = to == InvocationStatus::kSuccess;
    *next = StatusRecord{to, std::nullopt, clock_->NowMicros()};
    redis::Client::EvalCall call;
    call.script = &FinishScript();
    call.keys = {po_ + "seq"};
    call.args = {po_,
                 ps_,
                 pt_,
                 id.str(),
                 *actor.runner_id,
                 std::string(StatusName(to)),
                 std::to_string(next->timestamp_us),
                 success ? "results" : "exceptions",
                 payload};
    AppendHistory(id, *next, actor, &call.args);
    call.args.push_back(names().status);
    call.args.push_back(success ? names().result : names().exception);
    call.args.push_back(release_waiters ? "1" : "0");
    call.args.push_back(parts().trigger ? "1" : "0");
    call.args.push_back(std::to_string(kNoteResultBytes));
    return call;
  }

  // The finish script's outcome from its reply; nullopt when it was not the
  // common case (it wrote nothing).
  static Result<std::optional<FinishOutcome>> FinishReply(const Result<Value>& r,
                                                          const StatusRecord& next) {
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "finish");
    if (v.elements.empty() || v.elements[0].integer == 0) return std::optional<FinishOutcome>();
    FinishOutcome out;
    out.change.record = next;
    out.change.status_watched = v.elements[1].integer != 0;
    out.payload_watched = v.elements[2].integer != 0;
    CountReplaced(v, 3, next);
    return std::optional<FinishOutcome>(out);
  }

  // The one-script finish; nullopt when it was not the common case.
  Result<std::optional<FinishOutcome>> Finish(const InvocationId& id, InvocationStatus to,
                                              const std::string& payload, const Actor& actor,
                                              bool release_waiters) {
    StatusRecord next;
    std::optional<redis::Client::EvalCall> call =
        FinishCall(id, to, payload, actor, release_waiters, &next);
    if (!call) return std::optional<FinishOutcome>();
    return FinishReply(client_->Eval(*call->script, call->keys, call->args), next);
  }

  // The finish's outcome: the script's, else (not its common case) the port's.
  Result<FinishOutcome> FinishOrPort(Result<std::optional<FinishOutcome>> fast,
                                     const InvocationId& id, const std::string& payload,
                                     bool success, const Actor& actor, const TaskId& task,
                                     bool release_waiters) {
    if (!fast.ok()) return fast.status();
    if (fast.value()) return *fast.value();
    return success ? PortLifecycle::FinishSuccess(id, payload, actor, task, release_waiters)
                   : PortLifecycle::FinishFailure(id, payload, actor, task, release_waiters);
  }

  // A TakeStartScript reply (or its loss) for the id `taken`, as TakeAndStart
  // hands it out; `next`/`running` are the records its arguments wrote.
  TakenClaim TakenOf(const redis::PoppedThen& taken, const Actor& actor, const StatusRecord& next,
                     const StatusRecord& running) {
    TakenClaim out = [&] {
      if (!taken.reply) {  // the reply of the attempt that took it was lost
        return Taken(taken.id, taken.mark == '2' ? ClaimedBefore(taken.id, actor)
                                                 : PortLifecycle::ClaimAndStart(taken.id, actor));
      }
      if (taken.reply->is_error()) return Taken(taken.id, ReplyError(*taken.reply, "claim"));
      if (!taken.reply->elements.empty() && taken.reply->elements[0].integer == -1) {
        // Not taken by the script (e.g. registered after the arguments were
        // built): ClaimScript with fresh arguments, then, if need be, the port path.
        return Taken(taken.id, ClaimScripted(taken.id, actor, true));
      }
      return Taken(taken.id, ClaimReply(*taken.reply, taken.id, actor, true, next, running));
    }();
    out.backlog = taken.more;
    return out;
  }

  const std::shared_ptr<redis::Client> client_;
  const std::shared_ptr<Clock> clock_;
  const std::string po_, ps_, pt_, pb_;
  // The wake-token bound of the broker's default options (only a list trim).
  const std::int64_t wake_token_bound_ = redis::RedisBrokerOptions{}.wake_token_bound;
  std::vector<std::string> available_;  // statuses available for run
  std::vector<std::string> claimable_;  // of those, the ones that may move to PENDING freely
  // The claim's owner may move PENDING on to RUNNING (ClaimAndStart's script).
  const bool pending_runs_ =
      Definition(InvocationStatus::kPending).Allows(InvocationStatus::kRunning);
  Mutex armed_mu_;
  std::unordered_map<std::thread::id, Armed> armed_ PYNENC_GUARDED_BY(armed_mu_);
};

}  // namespace

Result<std::unique_ptr<Lifecycle>> NewRedisLifecycle(LifecycleParts parts,
                                                     std::shared_ptr<redis::Client> client,
                                                     const BackendConfig& config,
                                                     TriggerContextNames names) {
  return std::unique_ptr<Lifecycle>(
      new RedisLifecycle(std::move(parts), std::move(names), std::move(client), config));
}

}  // namespace pynenc_cpp::native
