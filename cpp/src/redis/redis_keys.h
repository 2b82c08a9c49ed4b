// The layout of pynenc-cpp's Redis keys, in one place. Every key of one app's
// component starts with KeyPrefix(app_id, component); the rest is one of the
// names below, followed by an id for a name that ends in ':'.
//
// C++ spells a name keys::kInv. A Lua script spells it ${inv}: redis::Script
// replaces it with the quoted name ('inv:') when the script is built, so the
// script that runs is plain Lua and costs nothing more. A script gets the prefix
// of each component it touches (ARGV or KEYS) and appends the names to it.
// What each key holds is told beside the component's code (redis_broker.h,
// redis_orchestrator_impl.h, redis_state_backend.h, redis_trigger_store_impl.h,
// redis_generation_source.h, redis_fenced_store.h, redis_journal.h).
#pragma once

#include <string>
#include <string_view>

namespace pynenc_cpp::redis {

// X(C++ constant, Lua name, key name), grouped by the component whose prefix
// the key is under; a name two components use is listed once, at its first.
#define PYNENC_CPP_REDIS_KEY_NAMES(X)                                           \
  /* orchestrator: invocations, their indexes, waits, runners, services */      \
  X(kSeq, seq, "seq")  /* INCR counter; each component has its own */           \
  X(kInv, inv, "inv:") /* an invocation (the state backend's: its record) */    \
  X(kTask, task, "task:")                                                       \
  X(kCall, call, "call:")   /* an earlier layout's; unlinked when opened */     \
  X(kArg, arg, "arg:")                                                          \
  X(kArgs, args, "args:")                                                       \
  X(kTimes, times, "times") /* an earlier layout's; unlinked when opened */     \
  X(kStimes, stimes, "stimes:")                                                 \
  X(kTtimes, ttimes, "ttimes:") /* an earlier layout's; unlinked */           \
  X(kAll, all, "all")           /* an earlier layout's; unlinked when opened */ \
  X(kStatus, status, "status:") /* an earlier layout's; unlinked */             \
  X(kPurge, purge, "purge")                                                     \
  X(kWf, wf, "wf:")                                                             \
  X(kWb, wb, "wb:")                                                             \
  X(kWaited, waited, "waited")                                                  \
  X(kFw, fw, "fw:")                                                             \
  X(kNote, note, "note:")                                                       \
  X(kRunner, runner, "runner:")                                                 \
  X(kRunners, runners, "runners") /* also the state backend's contexts */       \
  X(kExec, exec, "exec:")                                                       \
  X(kExecs, execs, "execs")                                                     \
  X(kExecRunning, exec_running, "exec_running")                                 \
  X(kExecSeq, exec_seq, "exec_seq")                                             \
  /* state: records, results, history, workflows */                             \
  X(kResults, results, "results")                                               \
  X(kExceptions, exceptions, "exceptions")                                      \
  X(kHist, hist, "hist") /* layout 1's history values, still read */            \
  X(kHseq, hseq, "hseq")                                                        \
  X(kHtime, htime, "htime")                                                     \
  X(kHkey, hkey, "hkey:")                                                       \
  X(kHinv, hinv, "hinv:") /* an earlier layout's; unlinked */                   \
  X(kWftypes, wftypes, "wftypes")                                               \
  X(kWftypeOf, wftype_of, "wftype_of")                                          \
  X(kWfruns, wfruns, "wfruns")                                                  \
  X(kWfrunsT, wfruns_t, "wfruns_t:")                                            \
  X(kWfsub, wfsub, "wfsub:")                                                    \
  X(kWfdata, wfdata, "wfdata:")                                                 \
  X(kLayout, layout, "layout") /* the layout marker */                          \
  X(kIxParent, ix_parent, "ix:parent:")                                         \
  X(kIxEvent, ix_event, "ix:event:")                                            \
  X(kIxWf, ix_wf, "ix:wf:")                                                     \
  X(kIxWftype, ix_wftype, "ix:wftype:")                                         \
  X(kIxWfany, ix_wfany, "ix:wfany")                                             \
  /* broker: queues and deliveries */                                           \
  X(kQ, q, "q:")                                                                \
  X(kW, w, "w:")                                                                \
  X(kQueues, queues, "queues")                                                  \
  X(kConsumers, consumers, "consumers")                                         \
  X(kLease, lease, "lease:")                                                    \
  X(kProc, proc, "proc:")                                                       \
  X(kRecovery, recovery, "recovery")                                            \
  X(kTook, took, "took:")                                                       \
  X(kIntr, intr, "intr:")                                                       \
  /* trigger: conditions, triggers, events, runs */                             \
  X(kCond, cond, "cond")                                                        \
  X(kCondCtx, cond_ctx, "cond_ctx")                                             \
  X(kCondOrder, cond_order, "cond_order")                                       \
  X(kSrc, src, "src:")                                                          \
  X(kTrig, trig, "trig")                                                        \
  X(kTtask, ttask, "ttask:")                                                    \
  X(kCtrig, ctrig, "ctrig:")                                                    \
  X(kVc, vc, "vc")                                                              \
  X(kVcOrder, vc_order, "vc_order")                                             \
  X(kVcNote, vc_note, "vc_note:")                                               \
  X(kVcWaiters, vc_waiters, "vc_waiters")                                       \
  X(kCron, cron, "cron")                                                        \
  X(kClaim, claim, "claim:")                                                    \
  X(kEv, ev, "ev")                                                              \
  X(kEvTime, ev_time, "ev_time")                                                \
  X(kEvCode, ev_code, "ev_code:")                                               \
  X(kEvEmit, ev_emit, "ev_emit:")                                               \
  X(kEvCodes, ev_codes, "ev_codes")                                             \
  X(kLinks, links, "links:")                                                    \
  X(kRun, run, "run")                                                           \
  X(kRunTime, run_time, "run_time")                                             \
  X(kRunEv, run_ev, "run_ev:")                                                  \
  X(kRunInv, run_inv, "run_inv:")                                               \
  X(kRunSrc, run_src, "run_src:")                                               \
  X(kRunVc, run_vc, "run_vc:")                                                  \
  X(kAsr, asr, "asr")                                                           \
  X(kPendingReports, pending_reports, "pending_reports")                        \
  /* generation: the cluster's generation source */                             \
  X(kOwners, owners, "owners")                                                  \
  X(kSpecs, specs, "specs")                                                     \
  /* fenced: fenced values; journal: event-sourced entities */                  \
  X(kV, v, "v:")                                                                \
  X(kLog, log, "log:")                                                          \
  X(kFence, fence, "fence:")                                                    \
  X(kSnap, snap, "snap:")                                                       \
  /* client_data: pynenc's client data store */                                 \
  X(kData, data, "data")

namespace keys {

// The one key outside every app's prefix: the server-wide hash of app infos
// (app id -> JSON) that discovery reads.
inline constexpr char kAppInfos[] = "pynenc:app_infos";

// The components, each with its own prefix.
inline constexpr char kOrchestrator[] = "orchestrator";
inline constexpr char kState[] = "state";
inline constexpr char kBroker[] = "broker";
inline constexpr char kTrigger[] = "trigger";
inline constexpr char kGeneration[] = "generation";
inline constexpr char kFenced[] = "fenced";
inline constexpr char kJournal[] = "journal";
inline constexpr char kClientData[] = "client_data";

#define PYNENC_CPP_REDIS_KEY_CONSTANT(constant, lua, text) inline constexpr char constant[] = text;
PYNENC_CPP_REDIS_KEY_NAMES(PYNENC_CPP_REDIS_KEY_CONSTANT)
#undef PYNENC_CPP_REDIS_KEY_CONSTANT

}  // namespace keys

// The key layout this version writes, as the state backend's P layout marker
// holds it (docs/backends/redis.md, "Layout versions and upgrading").
inline constexpr char kCurrentLayout[] = "2";

// The key prefix of one component of one app: "pynenc:{app_id}:{component}:".
// The braces make every key of an app hash to one Redis Cluster slot.
std::string KeyPrefix(const std::string& app_id, const std::string& component);

// `script` with every ${name} replaced by that key name as a Lua string: ${inv}
// becomes 'inv:'. Throws std::invalid_argument naming a ${name} the layout
// does not have (a defect of the script, found when it is built).
std::string ExpandKeyNames(std::string_view script);

// `s` with the glob metacharacters of SCAN MATCH escaped, so it matches itself.
std::string GlobEscape(const std::string& s);

// The SCAN MATCH pattern of every key that starts with `prefix`.
inline std::string MatchPrefix(const std::string& prefix) { return GlobEscape(prefix) + "*"; }

}  // namespace pynenc_cpp::redis
