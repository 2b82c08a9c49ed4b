// Redis orchestrator, part 1: invocation records, their indexes, queries, auto
// purge, the wait graph and purge. Key layout: redis_orchestrator_impl.h.
//
// TransitionStatus keeps the status machine in C++ (core ApplyTransition): it
// reads the record, computes the next one, and writes it with a Lua
// compare-and-set that also moves every index; if another client changed the
// record in between, it re-reads and tries again (bounded). Of racing callers
// exactly one wins; the others see its record and get the machine's own error.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <random>

#include "pynenc_cpp/core/metrics.h"
#include "redis/redis_keys.h"
#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp {
namespace redis_orchestrator {
namespace {

using redis::MatchPrefix;
using redis::Value;

constexpr int kCasAttempts = 100;

Status UnknownInvocation(const InvocationId& id) {
  return Status::NotFound("invocation '" + id.str() + "' is not registered in the orchestrator");
}

std::vector<std::string> StatusNames(const std::vector<InvocationStatus>& statuses) {
  std::vector<std::string> out;
  for (InvocationStatus s : statuses) out.emplace_back(StatusName(s));
  return out;
}

void AppendRecord(std::vector<std::string>& args, const StatusRecord& r) {
  args.emplace_back(StatusName(r.status));
  args.push_back(std::to_string(r.timestamp_us));
  args.push_back(r.runner_id ? "1" : "0");
  args.push_back(r.runner_id.value_or(""));
}

}  // namespace

// A fresh waiter token (32 hex digits), unique across threads and processes.
std::string NewWaitToken() {
  // A forked child inherits this thread's generator state, so it is reseeded in
  // each new process.
  static thread_local std::mt19937_64 rng;
  static thread_local long rng_pid = 0;
  if (rng_pid != getpid()) {
    rng_pid = getpid();
    std::random_device rd;
    rng.seed((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
             (static_cast<std::uint64_t>(rng_pid) << 16));
  }
  char token[40];
  std::snprintf(token, sizeof token, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return token;
}

Status ReplyError(const Value& v, const std::string& what) {
  return Status::BackendFailure("redis orchestrator: " + what + ": " + v.str);
}

Result<std::vector<std::string>> Strings(const Value& v, const std::string& what) {
  if (v.is_error()) return ReplyError(v, what);
  if (v.type != Value::Type::kArray) {
    return Status::BackendFailure("redis orchestrator: " + what + ": expected an array reply");
  }
  std::vector<std::string> out;
  out.reserve(v.elements.size());
  for (const Value& e : v.elements) {
    if (e.type == Value::Type::kInt) {
      out.push_back(std::to_string(e.integer));
    } else {
      out.push_back(e.str);
    }
  }
  return out;
}

Result<std::int64_t> ParseInt(const std::string& s, const std::string& what) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return Status::BackendFailure("redis orchestrator: " + what + ": malformed integer '" + s +
                                  "'");
  }
  return n;
}

std::optional<FinalNote> ParseFinalNote(const std::string& note,
                                        const std::vector<InvocationId>& ids) {
  const auto named = [&](std::string_view id) -> const InvocationId* {
    for (const InvocationId& i : ids) {
      if (i.str() == id) return &i;
    }
    return nullptr;
  };
  std::size_t len = 0;
  const char* begin = note.data();
  const char* end = note.data() + note.size();
  auto [colon, ec] = std::from_chars(begin, end, len);
  if (ec == std::errc() && colon != begin && colon < end && *colon == ':' &&
      len <= static_cast<std::size_t>(end - colon - 1)) {
    const std::string_view id(colon + 1, len);
    if (const InvocationId* i = named(id)) {
      return FinalNote{*i, std::string(colon + 1 + len, end)};
    }
  }
  if (const InvocationId* i = named(note)) return FinalNote{*i, ""};  // a bare id
  return std::nullopt;
}

Result<std::optional<FinalWake>> WaitFinal(redis::Client& client, const std::string& prefix,
                                           const std::vector<InvocationId>& ids,
                                           TimestampUs timeout_us, const FinalRegistration& reg,
                                           const ArmedWait* armed) {
  using Clock = std::chrono::steady_clock;
  // Longer waits are clamped (no time_point overflow): ~31 years.
  constexpr TimestampUs kMaxWaitUs = 1'000'000'000'000'000;
  // One BLPOP blocks at most this long; a longer wait registers again (the
  // registrations of the previous token expire on their own).
  constexpr std::int64_t kMaxBlockMs = 10'000;
  const auto deadline =
      Clock::now() + std::chrono::microseconds(std::clamp<TimestampUs>(timeout_us, 0, kMaxWaitUs));
  while (true) {
    const auto left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    std::int64_t block_ms = std::clamp<std::int64_t>(left_ms, 0, kMaxBlockMs);
    std::string token;
    if (armed != nullptr && armed->valid_ms > 0 && block_ms > 0) {
      // Registered by the read before this wait: its notes are what to block on.
      token = armed->token;
      block_ms = std::min(block_ms, armed->valid_ms);
    } else {
      token = NewWaitToken();
      Result<Value> got_reg = reg(token, block_ms + 1000);
      if (!got_reg.ok()) return got_reg.status();
      if (!got_reg.value().is_nil()) {
        return std::optional<FinalWake>(FinalWake{std::move(got_reg).value(), std::nullopt});
      }
      if (block_ms <= 0) return std::optional<FinalWake>();
    }
    armed = nullptr;  // once: later blocks register their own token
    // BLPOP's timeout is in seconds (decimals allowed since Redis 6).
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3f", static_cast<double>(block_ms) / 1000.0);
    Result<Value> got =
        client.BlockingCommand({"BLPOP", prefix + redis::keys::kNote + token, secs}, block_ms);
    if (!got.ok()) return got.status();
    if (got.value().is_error()) return ReplyError(got.value(), "wait for a final status");
    if (got.value().type == Value::Type::kArray && got.value().elements.size() == 2) {
      std::optional<FinalNote> note = ParseFinalNote(got.value().elements[1].str, ids);
      if (note) return std::optional<FinalWake>(FinalWake{Value{}, std::move(note)});
      // Not one of ours (cannot happen with unique tokens): register again.
    }
    if (Clock::now() >= deadline) return std::optional<FinalWake>();
  }
}

Result<Value> RedisOrchestrator::Run(const redis::Script& script, std::vector<std::string> args,
                                     const std::string& what) {
  args.insert(args.begin(), prefix_);
  Result<Value> r = client_->Eval(script, {prefix_ + redis::keys::kSeq}, args);
  if (!r.ok()) return r;
  if (r.value().is_error()) return ReplyError(r.value(), what);
  return r;
}

Result<std::vector<InvocationId>> RedisOrchestrator::RunIds(const redis::Script& script,
                                                            std::vector<std::string> args,
                                                            const std::string& what) {
  Result<Value> r = Run(script, std::move(args), what);
  if (!r.ok()) return r.status();
  Result<std::vector<std::string>> s = Strings(r.value(), what);
  if (!s.ok()) return s.status();
  std::vector<InvocationId> out;
  out.reserve(s.value().size());
  for (std::string& id : s.value()) out.emplace_back(std::move(id));
  return out;
}

Result<std::optional<StatusRecord>> RedisOrchestrator::ReadRecord(const InvocationId& id) {
  Result<Value> r =
      client_->Command({"HMGET", prefix_ + redis::keys::kInv + id.str(), "st", "ts", "own"});
  if (!r.ok()) return r.status();
  const Value& v = r.value();
  if (v.is_error()) return ReplyError(v, "read status record");
  if (v.type != Value::Type::kArray || v.elements.size() != 3) {
    return Status::BackendFailure("redis orchestrator: read status record: bad reply");
  }
  if (v.elements[0].is_nil()) return std::optional<StatusRecord>();
  std::optional<InvocationStatus> status = ParseStatus(v.elements[0].str);
  if (!status) {
    return Status::BackendFailure("redis orchestrator: invocation '" + id.str() +
                                  "' has unknown status '" + v.elements[0].str + "'");
  }
  Result<std::int64_t> ts = ParseInt(v.elements[1].str, "status time of " + id.str());
  if (!ts.ok()) return ts.status();
  StatusRecord rec{*status, std::nullopt, ts.value()};
  if (!v.elements[2].is_nil()) rec.runner_id = v.elements[2].str;
  return std::optional<StatusRecord>(rec);
}

Result<StatusRecord> RedisOrchestrator::RegisterInvocations(
    const std::vector<NewInvocation>& invocations, const std::optional<std::string>& runner_id) {
  for (const NewInvocation& inv : invocations) {
    if (inv.id.empty()) return Status::InvalidArgument("invocation id must not be empty");
  }
  const StatusRecord record{InvocationStatus::kRegistered, runner_id, clock_->NowMicros()};
  if (invocations.empty()) return record;
  std::vector<std::string> args;
  args.reserve(4 + 3 * invocations.size());
  args.emplace_back(StatusName(record.status));
  args.push_back(std::to_string(record.timestamp_us));
  args.push_back(runner_id ? "1" : "0");
  args.push_back(runner_id.value_or(""));
  for (const NewInvocation& inv : invocations) {
    args.push_back(inv.id.str());
    args.push_back(inv.task_id.str());
    args.push_back(inv.call_id.str());
  }
  Result<Value> r = Run(RegisterScript(), std::move(args), "register invocations");
  if (!r.ok()) return r.status();
  if (r.value().type == Value::Type::kInt && r.value().integer > 0) {
    metrics::OnEntered(record.status, static_cast<std::uint64_t>(r.value().integer));
  }
  return record;
}

Result<StatusRecord> RedisOrchestrator::TransitionStatus(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id) {
  return Transition(id, to, runner_id, nullptr);
}

Result<StatusRecord> RedisOrchestrator::TransitionStatusFromOwner(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
    const std::optional<std::string>& expected_owner) {
  return Transition(id, to, runner_id, &expected_owner);
}

Result<StatusRecord> RedisOrchestrator::Transition(
    const InvocationId& id, InvocationStatus to, const std::optional<std::string>& runner_id,
    const std::optional<std::string>* expected_owner) {
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    Result<std::optional<StatusRecord>> current = ReadRecord(id);
    if (!current.ok()) return current.status();
    if (!current.value()) return UnknownInvocation(id);
    const StatusRecord& cur = *current.value();
    // The script below sets the new record only while the stored one is still `cur`,
    // so an owner checked here is the owner at the moment of the change.
    if (expected_owner != nullptr) {
      if (Status s = ValidateExpectedOwner(cur, to, runner_id, *expected_owner); !s.ok()) {
        return s;
      }
    }
    Result<StatusRecord> next = ApplyTransition(cur, to, runner_id, clock_->NowMicros());
    if (!next.ok()) return next;
    std::vector<std::string> args{id.str()};
    AppendRecord(args, cur);
    AppendRecord(args, next.value());
    Result<Value> r = Run(TransitionScript(), std::move(args), "status transition");
    if (!r.ok()) return r.status();
    if (r.value().type != Value::Type::kInt) {
      return Status::BackendFailure("redis orchestrator: status transition: bad reply");
    }
    if (r.value().integer == 1) {
      metrics::OnTransition(cur, next.value());
      return next;
    }
    if (r.value().integer == -1) return UnknownInvocation(id);  // purged meanwhile
  }
  return Status::BackendFailure("redis orchestrator: status transition of '" + id.str() +
                                "' lost the compare-and-set " + std::to_string(kCasAttempts) +
                                " times in a row");
}

