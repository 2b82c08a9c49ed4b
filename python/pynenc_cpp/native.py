"""Native mode: orchestrators whose hot path is one engine call per step.

``CppMemNativeOrchestrator``, ``CppSqliteNativeOrchestrator`` and
``CppRedisNativeOrchestrator`` are the mixed-mode orchestrators
(``pynenc_cpp.orchestrator``) with pynenc's ``BaseOrchestrator`` hot-path
methods overridden by the engine's composite operations (``_core.Lifecycle``):

=================================== ==========================================
pynenc method                        one engine call
=================================== ==========================================
register_new_invocations             upsert + register + history + route
set_invocation_status                transition + waiters + auto-purge + history
get_additional_invocations_to_run    per id: status check + lookup + PENDING + history
set_invocation_result / _exception   store + SUCCESS / FAILED (as above)
set_invocation_retry                 RETRY + history + retries + 1 + route
reroute_invocations                  per id: REROUTED + history + route
claim_for_run (CppRunner)            status check + lookup + PENDING + RUNNING + history
get_invocation_status_record         status record + (SUCCESS) result, kept for get_result
=================================== ==========================================

``claim_for_run(..., start=True)`` (what ``CppRunner`` asks) also makes the first
storage step of pynenc's ``DistributedInvocation.run``, the move to RUNNING, in the
claim's own engine call, for a task that runs freely (the only kind the claim moves
by itself), while the run-time concurrency check is pynenc's own (which always
authorizes such a task). ``run`` still calls ``set_invocation_status(RUNNING)``; on
the same thread, for that invocation, the call then does only what is left of it:
the log line and the trigger report. ``CppRunner`` runs what it claimed with
``run_invocation``, pynenc's ``run`` step for step with less Python between the
steps.

Every side effect of pynenc's implementation is kept: the same history rows,
waiter release, auto-purge marks, routing, log lines, and trigger reporting.
Trigger reporting stays pynenc's Python code; the composite tells whether a
trigger condition of the right context type watches the task, and the report is
skipped only when none does (pynenc's report would then evaluate nothing).

The native path is taken when the app's state backend and broker (and, for the
cheap trigger check, its trigger) are pynenc-cpp components of the same backend;
otherwise, or with ``cpp_native=False`` in the config, every method falls back
to ``BaseOrchestrator``'s own code (mixed mode).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pynenc import context
from pynenc.call import LazyCall
from pynenc.conf.config_broker import validate_priority
from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.exceptions import InvocationConcurrencyWithDifferentArgumentsError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.dist_invocation import (
    DistributedInvocation,
    ReusedInvocation,
    TaskInvocation,
    WorkflowInvocation,
)
from pynenc.invocation.status import InvocationStatus, InvocationStatusRecord
from pynenc.orchestrator.base_orchestrator import BaseOrchestrator
from pynenc.runner.base_runner import ExternalRunner
from pynenc.runner.runner_context import RunnerContext
from pynenc.task import Task
from pynenc.trigger.conditions import ExceptionContext, ResultContext, StatusContext
from pynenc.workflow.workflow_identity import WorkflowIdentity

from pynenc_cpp import _core, _shortcuts
from pynenc_cpp._component import MemBackend, RedisBackend, SqliteBackend
from pynenc_cpp._concurrency import Gated
from pynenc_cpp._outage import Settled
from pynenc_cpp._pending_reports import notes_reports
from pynenc_cpp._pick import PicksInvocations
from pynenc_cpp._read_ahead import ReadAhead
from pynenc_cpp._run import _PYNENC_CALL_FROM_DTO, _PYNENC_INV_FROM_DTO
from pynenc_cpp._submit import compute_args_id, keep_signature, new_invocation_id, record_of
from pynenc_cpp.errors import (
    BackendConnectionError,
    IllegalTransition,
    InvocationNotFound,
    OwnershipViolation,
    names_invocation,
    to_pynenc_status_error,
)
from pynenc_cpp.orchestrator import (
    CppOrchestrator,
    UnregisteredInvocationTransitionError,
    _record,
)
from pynenc_cpp.state_backend import (
    _PREFETCH_TTL_SEC,
    CppStateBackend,
    _arguments_from_json,
    _call_id,
    _dtos,
    _record_workflow,
)
from pynenc_cpp.trigger import _context_type_name

if TYPE_CHECKING:
    from pynenc import Pynenc
    from pynenc.call import Call, PreSerializedCall
    from pynenc.types import Params, Result

#: The largest result read together with its SUCCESS status (a larger one is read
#: on its own when asked for).
_PREFETCH_RESULT_BYTES = 64 * 1024
#: pynenc's own ``route_call`` (a patched one is called by ``route_call`` below).
_PYNENC_ROUTE_CALL = BaseOrchestrator.route_call
#: ``_finish``'s ``made`` when the composite is still to be made.
_NOT_YET: Any = object()

_CONTEXT_NAMES = (
    _context_type_name(StatusContext),
    _context_type_name(ResultContext),
    _context_type_name(ExceptionContext),
)


class CppNativeOrchestrator(PicksInvocations, CppOrchestrator):
    """The orchestrator of native mode (backend picked by the subclass).

    Thread-safe like the mixed-mode orchestrator. See the module docstring for
    which pynenc methods become one engine call.
    """

    #: Whether status reads read this thread's submitted invocations ahead
    #: (``pynenc_cpp._read_ahead``): where a read is a round trip of its own.
    _reads_ahead = False

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        # The components the lifecycle was made for (``_lifecycle``).
        self._lifecycle_parts: tuple[object, object, object] | None = None
        self._lifecycle_obj: _core.Lifecycle | None = None
        self._external_ctx: tuple[int, RunnerContext] | None = None
        # Per thread: (invocation id, runner id, status watched) of the invocation this
        # thread claimed and started (``claim_for_run(start=True)``) and whose
        # ``set_invocation_status(RUNNING)`` from pynenc's ``run`` has not come yet.
        self._started = threading.local()
        # Routes (queue, priority) that passed ``_validate_route`` (a bounded cache).
        self._valid_routes: set[tuple[str, float]] = set()
        # Per thread: (invocation id, raw status record, result | None, purge generation,
        # monotonic time) that ``wait_any_final`` read with the final status it waited
        # for, served to this thread's next status read (``get_invocation_status_record``)
        # of that id within ``_PREFETCH_TTL_SEC`` and before any purge.
        self._final_seen = threading.local()
        # Per thread: the final records read ahead of this thread's status reads
        # (``_read_ahead``; only where a read is a round trip: Redis).
        self._read_ahead = ReadAhead(_PREFETCH_TTL_SEC) if self._reads_ahead else None

    # ---- plumbing ------------------------------------------------------------

    def _lifecycle(self) -> _core.Lifecycle | None:
        """The composite operations over this app's components, or None (mixed mode).

        Rebuilt when the app's components are swapped (tests do that).
        """
        if not self._native_enabled:
            return None
        app = self.app
        state_backend, broker, trigger = app.state_backend, app.broker, app.trigger
        parts = self._lifecycle_parts
        if (
            parts is not None
            and parts[0] is state_backend
            and parts[1] is broker
            and parts[2] is trigger
        ):
            return self._lifecycle_obj
        lifecycle = None
        if self.shares_storage_with(state_backend) and self.shares_storage_with(broker):
            lifecycle = self.storage.lifecycle(self.shares_storage_with(trigger), *_CONTEXT_NAMES)
        self._lifecycle_parts, self._lifecycle_obj = (state_backend, broker, trigger), lifecycle
        return lifecycle

    @cached_property
    def _native_enabled(self) -> bool:
        """``cpp_conf.native_enabled`` and the ``native`` shortcut active
        (``pynenc_cpp._shortcuts``), read once (``cpp_conf`` is fixed at first use)."""
        return self.cpp_conf.native_enabled and "native" in _shortcuts.of_app(self.app)

    def _actor(self, runner_ctx: RunnerContext) -> tuple[str, str]:
        """(owner id, runner-context id) of ``runner_ctx``, its context stored as pynenc does."""
        state_backend = self.app.state_backend
        if isinstance(state_backend, CppStateBackend) and state_backend.runner_context_stored(
            runner_ctx
        ):
            return runner_ctx.runner_id, runner_ctx.runner_id  # storing it again is a no-op
        self._ride_out(
            lambda: self.app.state_backend.store_runner_context(runner_ctx),
            f"runner context {runner_ctx.runner_id}",
        )
        return runner_ctx.runner_id, runner_ctx.runner_id

    def _submit_runner_context(self) -> RunnerContext:
        """``context.get_or_create_runner_context`` with the external context kept per process.

        Outside a runner pynenc builds a fresh ``ExternalRunner`` context (same
        ``ExternalRunner@host-pid`` id) on every call; only its id is used here
        (the state backend stores the first context of each id), so it is built
        once per process.
        """
        app_id = self.app.app_id
        if context.get_runner_context(app_id) or context.get_current_runner(app_id):
            return context.get_or_create_runner_context(app_id)
        pid = os.getpid()
        cached = self._external_ctx
        if cached is None or cached[0] != pid:
            cached = (pid, ExternalRunner.get_default_external_runner_context())
            self._external_ctx = cached
        return cached[1]

    def _validate_route(self, queue: str, priority: float) -> None:
        """The broker's checks of ``route_invocation(s)``, made before anything is written.

        A route that passed them once to a queue the broker is configured with is
        not checked again (every submit passes here): for such a queue the checks
        depend on nothing but the route itself."""
        broker = self.app.broker
        route = (queue, priority)
        cacheable = type(priority) is float and type(queue) is str
        if cacheable and route in self._valid_routes and queue in broker.configured_queue_set:
            return
        broker._validate_queue_names((queue,))
        validate_priority(priority, label="Broker priority")
        if cacheable and queue in broker.configured_queue_set and len(self._valid_routes) < 1024:
            self._valid_routes.add(route)

    def _status_error(self, exc: Exception, invocation_id: InvocationId, status: Any) -> Exception:
        if isinstance(exc, IllegalTransition | OwnershipViolation):
            error: Exception = to_pynenc_status_error(exc)
            return error
        return UnregisteredInvocationTransitionError(
            from_status=None,
            to_status=InvocationStatus(status),
            allowed_statuses=frozenset({InvocationStatus.REGISTERED}),
        )

    def _invocation(self, record: dict[str, Any]) -> DistributedInvocation:
        """The invocation for a state-backend record, as ``get_invocation`` builds it
        (pynenc 0.4.0's ``LazyCall.from_dto`` and ``DistributedInvocation.from_dto`` of
        ``_dtos(record)``: same class, call, ids and workflow), without the two DTOs
        in between (every claim builds one). A patched factory is used instead."""
        if (
            "from_dto" not in _shortcuts.of_app(self.app)
            or getattr(DistributedInvocation.from_dto, "__func__", None) is not _PYNENC_INV_FROM_DTO
            or getattr(LazyCall.from_dto, "__func__", None) is not _PYNENC_CALL_FROM_DTO
        ):
            inv_dto, call_dto = _dtos(record)
            return DistributedInvocation.from_dto(
                inv_dto, call=LazyCall.from_dto(self.app, call_dto)
            )
        call_id = _call_id(record)
        call: LazyCall[Any, Any] = LazyCall(
            task=Task.from_id(self.app, call_id.task_id),
            _serialized_arguments=_arguments_from_json(str(record["serialized_arguments"])),
            _call_id=call_id,
        )
        workflow = _record_workflow(record)
        cls: type[DistributedInvocation] = TaskInvocation
        if call.task.is_workflow_root_task:
            if workflow is None:
                raise ValueError("WorkflowInvocation requires a workflow identity")
            cls = WorkflowInvocation
        parent_id = record["parent_invocation_id"]
        return cls(
            call=call,
            invocation_id=InvocationId(str(record["invocation_id"])),
            parent_invocation_id=InvocationId(parent_id) if parent_id else None,
            workflow=workflow,
            stored_in_backend=True,
            parent_event_id=record["parent_event_id"] or None,
        )

    def _after_change(
        self, invocation_id: InvocationId, status: InvocationStatus, watched: bool
    ) -> None:
        """What set_invocation_status does after the storage steps."""
        if watched:
            self.app.trigger.report_tasks_status([invocation_id], status)
        logger = self.app.logger
        if logger.isEnabledFor(logging.INFO):  # the same line; not formatted when not logged
            logger.info(f"invocation:{invocation_id} status:{status.value}")

    # ---- registration ------------------------------------------------------

    def register_new_invocations(
        self, invocations: list[DistributedInvocation[Params, Result]]
    ) -> None:
        lifecycle = self._lifecycle()
        if lifecycle is None:
            super().register_new_invocations(invocations)
            return
        runner_id, ctx_id = self._actor(self._submit_runner_context())
        items = []
        validated: set[tuple[str, float]] = set()
        shortcut = "submit" in _shortcuts.of_app(self.app)
        for inv in invocations:
            route = (inv.task.broker_queue, inv.task.broker_priority)
            if route not in validated:
                self._validate_route(*route)
                validated.add(route)
            compute_args_id(inv.call, shortcut)
            items.append((record_of(inv, shortcut), *route))
        raw, watched = lifecycle.register_and_route(items, runner_id, ctx_id)
        self._registered(invocations, raw, watched)

    def _registered(
        self, invocations: list[DistributedInvocation[Params, Result]], raw: Any, watched: bool
    ) -> None:
        """What ``register_new_invocations`` does after its engine call."""
        self._remember_invocations(invocations)
        if self._read_ahead is not None:
            self._read_ahead.submitted(i.invocation_id for i in invocations)
        if watched:
            status = _record(raw).status
            self.app.trigger.report_tasks_status([i.invocation_id for i in invocations], status)
        logger = self.app.logger
        if logger.isEnabledFor(logging.INFO):
            for invocation in invocations:
                logger.info(
                    f"NEW task:{invocation.call.task.task_id.key} "
                    f"invocation:{invocation.invocation_id} REGISTERED and ROUTED"
                )

    def route_call(self, call: Call[Params, Result]) -> DistributedInvocation[Params, Result]:
        """pynenc's ``route_call``; for a task with no registration concurrency control,
        its debug line is formatted only when it is logged, and the task function's
        signature is kept for pynenc's next ``Arguments.from_call`` (``_submit.py``)."""
        lifecycle = self._lifecycle()
        if lifecycle is None or BaseOrchestrator.route_call is not _PYNENC_ROUTE_CALL:
            return super().route_call(call)
        if call.task.conf.registration_concurrency != ConcurrencyControlType.DISABLED:
            return self._route_guarded(lifecycle, call)
        task = call.task
        keep_signature(task.func, "submit" in _shortcuts.of_app(self.app))
        logger = task.logger
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(f"New invocation for call {call}")
        return self._route_new_call_invocation(call)

    def _route_guarded(
        self, lifecycle: _core.Lifecycle, call: Call[Params, Result]
    ) -> DistributedInvocation[Params, Result]:
        """pynenc's ``route_call`` for a task with registration concurrency control, its
        look for a REGISTERED invocation of the call's key and the registration of a
        new one made one engine step (``Lifecycle.register_guarded``): two clients
        calling at once share one invocation (pynenc looks, then registers, in two
        calls). What follows a found invocation is pynenc's: reused as it is, reused
        with the new arguments, or ``InvocationConcurrencyWithDifferentArgumentsError``."""
        task = call.task
        conf = task.conf
        key_args = call.serialized_args_for_concurrency_control(conf.registration_concurrency)
        app_id = self.app.app_id
        new_invocation = _new_invocation(
            call,
            parent_invocation=context.get_dist_invocation_context(app_id),
            parent_event_id=context.get_trigger_event_context(app_id),
        )
        queue, priority = task.broker_queue, task.broker_priority
        self._validate_route(queue, priority)
        shortcut = "submit" in _shortcuts.of_app(self.app)
        compute_args_id(new_invocation.call, shortcut)
        runner_id, ctx_id = self._actor(self._submit_runner_context())
        existing, raw, watched = lifecycle.register_guarded(
            record_of(new_invocation, shortcut),
            queue,
            priority,
            dict(key_args or {}),
            dict(call.serialized_arguments),
            runner_id,
            ctx_id,
        )
        if existing is None:
            self._registered([new_invocation], raw, watched)
            if self.app.logger.isEnabledFor(logging.INFO):
                self.app.logger.info(f"invocation:{new_invocation.invocation_id} ROUTED")
            return new_invocation
        invocation = self.app.state_backend.get_invocation(InvocationId(existing))
        if invocation.call.call_id == call.call_id:
            task.logger.debug(f"Reusing invocation:{invocation.invocation_id} for call {call}")
            return ReusedInvocation(invocation)
        if conf.on_diff_non_key_args_raise:
            raise InvocationConcurrencyWithDifferentArgumentsError.from_call_mismatch(
                existing_invocation=invocation, new_call=call
            )
        return ReusedInvocation(invocation, call.arguments)

    def _route_new_call_invocation(
        self, call: Call[Params, Result], runner_id: str | None = None
    ) -> DistributedInvocation[Params, Result]:
        """pynenc's ``_route_new_call_invocation`` with one engine call, not two.

        pynenc builds the invocation with ``DistributedInvocation.from_parent``,
        whose constructor upserts it in the state backend, then registers it
        (which, natively, upserts it again). Here the invocation is built
        unstored (``_new_invocation``: the same class, ids, workflow and log
        lines as ``from_parent``) and the register composite's upsert is its
        only write. Everything else is pynenc's code.
        """
        if self._lifecycle() is None:
            return super()._route_new_call_invocation(call, runner_id)
        app_id = self.app.app_id
        new_invocation = _new_invocation(
            call,
            parent_invocation=context.get_dist_invocation_context(app_id),
            parent_event_id=context.get_trigger_event_context(app_id),
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

    def route_calls(
        self, calls: list[PreSerializedCall[Params, Result]]
    ) -> list[DistributedInvocation[Params, Result]]:
        """pynenc's ``route_calls`` with the invocations upserted only by the register composite."""
        if (
            not calls
            or self._lifecycle() is None
            or calls[0].task.conf.registration_concurrency != ConcurrencyControlType.DISABLED
        ):
            routed: list[DistributedInvocation[Params, Result]] = super().route_calls(calls)
            return routed
        parent_invocation = context.get_dist_invocation_context(self.app.app_id)
        invocations = [_new_invocation(call, parent_invocation, None) for call in calls]
        self.register_new_invocations(invocations)
        return invocations

    # ---- status reads ------------------------------------------------------

    def wait_any_final(self, invocation_ids: Sequence[str], timeout_sec: float) -> str | None:
        """Blocks (GIL released) until one of ``invocation_ids`` is final, at most
        ``timeout_sec``; returns that id, or None when the time ran out.

        The engine reads the final status record (and a SUCCESS result up to
        ``_PREFETCH_RESULT_BYTES``) in the same call (on Redis in the wait's own round
        trips: the note that wakes the waiter carries them), and this thread's next
        status read of that id is served from it: the read pynenc's
        ``invocation.result`` makes after a wait costs nothing. A final status never
        changes; any other status read on this thread drops what was kept, and so do
        a purge and ``_PREFETCH_TTL_SEC``.
        """
        lifecycle = self._lifecycle()
        if lifecycle is None:
            final_id: str | None = self._engine.wait_any_final(list(invocation_ids), timeout_sec)
            return final_id
        self._final_seen.note = None  # what an earlier wait read is not served after this one
        generation = self.app.state_backend.prefetch_generation()  # before the read
        got = lifecycle.wait_any_final(list(invocation_ids), timeout_sec, _PREFETCH_RESULT_BYTES)
        if got is None:
            return None
        final_id, raw, result = got
        if raw is not None:
            self._final_seen.note = (final_id, raw, result, generation, time.monotonic())
        return final_id

    @names_invocation
    def get_invocation_status_record(self, invocation_id: InvocationId) -> InvocationStatusRecord:
        """The status record, read in one engine call with the result when the status
        is SUCCESS (results up to ``_PREFETCH_RESULT_BYTES``; one Redis script).

        The result is handed to the state backend for this thread's next
        ``get_result`` of the id: pynenc's ``invocation.result`` reads the status, then
        the result, so it makes one round trip instead of two. Right after this
        thread's ``wait_any_final`` found the id final, nothing is read: the wait read
        both already. On Redis the read also reads ahead, when the status is final,
        other invocations this thread submitted and has not read yet, and serves
        those found final to the thread's next reads of them
        (``pynenc_cpp._read_ahead``); and the first read of an invocation this thread
        submitted, finding it not final, registers this thread's wait for it in the
        same script (``Lifecycle.read_final(arm=True)``): pynenc's ``result`` waits
        next, and that wait then makes no registration round trip of its own.
        """
        lifecycle = self._lifecycle()
        if lifecycle is None:
            return super().get_invocation_status_record(invocation_id)
        state_backend = self.app.state_backend
        seen = getattr(self._final_seen, "note", None)
        if seen is not None:
            self._final_seen.note = None  # served once, and only to the very next read
            note_id, raw, result, generation, at = seen
            if (
                note_id == invocation_id
                and generation == state_backend.prefetch_generation()
                and time.monotonic() - at <= _PREFETCH_TTL_SEC
            ):
                if result is not None:
                    state_backend.remember_result(invocation_id, result, generation)
                if self._read_ahead is not None:
                    self._read_ahead.read_now(invocation_id)
                return _record(raw)
        generation = state_backend.prefetch_generation()  # before the read: a purge may follow
        ahead = self._read_ahead
        kept = ahead.take(invocation_id, generation) if ahead is not None else None
        # The first read of an invocation this thread submitted: when not final, it
        # also registers the wait pynenc's `result` makes next (one round trip fewer).
        arm = kept is None and ahead is not None and ahead.pending(invocation_id)
        candidates = ahead.candidates(invocation_id) if ahead is not None and not kept else []
        more: list[tuple[str, Any, str | None]] = []
        if kept is not None:
            raw, result, generation = kept
        elif candidates:
            raw, result, more = self._retried(
                lambda: lifecycle.read_final_ahead(
                    invocation_id, candidates, _PREFETCH_RESULT_BYTES, arm
                ),
                f"invocation:{invocation_id}",
            )
        else:
            raw, result = self._retried(
                lambda: lifecycle.read_final(invocation_id, _PREFETCH_RESULT_BYTES, arm),
                f"invocation:{invocation_id}",
            )
        if result is not None:
            state_backend.remember_result(invocation_id, result, generation)
        record = _record(raw)
        if candidates and ahead is not None:
            ahead.read(candidates, record.status.is_final(), more, generation)
        return record

    # ---- status changes ----------------------------------------------------

    @notes_reports("status")
    def set_invocation_status(
        self,
        invocation_id: InvocationId,
        status: InvocationStatus,
        runner_ctx: RunnerContext,
    ) -> None:
        # First: a note exists only if this thread's claim ran natively.
        if status == InvocationStatus.RUNNING and self._started_already(invocation_id, runner_ctx):
            return
        lifecycle = self._lifecycle()
        # A fenced change (a recovery, fenced_on_owner) takes pynenc's own steps over
        # the fenced transition: recoveries are rare, the fence is not.
        if lifecycle is None or self._fenced_owner() is not None:
            super().set_invocation_status(invocation_id, status, runner_ctx)
            return
        done, watched = self._take_gate_note(invocation_id, status, runner_ctx.runner_id)
        if done:  # this thread's gate made the change, history row included
            self._after_change(invocation_id, InvocationStatus(status), watched)
            return
        runner_id, ctx_id = self._actor(runner_ctx)
        blocking = bool(self.conf.blocking_control)
        try:
            outcome = self._ride_out(
                lambda: lifecycle.change_status(
                    invocation_id, status, runner_id, ctx_id, None, blocking
                ),
                f"invocation:{invocation_id} status {InvocationStatus(status).value}",
                settled=lambda: self._settled_as(invocation_id, status, runner_id),
            )
        except (IllegalTransition, OwnershipViolation, InvocationNotFound) as exc:
            raise self._status_error(exc, invocation_id, status) from exc
        watched = True if isinstance(outcome, Settled) else outcome[1]
        self._after_change(invocation_id, InvocationStatus(status), watched)

    def _gated_step(
        self,
        invocation: DistributedInvocation,
        status: InvocationStatus,
        runner_ctx: RunnerContext,
        key_args: dict[str, str],
        blocking: list[InvocationStatus],
        index_args: dict[str, str],
        defer: bool,
    ) -> Gated:
        """``Lifecycle.gated_change`` (gate and history row in one step; with ``defer``,
        pynenc's deferral and reroute too); mixed mode's step without a lifecycle."""
        lifecycle = self._lifecycle()
        if lifecycle is None:
            return super()._gated_step(
                invocation, status, runner_ctx, key_args, blocking, index_args, defer
            )
        invocation_id = invocation.invocation_id
        runner_id, ctx_id = self._actor(runner_ctx)
        task = invocation.task
        task_key = task.task_id.key
        path: list[InvocationStatus] = []
        queue, priority = None, 0.0
        if defer:
            if task.conf.reroute_on_concurrency_control:
                path = [InvocationStatus.CONCURRENCY_CONTROLLED, InvocationStatus.REROUTED]
                queue, priority = task.broker_queue, task.broker_priority
                self._validate_route(queue, priority)
            else:
                path = [InvocationStatus.CONCURRENCY_CONTROLLED_FINAL]
        blocking_control = bool(self.conf.blocking_control)

        def gate() -> tuple[Any, bool, str | None, list[tuple[Any, bool]]]:
            return lifecycle.gated_change(
                invocation_id,
                status,
                runner_id,
                ctx_id,
                task_key,
                key_args,
                blocking,
                index_args,
                path,
                queue,
                priority,
                blocking_control,
            )

        out: tuple[Any, bool, str | None, list[tuple[Any, bool]]] | Settled
        try:
            if defer:
                try:
                    out = gate()
                except BackendConnectionError:
                    # The claim may have landed, or its deferral in part: once the
                    # storage answers, what it holds says what is left to do.
                    return self._retried(
                        lambda: self._after_lost_claim(invocation, runner_ctx, runner_id),
                        f"invocation:{invocation_id} claim",
                    )
            else:
                out = self._ride_out(
                    gate,
                    f"invocation:{invocation_id} status {InvocationStatus(status).value}",
                    settled=lambda: self._status_is(invocation_id, status, runner_id),
                )
        except (IllegalTransition, OwnershipViolation, InvocationNotFound) as exc:
            raise self._status_error(exc, invocation_id, status) from exc
        if isinstance(out, Settled):
            self._note_gated(invocation_id, status, runner_id, True)
            return Gated(None)
        _raw, watched, blocker, deferred = out
        if blocker is not None:
            for step, (_record_raw, step_watched) in zip(path, deferred, strict=True):
                self._after_change(invocation_id, step, step_watched)
            return Gated(str(blocker), bool(path))
        self._note_gated(invocation_id, status, runner_id, watched)
        return Gated(None)

    def _after_lost_claim(
        self, invocation: DistributedInvocation, runner_ctx: RunnerContext, runner_id: str
    ) -> Gated:
        """A gated claim whose connection was lost, settled from the stored status: PENDING
        for this runner, the claim landed (its history row too, but on Redis, where
        the row is a step of its own); CONCURRENCY_CONTROLLED, the deferral stopped
        half-way: rerouted now; available for run, the id left its queue with the gate
        or with the deferral's reroute unrouted: routed again (one more queue entry at
        worst, which a later claim finds not available). Nothing is lost either way."""
        invocation_id = invocation.invocation_id
        record = self.get_invocation_status_record(invocation_id)
        status = record.status
        if status == InvocationStatus.PENDING and record.runner_id == runner_id:
            self._note_gated(invocation_id, status, runner_id, True)
            return Gated(None)
        if status == InvocationStatus.CONCURRENCY_CONTROLLED:
            self.reroute_invocations({invocation_id}, runner_ctx)
        elif status.is_available_for_run():
            self.route_invocation(invocation)
        return Gated("?", deferred=True)

    def _started_already(self, invocation_id: InvocationId, runner_ctx: RunnerContext) -> bool:
        """True if this thread's claim already moved ``invocation_id`` to RUNNING for
        ``runner_ctx`` (``claim_for_run(start=True)``): then what is left of the status
        change (log line, trigger report) is done here, once."""
        started = getattr(self._started, "slot", None)
        if started is None or started[0] != invocation_id:
            return False
        self._started.slot = None
        if started[1] != runner_ctx.runner_id:
            return False  # not the claimer: the ordinary change (and its errors)
        self._after_change(invocation_id, InvocationStatus.RUNNING, started[2])
        return True

    def forget_started(self) -> None:
        """Drops this thread's note of an invocation its claim started
        (``claim_for_run(start=True)``) whose run never reached its RUNNING step."""
        self._started.slot = None

    def _settled_as(
        self, invocation_id: InvocationId, status: InvocationStatus, runner_id: str
    ) -> bool:
        """Whether a status change whose connection was lost was applied (see ``_outage``).

        On Redis a change to a final status made outside a runner's finish script is
        several commands: if the status landed, the idempotent rest (waiter release,
        auto-purge mark) is done again here. A lost connection while doing it reaches
        ``ride_out``, which asks again (the rest is done again, never skipped)."""
        if not self._status_is(invocation_id, status, runner_id):
            return False
        if InvocationStatus(status).is_final():
            if self.conf.blocking_control:
                self.blocking_control.release_waiters(invocation_id)
            self.set_up_invocation_auto_purge(invocation_id)
        return True

    @notes_reports("result")
    def set_invocation_result(
        self, invocation: DistributedInvocation, result: Any, runner_ctx: RunnerContext
    ) -> None:
        lifecycle = self._lifecycle()
        if lifecycle is None:
            super().set_invocation_result(invocation, result, runner_ctx)
            return
        serialized = self.app.client_data_store.serialize(result)
        self._result_stored(lifecycle, invocation, result, runner_ctx, serialized, _NOT_YET)

    def _finish_deferrable(self) -> bool:
        own = type(self).set_invocation_result is CppNativeOrchestrator.set_invocation_result
        return own and "set_invocation_result" not in self.__dict__

    def _result_stored(
        self,
        lifecycle: _core.Lifecycle,
        invocation: DistributedInvocation,
        result: Any,
        runner_ctx: RunnerContext,
        serialized: str,
        outcome: object,
    ) -> None:
        """``set_invocation_result`` from its engine call on; ``outcome``: that call's
        tuple or error when it was made already (``run_invocation_to_finish``), or
        ``_NOT_YET``."""
        if self._finish(
            lifecycle.finish_success,
            InvocationStatus.SUCCESS,
            invocation,
            serialized,
            runner_ctx,
            outcome,
        ):
            self.app.trigger.report_invocation_result(invocation, result)

    @notes_reports("exception")
    def set_invocation_exception(
        self, invocation: DistributedInvocation, exception: Exception, runner_ctx: RunnerContext
    ) -> None:
        lifecycle = self._lifecycle()
        if lifecycle is None:
            super().set_invocation_exception(invocation, exception, runner_ctx)
            return
        serialized = self.app.state_backend.serialize_exception(exception)
        if self._finish(
            lifecycle.finish_failure, InvocationStatus.FAILED, invocation, serialized, runner_ctx
        ):
            self.app.trigger.report_invocation_failure(invocation, exception)

    def _finish(
        self,
        finish: Callable[..., tuple[Any, bool, bool]],
        status: InvocationStatus,
        invocation: DistributedInvocation,
        serialized: str,
        runner_ctx: RunnerContext,
        made: object = _NOT_YET,
    ) -> bool:
        """Store an outcome and its final ``status`` in one composite (``finish_success``
        or ``finish_failure``), then pynenc's after-change side effects; returns
        whether a trigger condition watches this outcome (result or exception).

        ``made``: the composite's outcome (its tuple, or the engine error it raised)
        when the caller made it already; it then counts as the first attempt (an
        error is handled as if this call had raised it)."""
        runner_id, ctx_id = self._actor(runner_ctx)
        inv_id = invocation.invocation_id
        task_key = invocation.call.task.task_id.key
        blocking = bool(self.conf.blocking_control)
        first = [] if made is _NOT_YET else [made]

        def call() -> tuple[Any, bool, bool]:
            if first:
                got = first.pop()
                if isinstance(got, BaseException):
                    raise got
                return got  # type: ignore[return-value]
            return finish(inv_id, serialized, runner_id, ctx_id, task_key, blocking)

        try:
            outcome = self._ride_out(
                call,
                f"invocation:{inv_id} outcome {status.value}",
                settled=lambda: self._settled_as(inv_id, status, runner_id),
            )
        except (IllegalTransition, OwnershipViolation, InvocationNotFound) as exc:
            raise self._status_error(exc, inv_id, status) from exc
        if isinstance(outcome, Settled):  # whether triggers watch it is unknown: report
            self._after_change(inv_id, status, True)
            return True
        _, status_watched, outcome_watched = outcome
        self._after_change(inv_id, status, status_watched)
        return bool(outcome_watched)

    def set_invocation_retry(
        self,
        invocation: DistributedInvocation[Params, Result],
        exception: Exception,
        runner_ctx: RunnerContext,
    ) -> None:
        lifecycle = self._lifecycle()
        if lifecycle is None:
            super().set_invocation_retry(invocation, exception, runner_ctx)
            return
        queue, priority = invocation.task.broker_queue, invocation.task.broker_priority
        self._validate_route(queue, priority)
        runner_id, ctx_id = self._actor(runner_ctx)
        inv_id = invocation.invocation_id
        task_key = invocation.call.task.task_id.key
        # The fence for a retry lost on the wire: its count moves only with it.
        retries = self._retried(
            lambda: self.get_invocation_retries(inv_id), f"invocation:{inv_id} retries"
        )
        try:
            outcome = self._ride_out(
                lambda: lifecycle.retry(inv_id, queue, priority, runner_id, ctx_id, task_key),
                f"invocation:{inv_id} retry",
                settled=lambda: self._retry_settled(inv_id, queue, priority, runner_id, retries),
            )
        except (IllegalTransition, OwnershipViolation, InvocationNotFound) as exc:
            raise self._status_error(exc, inv_id, InvocationStatus.RETRY) from exc
        watched = True if isinstance(outcome, Settled) else outcome[1]
        self._after_change(inv_id, InvocationStatus.RETRY, watched)

    def _retry_settled(
        self,
        invocation_id: InvocationId,
        queue: str,
        priority: float,
        runner_id: str,
        retries_before: int,
    ) -> bool:
        """Whether a retry whose connection was lost was applied, asked before it is
        sent again (see ``_outage``).

        A landed retry may already have been routed and claimed by another worker of
        this runner (same runner id, RUNNING again), so the status alone cannot tell:
        the retry count can, as only a retry moves it. On Redis a retry is several
        commands (status, count, route): one found in RETRY gets what it missed (a
        second queue entry is refused by the claim's status check). A lost connection
        while doing it reaches ``ride_out``, which asks again: once the count has
        moved, asking again only routes, so nothing is counted twice and a retry is
        never left in RETRY without a queue entry."""
        if self.get_invocation_retries(invocation_id) <= retries_before:
            if not self._status_is(invocation_id, InvocationStatus.RETRY, None):
                return False  # not applied (still RUNNING here): sent again
            self.increment_invocation_retries(invocation_id)
        if self._status_is(invocation_id, InvocationStatus.RETRY, None):
            self.app.broker.route_invocation(invocation_id, queue, priority)
        return True

    def reroute_invocations(
        self, invocations_to_reroute: set[InvocationId], runner_ctx: RunnerContext
    ) -> None:
        lifecycle = self._lifecycle()
        if lifecycle is None:
            super().reroute_invocations(invocations_to_reroute, runner_ctx)
            return
        for invocation_id in invocations_to_reroute:
            self._reroute_one(lifecycle, invocation_id, runner_ctx)

    def _reroute_one(
        self,
        lifecycle: _core.Lifecycle,
        invocation_id: InvocationId,
        runner_ctx: RunnerContext,
    ) -> None:
        invocation = self.app.state_backend.get_invocation(invocation_id)
        queue, priority = invocation.task.broker_queue, invocation.task.broker_priority
        self._validate_route(queue, priority)
        runner_id, ctx_id = self._actor(runner_ctx)
        try:
            _, watched = lifecycle.reroute(
                invocation_id, queue, priority, runner_id, ctx_id, invocation.call.task.task_id.key
            )
        except (IllegalTransition, OwnershipViolation, InvocationNotFound) as exc:
            raise self._status_error(exc, invocation_id, InvocationStatus.REROUTED) from exc
        self._after_change(invocation_id, InvocationStatus.REROUTED, watched)

    # ---- recovery ----------------------------------------------------------

    def recover_stale_invocations(self, runner_ctx: RunnerContext) -> list[InvocationId]:
        """pynenc's two recovery core tasks in two engine calls (plus the reroutes).

        PENDING invocations older than ``max_pending_seconds`` go to
        PENDING_RECOVERY and RUNNING ones of runners without a heartbeat for
        ``runner_considered_dead_after_minutes`` to RUNNING_RECOVERY (history,
        trigger reports and log lines as pynenc's core tasks), then every one is
        rerouted. Returns the recovered ids. For runners that run recovery
        themselves (the C++ runner); pynenc's core tasks keep working unchanged.
        """
        lifecycle = self._lifecycle()
        conf = self.app.conf
        pending_us = _us(conf.max_pending_seconds)
        running_us = _us(conf.runner_considered_dead_after_minutes * 60)
        if lifecycle is None:
            return self._recover_mixed(runner_ctx)
        runner_id, ctx_id = self._actor(runner_ctx)
        recovered: list[InvocationId] = []
        for kind, limit_us, status, message in (
            ("pending", pending_us, InvocationStatus.PENDING_RECOVERY, "timed-out pending"),
            ("running", running_us, InvocationStatus.RUNNING_RECOVERY, "running"),
        ):
            for invocation_id, _raw, watched in lifecycle.recover_stale(
                kind, limit_us, runner_id, ctx_id
            ):
                suffix = " from inactive runner" if kind == "running" else ""
                self.app.logger.info(f"Recovering {message} invocation:{invocation_id}{suffix}")
                self._after_change(invocation_id, status, watched)
                recovered.append(invocation_id)
        self.reroute_invocations(set(recovered), runner_ctx)
        return recovered

    def _recover_mixed(self, runner_ctx: RunnerContext) -> list[InvocationId]:
        recovered: list[InvocationId] = []
        for invocation_id in list(self.get_pending_invocations_for_recovery()):
            self.set_invocation_status(invocation_id, InvocationStatus.PENDING_RECOVERY, runner_ctx)
            recovered.append(invocation_id)
        for invocation_id in list(self.get_running_invocations_for_recovery()):
            self.set_invocation_status(invocation_id, InvocationStatus.RUNNING_RECOVERY, runner_ctx)
            recovered.append(invocation_id)
        self.reroute_invocations(set(recovered), runner_ctx)
        return recovered


def _new_invocation(
    call: Call[Params, Result],
    parent_invocation: DistributedInvocation | None,
    parent_event_id: str | None,
) -> DistributedInvocation[Params, Result]:
    """``DistributedInvocation.from_parent`` without its constructor's upsert.

    Same class (workflow root or task), ids, workflow identity and log lines as
    pynenc 0.4.0's ``WorkflowInvocation.from_parent`` /
    ``TaskInvocation.from_parent``; marked stored because the caller's register
    composite upserts it (in the same engine call as its registration).
    """
    invocation_id = InvocationId(new_invocation_id("submit" in _shortcuts.of_app(call.app)))
    parent_workflow = parent_invocation.workflow if parent_invocation else None
    parent_invocation_id = parent_invocation.invocation_id if parent_invocation else None
    logger = call.app.logger
    cls: type[DistributedInvocation]
    if call.task.is_workflow_root_task:
        cls = WorkflowInvocation
        if parent_workflow is None:
            workflow = WorkflowIdentity.new_workflow(
                invocation_id=invocation_id, task_id=call.task.task_id
            )
            logger.info(f"Creating a new workflow:{workflow.workflow_id}")
        else:
            workflow = WorkflowIdentity.new_subworkflow(
                invocation_id=invocation_id,
                task_id=call.task.task_id,
                parent_workflow_id=parent_workflow.workflow_id,
            )
            logger.info(
                f"Creating a new sub-workflow:{workflow.workflow_id} "
                f"from parent-workflow:{parent_workflow.workflow_id}"
            )
    else:
        cls = TaskInvocation
        workflow = parent_workflow
        if logger.isEnabledFor(logging.DEBUG):
            if workflow is None:
                logger.debug(f"Creating standalone task invocation:{invocation_id}")
            else:
                logger.debug(
                    f"Inheriting workflow from parent-workflow:{workflow.workflow_id} "
                    f"for new-invocation:{invocation_id}"
                )
    return cls(
        call=call,
        invocation_id=invocation_id,
        parent_invocation_id=parent_invocation_id,
        workflow=workflow,
        stored_in_backend=True,
        parent_event_id=parent_event_id,
    )


def _us(seconds: float) -> int:
    micros = round(seconds * 1_000_000)
    return max(micros, 1) if seconds > 0 else micros


class CppMemNativeOrchestrator(MemBackend, CppNativeOrchestrator):
    """Native mode on process-local memory."""


class CppSqliteNativeOrchestrator(SqliteBackend, CppNativeOrchestrator):
    """Native mode on the app's SQLite file: each composite is one transaction."""


class CppRedisNativeOrchestrator(RedisBackend, CppNativeOrchestrator):
    """Native mode on the app's Redis server."""

    _reads_ahead = True


__all__ = [
    "CppMemNativeOrchestrator",
    "CppNativeOrchestrator",
    "CppRedisNativeOrchestrator",
    "CppSqliteNativeOrchestrator",
]
