// Redis trigger store: what the trigger loop works through: valid conditions
// (and their waiters), pending reports, the cron compare-and-set and trigger-run
// claims. Key layout and the rest of the store: redis_trigger_store_impl.h.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "redis/redis_orchestrator_impl.h"
#include "redis/redis_trigger_store_impl.h"

namespace pynenc_cpp {
namespace redis_trigger {
namespace {

using redis::Value;

constexpr std::int64_t kMicrosPerSecond = 1'000'000;
constexpr std::int64_t kMaxExpirationSeconds = 10'000'000'000;
// Redis drops a claim key this long after its claim expired (garbage
// collection only: the stored expiry, compared with the config's Clock, decides).
constexpr std::int64_t kClaimSlackMs = 60'000;

// A valid-conditions waiter's registration: KEYS[1] the waiters' sorted set;
// ARGV: token, ttl ms. Kept (on Redis' clock) for ttl ms.
const redis::Script kWatch(R"lua(
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2]), ARGV[1])
return 1
)lua");

// KEYS[1] claim key; ARGV: now (OrderKey), expiry (OrderKey), ttl ms.
const redis::Script kClaim(R"lua(
local v = redis.call('GET', KEYS[1])
if v and v > ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
)lua");

}  // namespace

// ---- Valid conditions ------------------------------------------------------