Result<StatusRecord> RedisOrchestrator::GetStatusRecord(const InvocationId& id) {
  Result<std::optional<StatusRecord>> r = ReadRecord(id);
  if (!r.ok()) return r.status();
  if (!r.value()) return UnknownInvocation(id);
  return *r.value();
}

Result<std::vector<InvocationId>> RedisOrchestrator::FilterByStatus(
    const std::vector<InvocationId>& ids, const std::vector<InvocationStatus>& statuses) {
  std::vector<InvocationId> out;
  if (statuses.empty() || ids.empty()) return out;  // an empty filter selects nothing here
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(ids.size());
  for (const InvocationId& id : ids)
    cmds.push_back({"HGET", prefix_ + redis::keys::kInv + id.str(), "st"});
  Result<std::vector<Value>> replies = client_->Pipeline(cmds);
  if (!replies.ok()) return replies.status();
  const std::vector<std::string> names = StatusNames(statuses);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Value& v = replies.value()[i];
    if (v.is_error()) return ReplyError(v, "filter by status");
    if (v.is_nil()) continue;
    for (const std::string& n : names) {
      if (v.str == n) {
        out.push_back(ids[i]);
        break;
      }
    }
  }
  return out;
}

Result<std::optional<InvocationId>> RedisOrchestrator::WaitAnyFinal(
    const std::vector<InvocationId>& ids, TimestampUs timeout_us) {
  if (ids.empty()) return Status::InvalidArgument("WaitAnyFinal needs at least one invocation id");
  Result<std::optional<FinalWake>> wake =
      WaitFinal(*client_, prefix_, ids, timeout_us,
                [&](const std::string& token, std::int64_t ttl_ms) -> Result<Value> {
                  std::vector<std::string> args{token, std::to_string(ttl_ms)};
                  for (const InvocationId& id : ids) args.push_back(id.str());
                  return Run(WaitFinalScript(), std::move(args), "wait for a final status");
                });
  if (!wake.ok()) return wake.status();
  if (!wake.value()) return std::optional<InvocationId>();
  const FinalWake& w = *wake.value();
  if (w.note) return std::optional<InvocationId>(w.note->id);
  if (w.registered.type != Value::Type::kString) {
    return Status::BackendFailure("redis wait for a final status: bad reply");
  }
  return std::optional<InvocationId>(InvocationId(w.registered.str));
}

