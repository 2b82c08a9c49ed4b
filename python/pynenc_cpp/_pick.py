"""Picking work natively: ``PicksInvocations``, the part of ``CppNativeOrchestrator``
(``pynenc_cpp.native``) that claims invocations taken from the broker, for pynenc's
``get_additional_invocations_to_run`` and for ``CppRunner`` (``claim_for_run``,
``take_for_runner`` and ``claimed_for_run``): one engine call per claim (status
check, lookup, PENDING, for ``CppRunner`` also RUNNING, history rows), with
pynenc's running concurrency control made in Python the first time a task is seen.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp._claim import defer_or_pend
from pynenc_cpp._native_step import native_step
from pynenc_cpp._run import RunsInvocations
from pynenc_cpp.errors import (
    BackendConnectionError,
    IllegalTransition,
    OwnershipViolation,
    to_pynenc_status_error,
)

if TYPE_CHECKING:
    from pynenc.identifiers.invocation_id import InvocationId
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.runner.runner_context import RunnerContext

    from pynenc_cpp import _core


class PicksInvocations(RunsInvocations):
    """The claims of a native orchestrator, over what the orchestrator provides:
    ``_actor``, ``_invocation``, ``_after_change``, its ``storage`` and the per-thread
    ``_started`` note (``claim_for_run(start=True)``, read by ``set_invocation_status``)."""

    _started: threading.local
    storage: _core.Storage  # CppComponentMixin's

    @abstractmethod
    def _lifecycle(self) -> _core.Lifecycle | None:
        """The app's composite operations, or None (mixed mode: ``native_step``)."""

    @abstractmethod
    def _actor(self, runner_ctx: RunnerContext) -> tuple[str, str]:
        """(owner id, runner-context id) of ``runner_ctx``, its context stored."""

    @abstractmethod
    def _invocation(self, record: dict[str, Any]) -> DistributedInvocation:
        """The invocation for a state-backend record, as ``get_invocation`` builds it."""

    @abstractmethod
    def _after_change(
        self, invocation_id: InvocationId, status: InvocationStatus, watched: bool
    ) -> None:
        """What ``set_invocation_status`` does after the storage steps."""

    def _claim(
        self,
        lifecycle: _core.Lifecycle,
        invocation_id: InvocationId,
        runner_ctx: RunnerContext,
        invocations_to_reroute: set[InvocationId],
        start: bool = False,
    ) -> DistributedInvocation | None:
        """The per-id body of ``get_additional_invocations_to_run``.

        Returns the invocation now PENDING for this runner (with ``start``, possibly
        RUNNING already: see ``claim_for_run``), or None when it is not to be run now
        (not available, deferred by concurrency control, or taken by another runner
        first: logged as pynenc logs it).
        """
        runner_id, ctx_id = self._actor(runner_ctx)
        try:
            claim = lifecycle.claim(invocation_id, runner_id, ctx_id, start)
        except (IllegalTransition, OwnershipViolation) as exc:
            self._claim_refused(invocation_id, exc)
            return None
        except BackendConnectionError:
            # The id has left its queue; the claim may or may not have landed. Once
            # the storage answers it goes back to a queue, whatever the claim did
            # (a runner loop that let the error out, as pynenc's do, lost it).
            self._retried(
                lambda: self._return_unclaimed(invocation_id, runner_ctx, runner_id),
                f"invocation:{invocation_id} claim",
            )
            return None
        return self._claimed(lifecycle, invocation_id, runner_ctx, claim, invocations_to_reroute)

    def _return_unclaimed(
        self, invocation_id: InvocationId, runner_ctx: RunnerContext, runner_id: str
    ) -> None:
        """Puts an id whose claim lost its connection back in a queue, from its stored
        status: available for run, routed again (one more queue entry at worst, which
        a later claim finds not available); PENDING for this runner (the claim landed),
        rerouted; RUNNING for it (a claim that also started it), KILLED and rerouted."""
        record = self.get_invocation_status_record(invocation_id)
        status, mine = record.status, record.runner_id == runner_id
        if status.is_available_for_run():
            self.route_invocation(self.app.state_backend.get_invocation(invocation_id))
        elif status == InvocationStatus.PENDING and mine:
            self.reroute_invocations({invocation_id}, runner_ctx)
        elif status == InvocationStatus.RUNNING and mine:
            self._started.slot = None
            self.set_invocation_status(invocation_id, InvocationStatus.KILLED, runner_ctx)
            self.reroute_invocations({invocation_id}, runner_ctx)

    def _claim_refused(
        self, invocation_id: InvocationId, exc: IllegalTransition | OwnershipViolation
    ) -> None:
        """Another runner moved the invocation first: logged as pynenc logs it."""
        ex = to_pynenc_status_error(exc)
        self.app.logger.warning(f"Could not set invocation:{invocation_id} to status:pending: {ex}")

    def _claimed(
        self,
        lifecycle: _core.Lifecycle,
        invocation_id: InvocationId,
        runner_ctx: RunnerContext,
        claim: tuple[str, Any, dict[str, Any] | None, bool],
        invocations_to_reroute: set[InvocationId],
    ) -> DistributedInvocation | None:
        """What follows the engine's claim (``Lifecycle.claim``'s tuple) in ``_claim``."""
        kind, _raw, record, watched = claim
        if kind == "not_available" or record is None:  # a record unless not available
            return None
        invocation = self._invocation(record)
        if kind == "claimed":
            self._after_change(invocation_id, InvocationStatus.PENDING, watched)
            return invocation
        if kind == "started":
            self._after_change(invocation_id, InvocationStatus.PENDING, watched)
            self._started.slot = (invocation_id, runner_ctx.runner_id, watched)
            return invocation
        # needs_check: the task's running concurrency control is not known yet.
        task = invocation.task
        if task.conf.running_concurrency == ConcurrencyControlType.DISABLED:
            self._task_runs_freely(task.task_id.key)
        return defer_or_pend(self, invocation, runner_ctx, invocations_to_reroute)

    @native_step
    def get_additional_invocations_to_run(
        self,
        lifecycle: _core.Lifecycle,
        missing_invocations: int,
        blocking_invocation_ids: set[InvocationId],
        invocations_to_reroute: set[InvocationId],
        runner_ctx: RunnerContext,
        queue_provider: Callable[[], Sequence[str]],
        on_queue_retrieved: Callable[[str], None],
    ) -> Iterator[DistributedInvocation]:
        broker = self.app.broker
        while missing_invocations > 0:
            retrieved_invocation = False
            for queue_name in queue_provider():
                invocation_id = broker.retrieve_invocation(queue_name)
                if not invocation_id:
                    continue
                retrieved_invocation = True
                on_queue_retrieved(queue_name)
                if invocation_id not in blocking_invocation_ids:
                    invocation = self._claim(
                        lifecycle, invocation_id, runner_ctx, invocations_to_reroute
                    )
                    if invocation is not None:
                        missing_invocations -= 1
                        yield invocation
                break
            if not retrieved_invocation:
                break

    @native_step
    def take_for_runner(
        self, lifecycle: _core.Lifecycle, runner_ctx: RunnerContext
    ) -> tuple[_core.Lifecycle, _core.Broker, str, str] | None:
        """What a runner's engine needs to take and claim in one step
        (``Lifecycle.take_and_start``): (lifecycle, its broker, owner id, runner-context
        id), the context stored; None in mixed mode. The runner then hands each
        outcome to ``claimed_for_run``."""
        if not self._claims_may_start():
            return None
        runner_id, ctx_id = self._actor(runner_ctx)
        return lifecycle, self.storage.broker(), runner_id, ctx_id

    def claimed_for_run(
        self,
        invocation_id: InvocationId,
        runner_ctx: RunnerContext,
        claim: tuple[str, Any, dict[str, Any] | None, bool] | BaseException,
    ) -> DistributedInvocation | None:
        """``claim_for_run(invocation_id, runner_ctx, start=True)`` for an id the
        engine took and claimed already (``take_for_runner``): ``claim`` is the claim's
        outcome, or the error it raised, raised here unless another runner won the
        race (then logged as pynenc logs it, and None)."""
        if isinstance(claim, IllegalTransition | OwnershipViolation):
            self._claim_refused(invocation_id, claim)
            return None
        if isinstance(claim, BaseException):
            raise claim
        lifecycle = self._lifecycle()
        assert lifecycle is not None  # take_for_runner gave it
        to_reroute: set[InvocationId] = set()
        invocation = self._claimed(lifecycle, invocation_id, runner_ctx, claim, to_reroute)
        if to_reroute:
            self.reroute_invocations(to_reroute, runner_ctx)
        return invocation

    @native_step
    def claim_for_run(
        self,
        lifecycle: _core.Lifecycle,
        invocation_id: InvocationId,
        runner_ctx: RunnerContext,
        start: bool = False,
    ) -> DistributedInvocation | None:
        """Claim one id already taken from the broker for ``runner_ctx``.

        Same semantics as the per-id body of ``get_additional_invocations_to_run``
        (status check, lookup, running concurrency control, PENDING with its
        history row and trigger report); an invocation deferred by concurrency
        control with ``reroute_on_concurrency_control`` is rerouted at once.
        Returns None when the invocation is not to be run now.

        ``start``: the caller runs the returned invocation at once, on this thread,
        with ``DistributedInvocation.run(runner_ctx)``. For a task that runs freely
        the claim then also moves it to RUNNING (history row included) in the same
        engine call, and ``run``'s own ``set_invocation_status(RUNNING)`` only logs
        and reports to the trigger, so the storage sees one operation fewer.
        """
        to_reroute: set[InvocationId] = set()
        start = start and self._claims_may_start()
        invocation = self._claim(lifecycle, invocation_id, runner_ctx, to_reroute, start)
        if to_reroute:
            self.reroute_invocations(to_reroute, runner_ctx)
        return invocation
