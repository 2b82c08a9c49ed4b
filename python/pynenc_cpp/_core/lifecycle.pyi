"""
Native mode's composite operations.
"""

from __future__ import annotations

import collections.abc
import typing

import pynenc_cpp._core
import pynenc_cpp._core.broker
import pynenc_cpp._core.orchestrator
import pynenc_cpp._core.state_backend
import pynenc_cpp._core.trigger

__all__: list[str] = ["Lifecycle", "history_json"]

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
        orchestrator: pynenc_cpp._core.orchestrator.Orchestrator,
        state_backend: pynenc_cpp._core.state_backend.StateBackend,
        broker: pynenc_cpp._core.broker.Broker,
        trigger: pynenc_cpp._core.trigger.TriggerStore,
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
    ) -> pynenc_cpp._core.Change:
        """
        pynenc's set_invocation_status in one call: transition, waiter release and
        auto-purge mark for a final status, history row. Returns a Change (record,
        status_watched).
        Raises InvocationNotFound, IllegalTransition or OwnershipViolation.
        """
    def claim(
        self, invocation_id: str, runner_id: str | None, runner_context_id: str, start: bool = False
    ) -> pynenc_cpp._core.Claim:
        """
        Claims one id taken from the broker: returns a Claim (kind, record, invocation dict |
        None, status_watched); kind is 'claimed' (now PENDING), 'not_available' or 'needs_check'
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
    ) -> pynenc_cpp._core.Finish:
        """
        pynenc's set_invocation_exception in one call: store the exception, then FAILED as
        change_status. Returns a Finish (record, status_watched, outcome_watched: the
        exception).
        """
    def finish_success(
        self,
        invocation_id: str,
        serialized_result: str,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
        release_waiters: bool = True,
    ) -> pynenc_cpp._core.Finish:
        """
        pynenc's set_invocation_result in one call: store the result, then SUCCESS as
        change_status. Returns a Finish (record, status_watched, outcome_watched: the result).
        """
    def gated_change(
        self,
        invocation_id: str,
        status: str,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
        key_arguments: collections.abc.Mapping[str, str],
        blocking: collections.abc.Sequence[str],
        index_arguments: collections.abc.Mapping[str, str],
        defer_path: collections.abc.Sequence[str] = [],
        defer_queue: str | None = None,
        defer_priority: typing.SupportsFloat | typing.SupportsIndex = 0.0,
        release_waiters: bool = True,
    ) -> tuple[typing.Any, bool, typing.Any, list]:
        """
        pynenc's running concurrency control and the status change it guards (a claim:
        PENDING unless another is PENDING or RUNNING; a start: RUNNING unless another is
        RUNNING) as one step, with the history row (one transaction on SQLite). Blocked,
        the invocation goes through `defer_path` (each status with its history row) and,
        with `defer_queue`, is routed there, in the same operation. Returns (record,
        status_watched, blocker id | None, [a Change of each deferral step]). Raises InvocationNotFound, IllegalTransition or OwnershipViolation.
        """
    def read_final(
        self,
        invocation_id: str,
        max_result_bytes: typing.SupportsInt | typing.SupportsIndex,
        arm: bool = False,
    ) -> tuple[typing.Any, typing.Any]:
        """
        (status record, serialized result | None): the result is there when the status
        is SUCCESS and the stored result is at most max_result_bytes long (one script on
        Redis). Raises InvocationNotFound for an unknown id. With arm=True, a status not
        final also registers this thread's next wait_any_final of the id (Redis: no
        registration round trip of its own when it follows within 5 s).
        """
    def read_final_ahead(
        self,
        invocation_id: str,
        ahead: collections.abc.Sequence[str],
        max_result_bytes: typing.SupportsInt | typing.SupportsIndex,
        arm: bool = False,
    ) -> tuple[typing.Any, typing.Any, list]:
        """
        read_final(invocation_id, arm=arm) and, when that status is final, read_final of
        each id of `ahead` whose status is final too, in one call (one script on Redis):
        returns (status record, serialized result | None, [(id, status record, serialized
        result | None) for each final ahead id]). Raises InvocationNotFound for an unknown
        invocation_id; unknown ahead ids are left out.
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
    ) -> pynenc_cpp._core.Change:
        """
        pynenc's register_new_invocations in one call: upsert the (record, queue, priority)
        items, register them, one REGISTERED history row each, route them. Returns
        a Change (record, status_watched).
        """
    def register_guarded(
        self,
        record: dict,
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex,
        key_arguments: collections.abc.Mapping[str, str],
        index_arguments: collections.abc.Mapping[str, str],
        runner_id: str | None,
        runner_context_id: str,
    ) -> tuple:
        """
        pynenc's route_call for a task with registration concurrency control, as one step:
        unless an invocation of the task whose indexed arguments match `key_arguments` is
        REGISTERED, register_and_route of this one record with `index_arguments` indexed.
        Returns (existing id, None, False) when one was found (nothing written), else
        (None, status record, status_watched).
        """
    def reroute(
        self,
        invocation_id: str,
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
    ) -> pynenc_cpp._core.Change:
        """
        One invocation of pynenc's reroute_invocations in one call: REROUTED (history),
        route to `queue` at `priority`. Returns a Change (record, status_watched).
        """
    def retry(
        self,
        invocation_id: str,
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
        task_key: str,
    ) -> pynenc_cpp._core.Change:
        """
        pynenc's set_invocation_retry in one call: RETRY (history), retries + 1, route to
        `queue` at `priority`. Returns a Change (record, status_watched).
        """
    def set_task_runs_freely(self, task_key: str) -> None:
        """
        Declares that the task has running concurrency control disabled, so claim moves
        its invocations to PENDING directly.
        """
    def take_and_claim(
        self,
        queue: str,
        max: typing.SupportsInt | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
    ) -> list:
        """
        A runner's prefetch: up to `max` ids of `queue` taken and claimed (claim(), no
        start) in one operation (one transaction on SQLite, one script on Redis), without
        waiting. Returns [(invocation_id, claim), ...] in queue order; the list ends at the
        first id not claimed at once (on Redis and SQLite left in the queue; in memory
        taken, with its claim tuple or the exception its claim raised). Raises when
        nothing could be taken for an error.
        """
    def take_and_start(
        self,
        queue: str,
        timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
        runner_id: str | None,
        runner_context_id: str,
    ) -> typing.Any:
        """
        The broker's retrieve from `queue` (waiting up to `timeout_sec`), then claim(...,
        start=True) of the id taken: one Lua script on Redis when the queue has an id.
        Returns None (nothing arrived) or (invocation_id, claim), claim being claim()'s
        tuple or, when the claim failed, the exception it raised (not raised: the id has
        left the queue, the caller routes it back). Raises when the retrieval failed.
        """
    def wait_any_final(
        self,
        invocation_ids: collections.abc.Sequence[str],
        timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
        max_result_bytes: typing.SupportsInt | typing.SupportsIndex,
    ) -> typing.Any:
        """
        The orchestrator's wait_any_final and read_final of the id it found, in one call
        (GIL released): None on timeout, else (invocation_id, status record | None,
        serialized result | None). The record is None when the wait could not read it
        (the caller reads it). On Redis the read costs no round trip of its own.
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
