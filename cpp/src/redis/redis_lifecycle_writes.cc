// Redis Lifecycle: the writes of a status: submit (RegisterAndRoute,
// RegisterGuarded), a runner's status change, and the finishes (FinishSuccess /
// FinishFailure, and FinishThenTake with its take in the same pipeline). The
// class and the rest: redis_lifecycle_impl.h, redis_lifecycle.cc; the scripts:
// redis_lifecycle_scripts.cc.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/metrics.h"
#include "redis/redis_final_wait.h"
#include "redis/redis_lifecycle_impl.h"
#include "redis/redis_state_backend.h"

namespace pynenc_cpp::native::redis_lifecycle {

Result<ChangeOutcome> RedisLifecycle::RegisterAndRoute(
    const std::vector<NewRoutedInvocation>& batch, const Actor& actor) {
  bool plain = !batch.empty();
  for (const NewRoutedInvocation& inv : batch) plain = plain && !inv.record.invocation_id.empty();
  if (!plain) return PortLifecycle::RegisterAndRoute(batch, actor);  // its errors, its way
  const StatusRecord record{InvocationStatus::kRegistered, actor.runner_id, clock_->NowMicros()};
  Result<Value> r =
      client_->Eval(SubmitScript(), {po_ + redis::keys::kSeq}, SubmitArgs(batch, actor, record));
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
Result<RedisLifecycle::GuardedRegistration> RedisLifecycle::RegisterGuarded(
    const NewRoutedInvocation& item, const std::map<std::string, std::string>& key_args,
    const std::map<std::string, std::string>& index_args, const Actor& actor) {
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
  Result<Value> r = client_->Eval(GuardedSubmitScript(), {po_ + redis::keys::kSeq}, args);
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
std::vector<std::string> RedisLifecycle::SubmitArgs(const std::vector<NewRoutedInvocation>& batch,
                                                    const Actor& actor,
                                                    const StatusRecord& record) {
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

Result<ChangeOutcome> RedisLifecycle::ChangeStatus(const InvocationId& id, InvocationStatus to,
                                                   const Actor& actor,
                                                   const std::optional<TaskId>& task,
                                                   bool release_waiters) {
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
  Result<Value> r = client_->Eval(ChangeScript(), {po_ + redis::keys::kSeq}, args);
  if (!r.ok()) return r.status();
  const Value& v = r.value();
  if (v.is_error()) return ReplyError(v, "status change");
  if (v.elements.empty() || v.elements[0].integer == 0) {
    return PortLifecycle::ChangeStatus(id, to, actor, task, release_waiters);
  }
  CountReplaced(v, 2, next);
  return ChangeOutcome{next, v.elements[1].integer != 0};
}

Result<FinishOutcome> RedisLifecycle::FinishSuccess(const InvocationId& id,
                                                    const std::string& result, const Actor& actor,
                                                    const TaskId& task, bool release_waiters) {
  return FinishOrPort(Finish(id, InvocationStatus::kSuccess, result, actor, release_waiters), id,
                      result, true, actor, task, release_waiters);
}

Result<FinishOutcome> RedisLifecycle::FinishFailure(const InvocationId& id,
                                                    const std::string& exception,
                                                    const Actor& actor, const TaskId& task,
                                                    bool release_waiters) {
  return FinishOrPort(Finish(id, InvocationStatus::kFailed, exception, actor, release_waiters),
                      id, exception, false, actor, task, release_waiters);
}

// The finish script and a non-blocking take-and-start (TakeStartScript) in
// ONE pipeline (redis::RetrieveThenAfter): one round trip per task instead
// of two in a burst. The take runs whatever the finish did; what it took is
// handed out even when the finish failed (its claim is the taker's).
FinishedAndTaken RedisLifecycle::FinishThenTake(const InvocationId& id, const std::string& payload,
                                                bool success, const Actor& actor,
                                                const TaskId& task, bool release_waiters,
                                                const std::string& queue, const Actor& taker) {
  const InvocationStatus to = success ? InvocationStatus::kSuccess : InvocationStatus::kFailed;
  StatusRecord finished;
  std::optional<redis::Client::EvalCall> finish =
      FinishCall(id, to, payload, actor, release_waiters, &finished);
  if (!finish || !taker.runner_id || taker.runner_id->empty()) {
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

// The one-script finish's run; nullopt when it cannot be (no runner id).
std::optional<redis::Client::EvalCall> RedisLifecycle::FinishCall(
    const InvocationId& id, InvocationStatus to, const std::string& payload, const Actor& actor,
    bool release_waiters, StatusRecord* next) {
  if (!actor.runner_id || actor.runner_id->empty()) return std::nullopt;
  const bool success = to == InvocationStatus::kSuccess;
  *next = StatusRecord{to, std::nullopt, clock_->NowMicros()};
  redis::Client::EvalCall call;
  call.script = &FinishScript();
  call.keys = {po_ + redis::keys::kSeq};
  call.args = {po_,
               ps_,
               pt_,
               id.str(),
               *actor.runner_id,
               std::string(StatusName(to)),
               std::to_string(next->timestamp_us),
               success ? redis::keys::kResults : redis::keys::kExceptions,
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
Result<std::optional<FinishOutcome>> RedisLifecycle::FinishReply(const Result<Value>& r,
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
Result<std::optional<FinishOutcome>> RedisLifecycle::Finish(const InvocationId& id,
                                                            InvocationStatus to,
                                                            const std::string& payload,
                                                            const Actor& actor,
                                                            bool release_waiters) {
  StatusRecord next;
  std::optional<redis::Client::EvalCall> call =
      FinishCall(id, to, payload, actor, release_waiters, &next);
  if (!call) return std::optional<FinishOutcome>();
  return FinishReply(client_->Eval(*call->script, call->keys, call->args), next);
}

// The finish's outcome: the script's, else (not its common case) the port's.
Result<FinishOutcome> RedisLifecycle::FinishOrPort(Result<std::optional<FinishOutcome>> fast,
                                                   const InvocationId& id,
                                                   const std::string& payload, bool success,
                                                   const Actor& actor, const TaskId& task,
                                                   bool release_waiters) {
  if (!fast.ok()) return fast.status();
  if (fast.value()) return *fast.value();
  return success ? PortLifecycle::FinishSuccess(id, payload, actor, task, release_waiters)
                 : PortLifecycle::FinishFailure(id, payload, actor, task, release_waiters);
}

}  // namespace pynenc_cpp::native::redis_lifecycle