Status RedisTriggerStore::RecordValidConditions(const std::vector<IdJson>& valid_conditions) {
  if (valid_conditions.empty()) return Status::Ok();
  Change c;
  for (const IdJson& vc : valid_conditions) {
    c.Op({"ZADDSEQ", K(redis::keys::kVcOrder), vc.id, K(redis::keys::kSeq)});
    c.Op({"HSET", K(redis::keys::kVc), vc.id, vc.json});
  }
  c.Op({"WAKE", K(redis::keys::kVcWaiters), K(redis::keys::kVcNote)});  // wakes WaitValidConditions
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

Result<bool> RedisTriggerStore::WaitValidConditions(std::string* cursor, TimestampUs timeout_us) {
  // A registration outlives one block by this much, so a waiter busy with the
  // valid conditions it was woken for still gets the notes recorded meanwhile.
  constexpr std::int64_t kWatchSlackMs = 60'000;
  // One BLPOP blocks at most this long (the registration is renewed after it).
  constexpr std::int64_t kMaxBlockMs = 10'000;
  const bool first = cursor->empty();
  if (first) *cursor = redis_orchestrator::NewWaitToken();
  const std::int64_t block_ms =
      first ? 0 : std::clamp<std::int64_t>(timeout_us / 1000, 0, kMaxBlockMs);
  Result<Value> watched = client_->Eval(kWatch, {K(redis::keys::kVcWaiters)},
                                        {*cursor, std::to_string(block_ms + kWatchSlackMs)});
  if (!watched.ok()) return watched.status();
  if (watched.value().is_error()) {
    return client_->Failure("watch for valid conditions", watched.value().str);
  }
  if (first) return true;
  const std::string note = K(redis::keys::kVcNote + *cursor);
  if (block_ms <= 0) {
    Result<Value> got = client_->Command({"LPOP", note});
    if (!got.ok()) return got.status();
    return !got.value().is_nil() && !got.value().is_error();
  }
  // BLPOP's timeout is in seconds (decimals allowed since Redis 6).
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", static_cast<double>(block_ms) / 1000.0);
  Result<Value> got = client_->BlockingCommand({"BLPOP", note, secs}, block_ms);
  if (!got.ok()) return got.status();
  if (got.value().is_error()) {
    return client_->Failure("wait for valid conditions", got.value().str);
  }
  return got.value().type == Value::Type::kArray;
}

Status RedisTriggerStore::NudgeValidConditionsWaiter(const std::string& cursor) {
  if (cursor.empty()) return Status::Ok();
  const std::string note = K(redis::keys::kVcNote + cursor);
  Result<std::vector<Value>> r = client_->Pipeline(
      {{"LPUSH", note, "1"}, {"LTRIM", note, "0", "0"}, {"PEXPIRE", note, "60000"}});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<IdJson>> RedisTriggerStore::ValidConditions() {
  Result<std::vector<std::string>> ids = ZMembers(K(redis::keys::kVcOrder));
  if (!ids.ok()) return ids.status();
  Result<std::vector<std::optional<std::string>>> jsons = HMGet(K(redis::keys::kVc), ids.value());
  if (!jsons.ok()) return jsons.status();
  std::vector<IdJson> out;
  for (std::size_t i = 0; i < jsons.value().size(); ++i) {
    if (jsons.value()[i]) out.push_back({ids.value()[i], *jsons.value()[i]});
  }
  return out;
}

Status RedisTriggerStore::ClearValidConditions(
    const std::vector<std::string>& valid_condition_ids) {
  if (valid_condition_ids.empty()) return Status::Ok();
  Change c;
  for (const std::string& id : valid_condition_ids) {
    c.Op({"HDEL", K(redis::keys::kVc), id});
    c.Op({"ZREM", K(redis::keys::kVcOrder), id});
  }
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

// ---- Pending reports -------------------------------------------------------

Status RedisTriggerStore::NotePendingReports(const std::vector<IdJson>& notes) {
  if (notes.empty()) return Status::Ok();
  Change c;
  for (const IdJson& note : notes)
    c.Op({"HSET", K(redis::keys::kPendingReports), note.id, note.json});
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<IdJson>> RedisTriggerStore::PendingReports() {
  Result<Value> r = Cmd({"HGETALL", K(redis::keys::kPendingReports)});
  if (!r.ok()) return r.status();
  const std::vector<Value>& flat = r.value().elements;
  if (flat.size() % 2 != 0) return Status::BackendFailure("redis HGETALL: odd reply");
  std::vector<IdJson> out;
  out.reserve(flat.size() / 2);
  for (std::size_t i = 0; i < flat.size(); i += 2) out.push_back({flat[i].str, flat[i + 1].str});
  std::sort(out.begin(), out.end(),
            [](const IdJson& a, const IdJson& b) { return a.id < b.id; });
  return out;
}

Status RedisTriggerStore::ClearPendingReports(const std::vector<std::string>& note_ids) {
  if (note_ids.empty()) return Status::Ok();
  Change c;
  for (const std::string& id : note_ids) c.Op({"HDEL", K(redis::keys::kPendingReports), id});
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

// ---- Cron and claims -------------------------------------------------------

Result<std::optional<TimestampUs>> RedisTriggerStore::LastCronExecution(
    const std::string& condition_id) {
  Result<Value> r = Cmd({"HGET", K(redis::keys::kCron), condition_id});
  if (!r.ok()) return r.status();
  if (r.value().is_nil()) return std::optional<TimestampUs>();
  try {
    return std::optional<TimestampUs>(std::stoll(r.value().str));
  } catch (...) {
    return Corrupt("cron " + condition_id);
  }
}

Result<bool> RedisTriggerStore::StoreLastCronExecution(const std::string& condition_id,
                                                       TimestampUs execution_us,
                                                       CronExpectation expected) {
  Change c;
  switch (expected.kind) {
    case CronExpectation::Kind::kAny:
      break;
    case CronExpectation::Kind::kAbsent:
      c.guards.push_back({K(redis::keys::kCron), condition_id, std::nullopt});
      break;
    case CronExpectation::Kind::kValue:
      c.guards.push_back({K(redis::keys::kCron), condition_id, std::to_string(expected.value)});
      break;
  }
  c.Op({"HSET", K(redis::keys::kCron), condition_id, std::to_string(execution_us)});
  return Apply(c);
}

Result<bool> RedisTriggerStore::ClaimTriggerRun(const std::string& trigger_run_id,
                                                std::int64_t expiration_seconds) {
  if (expiration_seconds < 0 || expiration_seconds > kMaxExpirationSeconds) {
    return Status::InvalidArgument("expiration_seconds must be in [0, 1e10], got " +
                                   std::to_string(expiration_seconds));
  }
  const TimestampUs now = clock_->NowMicros();
  const TimestampUs expiry = now + expiration_seconds * kMicrosPerSecond;
  const std::int64_t ttl_ms = expiration_seconds * 1000 + kClaimSlackMs;
  Result<Value> r = client_->Eval(kClaim, {K(redis::keys::kClaim + trigger_run_id)},
                                  {OrderKey(now), OrderKey(expiry), std::to_string(ttl_ms)});
  if (!r.ok()) return r.status();
  if (r.value().is_error()) {
    return Status::BackendFailure("redis claim script failed on " + client_->Describe() + ": " +
                                  r.value().str);
  }
  return r.value().integer == 1;
}

}  // namespace redis_trigger
}  // namespace pynenc_cpp
