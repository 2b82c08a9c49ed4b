"""Native mode's shared plumbing: ``NativeBase``, the base of every step's mixin
(``submit``, ``reads``, ``changes``, ``recover``): the lifecycle (the engine's
composite operations) over the app's components, the actor of a change, route
checks, status errors, invocations built from records, and what follows a change."""

from __future__ import annotations

import logging
import os
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pynenc import context
from pynenc.call import LazyCall
from pynenc.conf.config_broker import validate_priority
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.dist_invocation import (
    DistributedInvocation,
    TaskInvocation,
    WorkflowInvocation,
)
from pynenc.invocation.status import InvocationStatus
from pynenc.runner.base_runner import ExternalRunner
from pynenc.runner.runner_context import RunnerContext
from pynenc.task import Task
from pynenc.trigger.conditions import ExceptionContext, ResultContext, StatusContext

from pynenc_cpp import _core, _shortcuts
from pynenc_cpp._pick import PicksInvocations
from pynenc_cpp._read_ahead import ReadAhead
from pynenc_cpp._run import _PYNENC_CALL_FROM_DTO, _PYNENC_INV_FROM_DTO
from pynenc_cpp._storage import Learned, learned_for
from pynenc_cpp.errors import (
    IllegalTransition,
    OwnershipViolation,
    to_pynenc_status_error,
)
from pynenc_cpp.native.mixed import MixedSteps
from pynenc_cpp.orchestrator import UnregisteredInvocationTransitionError
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

_CONTEXT_NAMES = (
    _context_type_name(StatusContext),
    _context_type_name(ResultContext),
    _context_type_name(ExceptionContext),
)


def _same(parts: tuple[object, object, object], *components: object) -> bool:
    """Whether ``parts`` are these very component objects."""
    return all(a is b for a, b in zip(parts, components, strict=True))


def _us(seconds: float) -> int:
    micros = round(seconds * 1_000_000)
    return max(micros, 1) if seconds > 0 else micros


class NativeBase(PicksInvocations, MixedSteps):
    """What every step of native mode shares (see the package's docs).

    Each step takes the app's lifecycle as its first argument (``native_step``); without
    one it is mixed mode's: pynenc's own (``CppOrchestrator``) or ``MixedSteps``'."""

    #: Whether status reads read this thread's submitted invocations ahead
    #: (``pynenc_cpp._read_ahead``): where a read is a round trip of its own.
    _reads_ahead = False

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        # The components the lifecycle was made for, and it (``_lifecycle``): one
        # attribute, so a reader never pairs new components with an old lifecycle.
        self._lifecycle_made: (
            tuple[tuple[object, object, object], _core.Lifecycle | None] | None
        ) = None
        # Taken to build the lifecycle: the first calls may race (a runner's thread
        # starting its engine while a client thread submits), and each build is a new
        # object with its own in-process knowledge (the tasks known to run freely).
        self._lifecycle_lock = threading.Lock()
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
        made = self._lifecycle_made
        if made is not None:  # the hot path: three identity checks, inline
            parts = made[0]
            if parts[0] is state_backend and parts[1] is broker and parts[2] is trigger:
                return made[1]
        with self._lifecycle_lock:
            # Built by another thread meanwhile: that one, so every caller (the
            # runner's engine among them) shares one object.
            made = self._lifecycle_made
            if made is not None and _same(made[0], state_backend, broker, trigger):
                return made[1]
            lifecycle = None
            if self.shares_storage_with(state_backend) and self.shares_storage_with(broker):
                lifecycle = self.storage.lifecycle(
                    self.shares_storage_with(trigger), *_CONTEXT_NAMES
                )
            if lifecycle is not None:
                self._learned.adopt(lifecycle)
            self._lifecycle_made = ((state_backend, broker, trigger), lifecycle)
            return lifecycle

    @cached_property
    def _learned(self) -> Learned:
        """What every lifecycle over this storage is told, whichever orchestrator of
        the app made it (``_storage.Learned``): the runner's engine keeps the
        lifecycle it was given, and the app's components may be swapped, or built
        twice (pynenc builds them lazily, without a lock), so a later claim may run
        on another object than the engine's takes."""
        return learned_for(self.app, self.engine_uri)

    def _task_runs_freely(self, task_key: str) -> None:
        self._learned.runs_freely(task_key)

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
