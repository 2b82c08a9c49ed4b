// _core.StateBackend: registrations and conversions only. Records cross the
// boundary as plain dicts / tuples of str, int and None; timestamps are int
// microseconds since the epoch; statuses are pynenc's string values.
#include "pynenc_cpp/ports/state_backend.h"

#include "conversions.h"
#include "init.h"
#include "records.h"

namespace pynenc_cpp::bindings {
namespace {

// --- conversions (GIL held) ------------------------------------------------

std::string RequiredStr(const py::dict& d, const char* what, const char* key) {
  if (!d.contains(key)) {
    throw py::key_error(std::string(what) + " is missing required field '" + key + "'");
  }
  py::handle value = d[key];
  if (!py::isinstance<py::str>(value)) {
    throw py::type_error(std::string(what) + " field '" + key + "' must be str, got " +
                         std::string(py::str(py::type::handle_of(value).attr("__name__"))));
  }
  return value.cast<std::string>();
}

std::optional<std::string> OptionalStr(const py::dict& d, const char* what, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return RequiredStr(d, what, key);
}

template <typename IdT>
std::optional<IdT> OptionalId(const py::dict& d, const char* what, const char* key) {
  auto value = OptionalStr(d, what, key);
  if (!value) return std::nullopt;
  return IdT(std::move(*value));
}

template <typename IdT>
py::object IdOrNone(const std::optional<IdT>& id) {
  return id ? py::cast(id->str()) : py::none();
}

}  // namespace

InvocationRecord InvocationFromDict(const py::dict& d) {
  constexpr const char* kWhat = "invocation record";
  InvocationRecord r;
  r.invocation_id = InvocationId(RequiredStr(d, kWhat, "invocation_id"));
  r.call_id = CallId(RequiredStr(d, kWhat, "call_id"));
  r.task_id = TaskId(RequiredStr(d, kWhat, "task_id"));
  r.arguments_id = RequiredStr(d, kWhat, "arguments_id");
  r.serialized_arguments = RequiredStr(d, kWhat, "serialized_arguments");
  r.parent_invocation_id = OptionalId<InvocationId>(d, kWhat, "parent_invocation_id");
  r.parent_event_id = OptionalStr(d, kWhat, "parent_event_id");
  if (auto workflow_id = OptionalStr(d, kWhat, "workflow_id")) {
    r.workflow = WorkflowRecord{WorkflowId(std::move(*workflow_id)),
                                TaskId(RequiredStr(d, kWhat, "workflow_type")),
                                OptionalId<WorkflowId>(d, kWhat, "parent_workflow_id")};
  }
  return r;
}

py::dict InvocationToDict(const InvocationRecord& r) {
  py::dict d;
  d["invocation_id"] = r.invocation_id.str();
  d["call_id"] = r.call_id.str();
  d["task_id"] = r.task_id.str();
  d["arguments_id"] = r.arguments_id;
  d["serialized_arguments"] = r.serialized_arguments;
  d["parent_invocation_id"] = IdOrNone(r.parent_invocation_id);
  d["parent_event_id"] = r.parent_event_id ? py::cast(*r.parent_event_id) : py::none();
  d["workflow_id"] = r.workflow ? py::cast(r.workflow->workflow_id.str()) : py::none();
  d["workflow_type"] = r.workflow ? py::cast(r.workflow->workflow_type.str()) : py::none();
  d["parent_workflow_id"] = r.workflow ? IdOrNone(r.workflow->parent_workflow_id) : py::none();
  return d;
}

namespace {

py::dict RunnerContextToDict(const RunnerContextRecord& r) {
  py::dict d;
  d["runner_id"] = r.runner_id.str();
  d["runner_cls"] = r.runner_cls;
  d["parent_runner_id"] = IdOrNone(r.parent_runner_id);
  d["pid"] = r.pid;
  d["hostname"] = r.hostname;
  d["thread_id"] = r.thread_id;
  return d;
}

py::list RunnerContextsToList(const std::vector<RunnerContextRecord>& records) {
  py::list out;
  for (const RunnerContextRecord& r : records) out.append(RunnerContextToDict(r));
  return out;
}

py::tuple WorkflowToTuple(const WorkflowRecord& w) {
  return py::make_tuple(w.workflow_id.str(), w.workflow_type.str(), IdOrNone(w.parent_workflow_id));
}

std::size_t BatchSize(std::int64_t batch_size) {
  if (batch_size <= 0) {
    throw EngineException(
        Status::InvalidArgument("batch_size must be > 0, got " + std::to_string(batch_size)));
  }
  return static_cast<std::size_t>(batch_size);
}

using Cursor = std::optional<std::tuple<std::int64_t, std::uint64_t>>;

}  // namespace

void InitStateBackend(py::module_& m) {
  py::class_<StateBackend, std::shared_ptr<StateBackend>>(
      m, "StateBackend",
      "Invocations, history, results, runner contexts and workflows of one app (thread-safe).\n"
      "Payloads are opaque strings serialized by the adapter; queried fields are indexed.")
      .def(OpenFromUri(&OpenStateBackend), py::arg("uri") = "memory://",
           py::arg("app_id") = "pynenc",
           "Opens the state backend named by `uri` for `app_id`. Raises BadConfig for an "
           "unusable URI.")
      // --- invocations
      .def(
          "upsert_invocations",
          [](StateBackend& sb, const py::list& records) {
            std::vector<InvocationRecord> converted;
            converted.reserve(records.size());
            for (py::handle item : records) {
              if (!py::isinstance<py::dict>(item)) {
                throw py::type_error("upsert_invocations expects a list of dicts");
              }
              converted.push_back(InvocationFromDict(py::reinterpret_borrow<py::dict>(item)));
            }
            WithoutGil([&] { return sb.UpsertInvocations(converted); });
          },
          py::arg("records"),
          "Inserts or replaces invocation records: dicts with str fields invocation_id, "
          "call_id,\ntask_id, arguments_id, serialized_arguments and optional "
          "parent_invocation_id,\nparent_event_id, workflow_id (then workflow_type required), "
          "parent_workflow_id.")
      .def(
          "get_invocation",
          [](StateBackend& sb, InvocationId id) {
            return InvocationToDict(WithoutGil([&] { return sb.GetInvocation(id); }));
          },
          py::arg("invocation_id"),
          "The record dict of `invocation_id`; raises InvocationNotFound (a KeyError) if unknown.")
      .def(
          "child_invocations",
          [](StateBackend& sb, InvocationId parent) {
            return WithoutGil([&] { return sb.ChildInvocations(parent); });
          },
          py::arg("parent_invocation_id"),
          "Ids whose parent is `parent_invocation_id`, in first-upsert order.")
      .def(
          "invocations_by_parent_event",
          [](StateBackend& sb, std::string event_id) {
            return WithoutGil([&] { return sb.InvocationsByParentEvent(event_id); });
          },
          py::arg("parent_event_id"),
          "Ids created by event `parent_event_id`, in first-upsert order.")
      .def(
          "invocation_ids_by_workflow",
          [](StateBackend& sb, std::optional<std::string> workflow_id,
             std::optional<std::string> workflow_type) {
            return WithoutGil(
                [&] { return sb.InvocationIdsByWorkflow(workflow_id, workflow_type); });
          },
          py::arg("workflow_id") = py::none(), py::arg("workflow_type") = py::none(),
          "Ids of invocations in a workflow, narrowed by the filters given (None/'' = any).")
      // --- history
      .def(
          "add_histories",
          [](StateBackend& sb, std::vector<InvocationId> ids, TimestampUs timestamp_us,
             InvocationStatus status, std::string history_json) {
            HistoryRecord record{InvocationId(), timestamp_us, status, std::move(history_json)};
            WithoutGil([&] { return sb.AddHistories(ids, record); });
          },
          py::arg("invocation_ids"), py::arg("timestamp_us"), py::arg("status"),
          py::arg("history_json"),
          "Adds one history entry to each id; same (id, timestamp, status) replaces the JSON.")
      .def(
          "get_history",
          [](StateBackend& sb, InvocationId id) {
            auto records = WithoutGil([&] { return sb.GetHistory(id); });
            std::vector<std::string> out;
            out.reserve(records.size());
            for (HistoryRecord& r : records) out.push_back(std::move(r.history_json));
            return out;
          },
          py::arg("invocation_id"),
          "History JSON strings of `invocation_id`, by timestamp then arrival; [] if none.")
      .def(
          "history_in_range",
          [](StateBackend& sb, TimestampUs start_us, TimestampUs end_us, Cursor after,
             std::int64_t batch_size) {
            const std::size_t limit = BatchSize(batch_size);
            std::optional<HistoryPosition> position;
            if (after) {
              position = HistoryPosition{std::get<0>(*after), std::get<1>(*after)};
            }
            HistoryPage page =
                WithoutGil([&] { return sb.HistoryInRange(start_us, end_us, position, limit); });
            std::vector<std::string> jsons;
            jsons.reserve(page.records.size());
            for (HistoryRecord& r : page.records) jsons.push_back(std::move(r.history_json));
            Cursor next;
            if (page.next) next = std::make_tuple(page.next->timestamp_us, page.next->sequence);
            return std::make_pair(std::move(jsons), next);
          },
          py::arg("start_us"), py::arg("end_us"), py::arg("after") = py::none(),
          py::arg("batch_size") = 100,
          "One page of history JSON with start_us <= timestamp <= end_us, ordered by time:\n"
          "returns (jsons, cursor); pass cursor back as `after` for the next page (None: done).")
      .def(
          "invocations_in_range",
          [](StateBackend& sb, TimestampUs start_us, TimestampUs end_us,
             std::optional<InvocationId> after, std::int64_t batch_size) {
            const std::size_t limit = BatchSize(batch_size);
            return WithoutGil(
                [&] { return sb.InvocationsInRange(start_us, end_us, after, limit); });
          },
          py::arg("start_us"), py::arg("end_us"), py::arg("after") = py::none(),
          py::arg("batch_size") = 100,
          "Up to batch_size distinct ids with history in [start_us, end_us], ascending, > after.")
      // --- results and exceptions
      .def(
          "set_result",
          [](StateBackend& sb, InvocationId id, std::string value) {
            WithoutGil([&] { return sb.SetResult(id, value); });
          },
          py::arg("invocation_id"), py::arg("serialized_result"), "Stores the serialized result.")
      .def(
          "get_result",
          [](StateBackend& sb, InvocationId id) {
            return WithoutGil([&] { return sb.GetResult(id); });
          },
          py::arg("invocation_id"),
          "The serialized result; raises InvocationNotFound (a KeyError) if none was set.")
      .def(
          "set_exception",
          [](StateBackend& sb, InvocationId id, std::string value) {
            WithoutGil([&] { return sb.SetException(id, value); });
          },
          py::arg("invocation_id"), py::arg("serialized_exception"),
          "Stores the serialized exception.")
      .def(
          "get_exception",
          [](StateBackend& sb, InvocationId id) {
            return WithoutGil([&] { return sb.GetException(id); });
          },
          py::arg("invocation_id"),
          "The serialized exception; raises InvocationNotFound (a KeyError) if none was set.")
      // --- runner contexts
      .def(
          "store_runner_context",
          [](StateBackend& sb, RunnerId runner_id, std::string runner_cls,
             std::optional<RunnerId> parent_runner_id, std::int64_t pid, std::string hostname,
             std::int64_t thread_id) {
            RunnerContextRecord record{std::move(runner_id),        std::move(runner_cls),
                                       std::move(parent_runner_id), pid,
                                       std::move(hostname),         thread_id};
            WithoutGil([&] { return sb.StoreRunnerContext(record); });
          },
          py::arg("runner_id"), py::arg("runner_cls"), py::arg("parent_runner_id"), py::arg("pid"),
          py::arg("hostname"), py::arg("thread_id"),
          "Inserts or replaces the runner context `runner_id`.")
      .def(
          "get_runner_context",
          [](StateBackend& sb, RunnerId runner_id) {
            return RunnerContextToDict(WithoutGil([&] { return sb.GetRunnerContext(runner_id); }));
          },
          py::arg("runner_id"),
          "The context dict (runner_id, runner_cls, parent_runner_id, pid, hostname, "
          "thread_id);\nraises InvocationNotFound (a KeyError) if unknown.")
      .def(
          "get_runner_contexts",
          [](StateBackend& sb, std::vector<RunnerId> runner_ids) {
            return RunnerContextsToList(
                WithoutGil([&] { return sb.GetRunnerContexts(runner_ids); }));
          },
          py::arg("runner_ids"), "Context dicts of the known ids, in request order.")
      .def(
          "match_runner_contexts",
          [](StateBackend& sb, std::string partial_id) {
            return RunnerContextsToList(
                WithoutGil([&] { return sb.MatchRunnerContexts(partial_id); }));
          },
          py::arg("partial_id"), "Context dicts whose runner_id contains `partial_id`, by id.")
      // --- app info
      .def(
          "store_app_info",
          [](StateBackend& sb, std::string app_id, std::string app_info_json) {
            WithoutGil([&] { return sb.StoreAppInfo(app_id, app_info_json); });
          },
          py::arg("app_id"), py::arg("app_info_json"),
          "Registers the app info JSON under `app_id` for discovery.")
      .def(
          "get_app_info",
          [](StateBackend& sb) { return WithoutGil([&] { return sb.GetAppInfo(); }); },
          "This app's info JSON; raises InvocationNotFound (a KeyError) if none is registered.")
      .def_static(
          "discover_app_infos",
          [](std::string uri) {
            auto pairs = WithoutGil([&] {
              return DiscoverAppInfos(BackendConfig{std::move(uri), "", nullptr});
            });
            py::dict out;
            for (auto& [app_id, json] : pairs) out[py::str(app_id)] = json;
            return out;
          },
          py::arg("uri") = "memory://",
          "{app_id: app_info_json} of every app registered in the storage named by `uri`.")
      // --- workflows
      .def(
          "store_workflow_run",
          [](StateBackend& sb, WorkflowId workflow_id, TaskId workflow_type,
             std::optional<WorkflowId> parent_workflow_id) {
            WorkflowRecord run{std::move(workflow_id), std::move(workflow_type),
                               std::move(parent_workflow_id)};
            WithoutGil([&] { return sb.StoreWorkflowRun(run); });
          },
          py::arg("workflow_id"), py::arg("workflow_type"),
          py::arg("parent_workflow_id") = py::none(),
          "Inserts or replaces the workflow run `workflow_id`.")
      .def(
          "workflow_types",
          [](StateBackend& sb) { return WithoutGil([&] { return sb.WorkflowTypes(); }); },
          "Distinct workflow type keys of the stored runs, ascending.")
      .def(
          "workflow_runs",
          [](StateBackend& sb, std::optional<TaskId> workflow_type) {
            auto runs = WithoutGil([&] { return sb.WorkflowRuns(workflow_type); });
            py::list out;
            for (const WorkflowRecord& run : runs) out.append(WorkflowToTuple(run));
            return out;
          },
          py::arg("workflow_type") = py::none(),
          "(workflow_id, workflow_type, parent_workflow_id | None) of the runs of "
          "`workflow_type`\n(every run when None), ascending by id.")
      .def(
          "store_workflow_sub_invocation",
          [](StateBackend& sb, WorkflowId workflow_id, InvocationId sub_invocation_id) {
            WithoutGil(
                [&] { return sb.StoreWorkflowSubInvocation(workflow_id, sub_invocation_id); });
          },
          py::arg("workflow_id"), py::arg("sub_invocation_id"),
          "Records that `sub_invocation_id` runs inside `workflow_id` (idempotent).")
      .def(
          "workflow_sub_invocations",
          [](StateBackend& sb, WorkflowId workflow_id) {
            return WithoutGil([&] { return sb.WorkflowSubInvocations(workflow_id); });
          },
          py::arg("workflow_id"), "Sub-invocation ids of `workflow_id`, in first-store order.")
      .def(
          "set_workflow_data",
          [](StateBackend& sb, WorkflowId workflow_id, std::string key, std::string value) {
            WithoutGil([&] { return sb.SetWorkflowData(workflow_id, key, value); });
          },
          py::arg("workflow_id"), py::arg("key"), py::arg("value"),
          "Stores the serialized `value` under (workflow_id, key).")
      .def(
          "get_workflow_data",
          [](StateBackend& sb, WorkflowId workflow_id, std::string key) {
            return WithoutGil([&] { return sb.GetWorkflowData(workflow_id, key); });
          },
          py::arg("workflow_id"), py::arg("key"),
          "The serialized value under (workflow_id, key); raises InvocationNotFound if none.")
      .def(
          "purge", [](StateBackend& sb) { WithoutGil([&] { return sb.Purge(); }); },
          "Drops every record of this backend except the app info registration.");
}

}  // namespace pynenc_cpp::bindings
