"""Native mode's submit: ``register_new_invocations`` and ``route_call`` /
``route_calls`` in one engine call each (upsert, register, history, route), the
guarded registration of a registration-concurrency controlled task, and new
invocations built without pynenc's constructor upsert."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pynenc import context
from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.exceptions import InvocationConcurrencyWithDifferentArgumentsError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.dist_invocation import DistributedInvocation, ReusedInvocation
from pynenc.orchestrator.base_orchestrator import BaseOrchestrator

from pynenc_cpp import _core, _shortcuts, _submit
from pynenc_cpp._native_step import native_step
from pynenc_cpp._submit import compute_args_id, keep_signature, record_of
from pynenc_cpp.native.base import NativeBase
from pynenc_cpp.orchestrator import _record

if TYPE_CHECKING:
    from pynenc.call import Call, PreSerializedCall
    from pynenc.types import Params, Result

#: pynenc's own ``route_call`` (a patched one is called by ``route_call`` below).
_PYNENC_ROUTE_CALL = BaseOrchestrator.route_call


class Submits(NativeBase):
    """Registration and routing (a mixin of ``CppNativeOrchestrator``)."""

    # ---- registration ------------------------------------------------------

    @native_step
    def register_new_invocations(
        self, lifecycle: _core.Lifecycle, invocations: list[DistributedInvocation[Params, Result]]
    ) -> None:
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

    @native_step
    def route_call(
        self, lifecycle: _core.Lifecycle, call: Call[Params, Result]
    ) -> DistributedInvocation[Params, Result]:
        """pynenc's ``route_call``; for a task with no registration concurrency control,
        its debug line is formatted only when it is logged, and the task function's
        signature is kept for pynenc's next ``Arguments.from_call`` (``_submit.py``)."""
        if BaseOrchestrator.route_call is not _PYNENC_ROUTE_CALL:
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
        new_invocation = _submit.new_invocation(
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

    @native_step
    def _route_new_call_invocation(
        self, lifecycle: _core.Lifecycle, call: Call[Params, Result], runner_id: str | None = None
    ) -> DistributedInvocation[Params, Result]:
        """pynenc's ``_route_new_call_invocation`` with one engine call, not two.

        pynenc builds the invocation with ``DistributedInvocation.from_parent``,
        whose constructor upserts it in the state backend, then registers it
        (which, natively, upserts it again). Here the invocation is built
        unstored (``_submit.new_invocation``: the same class, ids, workflow and log
        lines as ``from_parent``) and the register composite's upsert is its
        only write. Everything else is pynenc's code.
        """
        return self._route_built(call, stored=True)

    @native_step
    def route_calls(
        self, lifecycle: _core.Lifecycle, calls: list[PreSerializedCall[Params, Result]]
    ) -> list[DistributedInvocation[Params, Result]]:
        """pynenc's ``route_calls`` with the invocations upserted only by the register composite."""
        if (
            not calls
            or calls[0].task.conf.registration_concurrency != ConcurrencyControlType.DISABLED
        ):
            routed: list[DistributedInvocation[Params, Result]] = super().route_calls(calls)
            return routed
        parent_invocation = context.get_dist_invocation_context(self.app.app_id)
        invocations = [_submit.new_invocation(call, parent_invocation, None) for call in calls]
        self.register_new_invocations(invocations)
        return invocations
