// The Lifecycle over the ports (see pynenc_cpp/native/lifecycle.h). Every
// operation runs inside Atomically(): a plain call here, one SQLite write
// transaction in SqliteLifecycle (sqlite/sqlite_lifecycle.cc).
#include <map>
#include <set>
#include <utility>

#include "lifecycle/port_lifecycle.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/ports/storage.h"

namespace pynenc_cpp {
namespace native {

PortLifecycle::PortLifecycle(LifecycleParts parts, TriggerContextNames names)
    : parts_(std::move(parts)), names_(std::move(names)) {}

Status PortLifecycle::Atomically(const std::function<Status()>& fn) {
  Status s = fn();
  // The steps run one by one here (no transaction): a connection lost at a later
  // step follows earlier steps that were applied, so the operation may have been
  // applied even when the failing command itself never reached the server.
  if (s.connection_lost() && !s.maybe_applied()) {
    return Status::ConnectionLost(s.message(), true);
  }
  return s;
}

Result<bool> PortLifecycle::Watched(const TaskId& task, const std::string& context_type) {
  if (!parts_.trigger) return true;
  Result<std::vector<std::string>> found =
      parts_.trigger->ConditionsSourcedFromTask(task.str(), context_type);
  if (!found.ok()) return found.status();
  return !found.value().empty();
}

Result<bool> PortLifecycle::StatusWatched(const InvocationId& id,
                                          const std::optional<TaskId>& task) {
  if (!parts_.trigger) return true;
  if (task) return Watched(*task, names_.status);
  Result<InvocationRecord> inv = parts_.state_backend->GetInvocation(id);
  if (!inv.ok()) {
    // Let pynenc's own reporting run (and fail exactly as it would).
    if (inv.status().code() == ErrorCode::kNotFound) return true;
    return inv.status();
  }
  return Watched(inv.value().task_id, names_.status);
}

Result<ChangeOutcome> PortLifecycle::ChangeSteps(const InvocationId& id, InvocationStatus to,
                                                 const Actor& actor,
                                                 const std::optional<TaskId>& task,
                                                 bool release_waiters,
                                                 const std::optional<std::string>* expected_owner) {
  Result<StatusRecord> record =
      expected_owner == nullptr
          ? parts_.orchestrator->TransitionStatus(id, to, actor.runner_id)
          : parts_.orchestrator->TransitionStatusFromOwner(id, to, actor.runner_id,
                                                           *expected_owner);
  if (!record.ok()) return record.status();
  if (IsFinal(to)) {
    if (release_waiters) {
      if (Status s = parts_.orchestrator->ReleaseWaiters(id); !s.ok()) return s;
    }
    if (Status s = parts_.orchestrator->ScheduleAutoPurge(id); !s.ok()) return s;
  }
  if (Status s = AddHistory(id, record.value(), actor, std::nullopt); !s.ok()) return s;
  Result<bool> watched = StatusWatched(id, task);
  if (!watched.ok()) return watched.status();
  return ChangeOutcome{record.value(), watched.value()};
}

Status PortLifecycle::AddHistory(const InvocationId& id, const StatusRecord& record,
                                 const Actor& actor,
                                 const std::optional<std::string>& registered_by) {
  HistoryRecord row;
  row.invocation_id = id;
  row.timestamp_us = record.timestamp_us;
  row.status = record.status;
  row.history_json = HistoryJson(id, record, actor.runner_context_id, registered_by);
  return parts_.state_backend->AddHistories({id}, row);
}

Result<ChangeOutcome> PortLifecycle::RegisterAndRoute(const std::vector<NewRoutedInvocation>& batch,
                                                      const Actor& actor) {
  for (const NewRoutedInvocation& inv : batch) {
    if (inv.record.invocation_id.empty()) {
      return Status::InvalidArgument("RegisterAndRoute: empty invocation id");
    }
  }
  ChangeOutcome out;
  Status s = Atomically([&]() { return RegisterSteps(batch, actor, &out); });
  if (!s.ok()) return s;
  return out;
}

Result<Lifecycle::GuardedRegistration> PortLifecycle::RegisterGuarded(
    const NewRoutedInvocation& item, const std::map<std::string, std::string>& key_args,
    const std::map<std::string, std::string>& index_args, const Actor& actor) {
  const InvocationId& id = item.record.invocation_id;
  if (id.empty()) return Status::InvalidArgument("RegisterGuarded: empty invocation id");
  GuardedRegistration out;
  MutexLock lock(register_mu_);
  Status s = Atomically([&]() -> Status {
    out = GuardedRegistration{};
    Result<std::vector<InvocationId>> found = parts_.orchestrator->GetExistingInvocations(
        item.record.task_id, key_args, {InvocationStatus::kRegistered});
    if (!found.ok()) return found.status();
    for (const InvocationId& other : found.value()) {
      if (other == id) continue;
      out.existing = other;
      return Status::Ok();
    }
    if (Status r = RegisterSteps({item}, actor, &out.registered); !r.ok()) return r;
    return parts_.orchestrator->IndexArguments(id, index_args);
  });
  if (!s.ok()) return s;
  return out;
}

Status PortLifecycle::RegisterSteps(const std::vector<NewRoutedInvocation>& batch,
                                    const Actor& actor, ChangeOutcome* result) {
  std::vector<InvocationRecord> rows;
  std::vector<NewInvocation> news;
  rows.reserve(batch.size());
  news.reserve(batch.size());
  // Routes grouped by (queue, priority), groups in first-seen order.
  std::vector<std::pair<std::string, double>> route_order;
  std::map<std::pair<std::string, double>, std::vector<InvocationId>> routes;
  std::vector<TaskId> tasks;
  for (const NewRoutedInvocation& inv : batch) {
    rows.push_back(inv.record);
    news.push_back(NewInvocation{inv.record.invocation_id, inv.record.task_id, inv.record.call_id});
    auto key = std::make_pair(inv.queue, inv.priority);
    auto [it, inserted] = routes.try_emplace(key);
    if (inserted) route_order.push_back(key);
    it->second.push_back(inv.record.invocation_id);
    bool seen = false;
    for (const TaskId& t : tasks) seen = seen || t == inv.record.task_id;
    if (!seen) tasks.push_back(inv.record.task_id);
  }
  ChangeOutcome& out = *result;
  {
    if (Status u = parts_.state_backend->UpsertInvocations(rows); !u.ok()) return u;
    Result<StatusRecord> record = parts_.orchestrator->RegisterInvocations(news, actor.runner_id);
    if (!record.ok()) return record.status();
    out.record = record.value();
    for (const NewRoutedInvocation& inv : batch) {
      std::optional<std::string> parent;
      if (inv.record.parent_invocation_id) parent = inv.record.parent_invocation_id->str();
      if (Status h = AddHistory(inv.record.invocation_id, out.record, actor, parent); !h.ok()) {
        return h;
      }
    }
    out.status_watched = false;
    for (const TaskId& task : tasks) {
      Result<bool> w = Watched(task, names_.status);
      if (!w.ok()) return w.status();
      out.status_watched = out.status_watched || w.value();
      if (out.status_watched) break;
    }
    for (const auto& key : route_order) {
      if (Status r = parts_.broker->Route(routes[key], key.first, key.second); !r.ok()) return r;
    }
  }
  return Status::Ok();
}

Result<ChangeOutcome> PortLifecycle::ChangeStatus(const InvocationId& id, InvocationStatus to,
                                                  const Actor& actor,
                                                  const std::optional<TaskId>& task,
                                                  bool release_waiters) {
  std::optional<ChangeOutcome> out;
  Status s = Atomically([&]() -> Status {
    Result<ChangeOutcome> r = ChangeSteps(id, to, actor, task, release_waiters);
    if (!r.ok()) return r.status();
    out = r.value();
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return *out;
}

Result<GatedChangeOutcome> PortLifecycle::GatedChange(
    const InvocationId& id, InvocationStatus to, const Actor& actor, const TaskId& task,
    const std::map<std::string, std::string>& key_args,
    const std::vector<InvocationStatus>& blocking,
    const std::map<std::string, std::string>& index_args, const std::optional<Deferral>& deferral) {
  if (IsFinal(to)) return Status::InvalidArgument("GatedChange: a final status is not gated");
  // Built once: a retried transaction runs the lambda again with the same request.
  const Orchestrator::GateRequest request{.id = id,
                                          .task_id = task,
                                          .key_args = key_args,
                                          .blocking = blocking,
                                          .index_args = index_args,
                                          .to = to,
                                          .runner_id = actor.runner_id};
  GatedChangeOutcome out;
  Status s = Atomically([&]() -> Status {
    out = GatedChangeOutcome{};
    Result<Orchestrator::GateOutcome> gate = parts_.orchestrator->GatedTransition(request);
    if (!gate.ok()) return gate.status();
    out.record = gate.value().record;
    if (gate.value().blocker) {
      out.blocker = gate.value().blocker;
      if (!deferral) return Status::Ok();
      // Each step through ChangeStatus (virtual): on redis:// its own script makes
      // the change and its history row together, so a process killed between two
      // steps leaves a status with its row (a CONCURRENCY_CONTROLLED one is
      // rerouted by CppRunner's recovery). On sqlite:// it joins this transaction.
      for (InvocationStatus step : deferral->path) {
        Result<ChangeOutcome> changed =
            ChangeStatus(id, step, actor, task, deferral->release_waiters);
        if (!changed.ok()) return changed.status();
        out.deferred.push_back(changed.value());
      }
      if (deferral->route) {
        return parts_.broker->Route({id}, deferral->route->first, deferral->route->second);
      }
      return Status::Ok();
    }
    if (Status h = AddHistory(id, out.record, actor, std::nullopt); !h.ok()) return h;
    Result<bool> watched = Watched(task, names_.status);
    if (!watched.ok()) return watched.status();
    out.change = ChangeOutcome{out.record, watched.value()};
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<FinalRead> PortLifecycle::ReadFinal(const InvocationId& id, std::size_t max_result_bytes) {
  Result<StatusRecord> record = parts_.orchestrator->GetStatusRecord(id);
  if (!record.ok()) return record.status();
  FinalRead out{record.value(), std::nullopt};
  if (out.record.status != InvocationStatus::kSuccess || max_result_bytes == 0) return out;
  // A final status never changes, so the two reads need no common scope. A result
  // that cannot be read here is read (and its error reported) on its own later.
  Result<std::string> result = parts_.state_backend->GetResult(id);
  if (result.ok() && result.value().size() <= max_result_bytes) {
    out.result = std::move(result).value();
  }
  return out;
}

Result<std::optional<FinalWait>> PortLifecycle::WaitAnyFinal(const std::vector<InvocationId>& ids,
                                                             TimestampUs timeout_us,
                                                             std::size_t max_result_bytes) {
  Result<std::optional<InvocationId>> id = parts_.orchestrator->WaitAnyFinal(ids, timeout_us);
  if (!id.ok()) return id.status();
  if (!id.value()) return std::optional<FinalWait>();
  FinalWait out{*id.value(), std::nullopt};
  // A read that fails here is made again, and its error reported, by the caller.
  Result<FinalRead> read = ReadFinal(out.id, max_result_bytes);
  if (read.ok()) out.read = std::move(read).value();
  return std::optional<FinalWait>(std::move(out));
}

void PortLifecycle::SetTaskRunsFreely(const TaskId& task) {
  MutexLock lock(mu_);
  free_tasks_.insert(task.str());
}

bool PortLifecycle::RunsFreely(const TaskId& task) {
  MutexLock lock(mu_);
  return free_tasks_.contains(task.str());
}

std::vector<std::string> PortLifecycle::FreeTasks() {
  MutexLock lock(mu_);
  return {free_tasks_.begin(), free_tasks_.end()};
}

Status PortLifecycle::ClaimSteps(const InvocationId& id, const Actor& actor, bool start,
                                 ClaimOutcome* out) {
  *out = ClaimOutcome{};
  Result<StatusRecord> current = parts_.orchestrator->GetStatusRecord(id);
  if (!current.ok()) return current.status();
  out->record = current.value();
  if (!IsAvailableForRun(current.value().status)) {
    out->kind = ClaimKind::kNotAvailable;
    return Status::Ok();
  }
  Result<InvocationRecord> inv = parts_.state_backend->GetInvocation(id);
  if (!inv.ok()) return inv.status();
  out->invocation = inv.value();
  if (!RunsFreely(inv.value().task_id)) {
    out->kind = ClaimKind::kNeedsCheck;
    return Status::Ok();
  }
  Result<ChangeOutcome> changed =
      ChangeSteps(id, InvocationStatus::kPending, actor, inv.value().task_id, false);
  if (!changed.ok()) return changed.status();
  out->kind = ClaimKind::kClaimed;
  out->record = changed.value().record;
  out->status_watched = changed.value().status_watched;
  if (!start) return Status::Ok();
  changed = ChangeSteps(id, InvocationStatus::kRunning, actor, inv.value().task_id, false);
  if (!changed.ok()) return changed.status();
  out->kind = ClaimKind::kStarted;
  out->record = changed.value().record;
  return Status::Ok();
}

Result<ClaimOutcome> PortLifecycle::Claim(const InvocationId& id, const Actor& actor) {
  ClaimOutcome out;
  Status s = Atomically([&] { return ClaimSteps(id, actor, false, &out); });
  if (!s.ok()) return s;
  return out;
}

Result<ClaimOutcome> PortLifecycle::ClaimAndStart(const InvocationId& id, const Actor& actor) {
  ClaimOutcome out;
  Status s = Atomically([&] { return ClaimSteps(id, actor, true, &out); });
  if (!s.ok()) return s;
  return out;
}

TakenClaim PortLifecycle::Taken(const InvocationId& id, Result<ClaimOutcome> claim) {
  TakenClaim out{id, claim.status(), ClaimOutcome{}};
  if (claim.ok()) out.claim = std::move(claim).value();
  return out;
}

Result<std::optional<TakenClaim>> PortLifecycle::TakeAndStart(const std::string& queue,
                                                              std::int64_t timeout_ms,
                                                              const Actor& actor) {
  Result<std::optional<InvocationId>> got = parts_.broker->Retrieve(queue, timeout_ms);
  if (!got.ok()) return got.status();
  if (!got.value()) return std::optional<TakenClaim>();
  const InvocationId& id = *got.value();
  return std::optional<TakenClaim>(Taken(id, ClaimAndStart(id, actor)));
}

Status PortLifecycle::TakeClaimSteps(const std::string& queue, int max, const Actor& actor,
                                     bool strict, std::vector<TakenClaim>* out) {
  out->clear();
  while (static_cast<int>(out->size()) < max) {
    Result<std::optional<InvocationId>> got = parts_.broker->Retrieve(queue, 0);
    if (!got.ok()) return strict || out->empty() ? got.status() : Status::Ok();
    if (!got.value()) break;
    ClaimOutcome claim;
    Status claimed = ClaimSteps(*got.value(), actor, false, &claim);
    const bool more = claimed.ok() && claim.kind == ClaimKind::kClaimed;
    out->push_back(TakenClaim{*got.value(), claimed, std::move(claim)});
    if (!more) break;  // the caller handles this one as a take's, then takes again
  }
  return Status::Ok();
}

Result<std::vector<TakenClaim>> PortLifecycle::TakeAndClaim(const std::string& queue, int max,
                                                            const Actor& actor) {
  std::vector<TakenClaim> out;
  if (max <= 0) return out;
  Status s = Atomically([&] { return TakeClaimSteps(queue, max, actor, false, &out); });
  if (!s.ok()) return s;
  return out;
}

Result<FinishOutcome> PortLifecycle::Finish(const InvocationId& id, const std::string& payload,
                                            bool success, const Actor& actor, const TaskId& task,
                                            bool release_waiters) {
  FinishOutcome out;
  Status s = Atomically([&]() -> Status {
    Status stored = success ? parts_.state_backend->SetResult(id, payload)
                            : parts_.state_backend->SetException(id, payload);
    if (!stored.ok()) return stored;
    Result<ChangeOutcome> changed =
        ChangeSteps(id, success ? InvocationStatus::kSuccess : InvocationStatus::kFailed, actor,
                    task, release_waiters);
    if (!changed.ok()) return changed.status();
    out.change = changed.value();
    Result<bool> w = Watched(task, success ? names_.result : names_.exception);
    if (!w.ok()) return w.status();
    out.payload_watched = w.value();
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<FinishOutcome> PortLifecycle::FinishSuccess(const InvocationId& id,
                                                   const std::string& result, const Actor& actor,
                                                   const TaskId& task, bool release_waiters) {
  return Finish(id, result, true, actor, task, release_waiters);
}

Result<FinishOutcome> PortLifecycle::FinishFailure(const InvocationId& id,
                                                   const std::string& exception, const Actor& actor,
                                                   const TaskId& task, bool release_waiters) {
  return Finish(id, exception, false, actor, task, release_waiters);
}

Result<ChangeOutcome> PortLifecycle::ChangeAndRoute(const InvocationId& id, InvocationStatus to,
                                                    bool count_retry, const std::string& queue,
                                                    double priority, const Actor& actor,
                                                    const TaskId& task) {
  ChangeOutcome out;
  Status s = Atomically([&]() -> Status {
    Result<ChangeOutcome> changed = ChangeSteps(id, to, actor, task, false);
    if (!changed.ok()) return changed.status();
    out = changed.value();
    if (count_retry) {
      if (Status r = parts_.orchestrator->IncrementRetries(id); !r.ok()) return r;
    }
    return parts_.broker->Route({id}, queue, priority);
  });
  if (!s.ok()) return s;
  return out;
}

Result<ChangeOutcome> PortLifecycle::Retry(const InvocationId& id, const std::string& queue,
                                           double priority, const Actor& actor,
                                           const TaskId& task) {
  return ChangeAndRoute(id, InvocationStatus::kRetry, true, queue, priority, actor, task);
}

Result<ChangeOutcome> PortLifecycle::Reroute(const InvocationId& id, const std::string& queue,
                                             double priority, const Actor& actor,
                                             const TaskId& task) {
  return ChangeAndRoute(id, InvocationStatus::kRerouted, false, queue, priority, actor, task);
}

Result<std::vector<Recovered>> PortLifecycle::RecoverStale(RecoveryKind kind, TimestampUs limit_us,
                                                           const Actor& actor) {
  std::vector<Recovered> out;
  Status s = Atomically([&]() -> Status {
    out.clear();
    Result<std::vector<InvocationId>> stale =
        kind == RecoveryKind::kPending ? parts_.orchestrator->PendingForRecovery(limit_us)
                                       : parts_.orchestrator->RunningForRecovery(limit_us);
    if (!stale.ok()) return stale.status();
    const InvocationStatus to = kind == RecoveryKind::kPending ? InvocationStatus::kPendingRecovery
                                                               : InvocationStatus::kRunningRecovery;
    // RUNNING_RECOVERY overrides ownership, so the change alone would also take an
    // invocation that another runner recovered and started again since the query
    // (seen in the chaos suite: run twice). Each RUNNING one is read again first,
    // left alone when its owner now heartbeats, and changed fenced on the owner
    // read (TransitionStatusFromOwner): a restart by a live runner between that
    // read and the change makes the change fail, on every backend.
    std::set<std::string> live;
    if (kind == RecoveryKind::kRunning && !stale.value().empty()) {
      Result<std::vector<RunnerInfo>> active =
          parts_.orchestrator->ActiveRunners(limit_us, std::nullopt);
      if (!active.ok()) return active.status();
      for (const RunnerInfo& r : active.value()) live.insert(r.runner_id);
    }
    for (const InvocationId& id : stale.value()) {
      std::optional<std::string> owner;  // the owner found dead (kRunning)
      if (kind == RecoveryKind::kRunning) {
        Result<StatusRecord> now = parts_.orchestrator->GetStatusRecord(id);
        if (!now.ok()) {
          if (now.status().code() == ErrorCode::kNotFound) continue;
          return now.status();
        }
        if (now.value().status != InvocationStatus::kRunning ||
            (now.value().runner_id && live.count(*now.value().runner_id) > 0)) {
          continue;  // moved since the query, or now owned by a live runner
        }
        owner = now.value().runner_id;
      }
      Result<ChangeOutcome> changed =
          ChangeSteps(id, to, actor, std::nullopt, false,
                      kind == RecoveryKind::kRunning ? &owner : nullptr);
      if (!changed.ok()) {
        const ErrorCode code = changed.status().code();
        // Moved or purged by someone else since the query: nothing to recover.
        if (code == ErrorCode::kIllegalTransition || code == ErrorCode::kOwnershipViolation ||
            code == ErrorCode::kNotFound) {
          continue;
        }
        return changed.status();
      }
      out.push_back(Recovered{id, changed.value()});
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace native

Result<std::unique_ptr<Lifecycle>> OpenLifecycle(LifecycleParts parts, const BackendConfig& config,
                                                 TriggerContextNames names) {
  Result<std::shared_ptr<Storage>> storage = Storage::Open(config);
  if (!storage.ok()) return storage.status();
  return storage.value()->NewLifecycle(std::move(parts), std::move(names));
}

}  // namespace pynenc_cpp
