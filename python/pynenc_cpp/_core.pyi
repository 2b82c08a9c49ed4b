"""
pynenc-cpp engine bindings (private; use the pynenc_cpp package).
"""

from __future__ import annotations

import collections.abc
import typing

__all__: list[str] = [
    "ActorSpec",
    "AgentFamily",
    "BackendConnectionError",
    "BackendError",
    "BadConfig",
    "Broker",
    "BufferFull",
    "ClientDataStore",
    "ClusterActivation",
    "ClusterHostedInstance",
    "ClusterMember",
    "ClusterMemberEvent",
    "ClusterNode",
    "ClusterNodeStatus",
    "ClusterOptions",
    "Conflict",
    "CoordinatorClusterView",
    "CoordinatorNodeView",
    "EngineError",
    "FencedStore",
    "Generation",
    "GenerationSource",
    "IllegalTransition",
    "InstanceContext",
    "InvalidArgument",
    "InvocationNotFound",
    "Journal",
    "LabelPlacement",
    "Lifecycle",
    "Orchestrator",
    "OwnershipViolation",
    "RunnerEngine",
    "SingletonSpec",
    "SpecStatus",
    "StaleGeneration",
    "StateBackend",
    "Timeout",
    "TriggerStore",
    "Unavailable",
    "apply_transition",
    "describe_backend",
    "engine_metrics",
    "gil_handovers",
    "history_json",
    "set_engine_metrics_enabled",
    "status_names",
    "status_table",
]

class EngineError(Exception):
    """
    Base class of every error raised by the pynenc-cpp engine.
    """

class InvocationNotFound(EngineError, KeyError):
    """
    An invocation, key or record named by the caller does not exist.
    """

class IllegalTransition(EngineError):
    """
    The invocation status machine forbids this transition.
    """

    from_status: str | None
    to_status: str
    allowed: list[str]
    reason: str

class OwnershipViolation(EngineError):
    """
    The status machine's runner-ownership rules forbid this change.
    """

    from_status: str
    to_status: str
    current_owner: str | None
    attempted_owner: str | None
    reason: str

class BackendError(EngineError, RuntimeError):
    """
    The storage backend failed (I/O, server, corrupt data).
    """

class BackendConnectionError(BackendError):
    """
    The connection to the storage server failed (refused, reset, timed out, still loading): the server may come back. maybe_applied: the command was sent on the lost connection, so it may or may not have been applied.
    """

    maybe_applied: bool

class BadConfig(EngineError, ValueError):
    """
    A configuration value is missing, malformed or unsupported.
    """

class InvalidArgument(EngineError, ValueError):
    """
    An argument is out of range or malformed.
    """

class Conflict(EngineError):
    """
    A compare-and-set lost: the stored value is not the expected one.
    """

class StaleGeneration(Conflict):
    """
    A write or command carries a generation below the one already stored.
    """

class Unavailable(EngineError, ConnectionError):
    """
    The cluster cannot serve the request now (no leader, no quorum).
    """

class Timeout(EngineError, TimeoutError):
    """
    No answer within the deadline.
    """

class BufferFull(EngineError):
    """
    A bounded buffer is full: the message was not queued.
    """

class Broker:
    """
    Queues of invocation ids by name and priority (thread-safe).
    Higher priority first; FIFO within one priority.
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the broker named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def count(self, queues: collections.abc.Sequence[str]) -> int:
        """
        Number of ids waiting in `queues`, summed.
        """
    def interrupt(self) -> None:
        """
        Wakes every retrieve() currently waiting; each returns None.
        """
    def purge(self) -> None:
        """
        Drops every queued id.
        """
    def retrieve(
        self, queue: str, timeout_seconds: typing.SupportsFloat | typing.SupportsIndex = 0.0
    ) -> str | None:
        """
        Pops the next id of `queue`, waiting up to `timeout_seconds` (GIL released) for one.
        Returns None if nothing arrived in time or interrupt() was called.
        """
    def route(
        self,
        invocation_ids: collections.abc.Sequence[str],
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex = 0.0,
    ) -> None:
        """
        Appends the ids, in order, to `queue` at `priority`; wakes waiting retrievers.
        """

class ClientDataStore:
    """
    Key -> serialized value store for large task data (thread-safe).
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the store named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def purge(self) -> None:
        """
        Removes every key.
        """
    def retrieve(self, key: str) -> str:
        """
        The value under `key`; raises InvocationNotFound (a KeyError) if none.
        """
    def store(self, key: str, value: str) -> None:
        """
        Stores `value` under `key`, replacing any old value.
        """

