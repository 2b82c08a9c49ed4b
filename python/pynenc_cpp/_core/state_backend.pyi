"""
State backends: records, results, history.
"""

from __future__ import annotations

import collections.abc
import typing

__all__: list[str] = ["StateBackend"]

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
