// Bindings of the TriggerStore port (pynenc_cpp._core.TriggerStore).
// Registrations and conversions only. Values travel as plain Python values:
// ids and JSON as str, timestamps as int microseconds since the epoch (UTC),
// rows as tuples documented on each method.
#include <utility>

#include "conversions.h"
#include "init.h"
#include "pynenc_cpp/ports/trigger_store.h"

namespace pynenc_cpp::bindings {
namespace {

using OptStr = std::optional<std::string>;
using OptTime = std::optional<TimestampUs>;
// (trigger_id, task_id_key, condition_ids, logic, argument_provider_json)
using TriggerTuple =
    std::tuple<std::string, std::string, std::vector<std::string>, std::string, OptStr>;
// (event_id, event_code, timestamp_us, matched, triggered, emitted_by_invocation_id,
//  emitted_by_runner_context_id)
using MarkerTuple = std::tuple<std::string, std::string, TimestampUs, bool, bool, OptStr, OptStr>;

TriggerTuple ToTuple(TriggerDefinitionRow row) {
  return {std::move(row.trigger_id), std::move(row.task_id_key), std::move(row.condition_ids),
          std::move(row.logic), std::move(row.argument_provider_json)};
}

std::tuple<std::string, std::vector<std::string>> ToTuple(StoredEvent e) {
  return {std::move(e.json), std::move(e.triggered_invocation_ids)};
}

EventFilter MakeFilter(OptStr event_code, OptTime start_us, OptTime end_us,
                       std::optional<bool> matched, std::optional<bool> triggered,
                       OptStr emitted_by_invocation_id, OptStr emitted_by_task_id) {
  return EventFilter{std::move(event_code),
                     start_us,
                     end_us,
                     matched,
                     triggered,
                     std::move(emitted_by_invocation_id),
                     std::move(emitted_by_task_id)};
}

#define PYNENC_EVENT_FILTER_ARGS                                                       \
  py::kw_only(), py::arg("event_code") = py::none(), py::arg("start_us") = py::none(), \
                 py::arg("end_us") = py::none(), py::arg("matched") = py::none(),      \
                 py::arg("triggered") = py::none(),                                    \
                 py::arg("emitted_by_invocation_id") = py::none(),                     \
                 py::arg("emitted_by_task_id") = py::none()

void InitConditionsAndTriggers(py::class_<TriggerStore, std::shared_ptr<TriggerStore>>& c) {
  c.def(
       "register_condition",
       [](TriggerStore& s, std::string id, std::string json, std::string context_type) {
         WithoutGil([&] { return s.RegisterCondition(id, json, context_type); });
       },
       py::arg("condition_id"), py::arg("json"), py::arg("context_type"),
       "Stores or replaces a condition's JSON and context type name (cron time kept).")
      .def(
          "get_condition",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.GetCondition(id); });
          },
          py::arg("condition_id"), "The condition's JSON, or None if not registered.")
      .def(
          "all_conditions",
          [](TriggerStore& s) { return WithoutGil([&] { return s.AllConditions(); }); },
          "JSON of every condition, in registration order.")
      .def(
          "register_source_task_condition",
          [](TriggerStore& s, std::string task_key, std::string id) {
            WithoutGil([&] { return s.RegisterSourceTaskCondition(task_key, id); });
          },
          py::arg("task_id_key"), py::arg("condition_id"),
          "Records that the condition watches the task (idempotent).")
      .def(
          "conditions_sourced_from_task",
          [](TriggerStore& s, std::string task_key, OptStr context_type) {
            return WithoutGil([&] { return s.ConditionsSourcedFromTask(task_key, context_type); });
          },
          py::arg("task_id_key"), py::arg("context_type") = py::none(),
          "JSON of the registered conditions watching the task, optionally only those of\n"
          "one context type name.")
      .def(
          "register_trigger",
          [](TriggerStore& s, std::string trigger_id, std::string task_key,
             std::vector<std::string> condition_ids, std::string logic, OptStr provider) {
            TriggerDefinitionRow row{std::move(trigger_id), std::move(task_key),
                                     std::move(condition_ids), std::move(logic),
                                     std::move(provider)};
            WithoutGil([&] { return s.RegisterTrigger(row); });
          },
          py::arg("trigger_id"), py::arg("task_id_key"), py::arg("condition_ids"), py::arg("logic"),
          py::arg("argument_provider_json") = py::none(),
          "Stores or replaces a trigger definition and links it to its conditions.")
      .def(
          "get_trigger",
          [](TriggerStore& s, std::string id) -> std::optional<TriggerTuple> {
            auto row = WithoutGil([&] { return s.GetTrigger(id); });
            if (!row) return std::nullopt;
            return ToTuple(std::move(*row));
          },
          py::arg("trigger_id"),
          "(trigger_id, task_id_key, condition_ids, logic, argument_provider_json) or None.")
      .def(
          "triggers_for_condition",
          [](TriggerStore& s, std::string id) {
            auto rows = WithoutGil([&] { return s.TriggersForCondition(id); });
            std::vector<TriggerTuple> out;
            for (auto& row : rows) out.push_back(ToTuple(std::move(row)));
            return out;
          },
          py::arg("condition_id"), "Trigger tuples (see get_trigger) linked to the condition.")
      .def(
          "clean_task_triggers",
          [](TriggerStore& s, std::string task_key) {
            return WithoutGil([&] { return s.CleanTaskTriggers(task_key); });
          },
          py::arg("task_id_key"), "Removes every trigger of the task; returns how many.")
      .def(
          "record_valid_conditions",
          [](TriggerStore& s, std::vector<std::pair<std::string, std::string>> items) {
            std::vector<IdJson> rows;
            rows.reserve(items.size());
            for (auto& [id, json] : items) rows.push_back({std::move(id), std::move(json)});
            WithoutGil([&] { return s.RecordValidConditions(rows); });
          },
          py::arg("valid_conditions"),
          "Stores or replaces each (valid_condition_id, json) pair, atomically.")
      .def(
          "valid_conditions",
          [](TriggerStore& s) {
            auto rows = WithoutGil([&] { return s.ValidConditions(); });
            std::vector<std::pair<std::string, std::string>> out;
            for (auto& r : rows) out.emplace_back(std::move(r.id), std::move(r.json));
            return out;
          },
          "(valid_condition_id, json) pairs, in recording order.")
      .def(
          "clear_valid_conditions",
          [](TriggerStore& s, std::vector<std::string> ids) {
            WithoutGil([&] { return s.ClearValidConditions(ids); });
          },
          py::arg("valid_condition_ids"), "Removes the named valid conditions (unknown ignored).")
      .def(
          "note_pending_reports",
          [](TriggerStore& s, std::vector<std::pair<std::string, std::string>> items) {
            std::vector<IdJson> rows;
            rows.reserve(items.size());
            for (auto& [id, json] : items) rows.push_back({std::move(id), std::move(json)});
            WithoutGil([&] { return s.NotePendingReports(rows); });
          },
          py::arg("notes"),
          "Stores or replaces each (note_id, json) pair, atomically: a status change\n"
          "whose trigger report is not made yet.")
      .def(
          "pending_reports",
          [](TriggerStore& s) {
            auto rows = WithoutGil([&] { return s.PendingReports(); });
            std::vector<std::pair<std::string, std::string>> out;
            for (auto& r : rows) out.emplace_back(std::move(r.id), std::move(r.json));
            return out;
          },
          "(note_id, json) pairs of every pending report, ordered by id.")
      .def(
          "clear_pending_reports",
          [](TriggerStore& s, std::vector<std::string> ids) {
            WithoutGil([&] { return s.ClearPendingReports(ids); });
          },
          py::arg("note_ids"), "Removes the named pending reports (unknown ignored).")
      .def(
          "wait_valid_conditions",
          [](TriggerStore& s, std::string cursor, double timeout_sec) {
            const TimestampUs timeout_us = TimeoutMicros(timeout_sec);
            const bool woken =
                WithoutGil([&] { return s.WaitValidConditions(&cursor, timeout_us); });
            return std::make_pair(woken, cursor);
          },
          py::arg("cursor"), py::arg("timeout_sec"),
          "(woken, cursor): blocks (GIL released) until valid conditions are recorded\n"
          "by any process after the previous call with `cursor` returned, or until\n"
          "`timeout_sec` passes. Start with cursor '' (that call arms the watch and\n"
          "returns at once) and pass the returned cursor to the next call.")
      .def(
          "nudge_valid_conditions_waiter",
          [](TriggerStore& s, std::string cursor) {
            WithoutGil([&] { return s.NudgeValidConditionsWaiter(cursor); });
          },
          py::arg("cursor"), "Ends the current or next wait of `cursor` early (it returns woken).");
}

