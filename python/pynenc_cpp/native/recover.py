"""Native mode's recovery: pynenc's two recovery core tasks (stale RUNNING and
PENDING invocations) in two engine calls, then the reroutes."""

from __future__ import annotations

from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus
from pynenc.runner.runner_context import RunnerContext

from pynenc_cpp import _core
from pynenc_cpp._native_step import native_step
from pynenc_cpp.native.base import NativeBase, _us


class Recovers(NativeBase):
    """Recovery (a mixin of ``CppNativeOrchestrator``)."""

    # ---- recovery ----------------------------------------------------------

    @native_step
    def recover_stale_invocations(
        self, lifecycle: _core.Lifecycle, runner_ctx: RunnerContext
    ) -> list[InvocationId]:
        """pynenc's two recovery core tasks in two engine calls (plus the reroutes).

        PENDING invocations older than ``max_pending_seconds`` go to
        PENDING_RECOVERY and RUNNING ones of runners without a heartbeat for
        ``runner_considered_dead_after_minutes`` to RUNNING_RECOVERY (history,
        trigger reports and log lines as pynenc's core tasks), then every one is
        rerouted. Returns the recovered ids. For runners that run recovery
        themselves (the C++ runner); pynenc's core tasks keep working unchanged.
        """
        conf = self.app.conf
        pending_us = _us(conf.max_pending_seconds)
        running_us = _us(conf.runner_considered_dead_after_minutes * 60)
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
