"""Stopping a ``CppRunner``: the graceful stop (first signal or ``stop_runner_loop()``)
with its grace period, the immediate stop (second signal: ``_abort``), the cleanup once
``run`` ends (orphans routed back, timeouts stored, the heartbeat row forgotten), and
the stop of runners still running when the interpreter exits.
"""

from __future__ import annotations

import atexit
import logging
import time
import weakref
from typing import TYPE_CHECKING, Any, cast

from pynenc.identifiers.invocation_id import InvocationId

from pynenc_cpp._interrupt import interrupt_thread
from pynenc_cpp._outage import no_ride_out

if TYPE_CHECKING:
    from pynenc_cpp.runner import ConfigCppRunner, CppRunner, TaskTimeoutError

#: How long an immediate stop waits for interrupted workers before exiting.
_ABORT_GRACE_SEC = 2.0


def _wait_for(engine: Any, seconds: float) -> bool:
    """``engine.wait`` for ``seconds`` in all, through the nudges that end a wait
    early (``CppRunner._abort``). True when the engine's threads are done."""
    deadline = time.monotonic() + seconds
    while not engine.wait(max(deadline - time.monotonic(), 0.0)):
        if time.monotonic() >= deadline:
            return False
    return True


#: Runners whose engine is running, stopped at interpreter exit (see below).
_LIVE_RUNNERS: weakref.WeakSet[CppRunner] = weakref.WeakSet()


@atexit.register
def _stop_runners_at_exit() -> None:
    """A runner still running when the interpreter exits (e.g. ``run()`` in a daemon
    thread) stops retrieving while Python can still route back what its workers
    were taking; invocations still running are left to pynenc's recovery."""
    for runner in list(_LIVE_RUNNERS):
        engine = runner._engine
        if engine is None or engine.state != "running":
            continue
        engine.stop()
        _wait_for(engine, 1.0)
        for invocation_id in engine.take_orphans():
            runner._route_back(InvocationId(invocation_id))


class RunnerStop:
    """``CppRunner``'s stops (a mixin; ``self`` is the runner, which ``cast`` tells the
    type checker where it is passed as one)."""

    app: Any
    logger: logging.Logger
    runner_id: str
    _engine: Any
    _stop_requests: int
    _abort_deadline: float | None
    _grace_deadline: float | None
    _unrecorded_timeouts: dict[InvocationId, tuple[TaskTimeoutError, bool]]

    if TYPE_CHECKING:
        # CppRunner's, its other mixins' and pynenc's BaseRunner's.

        @property
        def conf(self) -> ConfigCppRunner: ...

        def _route_back(self, invocation_id: InvocationId) -> None: ...

        def _kill_and_reroute(self, invocation_id: Any, runner_ctx: Any = None) -> None: ...

        def _record_timeouts(self) -> None: ...

        def _stop_trigger_wake(self) -> None: ...

        def _stop_metrics_server(self) -> None: ...

    def _on_stop_runner_loop(self) -> None:
        self._stop_requests += 1
        if self._engine is None:
            return
        self._stop_trigger_wake()  # a stopping runner fires no more triggers
        grace = float(self.conf.cpp_runner_stop_grace_sec)
        if self._stop_requests == 1 and grace != 0:
            self.logger.info(
                f"CppRunner:{self.runner_id} graceful stop: running invocations finish"
            )
            self._engine.stop()
            if grace > 0:
                self._grace_deadline = time.monotonic() + grace
                self._engine.nudge()  # run() waits for the new deadline
            # What is held for the workers (taken ahead, prefetched) will not run
            # now: routed back at once, not after the running tasks end. (A second
            # stop arriving meanwhile aborts, which ends the grace period.)
            with no_ride_out():
                for invocation_id in self._engine.take_held():
                    self._route_back(InvocationId(invocation_id))
        else:
            self._abort()

    def _abort(self) -> None:
        """Immediate stop: KILLED + rerouted for every running invocation."""
        engine = self._engine
        if engine is None:
            return
        running = engine.abort()
        if running:
            self.logger.warning(
                f"CppRunner:{self.runner_id} immediate stop: killing {len(running)} invocations"
            )
        for invocation_id, thread_ident in running:
            try:
                with no_ride_out():  # an immediate stop does not wait for the storage
                    self._kill_and_reroute(InvocationId(invocation_id))
            except Exception:
                self.logger.exception(
                    f"CppRunner:{self.runner_id} invocation:{invocation_id} not killed; "
                    "left to recovery"
                )
            interrupt_thread(thread_ident)
        self._grace_deadline = None  # an abort ends the grace period, however it came
        self._abort_deadline = time.monotonic() + _ABORT_GRACE_SEC
        engine.nudge()  # run() waits for the new deadline

    def _on_stop(self) -> None:
        self._stop_trigger_wake()
        engine = self._engine
        if engine is None:
            return
        if engine.state == "running":
            engine.stop()
            _wait_for(engine, _ABORT_GRACE_SEC)
        with no_ride_out():  # stopping does not wait for the storage
            for invocation_id in engine.take_orphans():
                self._route_back(InvocationId(invocation_id))
        self._record_timeouts()
        for inv_id in self._unrecorded_timeouts:
            self.logger.error(
                f"invocation:{inv_id} timed out; FAILED not stored (storage unreachable), "
                "left RUNNING to the recovery of dead runners"
            )
        self._deregister(engine)
        _LIVE_RUNNERS.discard(cast("CppRunner", self))
        self._stop_metrics_server()

    def _deregister(self, engine: Any) -> None:
        """A graceful stop whose workers all ended forgets this runner's heartbeat row,
        so nobody counts it alive for a dead-after time (``pynenc-cpp info``). A stop
        that left a task running keeps the row: that task's thread may still write,
        and the recovery of dead runners takes it after dead-after, as for a kill."""
        if engine.state != "stopped" or self._unrecorded_timeouts:
            return
        deregister = getattr(self.app.orchestrator, "deregister_runners", None)
        if deregister is None:  # not an engine orchestrator
            return
        try:
            with no_ride_out():  # stopping does not wait for the storage
                deregister([self.runner_id])
        except Exception:
            self.logger.warning(
                f"CppRunner:{self.runner_id} could not deregister; it is listed until its "
                "heartbeat is older than dead-after",
                exc_info=True,
            )
