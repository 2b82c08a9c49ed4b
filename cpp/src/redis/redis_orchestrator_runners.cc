// Redis orchestrator, part 2: runner heartbeats, the recovery queries and
// atomic-service execution rows. Key layout: redis_orchestrator_impl.h.
#include <algorithm>

#include "ports/queue_codec.h"
#include "redis/redis_orchestrator_impl.h"

namespace pynenc_cpp::redis_orchestrator {
namespace {

using redis::Value;

}  // namespace

Status RedisOrchestrator::RegisterHeartbeats(
    const std::vector<std::string>& runner_ids, bool can_run_atomic_service,
    const std::optional<std::vector<std::string>>& consumed_queues) {
  if (Status s = CheckRunnerIds(runner_ids); !s.ok()) return s;
  if (runner_ids.empty()) return Status::Ok();
  std::vector<std::string> args{std::to_string(clock_->NowMicros()),
                                can_run_atomic_service ? "1" : "0", consumed_queues ? "1" : "0",
                                consumed_queues ? queue_codec::Encode(*consumed_queues) : ""};
  args.insert(args.end(), runner_ids.begin(), runner_ids.end());
  return Run(HeartbeatScript(), std::move(args), "register heartbeats").status();
}

Status RedisOrchestrator::DeregisterRunners(const std::vector<std::string>& runner_ids) {
  if (runner_ids.empty()) return Status::Ok();
  return Run(DeregisterScript(), runner_ids, "deregister runners").status();
}

Result<std::vector<RunnerInfo>> RedisOrchestrator::ActiveRunners(
    TimestampUs timeout_us, std::optional<bool> can_run_atomic_service) {
  const TimestampUs cutoff = clock_->NowMicros() - timeout_us;
  Result<Value> r = Run(RunnersScript(), {}, "active runners");
  if (!r.ok()) return r.status();
  Result<std::vector<std::string>> flat = Strings(r.value(), "active runners");
  if (!flat.ok()) return flat.status();
  const std::vector<std::string>& f = flat.value();
  std::vector<RunnerInfo> out;
  for (std::size_t i = 0; i + 5 <= f.size(); i += 5) {
    Result<std::int64_t> created = ParseInt(f[i + 1], "runner creation");
    Result<std::int64_t> beat = ParseInt(f[i + 2], "runner heartbeat");
    if (!created.ok()) return created.status();
    if (!beat.ok()) return beat.status();
    const bool atomic = f[i + 3] == "1";
    if (beat.value() < cutoff) continue;
    if (can_run_atomic_service && atomic != *can_run_atomic_service) continue;
    Result<std::vector<std::string>> queues =
        queue_codec::Decode(f[i + 4], "redis orchestrator: malformed consumed queues");
    if (!queues.ok()) return queues.status();
    // The script returns creation order, ties by id (sorted-set order).
    out.push_back(
        RunnerInfo{f[i], created.value(), beat.value(), atomic, std::move(queues).value()});
  }
  return out;
}

Result<std::vector<InvocationId>> RedisOrchestrator::PendingForRecovery(
    TimestampUs max_pending_us) {
  const TimestampUs cutoff = clock_->NowMicros() - max_pending_us;
  return RunIds(PendingRecoveryScript(), {std::to_string(cutoff)}, "pending for recovery");
}

Result<std::vector<InvocationId>> RedisOrchestrator::RunningForRecovery(
    TimestampUs heartbeat_timeout_us) {
  const TimestampUs cutoff = clock_->NowMicros() - heartbeat_timeout_us;
  return RunIds(OwnerDeadScript(), {std::to_string(cutoff), "running", "1"},
                "running for recovery");
}

Result<std::vector<InvocationId>> RedisOrchestrator::PendingOfDeadRunners(
    TimestampUs heartbeat_timeout_us) {
  const TimestampUs cutoff = clock_->NowMicros() - heartbeat_timeout_us;
  return RunIds(OwnerDeadScript(), {std::to_string(cutoff), "pending", "0"},
                "pending of dead runners");
}

Result<AtomicServiceStart> RedisOrchestrator::RecordAtomicServiceStart(
    const std::string& runner_id, const std::string& run_id,
    std::optional<TimestampUs> started_at_us, AtomicServiceStatus status,
    const std::string& reason) {
  if (run_id.empty()) return Status::InvalidArgument("atomic_service_run_id must not be empty");
  const TimestampUs start = started_at_us.value_or(clock_->NowMicros());
  // The gate (find the newest RUNNING row, store ours as RUNNING or BLOCKED)
  // runs inside one script: of racing clients exactly one sees no prior row.
  Result<Value> r = Run(ExecutionStartScript(),
                        {runner_id, run_id, std::to_string(start),
                         std::string(AtomicServiceStatusName(status)), reason},
                        "record atomic service start");
  if (!r.ok()) return r.status();
  Result<std::vector<std::string>> f = Strings(r.value(), "record atomic service start");
  if (!f.ok()) return f.status();
  if (f.value().size() != 2) {
    return Status::BackendFailure("redis orchestrator: record atomic service start: bad reply");
  }
  Result<std::int64_t> started = ParseInt(f.value()[1], "atomic service start");
  if (!started.ok()) return started.status();
  return AtomicServiceStart{f.value()[0] == "1", started.value()};
}

Status RedisOrchestrator::FinalizeAtomicService(const std::string& runner_id,
                                                const std::string& run_id, TimestampUs end_us,
                                                AtomicServiceStatus status,
                                                const std::string& reason) {
  if (Status s = CheckFinalize(status, run_id); !s.ok()) return s;
  return Run(ExecutionFinalizeScript(),
             {runner_id, run_id, std::to_string(end_us),
              std::string(AtomicServiceStatusName(status)), reason},
             "finalize atomic service")
      .status();
}

Result<std::vector<std::pair<AtomicServiceExecution, std::string>>> RedisOrchestrator::Executions(
    bool running_only) {
  Result<Value> r = Run(ExecutionsScript(), {running_only ? "1" : "0"}, "atomic service rows");
  if (!r.ok()) return r.status();
  Result<std::vector<std::string>> flat = Strings(r.value(), "atomic service rows");
  if (!flat.ok()) return flat.status();
  const std::vector<std::string>& f = flat.value();
  struct Row {
    AtomicServiceExecution e;
    std::string seq_text;
    std::int64_t seq;
  };
  std::vector<Row> rows;
  for (std::size_t i = 0; i + 8 <= f.size(); i += 8) {
    Result<std::int64_t> start = ParseInt(f[i + 2], "atomic service start");
    Result<std::int64_t> seq = ParseInt(f[i + 7], "atomic service seq");
    if (!start.ok()) return start.status();
    if (!seq.ok()) return seq.status();
    std::optional<TimestampUs> end;
    if (f[i + 4] == "1") {
      Result<std::int64_t> e = ParseInt(f[i + 3], "atomic service end");
      if (!e.ok()) return e.status();
      end = e.value();
    }
    std::optional<AtomicServiceStatus> st = ParseAtomicServiceStatus(f[i + 5]);
    if (!st) {
      return Status::BackendFailure("redis orchestrator: atomic service row has unknown status '" +
                                    f[i + 5] + "'");
    }
    rows.push_back(Row{AtomicServiceExecution{f[i], f[i + 1], start.value(), end, *st, f[i + 6]},
                       f[i + 7], seq.value()});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.e.start_us != b.e.start_us) return a.e.start_us > b.e.start_us;
    return a.seq > b.seq;
  });
  std::vector<std::pair<AtomicServiceExecution, std::string>> out;
  out.reserve(rows.size());
  for (Row& row : rows) out.emplace_back(std::move(row.e), std::move(row.seq_text));
  return out;
}

