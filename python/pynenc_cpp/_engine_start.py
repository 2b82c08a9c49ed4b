"""Starting ``CppRunner``'s engine: its options read from the config (``workers``,
``prefetch``, the settings checked at start), the ``_core.RunnerEngine`` built over the
engine broker with the runner's hooks (``_start_engine``), and what runs beside it: the
trigger wake (``_trigger_wake``) and the metrics server.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, cast

from pynenc_cpp import _core, _shortcuts
from pynenc_cpp._component import CppComponentMixin
from pynenc_cpp._settings import check_setting
from pynenc_cpp._stopping import _LIVE_RUNNERS
from pynenc_cpp._trigger_wake import TriggerWake

if TYPE_CHECKING:
    import threading

    from pynenc.runner.runner_context import RunnerContext

    from pynenc_cpp._run import FinishState, PendingFinish
    from pynenc_cpp.runner import ConfigCppRunner, CppRunner

#: Where a value read again at use came from: the config is checked when it is made, so
#: a refused value here was assigned to the runner's config object afterwards.
_SET_LATER = "set on the runner's config after it was built"


class EngineStart:
    """``CppRunner``'s engine options and start (a mixin; ``self`` is the runner, which
    ``cast`` tells the type checker where it is passed as one)."""

    app: Any
    logger: logging.Logger
    runner_id: str
    runner_context: RunnerContext
    _engine: Any
    _metrics_server: Any
    _trigger_wake: TriggerWake | None
    _stop_requests: int
    _abort_deadline: float | None
    _grace_deadline: float | None
    _last_heartbeat_ok: float | None
    _heartbeats_steady_since: float | None

    if TYPE_CHECKING:
        # CppRunner's, and its other mixins': the engine's hooks and the timer's ticks.

        @property
        def conf(self) -> ConfigCppRunner: ...

        @property
        def _unrecorded_lock(self) -> threading.Lock: ...

        def _intervals(self) -> tuple[float, float]: ...

        def _heartbeat(self) -> None: ...

        def _management(self) -> None: ...

        def _execute(self, invocation_id: str, claimed: bool) -> None: ...

        def _execute_taken(self, invocation_id: str, claim: Any) -> PendingFinish | None: ...

        def _finished_taken(self, state: FinishState, outcome: object) -> None: ...

        def _fallback_next(self) -> str | None: ...

        def _next_blocking(self) -> str | None: ...

        def _on_timeout(self, invocation_id: str, thread_ident: int) -> None: ...

        def _on_thread_started(self, worker: int) -> None: ...

        def _report_error(self, message: str) -> None: ...

    @property
    def workers(self) -> int:
        """Number of worker threads (``cpp_runner_workers``, or one per CPU)."""
        n = check_setting("cpp_runner_workers", self.conf.cpp_runner_workers, _SET_LATER)
        return int(n) or (os.cpu_count() or 1)

    @property
    def prefetch(self) -> int:
        """``cpp_runner_prefetch``: the most invocations a worker holds (>= 1)."""
        return int(check_setting("cpp_runner_prefetch", self.conf.cpp_runner_prefetch, _SET_LATER))

    def _take_for_runner(self, broker: Any) -> tuple[Any, Any, str, str] | None:
        """(lifecycle, broker, owner id, context id) when the workers can take and claim
        in one engine call (a native orchestrator over this engine broker), else None."""
        if broker is None:
            return None
        take_for_runner = getattr(self.app.orchestrator, "take_for_runner", None)
        if take_for_runner is None:
            return None
        take = take_for_runner(self.runner_context)
        if take is None or take[1] is not broker:
            return None
        return cast(tuple[Any, Any, str, str], take)

    def _engine_broker(self) -> Any:
        """The engine broker to block on, or None for a non pynenc-cpp broker."""
        broker = self.app.broker
        return broker.storage.broker() if isinstance(broker, CppComponentMixin) else None

    def _on_start(self) -> None:
        # Its per-id claim follows pynenc's claim body, which has no per-id fallback.
        _shortcuts.require_unchanged("claim", "CppRunner")
        self._stop_requests = 0
        _ = self._unrecorded_lock  # made before the engine's threads may race for it
        self._abort_deadline = None
        self._grace_deadline = None
        self._last_heartbeat_ok = self._heartbeats_steady_since = None
        timeout = float(
            check_setting(
                "cpp_runner_task_timeout_sec", self.conf.cpp_runner_task_timeout_sec, _SET_LATER
            )
        )
        # Read by the trigger wake when it starts; refused here, before anything runs.
        check_setting("cpp_runner_trigger_wake", self.conf.cpp_runner_trigger_wake, _SET_LATER)
        heartbeat, management = self._intervals()
        broker = self._engine_broker()
        queues = list(self.conf.queues or self.app.broker.conf.queues)
        self._start_metrics_server()  # a taken port fails here, before anything runs
        try:
            self._start_engine(broker, queues, timeout, heartbeat, management)
        except BaseException:
            self._stop_metrics_server()
            raise

    def _start_engine(
        self,
        broker: Any,
        queues: list[str],
        timeout: float,
        heartbeat: float,
        management: float,
    ) -> None:
        self._heartbeat()  # registered before any invocation is claimed
        take = self._take_for_runner(broker)
        settings = _core.RunnerSettings(
            self.workers,
            timeout,
            heartbeat,
            management,
            retrieve_wait_sec=float(self.conf.cpp_runner_retrieve_wait_sec),
            idle_backoff_sec=max(float(self.conf.runner_loop_sleep_time_sec), 0.001),
            take_ahead=bool(self.conf.cpp_runner_take_ahead),
            prefetch=self.prefetch,
        )
        if take is not None:
            lifecycle, engine_broker, runner_id, context_id = take
            source = _core.RunnerSource(
                engine_broker,
                queues,
                lifecycle=lifecycle,
                runner_id=runner_id,
                runner_context_id=context_id,
            )
        elif broker is not None:
            source = _core.RunnerSource(broker, queues)
        else:
            source = _core.RunnerSource(fallback_next=self._fallback_next)
        callbacks = _core.RunnerCallbacks(
            self._execute,
            execute_taken=self._execute_taken if take is not None else None,
            finished_taken=self._finished_taken if take is not None else None,
            next_blocking=self._next_blocking,
            heartbeat=self._heartbeat,
            management=self._management,
            timed_out=self._on_timeout,
            thread_started=self._on_thread_started,
            report_error=self._report_error,
        )
        self._engine = _core.RunnerEngine(settings, source, callbacks)
        self._engine.start()
        _LIVE_RUNNERS.add(cast("CppRunner", self))
        self._start_trigger_wake()
        self.logger.info(
            f"CppRunner:{self.runner_id} started {self.workers} workers on queues {queues} "
            f"({'engine broker, blocking' if broker is not None else 'polling ' + type(self.app.broker).__name__})"
        )

    def _start_trigger_wake(self) -> None:
        # A stop from another thread may take self._trigger_wake meanwhile: the wake
        # it stopped does not start (TriggerWake.start).
        wake = TriggerWake.for_runner(self) if self.conf.cpp_runner_trigger_wake else None
        self._trigger_wake = wake
        if wake is not None:
            wake.start()

    def _stop_trigger_wake(self) -> None:
        wake, self._trigger_wake = self._trigger_wake, None
        if wake is not None:
            wake.stop()

    def _stop_metrics_server(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.close()
            self._metrics_server = None

    def _start_metrics_server(self) -> None:
        port = int(
            check_setting("cpp_runner_metrics_port", self.conf.cpp_runner_metrics_port, _SET_LATER)
        )
        if port == 0:
            return
        from pynenc_cpp.metrics import serve

        addr = str(self.conf.cpp_runner_metrics_addr)
        self._metrics_server = serve(port, addr, app=self.app)
        self.logger.info(
            f"CppRunner:{self.runner_id} serves metrics on http://{addr}:{port}/metrics"
        )
