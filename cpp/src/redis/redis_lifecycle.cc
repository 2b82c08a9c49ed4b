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
//
// This file: construction, claims and takes; the final-status reads and waits:
// redis_lifecycle_reads.cc; submit, status changes and finishes:
// redis_lifecycle_writes.cc; the class: redis_lifecycle_impl.h.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/core/metrics.h"
#include "redis/redis_lifecycle_impl.h"
#include "redis/redis_state_backend.h"

namespace pynenc_cpp::native {
namespace redis_lifecycle {

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

RedisLifecycle::RedisLifecycle(LifecycleParts parts, TriggerContextNames names,
                               std::shared_ptr<redis::Client> client, const BackendConfig& config)
    : PortLifecycle(std::move(parts), std::move(names)),
      client_(std::move(client)),
      clock_(ClockOrReal(config)),
      po_(redis::KeyPrefix(config.app_id, redis::keys::kOrchestrator)),
      ps_(redis::KeyPrefix(config.app_id, redis::keys::kState)),
      pt_(redis::KeyPrefix(config.app_id, redis::keys::kTrigger)),
      pb_(redis::KeyPrefix(config.app_id, redis::keys::kBroker)) {
  for (InvocationStatus s : AllStatuses()) {
    if (!IsAvailableForRun(s)) continue;
    available_.emplace_back(StatusName(s));
    const StatusDefinition& d = Definition(s);
    if (d.Allows(InvocationStatus::kPending) && !d.requires_ownership) {
      claimable_.emplace_back(StatusName(s));
    }
  }
}

Result<ClaimOutcome> RedisLifecycle::Claim(const InvocationId& id, const Actor& actor) {
  return ClaimScripted(id, actor, false);
}

// The claim script moves PENDING on to RUNNING, as pynenc's status machine allows
// (core/status.cc; tests_cpp/status_machine_test.cc pins every transition).
Result<ClaimOutcome> RedisLifecycle::ClaimAndStart(const InvocationId& id, const Actor& actor) {
  return ClaimScripted(id, actor, true);
}

Result<std::optional<TakenClaim>> RedisLifecycle::TakeAndStart(const std::string& queue,
                                                               std::int64_t timeout_ms,
                                                               const Actor& actor) {
  if (!actor.runner_id || actor.runner_id->empty()) {
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
Result<std::vector<TakenClaim>> RedisLifecycle::TakeAndClaim(const std::string& queue, int max,
                                                             const Actor& actor) {
  if (!actor.runner_id || actor.runner_id->empty()) {
    return PortLifecycle::TakeAndClaim(queue, max, actor);
  }
  std::vector<TakenClaim> out;
  if (max <= 0) return out;
  StatusRecord next, running;
  std::vector<std::string> args = ClaimArgs(InvocationId(), actor, false, &next, &running);
  args.push_back(pb_);
  args.push_back(queue);
  args.push_back(std::to_string(max));
  Result<Value> r = client_->Eval(TakeClaimScript(), {po_ + redis::keys::kSeq}, args);
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

// The history entry's replace key ("<ts>:<status>") and stored value, as
// the state backend's AddHistories writes them.
std::string RedisLifecycle::HistoryKey(const StatusRecord& record) {
  return std::to_string(record.timestamp_us) + ":" +
         std::to_string(static_cast<int>(record.status));
}

std::string RedisLifecycle::HistoryValueOf(const InvocationId& id, const StatusRecord& record,
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
void RedisLifecycle::AppendHistory(const InvocationId& id, const StatusRecord& record,
                                   const Actor& actor, std::vector<std::string>* args) {
  args->push_back(redis::HistoryPositionPrefix(record.timestamp_us));
  args->push_back(HistoryKey(record));
  args->push_back(HistoryValueOf(id, record, actor, std::nullopt));
}

// Counts the change a fast-path script applied: the replaced record's status
// and timestamp are the reply's elements `at` and `at + 1`.
void RedisLifecycle::CountReplaced(const Value& reply, std::size_t at, const StatusRecord& next) {
  if (reply.elements.size() < at + 2) return;
  std::optional<InvocationStatus> was = ParseStatus(reply.elements[at].str);
  Result<std::int64_t> since = ToInt(reply.elements[at + 1].str);
  if (was && since.ok()) {
    metrics::OnTransition({*was, std::nullopt, since.value()}, next);
  } else {
    metrics::OnEntered(next.status);
  }
}

Result<InvocationRecord> RedisLifecycle::Invocation(const Value& packed, const InvocationId& id) {
  std::optional<InvocationRecord> r = redis::ParseInvocationRecord(packed.str);
  if (!r) return Status::BackendFailure("redis: corrupt invocation record " + id.str());
  return *std::move(r);
}

// ClaimScript's arguments for `id` claimed by `actor`; fills in the PENDING
// (and, with `start`, RUNNING) record they write.
// REQUIRES: actor.runner_id is set.
std::vector<std::string> RedisLifecycle::ClaimArgs(const InvocationId& id, const Actor& actor,
                                                   bool start, StatusRecord* next,
                                                   StatusRecord* running) {
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
Result<ClaimOutcome> RedisLifecycle::ClaimScripted(const InvocationId& id, const Actor& actor,
                                                   bool start) {
  if (!actor.runner_id || actor.runner_id->empty()) return PortClaim(id, actor, start);
  StatusRecord next, running;
  const std::vector<std::string> args = ClaimArgs(id, actor, start, &next, &running);
  Result<Value> r = client_->Eval(ClaimScript(), {po_ + redis::keys::kSeq}, args);
  if (!r.ok()) return r.status();
  if (r.value().is_error()) return ReplyError(r.value(), "claim");
  return ClaimReply(r.value(), id, actor, start, next, running);
}

Result<ClaimOutcome> RedisLifecycle::PortClaim(const InvocationId& id, const Actor& actor,
                                               bool start) {
  return start ? PortLifecycle::ClaimAndStart(id, actor) : PortLifecycle::Claim(id, actor);
}

// The outcome of ClaimScript's reply `v` (the port path for its {-1}).
Result<ClaimOutcome> RedisLifecycle::ClaimReply(const Value& v, const InvocationId& id,
                                                const Actor& actor, bool start,
                                                const StatusRecord& next,
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
Result<ClaimOutcome> RedisLifecycle::ClaimedBefore(const InvocationId& id, const Actor& actor) {
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

// A TakeStartScript reply (or its loss) for the id `taken`, as TakeAndStart
// hands it out; `next`/`running` are the records its arguments wrote.
TakenClaim RedisLifecycle::TakenOf(const redis::PoppedThen& taken, const Actor& actor,
                                   const StatusRecord& next, const StatusRecord& running) {
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

}  // namespace redis_lifecycle

using redis_lifecycle::RedisLifecycle;

Result<std::unique_ptr<Lifecycle>> NewRedisLifecycle(LifecycleParts parts,
                                                     std::shared_ptr<redis::Client> client,
                                                     const BackendConfig& config,
                                                     TriggerContextNames names) {
  return std::unique_ptr<Lifecycle>(
      new RedisLifecycle(std::move(parts), std::move(names), std::move(client), config));
}

}  // namespace pynenc_cpp::native