void InitCronAndClaims(py::class_<TriggerStore, std::shared_ptr<TriggerStore>>& c) {
  c.def(
       "last_cron_execution",
       [](TriggerStore& s, std::string id) {
         return WithoutGil([&] { return s.LastCronExecution(id); });
       },
       py::arg("condition_id"), "Last cron execution (int microseconds), or None.")
      .def(
          "store_last_cron_execution",
          [](TriggerStore& s, std::string id, TimestampUs execution_us, OptTime expected_us,
             bool unconditional) {
            CronExpectation expected = unconditional ? CronExpectation::Any()
                                       : expected_us ? CronExpectation::Value(*expected_us)
                                                     : CronExpectation::Absent();
            return WithoutGil([&] { return s.StoreLastCronExecution(id, execution_us, expected); });
          },
          py::arg("condition_id"), py::arg("execution_us"), py::arg("expected_us") = py::none(),
          py::kw_only(), py::arg("unconditional") = false,
          "Compare-and-set of the last cron execution. Stores and returns True iff the\n"
          "current value equals `expected_us` (None: no execution recorded yet), or\n"
          "always when `unconditional`. Otherwise returns False and changes nothing.")
      .def(
          "claim_trigger_run",
          [](TriggerStore& s, std::string id, std::int64_t expiration_seconds) {
            return WithoutGil([&] { return s.ClaimTriggerRun(id, expiration_seconds); });
          },
          py::arg("trigger_run_id"), py::arg("expiration_seconds") = 60,
          "True if this caller now holds the claim (until now + expiration_seconds);\n"
          "False while another unexpired claim exists.")
      .def(
          "purge", [](TriggerStore& s) { WithoutGil([&] { return s.Purge(); }); },
          "Drops all trigger data of this store.");
}

