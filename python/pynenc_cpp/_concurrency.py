"""pynenc's running concurrency control made in the engine's atomic step:
``ConcurrencyGate``, the part of ``CppOrchestrator`` (both modes) that claims and
starts an invocation of a task with ``running_concurrency`` in one engine call.

pynenc 0.4.0 checks the limit in Python (``is_candidate_to_run_by_concurrency_control``
before the move to PENDING, ``is_authorize_to_run_by_concurrency_control`` before
the move to RUNNING) and then changes the status in a separate call: two runners
that check one key at the same time both see it free, and both run. Here the check
and the change are ``Orchestrator.gated_transition`` (one SQLite transaction, one
Lua script, one step under the memory backend's lock); the rules, statuses,
history rows, trigger reports and log lines are pynenc's.

Where pynenc's own Python still decides (documented in docs/reliability.md): an
orchestrator subclass that overrides the checks (or a patched check) is asked as
pynenc asks it, and its answer is acted on in a separate step.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from pynenc import context
from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.exceptions import InvocationStatusError
from pynenc.invocation.status import InvocationStatus
from pynenc.orchestrator.base_orchestrator import BaseOrchestrator

from pynenc_cpp import _shortcuts
from pynenc_cpp._claim import claim_one

if TYPE_CHECKING:
    from pynenc.identifiers.invocation_id import InvocationId
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.runner.runner_context import RunnerContext

#: pynenc's own checks: the gate stands in for them only while they are the ones
#: in force (a subclass's or a patched check is asked as pynenc asks it).
_PYNENC_CANDIDATE = BaseOrchestrator.is_candidate_to_run_by_concurrency_control
_PYNENC_CORE = BaseOrchestrator._is_authorize_by_concurrency_control

#: The statuses that block a claim (PENDING) and a start (RUNNING), pynenc's rules.
_BLOCKING: dict[InvocationStatus, list[InvocationStatus]] = {
    InvocationStatus.PENDING: [InvocationStatus.PENDING, InvocationStatus.RUNNING],
    InvocationStatus.RUNNING: [InvocationStatus.RUNNING],
}


class Gated(NamedTuple):
    """What ``gate_running_concurrency`` did."""

    blocker: str | None  # None: moved
    deferred: bool = False  # blocked, and pynenc's deferral made in the same step


class GateStep(NamedTuple):
    """One ``gate_running_concurrency`` call, as ``_gated_step`` makes it."""

    invocation: DistributedInvocation
    status: InvocationStatus
    runner_ctx: RunnerContext
    key_args: dict[str, str]  # the arguments that key the task's concurrency control
    blocking: list[InvocationStatus]  # the statuses that block ``status``
    index_args: dict[str, str]  # every argument, indexed with the claimed invocation
    defer: bool  # make pynenc's deferral in the same step (a claim)


class ConcurrencyGate(BaseOrchestrator):
    """Running concurrency control as one engine step, for an orchestrator whose
    ``_gated_step`` makes it (``CppOrchestrator``: ``Orchestrator.gated_transition``;
    native mode: ``Lifecycle.gated_change``, history row included)."""

    @cached_property
    def _gate_notes(self) -> threading.local:
        """Per thread: (invocation id, status, runner id, payload) of the change this
        thread's gate made and whose ``set_invocation_status`` has not come yet."""
        return threading.local()

    def _gates(self) -> bool:
        """Whether the gate stands in for the checks: only while they are pynenc's own
        and the ``gate`` shortcut is active (``pynenc_cpp._shortcuts``)."""
        cls, own = type(self), self.__dict__
        return (
            "gate" in _shortcuts.of_app(self.app)
            and cls.is_candidate_to_run_by_concurrency_control is _PYNENC_CANDIDATE
            and cls._is_authorize_by_concurrency_control is _PYNENC_CORE
            and cls.is_authorize_to_run_by_concurrency_control
            is ConcurrencyGate.is_authorize_to_run_by_concurrency_control
            and "is_candidate_to_run_by_concurrency_control" not in own
            and "is_authorize_to_run_by_concurrency_control" not in own
            and "_is_authorize_by_concurrency_control" not in own
        )

    def gated(self, invocation: DistributedInvocation) -> bool:
        """Whether ``invocation``'s claim and start go through the gate: its task has
        running concurrency control and the checks are pynenc's own."""
        return (
            invocation.task.conf.running_concurrency != ConcurrencyControlType.DISABLED
            and self._gates()
        )

    def gate_running_concurrency(
        self,
        invocation: DistributedInvocation,
        status: InvocationStatus,
        runner_ctx: RunnerContext,
        defer: bool = False,
    ) -> Gated:
        """Moves ``invocation`` to ``status`` (PENDING: a claim; RUNNING: its run's
        start) unless pynenc's running concurrency control defers it, in one engine step.

        ``blocker`` None: it moved, and the rest of that status change (history row in
        mixed mode, trigger report, log line) is made by the
        ``set_invocation_status(id, status, runner_ctx)`` the caller makes next on this
        thread, which makes no transition of its own. Otherwise ``blocker`` is the id
        of the invocation that blocks it (logged as pynenc logs a deferral) and
        nothing changed, unless ``defer`` (a claim) and ``deferred``: then pynenc's
        deferral was made in the same step too (CONCURRENCY_CONTROLLED and REROUTED
        with the route, or CONCURRENCY_CONTROLLED_FINAL; native mode). Raises
        pynenc's status errors as ``set_invocation_status`` does.
        """
        conf = invocation.task.conf
        blocking = _BLOCKING[InvocationStatus(status)]
        call = invocation.call
        key_args = call.serialized_args_for_concurrency_control(conf.running_concurrency) or {}
        gated = self._gated_step(
            GateStep(
                invocation,
                status,
                runner_ctx,
                dict(key_args),
                blocking,
                dict(call.serialized_arguments),
                defer,
            )
        )
        blocker = gated.blocker
        if blocker is not None:
            invocation.task.logger.info(
                f"invocation:{invocation.invocation_id} deferred by concurrency_control: "
                f"invocation:{blocker} already in status:{blocking} "
                f"(concurrency_control={conf.running_concurrency.value})"
            )
        return gated

    @abstractmethod
    def _gated_step(self, step: GateStep) -> Gated:
        """The engine step of ``gate_running_concurrency``: the blocker's id, or none
        with this thread's note of the change left for ``set_invocation_status``."""

    def _note_gated(
        self, invocation_id: str, status: InvocationStatus, runner_id: str, payload: Any
    ) -> None:
        """Leaves this thread's note of a change the gate made (``_take_gate_note``)."""
        self._gate_notes.slot = (invocation_id, InvocationStatus(status), runner_id, payload)

    def _take_gate_note(
        self, invocation_id: str, status: InvocationStatus, runner_id: str | None
    ) -> tuple[bool, Any]:
        """(True, payload) if this thread's gate already made the change of
        ``invocation_id`` to ``status`` for ``runner_id`` (the note is consumed)."""
        note = getattr(self._gate_notes, "slot", None)
        if note is None or note[0] != invocation_id:
            return False, None
        self._gate_notes.slot = None
        if note[1] != InvocationStatus(status) or note[2] != runner_id:
            return False, None
        return True, note[3]

    # ---- the checks pynenc calls ----------------------------------------------

    def is_authorize_to_run_by_concurrency_control(self, invocation: DistributedInvocation) -> bool:
        """pynenc's check before a run's RUNNING step, made as that step: called from a
        run (a runner context on this thread) for an invocation PENDING for that
        runner, the move to RUNNING is made here unless another invocation of the key
        is RUNNING, and the run's ``set_invocation_status(RUNNING)`` then only
        completes it. Elsewhere (no runner context, another status) it is pynenc's
        plain check."""
        if not self._gates():  # a replaced check is asked, free task or not (as pynenc does)
            return bool(super().is_authorize_to_run_by_concurrency_control(invocation))
        if invocation.task.conf.running_concurrency == ConcurrencyControlType.DISABLED:
            return True
        runner_ctx = context.get_runner_context(self.app.app_id)
        if runner_ctx is None:
            return bool(super().is_authorize_to_run_by_concurrency_control(invocation))
        try:
            gated = self.gate_running_concurrency(invocation, InvocationStatus.RUNNING, runner_ctx)
        except InvocationStatusError:
            # Not PENDING for this runner: not a run's start; the run's own RUNNING
            # step (if any) raises what pynenc's would.
            return bool(super().is_authorize_to_run_by_concurrency_control(invocation))
        return gated.blocker is None

    def get_blocking_invocations_to_run(
        self,
        max_num_invocations: int,
        blocking_invocation_ids: set[InvocationId],
        runner_ctx: RunnerContext,
    ) -> Iterator[InvocationId]:
        """pynenc 0.4.0's, its check and PENDING step one gated step (pynenc's own while
        the ``gate`` shortcut is off)."""
        if "gate" not in _shortcuts.of_app(self.app):
            yield from super().get_blocking_invocations_to_run(
                max_num_invocations, blocking_invocation_ids, runner_ctx
            )
            return
        for blocking_invocation_id in self.get_blocking_invocations(max_num_invocations):
            current_status = self.get_invocation_status(blocking_invocation_id)
            if not current_status.can_transition_to(InvocationStatus.PENDING):
                continue
            blocking_invocation = self.app.state_backend.get_invocation(blocking_invocation_id)
            try:
                if self.gated(blocking_invocation):
                    if self.gate_running_concurrency(
                        blocking_invocation, InvocationStatus.PENDING, runner_ctx
                    ).blocker:
                        continue
                elif not self.is_candidate_to_run_by_concurrency_control(blocking_invocation):
                    continue
                self.set_invocation_status(
                    blocking_invocation_id, InvocationStatus.PENDING, runner_ctx
                )
                blocking_invocation_ids.add(blocking_invocation_id)
                yield blocking_invocation_id
            except InvocationStatusError as ex:
                self.app.logger.debug(
                    f"Could not set blocking invocation:{blocking_invocation_id} to status:pending: {ex}"
                )
                continue

    def get_additional_invocations_to_run(
        self,
        missing_invocations: int,
        blocking_invocation_ids: set[InvocationId],
        invocations_to_reroute: set[InvocationId],
        runner_ctx: RunnerContext,
        queue_provider: Callable[[], Sequence[str]],
        on_queue_retrieved: Callable[[str], None],
    ) -> Iterator[DistributedInvocation]:
        """pynenc 0.4.0's loop; its per-id body is ``claim_one`` (gated). pynenc's own
        while the ``gate`` shortcut is off."""
        if "gate" not in _shortcuts.of_app(self.app):
            yield from super().get_additional_invocations_to_run(
                missing_invocations,
                blocking_invocation_ids,
                invocations_to_reroute,
                runner_ctx,
                queue_provider,
                on_queue_retrieved,
            )
            return
        while missing_invocations > 0:
            retrieved_invocation = False
            for queue_name in queue_provider():
                invocation_id = self.app.broker.retrieve_invocation(queue_name)
                if not invocation_id:
                    continue
                retrieved_invocation = True
                on_queue_retrieved(queue_name)
                if invocation_id not in blocking_invocation_ids:
                    invocation = claim_one(self, invocation_id, runner_ctx, invocations_to_reroute)
                    if invocation is not None:
                        missing_invocations -= 1
                        yield invocation
                break
            if not retrieved_invocation:
                break
