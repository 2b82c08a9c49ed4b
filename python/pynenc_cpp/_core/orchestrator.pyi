"""
Orchestrators: statuses, ownership, waits.
"""

from __future__ import annotations

import collections.abc
import typing

import pynenc_cpp._core

__all__: list[str] = ["Orchestrator"]

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
    def deregister_runners(self, runner_ids: collections.abc.Sequence[str]) -> None:
        """
        Forgets each runner's heartbeat row (a graceful stop); unknown ids are skipped.
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
    def gated_transition(
        self,
        invocation_id: str,
        task_key: str,
        key_arguments: collections.abc.Mapping[str, str],
        blocking: collections.abc.Sequence[str],
        index_arguments: collections.abc.Mapping[str, str],
        status: str,
        runner_id: str | None = None,
    ) -> tuple[typing.Any, typing.Any]:
        """
        pynenc's running concurrency control and the transition it guards, in one atomic
        step: indexes `index_arguments`, then, unless another invocation of the task whose
        indexed arguments match `key_arguments` has a status in `blocking`, transitions to
        `status`. Returns (record, blocker id | None): the new record, or (blocked) the
        current one. Raises InvocationNotFound, IllegalTransition or OwnershipViolation.
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
    ) -> pynenc_cpp._core.StatusRecord:
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
    def status_record(self, invocation_id: str) -> pynenc_cpp._core.StatusRecord:
        """
        The current status record. Raises InvocationNotFound for an unknown id.
        """
    def task_invocations(self, task_key: str) -> list[str]:
        """
        Every invocation of a task, in registration order.
        """
    def transition(
        self, invocation_id: str, status: str, runner_id: str | None = None
    ) -> pynenc_cpp._core.StatusRecord:
        """
        Atomically validates and applies a status transition; returns the new record.
        Raises InvocationNotFound, IllegalTransition or OwnershipViolation.
        """
    def transition_from_owner(
        self, invocation_id: str, status: str, runner_id: str | None, expected_owner: str | None
    ) -> pynenc_cpp._core.StatusRecord:
        """
        transition(), applied only while the invocation is owned by `expected_owner`
        (None: by no runner), in the same compare-and-set: the fence of a recovery that
        found that owner dead. Raises OwnershipViolation when it changed hands since,
        InvocationNotFound, IllegalTransition.
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
