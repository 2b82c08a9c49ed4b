"""Orchestrator adapter: pynenc's ``BaseOrchestrator`` and ``BaseBlockingControl``
on the engine's orchestrator.

Everything pynenc's ``MemOrchestrator`` keeps in Python dicts (status records,
task/call/status/argument indexes, retries, auto-purge marks, the wait graph,
runner heartbeats, atomic-service execution rows) lives in one engine object;
these classes only convert values. History, triggers and routing stay with
``BaseOrchestrator`` exactly as for pynenc's own backends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING

from pynenc import context
from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.exceptions import InvocationStatusTransitionError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus, InvocationStatusRecord
from pynenc.orchestrator.atomic_service import ActiveRunnerInfo
from pynenc.orchestrator.base_orchestrator import BaseBlockingControl

from pynenc_cpp import _core, _live, _shortcuts, _submit, _trigger_runs
from pynenc_cpp._atomic_service import AtomicServiceExecutions
from pynenc_cpp._component import CppComponentMixin, MemBackend, RedisBackend, SqliteBackend
from pynenc_cpp._concurrency import ConcurrencyGate, Gated, GateStep
from pynenc_cpp._convert import (
    as_invocation_ids,
    from_us,
    seconds_to_us,
    status_from_value,
)
from pynenc_cpp._outage import Settled, ride_out
from pynenc_cpp._pending_reports import notes_reports
from pynenc_cpp.errors import (
    IllegalTransition,
    InvocationNotFound,
    OwnershipViolation,
    names_invocation,
    to_pynenc_status_error,
)

if TYPE_CHECKING:
    from pynenc import Pynenc
    from pynenc.call import Call
    from pynenc.identifiers.call_id import CallId
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.runner.runner_context import RunnerContext
    from pynenc.task import Task, TaskId
    from pynenc.types import Params, Result

_RecordTuple = tuple[str, "str | None", int]


def _record(raw: _RecordTuple) -> InvocationStatusRecord:
    value, runner_id, timestamp_us = raw
    return InvocationStatusRecord(status_from_value(value), runner_id, from_us(timestamp_us))


def _statuses(statuses: Sequence[InvocationStatus] | None) -> list[InvocationStatus]:
    return list(statuses) if statuses else []


class UnregisteredInvocationTransitionError(InvocationStatusTransitionError, KeyError):
    """A status transition was requested for an invocation the orchestrator does not know.

    It is the ``KeyError`` that ``BaseOrchestrator._atomic_status_transition``
    documents, and also what pynenc's ``MemOrchestrator`` raises (a transition from
    no status, only ``REGISTERED`` allowed), so callers that catch
    ``InvocationStatusError`` (e.g. a runner killing invocations after a purge)
    keep working.
    """

    def __init__(
        self,
        from_status: InvocationStatus | None,
        to_status: InvocationStatus,
        allowed_statuses: frozenset[InvocationStatus],
    ) -> None:
        InvocationStatusTransitionError.__init__(self, from_status, to_status, allowed_statuses)

    __str__ = Exception.__str__  # not KeyError's repr-quoting


@contextmanager
def _status_errors(status: InvocationStatus) -> Iterator[None]:
    """The engine's transition errors raised as pynenc's status errors (an unknown id
    as the transition error of an unregistered invocation)."""
    try:
        yield
    except (IllegalTransition, OwnershipViolation) as exc:
        raise to_pynenc_status_error(exc) from exc
    except InvocationNotFound as exc:
        raise UnregisteredInvocationTransitionError(
            from_status=None,
            to_status=InvocationStatus(status),
            allowed_statuses=frozenset({InvocationStatus.REGISTERED}),
        ) from exc


class CppBlockingControl(BaseBlockingControl):
    """Blocking control on the orchestrator's engine (the wait graph lives there).

    Stateless view: it shares the engine object of its ``CppMemOrchestrator``, so
    the blocking query can join waits with invocation statuses atomically.
    """

    def __init__(self, app: Pynenc, engine: _core.Orchestrator) -> None:
        self.app = app
        self._engine = engine

    def waiting_for_results(
        self,
        caller_invocation_id: InvocationId,
        result_invocation_ids: list[InvocationId],
    ) -> None:
        self._engine.waiting_for_results(caller_invocation_id, list(result_invocation_ids))

    def release_waiters(self, waited_invocation_id: InvocationId) -> None:
        """Drops the waits on a final invocation; idempotent, so a storage outage is
        ridden out (pynenc calls it between a final status and its history row)."""
        engine = self._engine
        orchestrator = self.app.orchestrator
        budget = orchestrator.outage_budget_sec if isinstance(orchestrator, CppOrchestrator) else 0
        ride_out(
            lambda: engine.release_waiters(waited_invocation_id),
            budget_sec=budget,
            what=f"invocation:{waited_invocation_id} release waiters",
        )

    def get_blocking_invocations(self, max_num_invocations: int) -> Iterator[InvocationId]:
        """Invocations waited on, not waiting, available to run; oldest first."""
        return iter(as_invocation_ids(self._engine.blocking_invocations(max_num_invocations)))


class CppOrchestrator(CppComponentMixin, AtomicServiceExecutions, ConcurrencyGate):
    """Native orchestrator (backend picked by the subclass: Mem or Sqlite).

    Status transitions are an atomic compare-and-set in C++ (validation,
    ownership and new owner computed under the engine's lock), and running
    concurrency control is checked in the same step as the claim and the start it
    guards (``ConcurrencyGate``). Thread-safe. Unknown invocation ids raise
    ``InvocationNotFound`` (a ``KeyError``).
    """

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        _ = self.outage_budget_sec  # a bad value is an error here, not at the first outage
        self._engine = self.storage.orchestrator()
        self._fence = threading.local()  # fenced_on_owner's owner, per thread
        self._blocking_control = CppBlockingControl(app, self._engine)

    def _remember_invocations(self, invocations: Sequence[DistributedInvocation]) -> None:
        """These invocation objects were handed out (``_live``: a result wait updates
        their status cache)."""
        self._live_registry.add(invocations)

    @cached_property
    def _live_registry(self) -> _live.Registry:
        """The app's ``_live`` registry (looked up once: the lookup is not free)."""
        return _live.registry(self.app)

    def _note_final(self, invocation_id: str) -> None:
        """A result wait (``CppRunner``) found ``invocation_id`` final: the invocation
        objects the app handed out for it (``_live``), if still held, get its final
        status in pynenc's status cache, as pynenc's own ``status`` read would put it.

        pynenc's ``invocation.result`` loops ``while not self.status.is_final()``, and
        ``status`` answers from the cache for ``cached_status_time`` (0.1 s by default)
        after the last read; without this, a wait that returned at once would be
        followed by that whole time of the cached non-final status. The status is read
        (in native mode served by what the wait read: no round trip) and only a final
        one is cached: a final status never changes.
        """
        invocations = self._live_registry.held(invocation_id)
        if not invocations:
            return
        status = self.get_invocation_status(InvocationId(invocation_id))
        if status.is_final():
            for invocation in invocations:
                invocation.update_status_cache(status)

    @property
    def blocking_control(self) -> CppBlockingControl:
        return self._blocking_control

    # ---- invocations -------------------------------------------------------

    def _route_new_call_invocation(
        self, call: Call[Params, Result], runner_id: str | None = None
    ) -> DistributedInvocation[Params, Result]:
        """pynenc's, with the invocation's id fixed when one is (the invocation a
        trigger run starts: ``_trigger_runs``), while pynenc's code this follows is
        its own (the ``native`` shortcut, ``_shortcuts``)."""
        if not _trigger_runs.is_fixed() or "native" not in _shortcuts.of_app(self.app):
            return super()._route_new_call_invocation(call, runner_id)
        return self._route_built(call, stored=False)

    def _route_built(
        self, call: Call[Params, Result], *, stored: bool
    ) -> DistributedInvocation[Params, Result]:
        """pynenc's ``_route_new_call_invocation`` with the invocation built by
        ``_submit.new_invocation`` (``stored``: not upserted by its constructor, the
        register's upsert being its only write)."""
        app_id = self.app.app_id
        new_invocation = _submit.new_invocation(
            call,
            parent_invocation=context.get_dist_invocation_context(app_id),
            parent_event_id=context.get_trigger_event_context(app_id),
            stored=stored,
        )
        self.register_new_invocations([new_invocation])
        conf = call.task.conf
        if (
            conf.registration_concurrency != ConcurrencyControlType.DISABLED
            or conf.running_concurrency != ConcurrencyControlType.DISABLED
        ):
            self.index_arguments_for_concurrency_control(new_invocation)
        logger = self.app.logger
        if logger.isEnabledFor(logging.INFO):
            logger.info(f"invocation:{new_invocation.invocation_id} ROUTED")
        return new_invocation

    def _register_new_invocations(
        self,
        invocations: list[DistributedInvocation[Params, Result]],
        runner_id: str | None = None,
    ) -> InvocationStatusRecord:
        rows = [
            (inv.invocation_id, inv.call.task.task_id.key, inv.call.call_id.key)
            for inv in invocations
        ]
        record = _record(self._engine.register(rows, runner_id))
        self._remember_invocations(invocations)
        return record

    # ---- status changes and their trigger reports ----------------------------
    # pynenc's, each change of a watched task to a final status (or RETRY) made under
    # a pending-report note, so a runner killed before its report does not lose it
    # (pynenc_cpp._pending_reports).

    @notes_reports("status")
    def set_invocation_status(
        self, invocation_id: InvocationId, status: InvocationStatus, runner_ctx: RunnerContext
    ) -> None:
        super().set_invocation_status(invocation_id, status, runner_ctx)

    @notes_reports("result")
    def set_invocation_result(
        self, invocation: DistributedInvocation, result: object, runner_ctx: RunnerContext
    ) -> None:
        super().set_invocation_result(invocation, result, runner_ctx)

    @notes_reports("exception")
    def set_invocation_exception(
        self, invocation: DistributedInvocation, exception: Exception, runner_ctx: RunnerContext
    ) -> None:
        super().set_invocation_exception(invocation, exception, runner_ctx)

    @contextmanager
    def fenced_on_owner(self, owner: str | None) -> Iterator[None]:
        """The status changes this thread makes inside (``set_invocation_status``) are
        applied only while the invocation is owned by ``owner`` (None: by no runner), in
        the engine's compare-and-set (``transition_from_owner``); otherwise pynenc's
        ``InvocationStatusOwnershipError`` and nothing changes. The fence of a recovery
        that found ``owner`` dead: RUNNING_RECOVERY overrides ownership, so without it a
        sweep would also take an invocation that another runner recovered and started
        again since the sweep looked (docs/reliability.md)."""
        self._fence.owner = (owner,)
        try:
            yield
        finally:
            self._fence.owner = None

    def _fenced_owner(self) -> tuple[str | None] | None:
        """``(owner,)`` inside ``fenced_on_owner`` on this thread, else None."""
        fenced: tuple[str | None] | None = getattr(self._fence, "owner", None)
        return fenced

    def _atomic_status_transition(
        self,
        invocation_id: InvocationId,
        status: InvocationStatus,
        runner_id: str | None = None,
    ) -> InvocationStatusRecord:
        done, record = self._take_gate_note(invocation_id, status, runner_id)
        if done:  # this thread's gate made the transition (ConcurrencyGate)
            return record
        engine = self._engine
        fenced = self._fenced_owner()

        def change() -> tuple[str, str | None, int]:
            if fenced is None:
                return engine.transition(invocation_id, status, runner_id)
            return engine.transition_from_owner(invocation_id, status, runner_id, fenced[0])

        with _status_errors(status):
            raw = self._status_ride_out(change, invocation_id, status, runner_id)
            if isinstance(raw, Settled):
                return self.get_invocation_status_record(invocation_id)
        return _record(raw)

    def _status_ride_out[T](
        self,
        change: Callable[[], T],
        invocation_id: InvocationId,
        status: InvocationStatus,
        runner_id: str | None,
    ) -> T | Settled:
        """``change`` (an engine transition of ``invocation_id`` to ``status``) ridden
        out through a storage outage: Settled when the status is found made."""
        return self._ride_out(
            change,
            f"invocation:{invocation_id} status {InvocationStatus(status).value}",
            settled=lambda: self._status_is(invocation_id, status, runner_id),
        )

    def _gated_step(self, step: GateStep) -> Gated:
        """``Orchestrator.gated_transition``; the record is noted for this thread's
        ``_atomic_status_transition`` (pynenc's ``set_invocation_status`` then writes
        the history row, reports to the trigger and logs). A deferral is left to the
        caller (``defer`` is not made here)."""
        engine = self._engine
        invocation, status, runner_ctx, key_args, blocking, index_args, _defer = step
        invocation_id = invocation.invocation_id
        runner_id = runner_ctx.runner_id
        task_key = invocation.task.task_id.key
        with _status_errors(status):
            out = self._status_ride_out(
                lambda: engine.gated_transition(
                    invocation_id, task_key, key_args, blocking, index_args, status, runner_id
                ),
                invocation_id,
                status,
                runner_id,
            )
        if isinstance(out, Settled):
            record = self.get_invocation_status_record(invocation_id)
        else:
            raw, blocker = out
            if blocker is not None:
                return Gated(str(blocker))
            record = _record(raw)
        self._note_gated(invocation_id, status, runner_id, record)
        return Gated(None)

    @names_invocation
    def get_invocation_status_record(self, invocation_id: InvocationId) -> InvocationStatusRecord:
        engine = self._engine
        return _record(
            self._retried(
                lambda: engine.status_record(invocation_id), f"invocation:{invocation_id}"
            )
        )

    def _status_is(
        self, invocation_id: InvocationId, status: InvocationStatus, runner_id: str | None
    ) -> bool:
        """Whether ``invocation_id`` now has ``status``, owned by ``runner_id`` or nobody
        (a write found already applied after a lost connection; see ``_outage``)."""
        record = self.get_invocation_status_record(invocation_id)
        return record.status == InvocationStatus(status) and record.runner_id in (None, runner_id)

    def filter_by_status(
        self,
        invocation_ids: list[InvocationId],
        status_filter: frozenset[InvocationStatus],
    ) -> list[InvocationId]:
        if not invocation_ids or status_filter is None:
            return []
        ids, statuses = list(invocation_ids), list(status_filter)
        return as_invocation_ids(
            self._retried(
                lambda: self._engine.filter_by_status(ids, statuses), "status filter read"
            )
        )

    def index_arguments_for_concurrency_control(
        self, invocation: DistributedInvocation[Params, Result]
    ) -> None:
        self._engine.index_arguments(
            invocation.invocation_id, dict(invocation.call.serialized_arguments)
        )

    def get_existing_invocations(
        self,
        task: Task[Params, Result],
        key_serialized_arguments: dict[str, str] | None = None,
        statuses: list[InvocationStatus] | None = None,
    ) -> Iterator[InvocationId]:
        key, args, wanted = (
            task.task_id.key,
            dict(key_serialized_arguments or {}),
            _statuses(statuses),
        )
        found = self._retried(
            lambda: self._engine.existing_invocations(key, args, wanted),
            f"existing invocations of task {key}",
        )
        return iter(as_invocation_ids(found))

    def get_task_invocation_ids(self, task_id: TaskId) -> Iterator[InvocationId]:
        return iter(as_invocation_ids(self._engine.task_invocations(task_id.key)))

    def get_call_invocation_ids(self, call_id: CallId) -> Iterator[InvocationId]:
        return iter(as_invocation_ids(self._engine.call_invocations(call_id.key)))

    def get_invocation_ids_paginated(
        self,
        task_id: TaskId | None = None,
        statuses: list[InvocationStatus] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[InvocationId]:
        task_key = task_id.key if task_id else None
        return as_invocation_ids(
            self._engine.list_invocations(task_key, _statuses(statuses), limit, offset)
        )

    def count_invocations(
        self,
        task_id: TaskId | None = None,
        statuses: list[InvocationStatus] | None = None,
    ) -> int:
        task_key = task_id.key if task_id else None
        return self._engine.count_invocations(task_key, _statuses(statuses))

    def increment_invocation_retries(self, invocation_id: InvocationId) -> None:
        self._engine.increment_retries(invocation_id)

    def get_invocation_retries(self, invocation_id: InvocationId) -> int:
        """Retries of the invocation; 0 for an unknown one, as pynenc's backends do."""
        try:
            return self._retried(lambda: self._engine.retries(invocation_id), "retries read")
        except InvocationNotFound:
            return 0

    def set_up_invocation_auto_purge(self, invocation_id: InvocationId) -> None:
        """Marks a final invocation for auto-purge; idempotent, so a storage outage is
        ridden out (pynenc calls it between a final status and its history row)."""
        engine = self._engine
        self._retried(
            lambda: engine.schedule_auto_purge(invocation_id),
            f"invocation:{invocation_id} auto-purge mark",
        )

    def auto_purge(self) -> None:
        """Forget final invocations marked ``auto_final_invocation_purge_hours`` ago.

        Their wait-graph edges go with them (pynenc's ``release_waiters``).
        """
        hours = self.conf.auto_final_invocation_purge_hours
        self._purging(lambda: self._engine.auto_purge(seconds_to_us(hours * 3600)))

    def purge(self) -> None:
        self._purging(self._engine.purge)

    def _purging(self, purge: Callable[[], object]) -> None:
        """Runs ``purge`` so that no status or result read before it or while it runs
        (with a wait, ahead, or with its status) is served after it."""
        forget = getattr(self.app.state_backend, "forget_prefetched", None)
        if forget is not None:
            forget()
        try:
            purge()
        finally:
            if forget is not None:
                forget()

    # ---- runners and recovery ---------------------------------------------

    def register_runner_heartbeats(
        self,
        runner_ids: list[str],
        can_run_atomic_service: bool = False,
        consumed_queues: Sequence[str] | None = None,
    ) -> None:
        queues = None if consumed_queues is None else list(consumed_queues)
        self._engine.register_heartbeats(list(runner_ids), can_run_atomic_service, queues)

    def deregister_runners(self, runner_ids: Sequence[str]) -> None:
        """Forgets each runner's heartbeat row: a runner that stopped gracefully, none
        of its invocations still running, is not listed as alive (``pynenc-cpp
        info``) for a dead-after time after it left. Not in pynenc's ABC."""
        self._engine.deregister_runners(list(runner_ids))

    def _get_active_runners(
        self, timeout_seconds: float, can_run_atomic_service: bool | None = None
    ) -> list[ActiveRunnerInfo]:
        rows = self._engine.active_runners(seconds_to_us(timeout_seconds), can_run_atomic_service)
        return [
            ActiveRunnerInfo(
                runner_id=runner_id,
                creation_time=from_us(creation_us),
                last_heartbeat=from_us(heartbeat_us),
                allow_to_run_atomic_service=allowed,
                consumed_queues=tuple(queues),
            )
            for runner_id, creation_us, heartbeat_us, allowed, queues in rows
        ]

    def get_pending_invocations_for_recovery(self) -> Iterator[InvocationId]:
        max_pending_us = seconds_to_us(self.app.conf.max_pending_seconds)
        return iter(as_invocation_ids(self._engine.pending_for_recovery(max_pending_us)))

    def _get_running_invocations_for_recovery(
        self, timeout_seconds: float
    ) -> Iterator[InvocationId]:
        return iter(
            as_invocation_ids(self._engine.running_for_recovery(seconds_to_us(timeout_seconds)))
        )

    def get_pending_invocations_of_dead_runners(self) -> Iterator[InvocationId]:
        """PENDING invocations claimed by a runner that heartbeated but has not for
        ``runner_considered_dead_after_minutes``: a dead runner's claims, recovered
        at dead-after time instead of after ``max_pending_seconds``. Not part of
        pynenc's ABC (``CppRunner``'s native recovery uses it)."""
        timeout_us = seconds_to_us(self.app.conf.runner_considered_dead_after_minutes * 60)
        return iter(as_invocation_ids(self._engine.pending_of_dead_runners(timeout_us)))


class CppMemOrchestrator(MemBackend, CppOrchestrator):
    """The native orchestrator on process-local memory (like pynenc's ``memory()``)."""


class CppSqliteOrchestrator(SqliteBackend, CppOrchestrator):
    """The native orchestrator on the app's SQLite file (``cpp_sqlite_path``)."""


class CppRedisOrchestrator(RedisBackend, CppOrchestrator):
    """The native orchestrator on the app's Redis server (``cpp_redis_url``)."""
