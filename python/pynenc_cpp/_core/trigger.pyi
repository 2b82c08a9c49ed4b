"""
Trigger stores.
"""

from __future__ import annotations

import collections.abc
import typing

__all__: list[str] = ["TriggerStore"]

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
    def clear_pending_reports(self, note_ids: collections.abc.Sequence[str]) -> None:
        """
        Removes the named pending reports (unknown ignored).
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
    def note_pending_reports(self, notes: collections.abc.Sequence[tuple[str, str]]) -> None:
        """
        Stores or replaces each (note_id, json) pair, atomically: a status change
        whose trigger report is not made yet.
        """
    def nudge_valid_conditions_waiter(self, cursor: str) -> None:
        """
        Ends the current or next wait of `cursor` early (it returns woken).
        """
    def pending_reports(self) -> list[tuple[str, str]]:
        """
        (note_id, json) pairs of every pending report, ordered by id.
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
    def wait_valid_conditions(
        self, cursor: str, timeout_sec: typing.SupportsFloat | typing.SupportsIndex
    ) -> tuple[bool, str]:
        """
        (woken, cursor): blocks (GIL released) until valid conditions are recorded
        by any process after the previous call with `cursor` returned, or until
        `timeout_sec` passes. Start with cursor '' (that call arms the watch and
        returns at once) and pass the returned cursor to the next call.
        """