Result<std::vector<AtomicServiceExecution>> RedisOrchestrator::ActiveAtomicServiceExecutions() {
  auto rows = Executions(true);
  if (!rows.ok()) return rows.status();
  std::vector<AtomicServiceExecution> out;
  for (auto& [e, seq] : rows.value()) {
    if (e.status == AtomicServiceStatus::kRunning) out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<AtomicServiceExecution>> RedisOrchestrator::AtomicServiceExecutionsInRange(
    TimestampUs start_us, TimestampUs end_us, std::int64_t limit,
    const std::optional<std::string>& runner_id, TimestampUs min_duration_us) {
  std::vector<AtomicServiceExecution> out;
  if (limit <= 0) return out;
  auto rows = Executions(false);
  if (!rows.ok()) return rows.status();
  for (auto& [e, seq] : rows.value()) {
    if (static_cast<std::int64_t>(out.size()) >= limit) break;
    if (e.end_us.value_or(e.start_us) < start_us || e.start_us > end_us) continue;
    if (runner_id && e.runner_id != *runner_id) continue;
    if (min_duration_us > 0 && (!e.end_us || *e.end_us - e.start_us < min_duration_us)) continue;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::int64_t> RedisOrchestrator::PurgeAtomicServiceExecutions(
    const ExecutionPurgePolicy& policy) {
  auto rows = Executions(false);
  if (!rows.ok()) return rows.status();
  // Rules applied in C++ on a snapshot, oldest first; the drop script deletes a
  // row only if it is still the same insertion (seq) and not running, so a row
  // replaced or restarted meanwhile is kept.
  std::vector<FinishedExecution> finished;
  std::vector<const std::string*> seqs;
  for (auto it = rows.value().rbegin(); it != rows.value().rend(); ++it) {
    if (it->first.status == AtomicServiceStatus::kRunning) continue;
    finished.push_back(FinishedExecution{it->first.run_id, it->first.end_us});
    seqs.push_back(&it->second);
  }
  const std::vector<bool> dropped = DroppedExecutions(finished, policy, clock_->NowMicros());
  std::vector<std::string> args;
  for (std::size_t i = 0; i < finished.size(); ++i) {
    if (!dropped[i]) continue;
    args.emplace_back(finished[i].run_id);
    args.push_back(*seqs[i]);
  }
  if (args.empty()) return std::int64_t{0};
  Result<Value> r = Run(ExecutionDropScript(), std::move(args), "purge atomic service rows");
  if (!r.ok()) return r.status();
  return r.value().integer;
}

}  // namespace pynenc_cpp::redis_orchestrator