Status RedisOrchestrator::IndexArguments(const InvocationId& id,
                                         const std::map<std::string, std::string>& args) {
  std::vector<std::string> argv{id.str()};
  for (const auto& [k, v] : args) {
    argv.push_back(k);
    argv.push_back(v);
  }
  Result<Value> r = Run(IndexArgumentsScript(), std::move(argv), "index arguments");
  if (!r.ok()) return r.status();
  if (r.value().integer == 0) return UnknownInvocation(id);
  return Status::Ok();
}

Result<std::vector<InvocationId>> RedisOrchestrator::GetExistingInvocations(
    const TaskId& task_id, const std::map<std::string, std::string>& key_args,
    const std::vector<InvocationStatus>& statuses) {
  std::vector<std::string> args{task_id.str(), std::to_string(statuses.size())};
  for (InvocationStatus s : statuses) args.emplace_back(StatusName(s));
  for (const auto& [k, v] : key_args) {
    args.push_back(k);
    args.push_back(v);
  }
  return RunIds(ExistingScript(), std::move(args), "existing invocations");
}

// TransitionStatus's read and compare-and-set, the script also indexing and
// looking for a blocker (GateScript).
Result<Orchestrator::GateOutcome> RedisOrchestrator::GatedTransition(const GateRequest& gate) {
  if (Status st = gate.Check(); !st.ok()) return st;
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    Result<std::optional<StatusRecord>> current = ReadRecord(gate.id);
    if (!current.ok()) return current.status();
    if (!current.value()) return UnknownInvocation(gate.id);
    const StatusRecord& cur = *current.value();
    Result<StatusRecord> next = ApplyTransition(cur, gate.to, gate.runner_id, clock_->NowMicros());
    if (!next.ok()) return next.status();
    std::vector<std::string> args{gate.id.str()};
    AppendRecord(args, cur);
    AppendRecord(args, next.value());
    args.push_back(gate.task_id.str());
    args.push_back(std::to_string(gate.blocking.size()));
    for (InvocationStatus st : gate.blocking) args.emplace_back(StatusName(st));
    args.push_back(std::to_string(gate.index_args.size()));
    for (const auto& [k, v] : gate.index_args) {
      args.push_back(k);
      args.push_back(v);
    }
    for (const auto& [k, v] : gate.key_args) {
      args.push_back(k);
      args.push_back(v);
    }
    Result<Value> r = Run(GateScript(), std::move(args), "gated status transition");
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.type == Value::Type::kString) {
      return GateOutcome{cur, InvocationId(v.str)};
    }
    if (v.type != Value::Type::kInt) {
      return Status::BackendFailure("redis orchestrator: gated status transition: bad reply");
    }
    if (v.integer == 1) {
      metrics::OnTransition(cur, next.value());
      return GateOutcome{next.value(), std::nullopt};
    }
    if (v.integer == -1) return UnknownInvocation(gate.id);
  }
  return Status::BackendFailure("redis orchestrator: gated status transition of '" + gate.id.str() +
                                "' lost the compare-and-set " + std::to_string(kCasAttempts) +
                                " times in a row");
}

