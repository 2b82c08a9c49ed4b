"""pynenc's per-id claim (the body of ``BaseOrchestrator.get_additional_invocations_to_run``
for one invocation id already taken from the broker), for any orchestrator.

Shared by the native orchestrators (mixed-mode fallback, and the concurrency-control
step of the native claim) and by ``CppRunner`` when the orchestrator is not ours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynenc.exceptions import InvocationStatusError
from pynenc.invocation.status import InvocationStatus

if TYPE_CHECKING:
    from pynenc.identifiers.invocation_id import InvocationId
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.orchestrator.base_orchestrator import BaseOrchestrator
    from pynenc.runner.runner_context import RunnerContext


def defer_or_pend(
    orchestrator: BaseOrchestrator,
    invocation: DistributedInvocation,
    runner_ctx: RunnerContext,
    invocations_to_reroute: set[InvocationId],
) -> DistributedInvocation | None:
    """Concurrency control, then PENDING: the invocation if it is now PENDING for
    this runner; None if deferred (CONCURRENCY_CONTROLLED, added to
    ``invocations_to_reroute`` unless the gate rerouted it in the same step; or
    CONCURRENCY_CONTROLLED_FINAL) or taken first by another runner (logged as pynenc
    logs it)."""
    invocation_id = invocation.invocation_id
    gated = getattr(orchestrator, "gated", None)
    if gated is not None and gated(invocation):
        # The check and the move to PENDING as one engine step (pynenc_cpp._concurrency).
        try:
            outcome = orchestrator.gate_running_concurrency(
                invocation, InvocationStatus.PENDING, runner_ctx, defer=True
            )
        except InvocationStatusError as ex:
            orchestrator.app.logger.warning(
                f"Could not set invocation:{invocation_id} to status:pending: {ex}"
            )
            return None
        if outcome.blocker is None:
            # Completes the change (history, trigger report, log): no transition.
            orchestrator.set_invocation_status(invocation_id, InvocationStatus.PENDING, runner_ctx)
            return invocation
        if not outcome.deferred:
            _defer(orchestrator, invocation, runner_ctx, invocations_to_reroute)
        return None
    if not orchestrator.is_candidate_to_run_by_concurrency_control(invocation):
        _defer(orchestrator, invocation, runner_ctx, invocations_to_reroute)
        return None
    try:
        orchestrator.set_invocation_status(invocation_id, InvocationStatus.PENDING, runner_ctx)
    except InvocationStatusError as ex:
        orchestrator.app.logger.warning(
            f"Could not set invocation:{invocation_id} to status:pending: {ex}"
        )
        return None
    return invocation


def _defer(
    orchestrator: BaseOrchestrator,
    invocation: DistributedInvocation,
    runner_ctx: RunnerContext,
    invocations_to_reroute: set[InvocationId],
) -> None:
    """pynenc's deferral: CONCURRENCY_CONTROLLED (added to ``invocations_to_reroute``)
    with ``reroute_on_concurrency_control``, else CONCURRENCY_CONTROLLED_FINAL."""
    invocation_id = invocation.invocation_id
    if invocation.task.conf.reroute_on_concurrency_control:
        orchestrator.set_invocation_status(
            invocation_id, InvocationStatus.CONCURRENCY_CONTROLLED, runner_ctx
        )
        invocations_to_reroute.add(invocation_id)
    else:
        orchestrator.set_invocation_status(
            invocation_id, InvocationStatus.CONCURRENCY_CONTROLLED_FINAL, runner_ctx
        )


def claim_one(
    orchestrator: BaseOrchestrator,
    invocation_id: InvocationId,
    runner_ctx: RunnerContext,
    invocations_to_reroute: set[InvocationId],
) -> DistributedInvocation | None:
    """pynenc's per-id body verbatim: availability check, then ``defer_or_pend``."""
    if not orchestrator.get_invocation_status(invocation_id).is_available_for_run():
        return None
    invocation = orchestrator.app.state_backend.get_invocation(invocation_id)
    return defer_or_pend(orchestrator, invocation, runner_ctx, invocations_to_reroute)
