"""Native mode's status changes: ``set_invocation_status`` (with the running
concurrency gate), the finish of a run (``set_invocation_result`` /
``_exception``), ``set_invocation_retry`` and ``reroute_invocations``, each one
engine call, then pynenc's reports and log lines."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.dist_invocation import DistributedInvocation
from pynenc.invocation.status import InvocationStatus
from pynenc.runner.runner_context import RunnerContext

from pynenc_cpp import _core
from pynenc_cpp._concurrency import Gated, GateStep
from pynenc_cpp._native_step import native_step
from pynenc_cpp._outage import Settled
from pynenc_cpp._pending_reports import notes_reports
from pynenc_cpp.errors import (
    BackendConnectionError,
    IllegalTransition,
    InvocationNotFound,
    OwnershipViolation,
)
from pynenc_cpp.native.base import NativeBase

if TYPE_CHECKING:
    from pynenc.types import Params, Result

    from pynenc_cpp._run import FinishState

#: ``_finish``'s ``made`` when the composite is still to be made.
_NOT_YET: Any = object()


class ChangesStatus(NativeBase):
    """Status changes (a mixin of ``CppNativeOrchestrator``)."""

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
        # Not a native step (``native_step``): the note above comes first in both modes.
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

    @native_step
    def _gated_step(self, lifecycle: _core.Lifecycle, step: GateStep) -> Gated:
        """``Lifecycle.gated_change`` (gate and history row in one step; with ``defer``,
        pynenc's deferral and reroute too)."""
        invocation, status, runner_ctx, key_args, blocking, index_args, defer = step
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
            for moved, (_record_raw, moved_watched) in zip(path, deferred, strict=True):
                self._after_change(invocation_id, moved, moved_watched)
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
    @native_step
    def set_invocation_result(
        self,
        lifecycle: _core.Lifecycle,
        invocation: DistributedInvocation,
        result: Any,
        runner_ctx: RunnerContext,
    ) -> None:
        serialized = self.app.client_data_store.serialize(result)
        self._result_stored((invocation, runner_ctx, lifecycle, result, serialized, None), _NOT_YET)

    def _finish_deferrable(self) -> bool:
        own = type(self).set_invocation_result is ChangesStatus.set_invocation_result
        return own and "set_invocation_result" not in self.__dict__

    def _result_stored(self, state: FinishState, outcome: object) -> None:
        """``set_invocation_result`` from its engine call on; ``outcome``: that call's
        tuple or error when it was made already (``run_invocation_to_finish``), or
        ``_NOT_YET``."""
        invocation, runner_ctx, lifecycle, result, serialized, _note = state
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
    @native_step
    def set_invocation_exception(
        self,
        lifecycle: _core.Lifecycle,
        invocation: DistributedInvocation,
        exception: Exception,
        runner_ctx: RunnerContext,
    ) -> None:
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

    @native_step
    def set_invocation_retry(
        self,
        lifecycle: _core.Lifecycle,
        invocation: DistributedInvocation[Params, Result],
        exception: Exception,
        runner_ctx: RunnerContext,
    ) -> None:
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

    @native_step
    def reroute_invocations(
        self,
        lifecycle: _core.Lifecycle,
        invocations_to_reroute: set[InvocationId],
        runner_ctx: RunnerContext,
    ) -> None:
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