Result<std::vector<InvocationId>> RedisOrchestrator::GetTaskInvocations(const TaskId& task_id) {
  Result<Value> r =
      client_->Command({"ZRANGE", prefix_ + redis::keys::kTask + task_id.str(), "0", "-1"});
  if (!r.ok()) return r.status();
  Result<std::vector<std::string>> s = Strings(r.value(), "task invocations");
  if (!s.ok()) return s.status();
  std::vector<InvocationId> out;
  for (std::string& id : s.value()) out.emplace_back(std::move(id));
  return out;
}

Result<std::vector<InvocationId>> RedisOrchestrator::GetCallInvocations(const CallId& call_id) {
  // pynenc's call key is "<task key>:<args id>" (an args id has no ':').
  const std::string& call = call_id.str();
  const std::size_t colon = call.rfind(':');
  if (colon == std::string::npos) return std::vector<InvocationId>();
  return RunIds(CallInvocationsScript(), {call.substr(0, colon), call}, "call invocations");
}

Result<std::vector<InvocationId>> RedisOrchestrator::ListInvocations(
    const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses,
    std::int64_t limit, std::int64_t offset) {
  if (limit < 0 || offset < 0) {
    return Status::InvalidArgument("limit and offset must be >= 0");
  }
  if (limit == 0) return std::vector<InvocationId>();
  std::vector<std::string> args{std::to_string(limit), std::to_string(offset), task_id ? "1" : "0",
                                task_id ? task_id->str() : ""};
  // Each status once (a status's page must be merged once); no filter: all.
  for (InvocationStatus s : AllStatuses()) {
    if (statuses.empty() || std::find(statuses.begin(), statuses.end(), s) != statuses.end()) {
      args.emplace_back(StatusName(s));
    }
  }
  return RunIds(ListScript(), std::move(args), "list invocations");
}

