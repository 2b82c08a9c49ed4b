"""``MixedSteps``: what a native orchestrator does without a lifecycle (mixed mode) for
the steps pynenc's ``BaseOrchestrator`` has no method for. Every other step falls
back to pynenc's own code (``pynenc_cpp._native_step``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp._claim import claim_one
from pynenc_cpp.orchestrator import CppOrchestrator

if TYPE_CHECKING:
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.runner.runner_context import RunnerContext

    from pynenc_cpp import _core


class MixedSteps(CppOrchestrator):
    """Mixed mode's ``take_for_runner``, ``claim_for_run``, ``wait_any_final`` and
    ``recover_stale_invocations`` (native mode's are in ``_pick.py`` and ``native/``)."""

    def take_for_runner(
        self, runner_ctx: RunnerContext
    ) -> tuple[_core.Lifecycle, _core.Broker, str, str] | None:
        """None: a runner's engine takes and claims in one step only natively."""
        return None

    def claim_for_run(
        self, invocation_id: InvocationId, runner_ctx: RunnerContext, start: bool = False
    ) -> DistributedInvocation | None:
        """pynenc's per-id body of ``get_additional_invocations_to_run`` verbatim
        (``_claim.claim_one``); ``start`` changes nothing here."""
        to_reroute: set[InvocationId] = set()
        invocation = claim_one(self, invocation_id, runner_ctx, to_reroute)
        if to_reroute:
            self.reroute_invocations(to_reroute, runner_ctx)
        return invocation

    def wait_any_final(self, invocation_ids: Sequence[str], timeout_sec: float) -> str | None:
        """The orchestrator engine's wait, without reading what it found."""
        final_id: str | None = self._engine.wait_any_final(list(invocation_ids), timeout_sec)
        return final_id

    def recover_stale_invocations(self, runner_ctx: RunnerContext) -> list[InvocationId]:
        """pynenc's two recovery core tasks, a status change per invocation."""
        recovered: list[InvocationId] = []
        for invocation_id in list(self.get_pending_invocations_for_recovery()):
            self.set_invocation_status(invocation_id, InvocationStatus.PENDING_RECOVERY, runner_ctx)
            recovered.append(invocation_id)
        for invocation_id in list(self.get_running_invocations_for_recovery()):
            self.set_invocation_status(invocation_id, InvocationStatus.RUNNING_RECOVERY, runner_ctx)
            recovered.append(invocation_id)
        self.reroute_invocations(set(recovered), runner_ctx)
        return recovered


__all__ = ["MixedSteps"]
