// Redis Lifecycle: the final-status reads (ReadFinal, ReadFinalAhead,
// ReadFinalArmed, one script each) and WaitAnyFinal. The class and the rest:
// redis_lifecycle_impl.h, redis_lifecycle.cc; the scripts: redis_lifecycle_scripts.cc.
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "redis/redis_final_wait.h"
#include "redis/redis_lifecycle_impl.h"

namespace pynenc_cpp::native::redis_lifecycle {

Result<FinalReads> RedisLifecycle::ReadFinalAhead(const InvocationId& id,
                                                  const std::vector<InvocationId>& ahead,
                                                  std::size_t max_result_bytes) {
  if (ahead.empty()) return PortLifecycle::ReadFinalAhead(id, ahead, max_result_bytes);
  return ReadScripted(id, ahead, max_result_bytes, nullptr, std::nullopt);
}

Result<FinalReads> RedisLifecycle::ReadFinalArmed(const InvocationId& id,
                                                  const std::vector<InvocationId>& ahead,
                                                  std::size_t max_result_bytes) {
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

Result<FinalRead> RedisLifecycle::ReadFinal(const InvocationId& id, std::size_t max_result_bytes) {
  const std::vector<std::string> args = {po_, ps_, id.str(),
                                         std::string(StatusName(InvocationStatus::kSuccess)),
                                         std::to_string(max_result_bytes)};
  Result<Value> r = client_->Eval(ReadFinalScript(), {po_ + redis::keys::kSeq}, args);
  if (!r.ok()) return r.status();
  const Value& v = r.value();
  if (v.is_error()) return ReplyError(v, "read final");
  // An unknown id: the port's read reports it with the port's error.
  if (v.is_nil()) return PortLifecycle::ReadFinal(id, max_result_bytes);
  return FinalReadOf(v, id);
}

// A {st, ts, own|false[, result]} record of ReadFinalScript or
// ReadFinalAheadScript.
Result<FinalRead> RedisLifecycle::FinalReadOf(const Value& v, const InvocationId& id) {
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

Result<std::optional<FinalWait>> RedisLifecycle::WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                              TimestampUs timeout_us,
                                                              std::size_t max_result_bytes) {
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

// ReadFinalAhead's script (with `arm`: ReadFinalArmed's, withdrawing
// `previous`), its reply read.
Result<FinalReads> RedisLifecycle::ReadScripted(const InvocationId& id,
                                                const std::vector<InvocationId>& ahead,
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
  Result<Value> r = client_->Eval(arm != nullptr ? ReadFinalArmedScript() : ReadFinalAheadScript(),
                                  {po_ + redis::keys::kSeq}, args);
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
std::optional<redis_orchestrator::ArmedWait> RedisLifecycle::TakeArmed(
    const std::vector<InvocationId>& ids) {
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

}  // namespace pynenc_cpp::native::redis_lifecycle