class Orchestrator:
    """
    Invocation status records and indexes, blocking control, runner heartbeats and
    atomic-service execution rows (thread-safe; every call is atomic).
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the orchestrator named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def active_atomic_service_executions(self) -> list:
        """
        Running executions, most recently started first.
        """
    def active_runners(
        self,
        timeout_us: typing.SupportsInt | typing.SupportsIndex,
        can_run_atomic_service: bool | None = None,
    ) -> list:
        """
        Runners with a heartbeat within timeout_us, by creation time then id.
        """
    def atomic_service_executions_in_range(
        self,
        start_us: typing.SupportsInt | typing.SupportsIndex,
        end_us: typing.SupportsInt | typing.SupportsIndex,
        limit: typing.SupportsInt | typing.SupportsIndex = 1000,
        runner_id: str | None = None,
        min_duration_us: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> list:
        """
        Executions overlapping [start_us, end_us], most recently started first.
        """
    def auto_purge(self, older_than_us: typing.SupportsInt | typing.SupportsIndex) -> list[str]:
        """
        Forgets every invocation marked at or before now - older_than_us; returns their ids.
        """
    def blocking_invocations(
        self, max_num_invocations: typing.SupportsInt | typing.SupportsIndex
    ) -> list[str]:
        """
        Up to max_num_invocations ids waited on, not waiting, available to run; oldest first.
        """
    def call_invocations(self, call_key: str) -> list[str]:
        """
        Every invocation of a call, in registration order.
        """
    def count_invocations(
        self, task_key: str | None = None, statuses: collections.abc.Sequence[str] = []
    ) -> int:
        """
        Number of matching invocations.
        """
    def existing_invocations(
        self,
        task_key: str,
        key_arguments: collections.abc.Mapping[str, str],
        statuses: collections.abc.Sequence[str],
    ) -> list[str]:
        """
        Invocations of a task matching every key argument and any of `statuses`
        (empty: no filter), in registration order.
        """
    def filter_by_status(
        self, invocation_ids: collections.abc.Sequence[str], statuses: collections.abc.Sequence[str]
    ) -> list[str]:
        """
        The ids whose status is in `statuses`, in input order; unknown ids left out.
        """
    def finalize_atomic_service(
        self,
        runner_id: str,
        run_id: str,
        end_us: typing.SupportsInt | typing.SupportsIndex,
        status: str,
        reason: str = "",
    ) -> None:
        """
        Moves a running execution to a terminal status (first finalisation wins).
        """
    def increment_retries(self, invocation_id: str) -> None:
        """
        Adds one retry. Raises InvocationNotFound for an unknown id.
        """
    def index_arguments(
        self, invocation_id: str, serialized_arguments: collections.abc.Mapping[str, str]
    ) -> None:
        """
        Indexes the serialized arguments of a registered invocation.
        """
    def list_invocations(
        self,
        task_key: str | None = None,
        statuses: collections.abc.Sequence[str] = [],
        limit: typing.SupportsInt | typing.SupportsIndex = 100,
        offset: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> list[str]:
        """
        A page of matching invocations, newest status first. Raises InvalidArgument for a
        negative limit or offset.
        """
    def pending_for_recovery(
        self, max_pending_us: typing.SupportsInt | typing.SupportsIndex
    ) -> list[str]:
        """
        PENDING invocations older than max_pending_us.
        """
    def pending_of_dead_runners(
        self, timeout_us: typing.SupportsInt | typing.SupportsIndex
    ) -> list[str]:
        """
        PENDING invocations claimed by a runner whose last heartbeat is older than
        timeout_us (an owner that never heartbeated is left to pending_for_recovery).
        """
    def purge(self) -> None:
        """
        Forgets every invocation, wait edge, runner and execution.
        """
    def purge_atomic_service_executions(
        self,
        retention_us: typing.SupportsInt | typing.SupportsIndex,
        max_records: typing.SupportsInt | typing.SupportsIndex,
        protected_run_ids: collections.abc.Sequence[str] = [],
    ) -> int:
        """
        Drops finished executions by age and count, sparing protected run ids; returns
        how many were dropped.
        """
    def record_atomic_service_start(
        self,
        runner_id: str,
        run_id: str,
        started_at_us: typing.SupportsInt | typing.SupportsIndex | None,
        status: str = "running",
        reason: str = "",
    ) -> tuple[bool, int]:
        """
        Inserts an execution row; for 'running' at most one may be active.
        Returns (accepted, started_at_us).
        """
    def register(
        self,
        invocations: collections.abc.Sequence[tuple[str, str, str]],
        runner_id: str | None = None,
    ) -> tuple:
        """
        Registers (invocation_id, task_key, call_key) triples not yet known as REGISTERED
        owned by `runner_id`; known ids are untouched. Returns the REGISTERED record.
        """
    def register_heartbeats(
        self,
        runner_ids: collections.abc.Sequence[str],
        can_run_atomic_service: bool = False,
        consumed_queues: collections.abc.Sequence[str] | None = None,
    ) -> None:
        """
        Creates or refreshes runner heartbeats (one timestamp for the batch).
        """
    def release_waiters(self, waited_invocation_id: str) -> None:
        """
        Drops every wait edge into and out of the invocation.
        """
    def retries(self, invocation_id: str) -> int:
        """
        The retry count. Raises InvocationNotFound for an unknown id.
        """
    def running_for_recovery(
        self, timeout_us: typing.SupportsInt | typing.SupportsIndex
    ) -> list[str]:
        """
        RUNNING invocations whose owner has no heartbeat within timeout_us.
        """
    def schedule_auto_purge(self, invocation_id: str) -> None:
        """
        Marks an invocation for auto_purge, stamped now. Raises InvocationNotFound.
        """
    def status_record(self, invocation_id: str) -> tuple:
        """
        The current status record. Raises InvocationNotFound for an unknown id.
        """
    def task_invocations(self, task_key: str) -> list[str]:
        """
        Every invocation of a task, in registration order.
        """
    def transition(self, invocation_id: str, status: str, runner_id: str | None = None) -> tuple:
        """
        Atomically validates and applies a status transition; returns the new record.
        Raises InvocationNotFound, IllegalTransition or OwnershipViolation.
        """
    def wait_any_final(
        self,
        invocation_ids: collections.abc.Sequence[str],
        timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
    ) -> str | None:
        """
        Blocks (GIL released) until one of `invocation_ids` has a final status or
        `timeout_sec` passed; returns the first final id in input order, or None on
        timeout. Returns at once if one is already final; timeout <= 0 is a single check.
        Unknown ids count as not final. Memory: woken by the finishing transition;
        SQLite and Redis: polls the status rows (pause: a quarter of the time waited,
        100 us to 2 ms).
        Raises InvalidArgument for an empty id list or a NaN timeout.
        """
    def waiting_for_results(
        self, caller_invocation_id: str, result_invocation_ids: collections.abc.Sequence[str]
    ) -> None:
        """
        Records that the caller waits for each of the result invocations.
        """

class StateBackend:
    """
    Invocations, history, results, runner contexts and workflows of one app (thread-safe).
    Payloads are opaque strings serialized by the adapter; queried fields are indexed.
    """
    @staticmethod
    def discover_app_infos(uri: str = "memory://") -> dict:
        """
        {app_id: app_info_json} of every app registered in the storage named by `uri`.
        """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the state backend named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def add_histories(
        self,
        invocation_ids: collections.abc.Sequence[str],
        timestamp_us: typing.SupportsInt | typing.SupportsIndex,
        status: str,
        history_json: str,
    ) -> None:
        """
        Adds one history entry to each id; same (id, timestamp, status) replaces the JSON.
        """
    def child_invocations(self, parent_invocation_id: str) -> list[str]:
        """
        Ids whose parent is `parent_invocation_id`, in first-upsert order.
        """
    def get_app_info(self) -> str:
        """
        This app's info JSON; raises InvocationNotFound (a KeyError) if none is registered.
        """
    def get_exception(self, invocation_id: str) -> str:
        """
        The serialized exception; raises InvocationNotFound (a KeyError) if none was set.
        """
    def get_history(self, invocation_id: str) -> list[str]:
        """
        History JSON strings of `invocation_id`, by timestamp then arrival; [] if none.
        """
    def get_invocation(self, invocation_id: str) -> dict:
        """
        The record dict of `invocation_id`; raises InvocationNotFound (a KeyError) if unknown.
        """
    def get_result(self, invocation_id: str) -> str:
        """
        The serialized result; raises InvocationNotFound (a KeyError) if none was set.
        """
    def get_runner_context(self, runner_id: str) -> dict:
        """
        The context dict (runner_id, runner_cls, parent_runner_id, pid, hostname, thread_id);
        raises InvocationNotFound (a KeyError) if unknown.
        """
    def get_runner_contexts(self, runner_ids: collections.abc.Sequence[str]) -> list:
        """
        Context dicts of the known ids, in request order.
        """
    def get_workflow_data(self, workflow_id: str, key: str) -> str:
        """
        The serialized value under (workflow_id, key); raises InvocationNotFound if none.
        """
    def history_in_range(
        self,
        start_us: typing.SupportsInt | typing.SupportsIndex,
        end_us: typing.SupportsInt | typing.SupportsIndex,
        after: tuple[
            typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex
        ]
        | None = None,
        batch_size: typing.SupportsInt | typing.SupportsIndex = 100,
    ) -> tuple[list[str], tuple[int, int] | None]:
        """
        One page of history JSON with start_us <= timestamp <= end_us, ordered by time:
        returns (jsons, cursor); pass cursor back as `after` for the next page (None: done).
        """
    def invocation_ids_by_workflow(
        self, workflow_id: str | None = None, workflow_type: str | None = None
    ) -> list[str]:
        """
        Ids of invocations in a workflow, narrowed by the filters given (None/'' = any).
        """
    def invocations_by_parent_event(self, parent_event_id: str) -> list[str]:
        """
        Ids created by event `parent_event_id`, in first-upsert order.
        """
    def invocations_in_range(
        self,
        start_us: typing.SupportsInt | typing.SupportsIndex,
        end_us: typing.SupportsInt | typing.SupportsIndex,
        after: str | None = None,
        batch_size: typing.SupportsInt | typing.SupportsIndex = 100,
    ) -> list[str]:
        """
        Up to batch_size distinct ids with history in [start_us, end_us], ascending, > after.
        """
    def match_runner_contexts(self, partial_id: str) -> list:
        """
        Context dicts whose runner_id contains `partial_id`, by id.
        """
    def purge(self) -> None:
        """
        Drops every record of this backend except the app info registration.
        """
    def set_exception(self, invocation_id: str, serialized_exception: str) -> None:
        """
        Stores the serialized exception.
        """
    def set_result(self, invocation_id: str, serialized_result: str) -> None:
        """
        Stores the serialized result.
        """
    def set_workflow_data(self, workflow_id: str, key: str, value: str) -> None:
        """
        Stores the serialized `value` under (workflow_id, key).
        """
    def store_app_info(self, app_id: str, app_info_json: str) -> None:
        """
        Registers the app info JSON under `app_id` for discovery.
        """
    def store_runner_context(
        self,
        runner_id: str,
        runner_cls: str,
        parent_runner_id: str | None,
        pid: typing.SupportsInt | typing.SupportsIndex,
        hostname: str,
        thread_id: typing.SupportsInt | typing.SupportsIndex,
    ) -> None:
        """
        Inserts or replaces the runner context `runner_id`.
        """
    def store_workflow_run(
        self, workflow_id: str, workflow_type: str, parent_workflow_id: str | None = None
    ) -> None:
        """
        Inserts or replaces the workflow run `workflow_id`.
        """
    def store_workflow_sub_invocation(self, workflow_id: str, sub_invocation_id: str) -> None:
        """
        Records that `sub_invocation_id` runs inside `workflow_id` (idempotent).
        """
    def upsert_invocations(self, records: list) -> None:
        """
        Inserts or replaces invocation records: dicts with str fields invocation_id, call_id,
        task_id, arguments_id, serialized_arguments and optional parent_invocation_id,
        parent_event_id, workflow_id (then workflow_type required), parent_workflow_id.
        """
    def workflow_runs(self, workflow_type: str | None = None) -> list:
        """
        (workflow_id, workflow_type, parent_workflow_id | None) of the runs of `workflow_type`
        (every run when None), ascending by id.
        """
    def workflow_sub_invocations(self, workflow_id: str) -> list[str]:
        """
        Sub-invocation ids of `workflow_id`, in first-store order.
        """
    def workflow_types(self) -> list[str]:
        """
        Distinct workflow type keys of the stored runs, ascending.
        """

class TriggerStore:
    """
    Durable state of pynenc's trigger component (thread-safe):
    conditions, triggers, valid conditions, cron times, claims,
    events and trigger runs. Payloads are pynenc's JSON strings.
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the trigger store named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def age_purge_events(
        self, threshold_us: typing.SupportsInt | typing.SupportsIndex
    ) -> list[str]:
        """
        Deletes events older than the threshold; returns their ids.
        """
    def age_purge_trigger_runs(
        self, threshold_us: typing.SupportsInt | typing.SupportsIndex
    ) -> int:
        """
        Deletes runs older than the threshold; returns the count.
        """
    def all_conditions(self) -> list[str]:
        """
        JSON of every condition, in registration order.
        """
    def cap_purge_events(self, max_records: typing.SupportsInt | typing.SupportsIndex) -> list[str]:
        """
        Keeps the newest max_records events; returns deleted ids.
        """
    def cap_purge_trigger_runs(self, max_records: typing.SupportsInt | typing.SupportsIndex) -> int:
        """
        Keeps the newest max_records runs; returns the count deleted.
        """
    def cascade_delete_runs_for_events(self, event_ids: collections.abc.Sequence[str]) -> int:
        """
        Deletes runs referencing any of the events; returns the count.
        """
    def claim_trigger_run(
        self,
        trigger_run_id: str,
        expiration_seconds: typing.SupportsInt | typing.SupportsIndex = 60,
    ) -> bool:
        """
        True if this caller now holds the claim (until now + expiration_seconds);
        False while another unexpired claim exists.
        """
    def clean_task_triggers(self, task_id_key: str) -> int:
        """
        Removes every trigger of the task; returns how many.
        """
    def clear_valid_conditions(self, valid_condition_ids: collections.abc.Sequence[str]) -> None:
        """
        Removes the named valid conditions (unknown ignored).
        """
    def conditions_sourced_from_task(
        self, task_id_key: str, context_type: str | None = None
    ) -> list[str]:
        """
        JSON of the registered conditions watching the task, optionally only those of
        one context type name.
        """
    def count_events(
        self,
        *,
        event_code: str | None = None,
        start_us: typing.SupportsInt | typing.SupportsIndex | None = None,
        end_us: typing.SupportsInt | typing.SupportsIndex | None = None,
        matched: bool | None = None,
        triggered: bool | None = None,
        emitted_by_invocation_id: str | None = None,
        emitted_by_task_id: str | None = None,
    ) -> int:
        """
        Number of events matching the filters of get_events.
        """
    def event_codes(self) -> list[str]:
        """
        Distinct event codes, sorted.
        """
    def event_markers(
        self,
        start_us: typing.SupportsInt | typing.SupportsIndex,
        end_us: typing.SupportsInt | typing.SupportsIndex,
        *,
        event_code: str | None = None,
        state: str = "all",
        limit: typing.SupportsInt | typing.SupportsIndex = 1000,
        offset: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> tuple[list[tuple[str, str, int, bool, bool, str | None, str | None]], int, bool]:
        """
        (markers, total, truncated); each marker is (event_id, event_code, timestamp_us,
        matched, triggered, emitted_by_invocation_id, emitted_by_runner_context_id),
        oldest first. Raises InvalidArgument for an unknown state or a negative page.
        """
    def get_condition(self, condition_id: str) -> str | None:
        """
        The condition's JSON, or None if not registered.
        """
    def get_event(self, event_id: str) -> tuple[str, list[str]] | None:
        """
        (json, triggered_invocation_ids) or None.
        """
    def get_events(
        self,
        *,
        event_code: str | None = None,
        start_us: typing.SupportsInt | typing.SupportsIndex | None = None,
        end_us: typing.SupportsInt | typing.SupportsIndex | None = None,
        matched: bool | None = None,
        triggered: bool | None = None,
        emitted_by_invocation_id: str | None = None,
        emitted_by_task_id: str | None = None,
        limit: typing.SupportsInt | typing.SupportsIndex = 100,
        offset: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> list[tuple[str, list[str]]]:
        """
        (json, triggered_invocation_ids) of the filtered events, newest first.
        Raises InvalidArgument for a negative limit or offset.
        """
    def get_trigger(self, trigger_id: str) -> tuple[str, str, list[str], str, str | None] | None:
        """
        (trigger_id, task_id_key, condition_ids, logic, argument_provider_json) or None.
        """
    def get_trigger_run(self, trigger_run_id: str) -> str | None:
        """
        The run's JSON, or None.
        """
    def invocations_triggered_by_event(self, event_id: str) -> list[str]:
        """
        Invocation ids linked to the event, in link order.
        """
    def last_cron_execution(self, condition_id: str) -> int | None:
        """
        Last cron execution (int microseconds), or None.
        """
    def link_trigger_run_to_events(
        self, event_ids: collections.abc.Sequence[str], invocation_id: str, *, trigger_run_id: str
    ) -> None:
        """
        Links the invocation to each event once, atomically.
        """
    def purge(self) -> None:
        """
        Drops all trigger data of this store.
        """
    def record_valid_conditions(
        self, valid_conditions: collections.abc.Sequence[tuple[str, str]]
    ) -> None:
        """
        Stores or replaces each (valid_condition_id, json) pair, atomically.
        """
    def referenced_atomic_service_run_ids(self) -> list[str]:
        """
        Distinct atomic_service_run_id values of the stored runs, sorted.
        """
    def register_condition(self, condition_id: str, json: str, context_type: str) -> None:
        """
        Stores or replaces a condition's JSON and context type name (cron time kept).
        """
    def register_source_task_condition(self, task_id_key: str, condition_id: str) -> None:
        """
        Records that the condition watches the task (idempotent).
        """
    def register_trigger(
        self,
        trigger_id: str,
        task_id_key: str,
        condition_ids: collections.abc.Sequence[str],
        logic: str,
        argument_provider_json: str | None = None,
    ) -> None:
        """
        Stores or replaces a trigger definition and links it to its conditions.
        """
    def runs_for_event(self, event_id: str) -> list[str]:
        """
        JSON of the runs referencing the event, by run time.
        """
    def runs_for_invocation(self, invocation_id: str) -> list[str]:
        """
        JSON of the runs that produced the invocation, by run time.
        """
    def runs_for_valid_condition(self, valid_condition_id: str) -> list[str]:
        """
        JSON of the runs including the valid condition.
        """
    def runs_in_time_range(
        self,
        start_us: typing.SupportsInt | typing.SupportsIndex,
        end_us: typing.SupportsInt | typing.SupportsIndex,
        *,
        event_code: str | None = None,
        task_id_key: str | None = None,
        limit: typing.SupportsInt | typing.SupportsIndex | None = None,
    ) -> list[str]:
        """
        JSON of the runs whose time (executed_at, else claimed_at) is in the window.
        """
    def runs_sourced_by_invocation(self, invocation_id: str) -> list[str]:
        """
        JSON of the runs with the invocation as a source, by run time.
        """
    def store_event(
        self,
        event_id: str,
        event_code: str,
        timestamp_us: typing.SupportsInt | typing.SupportsIndex,
        json: str,
        *,
        matched: bool = False,
        emitted_by_invocation_id: str | None = None,
        emitted_by_task_id: str | None = None,
        emitted_by_runner_context_id: str | None = None,
        triggered_invocation_ids: collections.abc.Sequence[str] = [],
    ) -> None:
        """
        Stores or replaces an event; links the given triggered invocations (kept links stay).
        """
    def store_last_cron_execution(
        self,
        condition_id: str,
        execution_us: typing.SupportsInt | typing.SupportsIndex,
        expected_us: typing.SupportsInt | typing.SupportsIndex | None = None,
        *,
        unconditional: bool = False,
    ) -> bool:
        """
        Compare-and-set of the last cron execution. Stores and returns True iff the
        current value equals `expected_us` (None: no execution recorded yet), or
        always when `unconditional`. Otherwise returns False and changes nothing.
        """
    def store_trigger_run(
        self,
        trigger_run_id: str,
        trigger_id: str,
        task_id_key: str,
        logic: str,
        *,
        claimed_at_us: typing.SupportsInt | typing.SupportsIndex | None,
        executed_at_us: typing.SupportsInt | typing.SupportsIndex | None,
        triggered_invocation_id: str | None,
        atomic_service_run_id: str | None,
        json: str,
        event_ids: collections.abc.Sequence[str],
        source_invocation_ids: collections.abc.Sequence[str],
        valid_condition_ids: collections.abc.Sequence[str],
    ) -> None:
        """
        Stores or replaces a trigger run and its relation indexes.
        """
    def triggers_for_condition(
        self, condition_id: str
    ) -> list[tuple[str, str, list[str], str, str | None]]:
        """
        Trigger tuples (see get_trigger) linked to the condition.
        """
    def valid_conditions(self) -> list[tuple[str, str]]:
        """
        (valid_condition_id, json) pairs, in recording order.
        """

class Lifecycle:
    """
    Native mode's composite operations over one app's components (thread-safe). On
    sqlite:// each operation is one transaction; on redis:// claim and finish are one
    Lua script in their common case; otherwise a sequence of atomic steps (see
    docs/native.md).
    """
    def __init__(
        self,
        uri: str,
        app_id: str,
        orchestrator: Orchestrator,
        state_backend: StateBackend,
        broker: Broker,
        trigger: TriggerStore,
        status_context: str,
        result_context: str,
        exception_context: str,
    ) -> None:
        """
        Builds the composite operations over the given component objects, opened on
        `uri` for `app_id`. `trigger` may be None (every watched flag is then True).
        The *_context names are the context types trigger conditions are registered
        under. Raises ValueError (InvalidArgument) for a missing component.
        """
    def change_status(
        self,
        invocation_id: str,
        status: str,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str | None = None,
        release_waiters: bool = True,
    ) -> tuple[tuple, bool]:
        """
        pynenc's set_invocation_status in one call: transition, waiter release and
        auto-purge mark for a final status, history row. Returns (record, status_watched).
        Raises InvocationNotFound, IllegalTransition or OwnershipViolation.
        """
    def claim(
        self, invocation_id: str, runner_id: str | None, runner_context_id: str, start: bool = False
    ) -> tuple[str, tuple, typing.Any, bool]:
        """
        Claims one id taken from the broker: returns (kind, record, invocation dict | None,
        status_watched); kind is 'claimed' (now PENDING), 'not_available' or 'needs_check'
        (its task may have running concurrency control: nothing changed). With start=True
        a claimed invocation moves on to RUNNING in the same operation (both history
        rows; one script on Redis, one transaction on SQLite): kind 'started' instead.
        """
    def finish_failure(
        self,
        invocation_id: str,
        serialized_exception: str,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
        release_waiters: bool = True,
    ) -> tuple[tuple, bool, bool]:
        """
        pynenc's set_invocation_exception in one call: store the exception, then FAILED as
        change_status. Returns (record, status_watched, exception_watched).
        """
    def finish_success(
        self,
        invocation_id: str,
        serialized_result: str,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
        release_waiters: bool = True,
    ) -> tuple[tuple, bool, bool]:
        """
        pynenc's set_invocation_result in one call: store the result, then SUCCESS as
        change_status. Returns (record, status_watched, result_watched).
        """
    def recover_stale(
        self,
        kind: str,
        limit_us: typing.SupportsInt | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
    ) -> list:
        """
        The recovery sweep: kind 'pending' moves invocations PENDING for longer than
        `limit_us` to PENDING_RECOVERY, 'running' moves RUNNING ones whose owner's last
        heartbeat is older than `limit_us` to RUNNING_RECOVERY (history rows written).
        Returns [(invocation_id, record, status_watched)].
        """
    def register_and_route(
        self, items: list, runner_id: str | None, runner_context_id: str
    ) -> tuple[tuple, bool]:
        """
        pynenc's register_new_invocations in one call: upsert the (record, queue, priority)
        items, register them, one REGISTERED history row each, route them. Returns
        (status record, status_watched).
        """
    def reroute(
        self,
        invocation_id: str,
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
    ) -> tuple[tuple, bool]:
        """
        One invocation of pynenc's reroute_invocations in one call: REROUTED (history),
        route to `queue` at `priority`. Returns (record, status_watched).
        """
    def retry(
        self,
        invocation_id: str,
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
    ) -> tuple[tuple, bool]:
        """
        pynenc's set_invocation_retry in one call: RETRY (history), retries + 1, route to
        `queue` at `priority`. Returns (record, status_watched).
        """
    def set_task_runs_freely(self, task_key: str) -> None:
        """
        Declares that the task has running concurrency control disabled, so claim moves
        its invocations to PENDING directly.
        """

class RunnerEngine:
    """
    The C++ loop of CppRunner: worker threads (one persistent Python thread state each)
    retrieving from an engine broker with the GIL released, a timer thread for
    heartbeats, management duties and the task-timeout watchdog. Thread-safe.
    """
    def __init__(
        self,
        broker: typing.Any,
        queues: collections.abc.Sequence[str],
        workers: typing.SupportsInt | typing.SupportsIndex,
        task_timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
        heartbeat_interval_sec: typing.SupportsFloat | typing.SupportsIndex,
        management_interval_sec: typing.SupportsFloat | typing.SupportsIndex,
        execute: typing.Any,
        retrieve_wait_sec: typing.SupportsFloat | typing.SupportsIndex = 0.5,
        idle_backoff_sec: typing.SupportsFloat | typing.SupportsIndex = 0.01,
        fallback_next: typing.Any = None,
        next_blocking: typing.Any = None,
        heartbeat: typing.Any = None,
        management: typing.Any = None,
        timed_out: typing.Any = None,
        thread_started: typing.Any = None,
        report_error: typing.Any = None,
    ) -> None:
        """
        Builds a stopped engine. `broker`: an engine Broker to block on over `queues`, or
        None to poll `fallback_next() -> str | None` (GIL held, `idle_backoff_sec` between
        empty answers). Hooks run on engine threads with the GIL: execute(id, claimed),
        next_blocking() -> str | None, heartbeat(), management(), timed_out(id, thread_ident),
        thread_started(worker_index), report_error(message). 0 disables an interval.
        """
    def abort(self) -> list:
        """
        Immediate stop: returns [(invocation_id, thread_ident)] of what was running.
        """
    def mark_waiting(self) -> bool:
        """
        From a task on one of this engine's workers: its worker waits for results and
        stops counting as a slot until the task returns. False off a worker thread.
        """
    def on_worker_thread(self) -> bool:
        """
        True when called from one of this engine's worker threads.
        """
    def running(self) -> list:
        """
        [(invocation_id, thread_ident)] being executed (timed-out ones excluded).
        """
    def start(self) -> None:
        """
        Starts the workers and the timer thread.
        """
    def stop(self) -> None:
        """
        Graceful stop: no more retrieval; running invocations finish.
        """
    def take_orphans(self) -> list[str]:
        """
        Invocation ids retrieved after abort() and not run; the caller routes them again.
        """
    def wait(
        self,
        timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
        slice_sec: typing.SupportsFloat | typing.SupportsIndex = 0.1,
    ) -> bool:
        """
        Waits (GIL released, signal handlers run between slices) until every worker and
        the timer exited after stop()/abort(). True if they did within `timeout_sec`.
        """
    @property
    def executed(self) -> int:
        """
        Invocations handed to execute() so far.
        """
    @property
    def live_workers(self) -> int:
        """
        Workers alive and not abandoned.
        """
    @property
    def state(self) -> str:
        """
        created, running, draining, stopped or aborted.
        """
    @property
    def waiting(self) -> int:
        """
        Workers whose task waits for results.
        """

class Generation:
    """
    A singleton/actor generation {term, seq}, ordered term-major; packs into one int (term << 32 | seq) for fenced writes.
    """
    @staticmethod
    def from_packed(packed: typing.SupportsInt | typing.SupportsIndex) -> Generation:
        """
        The generation of a packed value.
        """
    def __eq__(self, arg0: Generation) -> bool: ...
    def __ge__(self, arg0: Generation) -> bool: ...
    def __gt__(self, arg0: Generation) -> bool: ...
    def __hash__(self) -> int: ...
    def __init__(
        self,
        term: typing.SupportsInt | typing.SupportsIndex = 0,
        seq: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> None:
        """
        A generation from its parts.
        """
    def __le__(self, arg0: Generation) -> bool: ...
    def __lt__(self, arg0: Generation) -> bool: ...
    def __repr__(self) -> str: ...
    def __str__(self) -> str: ...
    @property
    def packed(self) -> int:
        """
        term << 32 | seq.
        """
    @property
    def seq(self) -> int:
        """
        Bumps on a re-grant to the same owner.
        """
    @property
    def term(self) -> int:
        """
        Bumps when ownership moves (failover, move).
        """

class ActorSpec:
    """
    An actor spec (built by pynenc_cpp.cluster.ActorSpec).
    """
    def __init__(self) -> None:
        """
        An empty spec; set the fields, then submit it.
        """
    @property
    def actor_type(self) -> str:
        """
        Registered actor type.
        """
    @actor_type.setter
    def actor_type(self, arg0: str) -> None: ...
    @property
    def anti_affinity_labels(self) -> list[str]:
        """
        Labels that must not run on the node.
        """
    @anti_affinity_labels.setter
    def anti_affinity_labels(self, arg1: collections.abc.Sequence[str]) -> None: ...
    @property
    def colocate_with(self) -> str | None:
        """
        Only the node that runs this label (hard).
        """
    @colocate_with.setter
    def colocate_with(self, arg1: str | None) -> None: ...
    @property
    def crash_strategy(self) -> str:
        """
        'redistribute', 'wait_for_return' or 'abandon'.
        """
    @crash_strategy.setter
    def crash_strategy(self, arg1: str) -> None: ...
    @property
    def initial_state(self) -> bytes:
        """
        State bytes.
        """
    @initial_state.setter
    def initial_state(self, arg1: bytes) -> None: ...
    @property
    def label(self) -> str:
        """
        Unique label.
        """
    @label.setter
    def label(self, arg0: str) -> None: ...
    @property
    def required_classes(self) -> list[str]:
        """
        Node classes allowed (empty: any).
        """
    @required_classes.setter
    def required_classes(self, arg1: collections.abc.Sequence[str]) -> None: ...
    @property
    def required_metadata(self) -> dict[str, str]:
        """
        Metadata pairs the node must have.
        """
    @required_metadata.setter
    def required_metadata(self, arg1: collections.abc.Mapping[str, str]) -> None: ...
    @property
    def required_node_id(self) -> str | None:
        """
        Exactly this node (hard pin, never relocated).
        """
    @required_node_id.setter
    def required_node_id(self, arg1: str | None) -> None: ...
    @property
    def strategy(self) -> str:
        """
        'default', 'least_loaded', 'random' or 'pinned'.
        """
    @strategy.setter
    def strategy(self, arg1: str) -> None: ...
    @property
    def strategy_node(self) -> str:
        """
        Pinned's preferred node.
        """
    @strategy_node.setter
    def strategy_node(self, arg1: str) -> None: ...
    @property
    def strategy_seed(self) -> int:
        """
        Random's seed.
        """
    @strategy_seed.setter
    def strategy_seed(self, arg1: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def wait_ms(self) -> int:
        """
        wait_for_return: how long to wait for the node, ms.
        """
    @wait_ms.setter
    def wait_ms(self, arg1: typing.SupportsInt | typing.SupportsIndex) -> None: ...

class SingletonSpec:
    """
    A singleton spec (built by pynenc_cpp.cluster.SingletonSpec).
    """
    def __init__(self) -> None:
        """
        An empty spec; set the fields, then submit it.
        """
    @property
    def actor_type(self) -> str:
        """
        Registered actor type.
        """
    @actor_type.setter
    def actor_type(self, arg0: str) -> None: ...
    @property
    def anchor(self) -> str:
        """
        'leader', 'class' or 'node'.
        """
    @anchor.setter
    def anchor(self, arg1: str) -> None: ...
    @property
    def anchor_value(self) -> str:
        """
        The class or node id of a class/node anchor.
        """
    @anchor_value.setter
    def anchor_value(self, arg1: str) -> None: ...
    @property
    def drain_timeout_ms(self) -> int:
        """
        How long a graceful move waits for the old owner to stop, ms.
        """
    @drain_timeout_ms.setter
    def drain_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def label(self) -> str:
        """
        Unique label.
        """
    @label.setter
    def label(self, arg0: str) -> None: ...
    @property
    def state(self) -> bytes:
        """
        State bytes.
        """
    @state.setter
    def state(self, arg1: bytes) -> None: ...

class AgentFamily:
    """
    An agent family as this node declares it.
    """
    def __init__(self) -> None:
        """
        An empty family; set the fields, then declare it.
        """
    @property
    def agents(self) -> list[str]:
        """
        Known agent URIs.
        """
    @agents.setter
    def agents(self, arg0: collections.abc.Sequence[str]) -> None: ...
    @property
    def distribution(self) -> str:
        """
        'evenly' or 'evenly_by_capability'.
        """
    @distribution.setter
    def distribution(self, arg1: str) -> None: ...
    @property
    def drain_timeout_ms(self) -> int:
        """
        How long a rebalancing move waits for the old owner, ms.
        """
    @drain_timeout_ms.setter
    def drain_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def scheme(self) -> str:
        """
        URI scheme of its agents.
        """
    @scheme.setter
    def scheme(self, arg0: str) -> None: ...
    @property
    def supported(self) -> list[str] | None:
        """
        URIs this node can run (None: all it knows).
        """
    @supported.setter
    def supported(self, arg0: collections.abc.Sequence[str] | None) -> None: ...

class InstanceContext:
    """
    What an actor factory receives.
    """
    @property
    def actor_type(self) -> str:
        """
        Actor type (agent: the scheme).
        """
    @property
    def generation(self) -> Generation:
        """
        The instance's generation: stamp fenced writes with generation.packed.
        """
    @property
    def kind(self) -> str:
        """
        'actor', 'singleton' or 'agent'.
        """
    @property
    def label(self) -> str:
        """
        The label (agent: its URI).
        """
    @property
    def node(self) -> str:
        """
        This node's id.
        """
    @property
    def state(self) -> bytes:
        """
        State bytes.
        """

class SpecStatus:
    """
    A managed label's status (leader's view).
    """
    @property
    def generation(self) -> Generation: ...
    @property
    def kind(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def node(self) -> str | None:
        """
        Current (or last) owner, or None.
        """
    @property
    def reason(self) -> str:
        """
        Why it is not running ('' when running).
        """
    @property
    def state(self) -> str:
        """
        'pending', 'running', 'waiting_for_return' or 'unplaced'.
        """

class CoordinatorNodeView:
    """
    One node as the leader sees it.
    """
    @property
    def actor_types(self) -> list[str]: ...
    @property
    def address(self) -> str: ...
    @property
    def alive(self) -> bool: ...
    @property
    def id(self) -> str: ...
    @property
    def incarnation(self) -> int: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def node_class(self) -> str: ...
    @property
    def running(self) -> list[str]:
        """
        Labels placed on the node.
        """
    @property
    def state(self) -> str: ...

class CoordinatorClusterView:
    """
    The leader's view of the cluster.
    """
    @property
    def alive_count(self) -> int: ...
    @property
    def leader(self) -> str | None: ...
    @property
    def nodes(self) -> list[CoordinatorNodeView]: ...
    @property
    def total_count(self) -> int: ...

class LabelPlacement:
    """
    Where a label runs (a node's directory copy).
    """
    @property
    def address(self) -> str: ...
    @property
    def generation(self) -> Generation: ...
    @property
    def kind(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def node(self) -> str | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def state(self) -> str: ...

class GenerationSource:
    """
    Mints generations and keeps specs (thread-safe; may block on I/O).
    """
    def __init__(self, uri: str = "memory://", namespace: str = "pynenc-cpp") -> None:
        """
        Opens the source named by `uri`; `namespace` (a cluster's name) separates data.
        """
    def claim_seq(self, label: str, owner: str, expected: Generation) -> Generation:
        """
        Re-grant to the current owner: seq + 1 iff ownership is exactly (owner, expected); raises Conflict otherwise.
        """
    def claim_term(
        self, label: str, owner: str, min_term: typing.SupportsInt | typing.SupportsIndex = 0
    ) -> Generation:
        """
        A new ownership epoch: term = max(current, min_term) + 1, seq 0.
        """
    def current(self, label: str) -> typing.Any:
        """
        (owner, Generation) of the label, or None.
        """
    def list(self) -> list:
        """
        Every stored spec: (label, spec bytes, owner or None, Generation or None).
        """
    @property
    def shared(self) -> bool:
        """
        True when other processes see the same data (SQLite, Redis).
        """

class FencedStore:
    """
    Key -> value store that rejects writes stamped with a generation lower than the stored one (thread-safe).
    """
    def __init__(self, uri: str = "memory://", namespace: str = "pynenc-cpp") -> None:
        """
        Opens the store named by `uri`.
        """
    def delete(self, key: str, generation: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Removes the value, keeping max(stored, generation) as a tombstone; raises StaleGeneration when the stored generation is higher.
        """
    def read(self, key: str) -> typing.Any:
        """
        (value bytes, packed generation), or None.
        """
    def write(
        self, key: str, value: bytes, generation: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Stores value under key stamped with the packed generation; raises StaleGeneration (nothing changed) when the stored generation is higher.
        """

class Journal:
    """
    Event log of event-sourced actors, per entity, fenced by generations like FencedStore (thread-safe; may block on I/O).
    """
    def __init__(self, uri: str = "memory://", namespace: str = "pynenc-cpp") -> None:
        """
        Opens the journal named by `uri`.
        """
    def append(
        self,
        entity: str,
        expected_seq: typing.SupportsInt | typing.SupportsIndex,
        generation: typing.SupportsInt | typing.SupportsIndex,
        events: collections.abc.Sequence[bytes],
    ) -> int:
        """
        Appends events as entries expected_seq+1.., all or none; returns the new last seq. Raises StaleGeneration when generation is below the entity's fence (checked first), Conflict when the last seq is not expected_seq.
        """
    def fence(self, entity: str, generation: typing.SupportsInt | typing.SupportsIndex) -> int:
        """
        Raises the entity's fence to generation (a new owner, before replaying); returns the last seq. Raises StaleGeneration when the fence is already higher.
        """
    def fence_of(self, entity: str) -> int:
        """
        The entity's fence, a packed generation (0: never written).
        """
    def last_seq(self, entity: str) -> int:
        """
        The entity's last seq (0: empty).
        """
    def load_snapshot(self, entity: str) -> typing.Any:
        """
        (seq, packed generation, state bytes) of the snapshot, or None.
        """
    def read(
        self,
        entity: str,
        after_seq: typing.SupportsInt | typing.SupportsIndex = 0,
        limit: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> list:
        """
        Entries with seq > after_seq in order, at most limit (0: all): [(seq, packed generation, payload bytes)].
        """
    def save_snapshot(
        self,
        entity: str,
        seq: typing.SupportsInt | typing.SupportsIndex,
        generation: typing.SupportsInt | typing.SupportsIndex,
        state: bytes,
    ) -> None:
        """
        Stores the state as of entry seq, fenced like append; ignored when a snapshot with a higher seq is stored. Raises InvalidArgument when seq is past the last seq.
        """

class ClusterMember:
    """
    One member as this node sees it (read-only snapshot).
    """
    @property
    def address(self) -> str:
        """
        'host:port' the member listens on.
        """
    @property
    def id(self) -> str:
        """
        Node id (lowercase hex; persistent with a state dir).
        """
    @property
    def incarnation(self) -> int:
        """
        SWIM incarnation number.
        """
    @property
    def metadata(self) -> dict[str, str]:
        """
        The member's key-value metadata.
        """
    @property
    def node_class(self) -> str:
        """
        The member's node class.
        """
    @property
    def started_at_ms(self) -> int:
        """
        Wall-clock ms at which the member's process started (join order).
        """
    @property
    def state(self) -> str:
        """
        'alive', 'suspect', 'dead' or 'left'.
        """

class ClusterMemberEvent:
    """
    A membership change seen by this node.
    """
    @property
    def kind(self) -> str:
        """
        'joined', 'suspected', 'alive_again', 'dead' or 'left'.
        """
    @property
    def member(self) -> ClusterMember:
        """
        The member record after the change.
        """

class ClusterActivation:
    """
    What the work start/stop callbacks receive.
    """
    @property
    def epoch(self) -> int:
        """
        The agreed membership epoch of the election.
        """
    @property
    def lease_until_mono_ms(self) -> int:
        """
        End of the mastership lease, CLOCK_MONOTONIC ms (0 in standalone mode).
        """
    @property
    def node(self) -> str:
        """
        This node's id.
        """
    @property
    def standalone(self) -> bool:
        """
        True without a cluster.
        """

class ClusterHostedInstance:
    """
    An instance this node hosts.
    """
    @property
    def generation(self) -> Generation: ...
    @property
    def kind(self) -> str:
        """
        'actor', 'singleton' or 'agent'.
        """
    @property
    def label(self) -> str: ...
    @property
    def phase(self) -> str:
        """
        'acquiring', 'starting', 'active' or 'stopping'.
        """

class ClusterNodeStatus:
    """
    A snapshot of this node's view.
    """
    @property
    def address(self) -> str:
        """
        'host:port' (empty in standalone mode).
        """
    @property
    def epoch(self) -> int:
        """
        The agreed epoch of the current view.
        """
    @property
    def has_quorum(self) -> bool:
        """
        Whether live members reach quorum.
        """
    @property
    def hosted(self) -> list[ClusterHostedInstance]:
        """
        Instances this node hosts, any phase.
        """
    @property
    def id(self) -> str:
        """
        This node's id.
        """
    @property
    def incarnation(self) -> int:
        """
        This node's incarnation.
        """
    @property
    def leader(self) -> str | None:
        """
        The elected node id, or None.
        """
    @property
    def lease_until_mono_ms(self) -> int:
        """
        This node's lease end, CLOCK_MONOTONIC ms (0: none).
        """
    @property
    def standalone(self) -> bool:
        """
        True without a cluster.
        """
    @property
    def state(self) -> str:
        """
        Supervisor state: 'standby', 'activating', 'master' or 'stopping'.
        """
    @property
    def transport(self) -> dict:
        """
        Transport counters (monotonic; all 0 in standalone mode): frames_sent, frames_received (socket traffic), frames_local (to itself), frames_dropped, sends_oversize, handshakes_rejected, frames_oversize, frames_malformed, records_rejected (sealed frames that did not open), connections_established, reconnect_attempts, links_expired.
        """

class ClusterOptions:
    """
    Options of ClusterNode.start (pynenc_cpp.cluster.ClusterConfig builds them; the engine validates them again).
    """
    def __init__(self) -> None:
        """
        The engine's defaults.
        """
    @property
    def activation_log(self) -> str:
        """
        JSON-lines activation log path ('': none).
        """
    @activation_log.setter
    def activation_log(self, arg0: str) -> None: ...
    @property
    def actor_buffer_limit(self) -> int:
        """
        Per label: actor messages sent and not yet acknowledged, at most.
        """
    @actor_buffer_limit.setter
    def actor_buffer_limit(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def actor_inbox_limit(self) -> int:
        """
        Messages waiting for this process's actor runtime, at most.
        """
    @actor_inbox_limit.setter
    def actor_inbox_limit(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def actor_resend_ms(self) -> int:
        """
        An unacknowledged label message is sent again after this, ms.
        """
    @actor_resend_ms.setter
    def actor_resend_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def cluster_name(self) -> str:
        """
        Cluster name.
        """
    @cluster_name.setter
    def cluster_name(self, arg0: str) -> None: ...
    @property
    def election(self) -> str:
        """
        'oldest', 'hrw' or 'lowest_address'.
        """
    @election.setter
    def election(self, arg1: str) -> None: ...
    @property
    def election_class(self) -> str:
        """
        Oldest election only: candidates restricted to this node class.
        """
    @election_class.setter
    def election_class(self, arg0: str) -> None: ...
    @property
    def generation_source(self) -> str:
        """
        memory://, sqlite:///path or redis://host:port/db.
        """
    @generation_source.setter
    def generation_source(self, arg0: str) -> None: ...
    @property
    def heartbeat_ms(self) -> int:
        """
        Probe period, ms.
        """
    @heartbeat_ms.setter
    def heartbeat_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def host(self) -> str:
        """
        Listen host ('' with no seeds: standalone).
        """
    @host.setter
    def host(self, arg0: str) -> None: ...
    @property
    def indirect_probes(self) -> int:
        """
        Members asked to ping-req before suspicion.
        """
    @indirect_probes.setter
    def indirect_probes(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def lease_ms(self) -> int:
        """
        Lease length, ms (0: suspect).
        """
    @lease_ms.setter
    def lease_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def leave_timeout_ms(self) -> int:
        """
        How long a graceful stop waits for its instances to be handed over, ms.
        """
    @leave_timeout_ms.setter
    def leave_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def max_frame_bytes(self) -> int:
        """
        Frame size limit.
        """
    @max_frame_bytes.setter
    def max_frame_bytes(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def metadata(self) -> dict[str, str]:
        """
        This node's key-value metadata.
        """
    @metadata.setter
    def metadata(self, arg0: collections.abc.Mapping[str, str]) -> None: ...
    @property
    def node_class(self) -> str:
        """
        This node's class.
        """
    @node_class.setter
    def node_class(self, arg0: str) -> None: ...
    @property
    def node_id(self) -> str:
        """
        This node's id ('': random, or the state dir's).
        """
    @node_id.setter
    def node_id(self, arg0: str) -> None: ...
    @property
    def placement(self) -> str:
        """
        Default placement strategy: 'least_loaded', 'random:<seed>' or 'pinned:<node id>'.
        """
    @placement.setter
    def placement(self, arg1: str) -> None: ...
    @property
    def port(self) -> int:
        """
        Listen port (0: ephemeral).
        """
    @port.setter
    def port(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def quorum(self) -> int:
        """
        Quorum (0: majority of seeds + self).
        """
    @quorum.setter
    def quorum(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def request_timeout_ms(self) -> int:
        """
        Default deadline of coordinator requests and asks, ms.
        """
    @request_timeout_ms.setter
    def request_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def secret(self) -> str:
        """
        Shared cluster secret.
        """
    @secret.setter
    def secret(self, arg0: str) -> None: ...
    @property
    def seeds(self) -> list[str]:
        """
        Seed addresses 'host:port'.
        """
    @seeds.setter
    def seeds(self, arg0: collections.abc.Sequence[str]) -> None: ...
    @property
    def send_queue_bound(self) -> int:
        """
        Frames queued per peer before dropping the oldest.
        """
    @send_queue_bound.setter
    def send_queue_bound(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def spawn_timeout_ms(self) -> int:
        """
        Spawn ack deadline before a re-send, ms (0: max(5000, 3 * lease)).
        """
    @spawn_timeout_ms.setter
    def spawn_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def stabilize_ms(self) -> int:
        """
        Time elected before starting the work, ms.
        """
    @stabilize_ms.setter
    def stabilize_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def state_dir(self) -> str:
        """
        Node id / peers dir ('': none).
        """
    @state_dir.setter
    def state_dir(self, arg0: str) -> None: ...
    @property
    def suspect_timeout_ms(self) -> int:
        """
        Suspect -> Dead timeout, ms.
        """
    @suspect_timeout_ms.setter
    def suspect_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...

class ClusterNode:
    """
    A running cluster node (use pynenc_cpp.cluster.run_cluster).
    """
    @staticmethod
    def start(
        options: ClusterOptions,
        start: typing.Any,
        stop: typing.Any,
        on_event: typing.Any = None,
        on_log: typing.Any = None,
    ) -> ClusterNode:
        """
        Validates the options, binds, joins the seeds and returns the running node. start(activation) and stop(activation, reason) run on the node's callback thread; on_event(event) and on_log(level, line) too (level: 0 debug, 1 info, 2 warning, 3 error; None: warnings and errors go to stderr). Raises BadConfig (bad option, unwritable state dir) or BackendError (address in use).
        """
    def ack_label(
        self,
        token: typing.SupportsInt | typing.SupportsIndex,
        outcome: typing.SupportsInt | typing.SupportsIndex,
    ) -> None:
        """
        Answers a label message: 0 processed, 1 duplicate, 2 not here, 3 rejected.
        """
    def ask(
        self, label: str, payload: bytes, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> bytes:
        """
        Sends bytes to the label's instance and returns its answer.
        """
    def directory(self) -> list[LabelPlacement]:
        """
        This node's copy of the directory.
        """
    def drain_inbox(self, max: typing.SupportsInt | typing.SupportsIndex = 1024) -> list:
        """
        Up to `max` waiting inbox items: (kind, label, generation, spec kind, actor type, payload, token); kind 0 start, 1 stop, 2 label message, 3 path message, 4 regrant.
        """
    def inbox_fd(self) -> int:
        """
        The inbox eventfd (readable while items wait); -1 standalone.
        """
    def instance_stopped(self, label: str, generation: Generation) -> None:
        """
        The runtime finished a stop item.
        """
    def lookup(self, label: str) -> LabelPlacement | None:
        """
        Where the label runs per this node's directory copy, or None.
        """
    def mail_stats(self) -> dict:
        """
        Actor message counters and the messages buffered per label.
        """
    def members(self) -> list[ClusterMember]:
        """
        Every known member, self included, dead and left ones too, sorted by id.
        """
    def query_statuses(
        self, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> list[SpecStatus]:
        """
        The leader's statuses of every managed label.
        """
    def query_view(
        self, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> CoordinatorClusterView:
        """
        The leader's cluster view.
        """
    def raise_generation_floor(self, label: str, floor: Generation) -> None:
        """
        The label's storage is fenced at `floor`, above its instance's generation: the node drops that instance and the leader claims a term above `floor`.
        """
    def register_actor_type(self, actor_type: str, factory: typing.Any) -> None:
        """
        factory(InstanceContext) -> object (optional methods stop(reason), on_generation(Generation), on_message(bytes) -> bytes), called on the callback thread. Raises InvalidArgument (bad name) or TypeError.
        """
    def register_agent_family(self, family: AgentFamily, factory: typing.Any) -> None:
        """
        Declares an agent family and the factory of its agents.
        """
    def register_inbox_actor_type(
        self, actor_type: str, stop_timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Offers an actor type whose instances the runtime runs through the inbox.
        """
    def remove_spec(
        self, label: str, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Removes a spec (its instance stops); raises InvocationNotFound if unknown.
        """
    def send_to_label(self, label: str, payload: bytes) -> int:
        """
        Reliable, in-order delivery to the label's instance; returns the message's sequence number; raises BufferFull when the label's buffer is full.
        """
    def send_to_path(self, address: str, path: str, payload: bytes) -> None:
        """
        Best effort to the local actor at `path` of the node at `address`.
        """
    def status(self) -> ClusterNodeStatus:
        """
        A snapshot of this node's status.
        """
    def stop(self) -> None:
        """
        Graceful: stops the work (waits for the stop callback), sends Leaving, shuts the transport down. Idempotent.
        """
    def submit_actor(
        self, spec: ActorSpec, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Submits an actor spec to the leader; raises InvalidArgument, Conflict, Unavailable, Timeout or BackendError.
        """
    def submit_singleton(
        self, spec: SingletonSpec, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Submits a singleton spec to the leader.
        """
    def tell(self, label: str, payload: bytes) -> None:
        """
        Fire and forget; raises Unavailable if the directory knows no running instance.
        """
    def unregister_actor_type(self, actor_type: str) -> None:
        """
        This node stops offering the type. Raises InvocationNotFound if not registered.
        """

def _close_python_gate() -> None:
    """
    Stops the native threads that call Python, before the interpreter finalizes.
    """

def apply_transition(
    current: str | None, current_owner: str | None, to: str, runner_id: str | None
) -> tuple[typing.Any, typing.Any]:
    """
    Applies the status machine to one transition without storing anything.
    Returns (new_status, new_owner); raises IllegalTransition or OwnershipViolation.
    """

def describe_backend(uri: str, app_id: str = "pynenc") -> dict:
    """
    What the backend `uri` names says about itself: {'backend': 'memory' | 'sqlite' |
    'redis', 'facts': [(name, value), ...], 'warnings': [...]} where each warning is a
    setting that can lose acknowledged work. Never creates an SQLite file; raises
    BadConfig for a bad URI or a missing file, BackendError when unreachable.
    """

def engine_metrics() -> dict:
    """
    A snapshot of this process's task-engine metrics (pynenc_cpp.metrics renders it):
    entered (status -> changes applied into it, registrations included), backend_errors,
    backend_errors_connection, redis_connections_opened, redis_connections_lost, and the
    queue_wait / run_time histograms (bounds_us, per-bucket counts with +Inf last, count,
    sum_us).
    """

def gil_handovers() -> dict:
    """
    How often this process handed the GIL over so far: ``engine_calls`` (binding calls
    that released it and took it back) and ``thread_entries`` (engine threads that took
    it to run Python: a runner worker running an invocation, a callback). Each is one
    GIL acquisition. For profiling (bench/profile_burst.py); never reset.
    """

def history_json(
    invocation_id: str,
    status: str,
    runner_id: str | None,
    timestamp_us: typing.SupportsInt | typing.SupportsIndex,
    runner_context_id: str,
    registered_by: str | None = None,
) -> str:
    """
    The history JSON the Lifecycle writes (pynenc's InvocationHistory.to_json layout).
    """

def set_engine_metrics_enabled(enabled: bool) -> None:
    """
    Turns the engine's metric counting on or off (on by default).
    """

def status_names() -> list:
    """
    Every invocation status the engine knows, as pynenc's string values.
    """

def status_table() -> dict:
    """
    The status machine as a dict: status (None = not registered yet) -> definition dict
    with allowed_transitions and the ownership flags, shaped like pynenc's StatusDefinition.
    """

__version__: str = "0.1.0"
