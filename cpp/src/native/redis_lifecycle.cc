// Redis Lifecycle: the two hottest operations in one round trip each.
//
// Claim and FinishSuccess / FinishFailure run as ONE Lua script that reads and
// writes the orchestrator's, the state backend's and the trigger store's keys
// of the app (they share one Cluster slot through the {app} hash tag; layouts in
// redis_orchestrator_impl.h, redis_state_backend.h, redis_trigger_store_impl.h).
// The script takes the common case only and is a compare-and-set: Claim of an
// invocation whose status may move to PENDING without an ownership check, of a
// task known to run freely; Finish of an invocation RUNNING and owned by the
// caller. Anything else (unknown id, illegal transition, foreign owner, a task
// not known yet) writes nothing and falls back to the port-by-port operation,
// which then returns exactly the port's result or error. Every other operation
// is the port-by-port sequence (one round trip per step).
#include <string>
#include <vector>

#include "native/port_lifecycle.h"
#include "redis/redis_client.h"
#include "redis/redis_orchestrator_impl.h"
#include "redis/redis_state_backend.h"

namespace pynenc_cpp::native {
namespace {

using redis::Script;
using redis::Value;

// Shared by both scripts, after the orchestrator helpers (P = ARGV[1]).
// ARGV[2] = state prefix Ps, ARGV[3] = trigger prefix Pt, ARGV[4] = id.
constexpr const char* kLifecycleHelpers = R"lua(
local Ps, Pt, id = ARGV[2], ARGV[3], ARGV[4]
local function set_status(k, f, new, ts, owner)
  redis.call('HSET', k, 'st', new, 'ts', ts)
  if owner then redis.call('HSET', k, 'own', owner) else redis.call('HDEL', k, 'own') end
  redis.call('ZREM', P .. 'status:' .. f[2], id)
  redis.call('ZADD', P .. 'status:' .. new, f[1], id)
  local m = pad(f[1]) .. id
  redis.call('ZADD', P .. 'times', ts, m)
  redis.call('ZREM', P .. 'stimes:' .. f[2], m)
  redis.call('ZADD', P .. 'stimes:' .. new, ts, m)
  redis.call('ZADD', P .. 'ttimes:' .. f[4], ts, m)
  return m
end
local function add_history(tsenc, dk, val)
  local dkey = Ps .. 'hkey:' .. id
  local pos = redis.call('HGET', dkey, dk)
  if not pos then
    local hseq = redis.call('INCR', Ps .. 'hseq')
    pos = tsenc .. string.format('%016x', hseq)
    redis.call('HSET', dkey, dk, pos)
    redis.call('ZADD', Ps .. 'htime', 0, pos .. id)
    redis.call('ZADD', Ps .. 'hinv:' .. id, 0, pos)
  end
  redis.call('HSET', Ps .. 'hist', pos, val)
end
local function watched(enabled, task, ctx)
  if enabled ~= '1' then return 1 end
  for _, c in ipairs(redis.call('ZRANGE', Pt .. 'src:' .. task, 0, -1)) do
    if redis.call('HEXISTS', Pt .. 'cond', c) == 1 and
       redis.call('HGET', Pt .. 'cond_ctx', c) == ctx then
      return 1
    end
  end
  return 0
end
)lua";

// ARGV: P, Ps, Pt, id, runner, new status, ts, payload hash ('results' |
// 'exceptions'), payload, history pos prefix, history key, history value,
// status context, payload context, release waiters ('1'/'0'), watch ('1'/'0').
// Returns {0} (not the common case: nothing written) or {1, status_watched,
// payload_watched}.
const Script& FinishScript() {
  static const Script s(std::string(redis_orchestrator::LuaCommon()) + kLifecycleHelpers + R"lua(
local runner, new, ts = ARGV[5], ARGV[6], ARGV[7]
local k = P .. 'inv:' .. id
local f = redis.call('HMGET', k, 'seq', 'st', 'own', 'task')
if not f[1] or f[2] ~= 'running' or f[3] ~= runner then return {0} end
redis.call('HSET', Ps .. ARGV[8], id, ARGV[9])
local m = set_status(k, f, new, ts, nil)
if ARGV[15] == '1' then release(id) end
redis.call('ZADD', P .. 'purge', ts, m)
add_history(ARGV[10], ARGV[11], ARGV[12])
return {1, watched(ARGV[16], f[4], ARGV[13]), watched(ARGV[16], f[4], ARGV[14])}
)lua");
  return s;
}

// ARGV: P, Ps, Pt, id, runner, ts, history pos prefix, history key, history
// value, status context, watch, n, n available-for-run status names, m, m
// status names that may move to PENDING with no ownership check, free tasks...
// Returns {-1} (not the common case), {0, st, own|false, ts} (not available),
// {1, st, own|false, ts, rec} (needs check) or {2, rec, status_watched}.
const Script& ClaimScript() {
  static const Script s(std::string(redis_orchestrator::LuaCommon()) + kLifecycleHelpers + R"lua(
local runner, ts = ARGV[5], ARGV[6]
local k = P .. 'inv:' .. id
local f = redis.call('HMGET', k, 'seq', 'st', 'own', 'task', 'ts')
if not f[1] then return {-1} end
local n = tonumber(ARGV[12])
local available = false
for i = 13, 12 + n do if ARGV[i] == f[2] then available = true end end
if not available then return {0, f[2], f[3], f[5]} end
local rec = redis.call('HGET', Ps .. 'inv:' .. id, 'rec')
if not rec then return {-1} end
local at = 13 + n
local m = tonumber(ARGV[at])
local claimable = false
for i = at + 1, at + m do if ARGV[i] == f[2] then claimable = true end end
local free = false
for i = at + m + 1, #ARGV do if ARGV[i] == f[4] then free = true end end
if not free then return {1, f[2], f[3], f[5], rec} end
if not claimable then return {-1} end
set_status(k, f, 'pending', ts, runner)
add_history(ARGV[7], ARGV[8], ARGV[9])
return {2, rec, watched(ARGV[11], f[4], ARGV[10])}
)lua");
  return s;
}

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
        pt_(redis::KeyPrefix(config.app_id, "trigger")) {
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
    if (!actor.runner_id || actor.runner_id->empty()) return PortLifecycle::Claim(id, actor);
    const StatusRecord next{InvocationStatus::kPending, actor.runner_id, clock_->NowMicros()};
    std::vector<std::string> args = {po_, ps_, pt_, id.str(), *actor.runner_id,
                                     std::to_string(next.timestamp_us)};
    AppendHistory(id, next, actor, &args);
    args.push_back(names().status);
    args.push_back(parts().trigger ? "1" : "0");
    args.push_back(std::to_string(available_.size()));
    args.insert(args.end(), available_.begin(), available_.end());
    args.push_back(std::to_string(claimable_.size()));
    args.insert(args.end(), claimable_.begin(), claimable_.end());
    for (std::string& task : FreeTasks()) args.push_back(std::move(task));
    Result<Value> r = client_->Eval(ClaimScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "claim");
    if (v.elements.empty()) return Status::BackendFailure("redis claim script: empty reply");
    const std::int64_t kind = v.elements[0].integer;
    if (kind == -1) return PortLifecycle::Claim(id, actor);
    ClaimOutcome out;
    if (kind == 2) {
      out.kind = ClaimKind::kClaimed;
      out.record = next;
      Result<InvocationRecord> inv = Invocation(v.elements[1], id);
      if (!inv.ok()) return inv.status();
      out.invocation = std::move(inv).value();
      out.status_watched = v.elements[2].integer != 0;
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

  Result<FinishOutcome> FinishSuccess(const InvocationId& id, const std::string& result,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override {
    Result<std::optional<FinishOutcome>> fast =
        Finish(id, InvocationStatus::kSuccess, "results", result, names().result, actor,
               release_waiters);
    if (!fast.ok()) return fast.status();
    if (fast.value()) return *fast.value();
    return PortLifecycle::FinishSuccess(id, result, actor, task, release_waiters);
  }

  Result<FinishOutcome> FinishFailure(const InvocationId& id, const std::string& exception,
                                      const Actor& actor, const TaskId& task,
                                      bool release_waiters) override {
    Result<std::optional<FinishOutcome>> fast =
        Finish(id, InvocationStatus::kFailed, "exceptions", exception, names().exception, actor,
               release_waiters);
    if (!fast.ok()) return fast.status();
    if (fast.value()) return *fast.value();
    return PortLifecycle::FinishFailure(id, exception, actor, task, release_waiters);
  }

 private:
  // Appends history pos prefix, history key and value of `record` to `args`.
  static void AppendHistory(const InvocationId& id, const StatusRecord& record,
                            const Actor& actor, std::vector<std::string>* args) {
    HistoryRecord h;
    h.invocation_id = id;
    h.timestamp_us = record.timestamp_us;
    h.status = record.status;
    h.history_json = HistoryJson(id, record, actor.runner_context_id, std::nullopt);
    args->push_back(redis::HistoryPositionPrefix(h.timestamp_us));
    args->push_back(std::to_string(h.timestamp_us) + ":" +
                    std::to_string(static_cast<int>(h.status)));
    args->push_back(redis::HistoryValue(h));
  }

  static Result<InvocationRecord> Invocation(const Value& packed, const InvocationId& id) {
    std::optional<InvocationRecord> r = redis::ParseInvocationRecord(packed.str);
    if (!r) return Status::BackendFailure("redis: corrupt invocation record " + id.str());
    return *std::move(r);
  }

  // The one-script finish; nullopt when it was not the common case.
  Result<std::optional<FinishOutcome>> Finish(const InvocationId& id, InvocationStatus to,
                                              const char* hash, const std::string& payload,
                                              const std::string& payload_context,
                                              const Actor& actor, bool release_waiters) {
    if (!actor.runner_id || actor.runner_id->empty()) return std::optional<FinishOutcome>();
    const StatusRecord next{to, std::nullopt, clock_->NowMicros()};
    std::vector<std::string> args = {po_,
                                     ps_,
                                     pt_,
                                     id.str(),
                                     *actor.runner_id,
                                     std::string(StatusName(to)),
                                     std::to_string(next.timestamp_us),
                                     hash,
                                     payload};
    AppendHistory(id, next, actor, &args);
    args.push_back(names().status);
    args.push_back(payload_context);
    args.push_back(release_waiters ? "1" : "0");
    args.push_back(parts().trigger ? "1" : "0");
    Result<Value> r = client_->Eval(FinishScript(), {po_ + "seq"}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, "finish");
    if (v.elements.empty() || v.elements[0].integer == 0) return std::optional<FinishOutcome>();
    FinishOutcome out;
    out.change.record = next;
    out.change.status_watched = v.elements[1].integer != 0;
    out.payload_watched = v.elements[2].integer != 0;
    return std::optional<FinishOutcome>(out);
  }

  const std::shared_ptr<redis::Client> client_;
  const std::shared_ptr<Clock> clock_;
  const std::string po_, ps_, pt_;
  std::vector<std::string> available_;  // statuses available for run
  std::vector<std::string> claimable_;  // of those, the ones that may move to PENDING freely
};

}  // namespace

Result<std::unique_ptr<Lifecycle>> NewRedisLifecycle(LifecycleParts parts,
                                                     const BackendConfig& config,
                                                     TriggerContextNames names) {
  Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
  if (!client.ok()) return client.status();
  return std::unique_ptr<Lifecycle>(
      new RedisLifecycle(std::move(parts), std::move(names), client.value(), config));
}

}  // namespace pynenc_cpp::native