void InitEvents(py::class_<TriggerStore, std::shared_ptr<TriggerStore>>& c) {
  c.def(
       "store_event",
       [](TriggerStore& s, std::string event_id, std::string code, TimestampUs ts, std::string json,
          bool matched, OptStr by_inv, OptStr by_task, OptStr by_ctx,
          std::vector<std::string> triggered) {
         EventRow row{std::move(event_id), std::move(code),   ts,
                      std::move(json),     matched,           std::move(by_inv),
                      std::move(by_task),  std::move(by_ctx), std::move(triggered)};
         WithoutGil([&] { return s.StoreEvent(row); });
       },
       py::arg("event_id"), py::arg("event_code"), py::arg("timestamp_us"), py::arg("json"),
       py::kw_only(), py::arg("matched") = false, py::arg("emitted_by_invocation_id") = py::none(),
       py::arg("emitted_by_task_id") = py::none(),
       py::arg("emitted_by_runner_context_id") = py::none(),
       py::arg("triggered_invocation_ids") = std::vector<std::string>{},
       "Stores or replaces an event; links the given triggered invocations (kept links stay).")
      .def(
          "get_event",
          [](TriggerStore& s,
             std::string id) -> std::optional<std::tuple<std::string, std::vector<std::string>>> {
            auto e = WithoutGil([&] { return s.GetEvent(id); });
            if (!e) return std::nullopt;
            return ToTuple(std::move(*e));
          },
          py::arg("event_id"), "(json, triggered_invocation_ids) or None.")
      .def(
          "get_events",
          [](TriggerStore& s, OptStr code, OptTime start, OptTime end, std::optional<bool> matched,
             std::optional<bool> triggered, OptStr by_inv, OptStr by_task, std::int64_t limit,
             std::int64_t offset) {
            EventFilter f = MakeFilter(code, start, end, matched, triggered, by_inv, by_task);
            auto rows = WithoutGil([&] { return s.GetEvents(f, limit, offset); });
            std::vector<std::tuple<std::string, std::vector<std::string>>> out;
            for (auto& e : rows) out.push_back(ToTuple(std::move(e)));
            return out;
          },
          PYNENC_EVENT_FILTER_ARGS, py::arg("limit") = 100, py::arg("offset") = 0,
          "(json, triggered_invocation_ids) of the filtered events, newest first.\n"
          "Raises InvalidArgument for a negative limit or offset.")
      .def(
          "count_events",
          [](TriggerStore& s, OptStr code, OptTime start, OptTime end, std::optional<bool> matched,
             std::optional<bool> triggered, OptStr by_inv, OptStr by_task) {
            EventFilter f = MakeFilter(code, start, end, matched, triggered, by_inv, by_task);
            return WithoutGil([&] { return s.CountEvents(f); });
          },
          PYNENC_EVENT_FILTER_ARGS, "Number of events matching the filters of get_events.")
      .def(
          "event_markers",
          [](TriggerStore& s, TimestampUs start, TimestampUs end, OptStr code, std::string state,
             std::int64_t limit, std::int64_t offset) {
            EventMarkerState parsed = Unwrap(ParseEventMarkerState(state));
            auto page =
                WithoutGil([&] { return s.EventMarkers(start, end, code, parsed, limit, offset); });
            std::vector<MarkerTuple> markers;
            for (auto& m : page.markers) {
              markers.emplace_back(std::move(m.event_id), std::move(m.event_code), m.timestamp_us,
                                   m.matched, m.triggered, std::move(m.emitted_by_invocation_id),
                                   std::move(m.emitted_by_runner_context_id));
            }
            return std::make_tuple(std::move(markers), page.total, page.truncated);
          },
          py::arg("start_us"), py::arg("end_us"), py::kw_only(), py::arg("event_code") = py::none(),
          py::arg("state") = "all", py::arg("limit") = 1000, py::arg("offset") = 0,
          "(markers, total, truncated); each marker is (event_id, event_code, timestamp_us,\n"
          "matched, triggered, emitted_by_invocation_id, emitted_by_runner_context_id),\n"
          "oldest first. Raises InvalidArgument for an unknown state or a negative page.")
      .def(
          "event_codes", [](TriggerStore& s) { return WithoutGil([&] { return s.EventCodes(); }); },
          "Distinct event codes, sorted.")
      .def(
          "link_trigger_run_to_events",
          [](TriggerStore& s, std::vector<std::string> event_ids, std::string inv,
             std::string run_id) {
            WithoutGil([&] { return s.LinkTriggerRunToEvents(event_ids, inv, run_id); });
          },
          py::arg("event_ids"), py::arg("invocation_id"), py::kw_only(), py::arg("trigger_run_id"),
          "Links the invocation to each event once, atomically.")
      .def(
          "invocations_triggered_by_event",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.InvocationsTriggeredByEvent(id); });
          },
          py::arg("event_id"), "Invocation ids linked to the event, in link order.");
}

