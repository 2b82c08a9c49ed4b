// The Redis lifecycle's wait for a final status: see redis_final_wait.h.
#include "redis/redis_final_wait.h"

#include <charconv>
#include <string_view>
#include <utility>

#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp::native {
namespace {

using redis::Script;
using redis::Value;

std::optional<std::int64_t> ParseTs(std::string_view text) {
  std::int64_t ts = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ts);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return ts;
}

// {st, ts, own|nil} at `at` of `v` as a record; nullopt when damaged.
std::optional<StatusRecord> RecordAt(const Value& v, std::size_t at) {
  if (v.elements[at].type != Value::Type::kString) return std::nullopt;
  std::optional<InvocationStatus> st = ParseStatus(v.elements[at].str);
  std::optional<std::int64_t> ts = ParseTs(v.elements[at + 1].str);
  if (!st || !ts) return std::nullopt;
  StatusRecord r;
  r.status = *st;
  r.timestamp_us = *ts;
  if (v.elements[at + 2].type == Value::Type::kString) r.runner_id = v.elements[at + 2].str;
  return r;
}

// WaitAnyFinal's registration, reading the record of an id already final as
// ReadFinalScript does. KEYS: the orchestrator's seq. ARGV: P, Ps, token, ttl
// ms, the SUCCESS status name, the longest result to return, then the ids.
// Returns {id, st, ts, own|false[, result]} for the first id (in input order)
// whose status is final, or registers the token in P fw:<id> for every id (kept
// at least ttl ms) and returns false (as the orchestrator's WaitFinalScript).
const Script& WaitFinalReadScript() {
  static const Script s(std::string(redis_orchestrator::LuaCommon()) + R"lua(
local Ps, token, ttl, success, most = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local first_id = 7
for i = first_id, #ARGV do
  local f = redis.call('HMGET', P .. ${inv} .. ARGV[i], 'st', 'ts', 'own')
  if f[1] and FINAL[f[1]] then
    local out = {ARGV[i], f[1], f[2], f[3]}
    if f[1] == success and most > 0 then
      local n = redis.call('HSTRLEN', Ps .. ${results}, ARGV[i])
      if n > 0 and n <= most then out[5] = redis.call('HGET', Ps .. ${results}, ARGV[i]) end
    end
    return out
  end
end
for i = first_id, #ARGV do
  local fk = P .. ${fw} .. ARGV[i]
  redis.call('SADD', fk, token)
  if redis.call('PTTL', fk) < ttl then redis.call('PEXPIRE', fk, ttl) end
end
return false
)lua");
  return s;
}

}  // namespace

Result<Value> RegisterFinalWait(redis::Client& client, const std::string& po,
                                const std::string& ps, const std::vector<InvocationId>& ids,
                                const std::string& token, std::int64_t ttl_ms,
                                std::size_t max_result_bytes) {
  std::vector<std::string> args{po,
                                ps,
                                token,
                                std::to_string(ttl_ms),
                                std::string(StatusName(InvocationStatus::kSuccess)),
                                std::to_string(max_result_bytes)};
  for (const InvocationId& id : ids) args.push_back(id.str());
  Result<Value> r = client.Eval(WaitFinalReadScript(), {po + redis::keys::kSeq}, args);
  if (r.ok() && r.value().is_error()) {
    return Status::BackendFailure("redis wait for a final status script failed: " +
                                  r.value().str);
  }
  return r;
}

Result<FinalWait> AlreadyFinal(const Value& reply) {
  if (reply.type != Value::Type::kArray || reply.elements.size() < 4 ||
      reply.elements[0].type != Value::Type::kString || reply.elements[0].str.empty()) {
    return Status::BackendFailure("redis wait for a final status: bad reply");
  }
  FinalWait out{InvocationId(reply.elements[0].str), std::nullopt};
  if (std::optional<StatusRecord> record = RecordAt(reply, 1)) {
    FinalRead read;
    read.record = *record;
    if (reply.elements.size() > 4 && reply.elements[4].type == Value::Type::kString) {
      read.result = reply.elements[4].str;
    }
    out.read = std::move(read);
  }
  return out;
}

std::optional<FinalRead> ParseNoteRecord(const std::string& extra) {
  const std::size_t c1 = extra.find(':');
  if (c1 == std::string::npos) return std::nullopt;
  const std::size_t c2 = extra.find(':', c1 + 1);
  if (c2 == std::string::npos || c2 + 1 >= extra.size()) return std::nullopt;
  const std::string_view text(extra);
  std::optional<InvocationStatus> st = ParseStatus(text.substr(0, c1));
  std::optional<std::int64_t> ts = ParseTs(text.substr(c1 + 1, c2 - c1 - 1));
  if (!st || !IsFinal(*st) || !ts) return std::nullopt;
  FinalRead out;
  out.record.status = *st;
  out.record.timestamp_us = *ts;
  const char kind = extra[c2 + 1];
  if (kind == 'r' && *st == InvocationStatus::kSuccess) {
    out.result = extra.substr(c2 + 2);
  } else if (kind != 'n' || c2 + 2 != extra.size()) {
    return std::nullopt;
  }
  return out;
}

}  // namespace pynenc_cpp::native
