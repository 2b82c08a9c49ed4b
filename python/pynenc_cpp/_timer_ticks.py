"""The ticks of ``CppRunner``'s engine timer thread: the heartbeat (which also stores
timeouts the storage missed and runs the native recovery of dead runners) and the
management duties (pynenc's atomic services), with their intervals (``runner_intervals``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pynenc_cpp._outage import no_ride_out

if TYPE_CHECKING:
    from pynenc.app import Pynenc
    from pynenc.identifiers.invocation_id import InvocationId

    from pynenc_cpp.runner import ConfigCppRunner, TaskTimeoutError

#: The longest heartbeat tick when ``cpp_runner_heartbeat_interval_sec`` is 0: the
#: native recovery runs on it (``CppRunner._recover_dead_runners``), so a dead runner's
#: invocations are recovered within dead-after + this. Each tick is a wake-up of an
#: idle runner (bench/results/2026-12-05-stop-49-idle-wakeups-counted.md: what one costs).
_RECOVERY_TICK_SEC = 5.0


def runner_intervals(app: Pynenc, conf: ConfigCppRunner) -> tuple[float, float]:
    """(heartbeat, management) intervals of a ``CppRunner`` of ``app``, in seconds."""
    app_conf = app.conf
    check = float(app_conf.atomic_service_check_interval_minutes) * 60.0
    heartbeat = float(conf.cpp_runner_heartbeat_interval_sec)
    if heartbeat <= 0:
        dead_after = float(app_conf.runner_considered_dead_after_minutes) * 60.0
        # At most _RECOVERY_TICK_SEC: the native recovery runs on this tick too,
        # so the invocations of a dead runner are recovered within dead-after + it.
        heartbeat = min(check, dead_after / 4.0, _RECOVERY_TICK_SEC)
    return max(heartbeat, 0.05), max(check, 0.05)


class TimerTicks:
    """``CppRunner``'s heartbeat and management ticks (a mixin).

    Called on the engine's timer thread.
    """

    app: Any
    logger: logging.Logger
    runner_id: str
    _unrecorded_timeouts: dict[InvocationId, tuple[TaskTimeoutError, bool]]
    _last_atomic_service_check_time: float

    if TYPE_CHECKING:
        # CppRunner's, its other mixins' and pynenc's BaseRunner's.

        @property
        def conf(self) -> ConfigCppRunner: ...

        def _record_timeouts(self) -> None: ...

        def _steady_heartbeats(self, now: float | None = None) -> bool: ...

        def _recover_dead_runners(self) -> None: ...

        def _check_atomic_services(self) -> None: ...

    def _intervals(self) -> tuple[float, float]:
        return runner_intervals(self.app, self.conf)

    def _heartbeat(self) -> None:
        if self._unrecorded_timeouts:
            self._record_timeouts()
        try:
            self.app.orchestrator.register_runner_heartbeats(
                [self.runner_id], can_run_atomic_service=True, consumed_queues=self.conf.queues
            )
        except Exception:
            self.logger.exception(f"CppRunner:{self.runner_id} heartbeat failed")
            return
        if not self._steady_heartbeats():
            return
        try:
            self._recover_dead_runners()
        except Exception:
            self.logger.exception(f"CppRunner:{self.runner_id} native recovery failed")

    def _management(self) -> None:
        # The C++ timer decides when; pynenc's own interval check must not skip it.
        self._last_atomic_service_check_time = 0.0
        try:
            # On the timer thread, which also runs the task-timeout watchdog: an
            # outage fails the duties at once (the next tick runs them again) rather
            # than holding the watchdog for the ride-out budget.
            with no_ride_out():
                self._check_atomic_services()
        except Exception:
            self.logger.exception(f"CppRunner:{self.runner_id} management duties failed")