void InitRunsAndRetention(py::class_<TriggerStore, std::shared_ptr<TriggerStore>>& c) {
  c.def(
       "store_trigger_run",
       [](TriggerStore& s, std::string run_id, std::string trigger_id, std::string task_key,
          std::string logic, OptTime claimed, OptTime executed, OptStr triggered_inv,
          OptStr atomic_run, std::string json, std::vector<std::string> event_ids,
          std::vector<std::string> source_ids, std::vector<std::string> valid_ids) {
         TriggerRunRow row{std::move(run_id),
                           std::move(trigger_id),
                           std::move(task_key),
                           std::move(logic),
                           claimed,
                           executed,
                           std::move(triggered_inv),
                           std::move(atomic_run),
                           std::move(json),
                           std::move(event_ids),
                           std::move(source_ids),
                           std::move(valid_ids)};
         WithoutGil([&] { return s.StoreTriggerRun(row); });
       },
       py::arg("trigger_run_id"), py::arg("trigger_id"), py::arg("task_id_key"), py::arg("logic"),
       py::kw_only(), py::arg("claimed_at_us"), py::arg("executed_at_us"),
       py::arg("triggered_invocation_id"), py::arg("atomic_service_run_id"), py::arg("json"),
       py::arg("event_ids"), py::arg("source_invocation_ids"), py::arg("valid_condition_ids"),
       "Stores or replaces a trigger run and its relation indexes.")
      .def(
          "get_trigger_run",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.GetTriggerRun(id); });
          },
          py::arg("trigger_run_id"), "The run's JSON, or None.")
      .def(
          "runs_for_event",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.RunsForEvent(id); });
          },
          py::arg("event_id"), "JSON of the runs referencing the event, by run time.")
      .def(
          "runs_for_invocation",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.RunsForInvocation(id); });
          },
          py::arg("invocation_id"), "JSON of the runs that produced the invocation, by run time.")
      .def(
          "runs_sourced_by_invocation",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.RunsSourcedByInvocation(id); });
          },
          py::arg("invocation_id"),
          "JSON of the runs with the invocation as a source, by run time.")
      .def(
          "runs_for_valid_condition",
          [](TriggerStore& s, std::string id) {
            return WithoutGil([&] { return s.RunsForValidCondition(id); });
          },
          py::arg("valid_condition_id"), "JSON of the runs including the valid condition.")
      .def(
          "runs_in_time_range",
          [](TriggerStore& s, TimestampUs start, TimestampUs end, OptStr code, OptStr task_key,
             std::optional<std::int64_t> limit) {
            TriggerRunFilter f{start, end, std::move(code), std::move(task_key), limit};
            return WithoutGil([&] { return s.RunsInTimeRange(f); });
          },
          py::arg("start_us"), py::arg("end_us"), py::kw_only(), py::arg("event_code") = py::none(),
          py::arg("task_id_key") = py::none(), py::arg("limit") = py::none(),
          "JSON of the runs whose time (executed_at, else claimed_at) is in the window.")
      .def(
          "referenced_atomic_service_run_ids",
          [](TriggerStore& s) {
            return WithoutGil([&] { return s.ReferencedAtomicServiceRunIds(); });
          },
          "Distinct atomic_service_run_id values of the stored runs, sorted.")
      .def(
          "age_purge_events",
          [](TriggerStore& s, TimestampUs t) {
            return WithoutGil([&] { return s.AgePurgeEvents(t); });
          },
          py::arg("threshold_us"), "Deletes events older than the threshold; returns their ids.")
      .def(
          "age_purge_trigger_runs",
          [](TriggerStore& s, TimestampUs t) {
            return WithoutGil([&] { return s.AgePurgeTriggerRuns(t); });
          },
          py::arg("threshold_us"), "Deletes runs older than the threshold; returns the count.")
      .def(
          "cap_purge_events",
          [](TriggerStore& s, std::int64_t n) {
            return WithoutGil([&] { return s.CapPurgeEvents(n); });
          },
          py::arg("max_records"), "Keeps the newest max_records events; returns deleted ids.")
      .def(
          "cap_purge_trigger_runs",
          [](TriggerStore& s, std::int64_t n) {
            return WithoutGil([&] { return s.CapPurgeTriggerRuns(n); });
          },
          py::arg("max_records"), "Keeps the newest max_records runs; returns the count deleted.")
      .def(
          "cascade_delete_runs_for_events",
          [](TriggerStore& s, std::vector<std::string> ids) {
            return WithoutGil([&] { return s.CascadeDeleteRunsForEvents(ids); });
          },
          py::arg("event_ids"), "Deletes runs referencing any of the events; returns the count.");
}

#undef PYNENC_EVENT_FILTER_ARGS

}  // namespace

void InitTrigger(py::module_& m) {
  py::class_<TriggerStore, std::shared_ptr<TriggerStore>> c(m, "TriggerStore",
                             "Durable state of pynenc's trigger component (thread-safe):\n"
                             "conditions, triggers, valid conditions, cron times, claims,\n"
                             "events and trigger runs. Payloads are pynenc's JSON strings.");
  c.def(
      OpenFromUri(&OpenTriggerStore), py::arg("uri") = "memory://", py::arg("app_id") = "pynenc",
      "Opens the trigger store named by `uri` for `app_id`. Raises BadConfig for an unusable URI.");
  InitConditionsAndTriggers(c);
  InitCronAndClaims(c);
  InitEvents(c);
  InitRunsAndRetention(c);
}

}  // namespace pynenc_cpp::bindings