Result<std::int64_t> RedisOrchestrator::CountInvocations(
    const std::optional<TaskId>& task_id, const std::vector<InvocationStatus>& statuses) {
  std::vector<std::string> args{task_id ? "1" : "0", task_id ? task_id->str() : "",
                                statuses.empty() ? "1" : "0"};
  // Each status once: the per-status counts are summed; no filter: all.
  for (InvocationStatus s : AllStatuses()) {
    if (statuses.empty() || std::find(statuses.begin(), statuses.end(), s) != statuses.end()) {
      args.emplace_back(StatusName(s));
    }
  }
  Result<Value> r = Run(CountScript(), std::move(args), "count invocations");
  if (!r.ok()) return r.status();
  return r.value().integer;
}

Status RedisOrchestrator::IncrementRetries(const InvocationId& id) {
  Result<Value> r = Run(IncrementRetriesScript(), {id.str()}, "increment retries");
  if (!r.ok()) return r.status();
  if (r.value().integer == 0) return UnknownInvocation(id);
  return Status::Ok();
}

Result<std::int64_t> RedisOrchestrator::GetRetries(const InvocationId& id) {
  Result<Value> r = client_->Command({"HGET", prefix_ + redis::keys::kInv + id.str(), "retries"});
  if (!r.ok()) return r.status();
  if (r.value().is_error()) return ReplyError(r.value(), "get retries");
  if (r.value().is_nil()) return UnknownInvocation(id);
  return ParseInt(r.value().str, "retries of " + id.str());
}

Status RedisOrchestrator::ScheduleAutoPurge(const InvocationId& id) {
  Result<Value> r = Run(ScheduleAutoPurgeScript(), {id.str(), std::to_string(clock_->NowMicros())},
                        "schedule auto purge");
  if (!r.ok()) return r.status();
  if (r.value().integer == 0) return UnknownInvocation(id);
  return Status::Ok();
}

Result<std::vector<InvocationId>> RedisOrchestrator::AutoPurge(TimestampUs older_than_us) {
  const TimestampUs cutoff = clock_->NowMicros() - older_than_us;
  return RunIds(AutoPurgeScript(), {std::to_string(cutoff)}, "auto purge");
}

Status RedisOrchestrator::WaitingForResults(const InvocationId& waiter,
                                            const std::vector<InvocationId>& waited) {
  if (waited.empty()) return Status::Ok();
  std::vector<std::string> args{waiter.str()};
  for (const InvocationId& w : waited) args.push_back(w.str());
  return Run(WaitingScript(), std::move(args), "waiting for results").status();
}

Status RedisOrchestrator::ReleaseWaiters(const InvocationId& waited) {
  return Run(ReleaseScript(), {waited.str()}, "release waiters").status();
}

Result<std::vector<InvocationId>> RedisOrchestrator::GetBlockingInvocations(
    std::int64_t max_count) {
  if (max_count < 0) return Status::InvalidArgument("max_num_invocations must be >= 0");
  std::vector<std::string> args{std::to_string(max_count)};
  for (InvocationStatus s : AllStatuses()) {
    if (IsAvailableForRun(s)) args.emplace_back(StatusName(s));
  }
  return RunIds(BlockingScript(), std::move(args), "blocking invocations");
}

Status RedisOrchestrator::Purge() {
  return UnlinkMatching(MatchPrefix(prefix_), "purge");
}

Status RedisOrchestrator::UnlinkMatching(const std::string& match, const std::string& what) {
  std::string cursor = "0";
  do {
    Result<Value> r = client_->Command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return ReplyError(v, what + " (scan)");
    if (v.type != Value::Type::kArray || v.elements.size() != 2) {
      return Status::BackendFailure("redis orchestrator: " + what + " (scan): bad reply");
    }
    cursor = v.elements[0].str;
    Result<std::vector<std::string>> keys = Strings(v.elements[1], what + " (scan)");
    if (!keys.ok()) return keys.status();
    if (keys.value().empty()) continue;
    std::vector<std::string> del{"UNLINK"};
    for (std::string& k : keys.value()) del.push_back(std::move(k));
    Result<Value> d = client_->Command(del);
    if (!d.ok()) return d.status();
    if (d.value().is_error()) return ReplyError(d.value(), what + " (unlink)");
  } while (cursor != "0");
  return Status::Ok();
}

Status RedisOrchestrator::DropRetiredIndexes() {
  std::vector<std::string> args;
  for (InvocationStatus st : AllStatuses()) args.emplace_back(StatusName(st));
  Result<Value> r = Run(DropRetiredIndexesScript(), std::move(args), "drop retired indexes");
  if (!r.ok()) return r.status();
  if (r.value().integer == 0) return Status::Ok();
  for (const char* kind : {redis::keys::kTtimes, redis::keys::kCall}) {
    Status dropped = UnlinkMatching(MatchPrefix(prefix_ + kind), "drop retired indexes");
    if (!dropped.ok()) return dropped;
  }
  Result<Value> d = client_->Command({"UNLINK", prefix_ + redis::keys::kTimes});
  if (!d.ok()) return d.status();
  if (d.value().is_error()) return ReplyError(d.value(), "drop retired indexes (unlink)");
  return Status::Ok();
}

}  // namespace redis_orchestrator

Result<std::unique_ptr<Orchestrator>> NewRedisOrchestrator(std::shared_ptr<redis::Client> client,
                                                           const BackendConfig& config) {
  auto orchestrator =
      std::make_unique<redis_orchestrator::RedisOrchestrator>(std::move(client), config);
  // Best effort: nothing reads those keys, so a failure (the server unreachable
  // for a moment) only leaves them for the next open.
  (void)orchestrator->DropRetiredIndexes();
  return std::unique_ptr<Orchestrator>(std::move(orchestrator));
}

}  // namespace pynenc_cpp
