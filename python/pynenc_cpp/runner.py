"""CppRunner: a pynenc runner whose loop runs in C++ (``_core.RunnerEngine``).

N worker threads, each with one persistent Python thread state, block on the
engine broker with the GIL released and take the GIL only to claim and run an
invocation. A C++ timer thread sends heartbeats, runs the management duties
(pynenc's atomic services: trigger loop and recovery) and the task-timeout
watchdog; a thread runs the trigger loop whenever the store records a valid
condition or a cron slot comes (``_trigger_wake``). Select it like any pynenc runner::

    app = PynencBuilder().app_id("a").cpp_sqlite(path="a.db").cpp_runner(workers=4).build()
    app.runner.run()                        # or: pynenc --app mod.app runner start

or with ``PYNENC__RUNNER_CLS=CppRunner`` and ``PYNENC__CPP_RUNNER_WORKERS=4``.

Shutdown: the first SIGINT/SIGTERM (or ``stop_runner_loop()``) is graceful (no
more retrieval; running invocations finish; none is left RUNNING); the second
is immediate (running invocations are KILLED and rerouted, then the runner exits).

This module holds ``CppRunner`` (its state, ``run`` and the hooks the engine's worker
threads call) and its config; its other parts are mixins in modules of their own:
``_engine_start`` (the engine's options and start), ``_stopping`` (graceful and
immediate stops), ``_timer_ticks`` (heartbeat and management ticks), ``_timeouts``,
``_recovery`` and ``_result_wait``.
"""

from __future__ import annotations

import threading
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from cistell import ConfigField
from pynenc import context
from pynenc.conf.config_runner import ConfigRunner
from pynenc.exceptions import InvocationStatusError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus
from pynenc.runner.base_runner import BaseRunner

from pynenc_cpp import _shortcuts
from pynenc_cpp._claim import claim_one
from pynenc_cpp._engine_start import EngineStart
from pynenc_cpp._interrupt import WorkerInterrupted, interrupt_thread
from pynenc_cpp._recovery import DeadRunnerRecovery
from pynenc_cpp._result_wait import ResultWaits
from pynenc_cpp._settings import StrictCppSettings
from pynenc_cpp._signal_wake import watch_signals
from pynenc_cpp._stopping import RunnerStop
from pynenc_cpp._timeouts import TimeoutRecords
from pynenc_cpp._timer_ticks import TimerTicks
from pynenc_cpp._timer_ticks import runner_intervals as runner_intervals
from pynenc_cpp._trigger_wake import TriggerWake
from pynenc_cpp.native import CppNativeOrchestrator

if TYPE_CHECKING:
    from collections.abc import Callable

    from pynenc.app import Pynenc
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.runner.runner_context import RunnerContext

    from pynenc_cpp._run import FinishState, PendingFinish

#: How often an idle ``run`` wakes to look at ``running`` (a stop, a signal or a new
#: deadline wakes it at once). Each wake-up of an idle process costs CPU time.
_RUN_TICK_SEC = 5.0
#: How often ``run`` lets Python's signal handlers run when no watch wakes it for them.
_SIGNAL_SLICE_SEC = 0.1


class TaskTimeoutError(TimeoutError):
    """Stored as the exception of an invocation that outlived ``cpp_runner_task_timeout_sec``."""


class TaskAbortedError(RuntimeError):
    """Stored as the exception of an invocation whose task ended its thread with a
    ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``...)."""


class ConfigCppRunner(StrictCppSettings, ConfigRunner):
    """
    :cvar ConfigField[int] cpp_runner_workers:
        Worker threads (parallel invocations). 0: one per CPU.
    :cvar ConfigField[float] cpp_runner_task_timeout_sec:
        An invocation running longer is set FAILED with a ``TaskTimeoutError`` and
        its worker is replaced. 0 (default): no timeout.
    :cvar ConfigField[float] cpp_runner_heartbeat_interval_sec:
        Seconds between heartbeats. 0 (default): a quarter of
        ``runner_considered_dead_after_minutes``, at most
        ``atomic_service_check_interval_minutes``.
    :cvar ConfigField[float] cpp_runner_retrieve_wait_sec:
        Longest single blocking wait on the broker (new work and a stop wake it at
        once; with one queue an idle worker wakes once per wait, with several it
        watches them in turn, 50 ms each). Default 5.
    :cvar ConfigField[float] cpp_runner_stop_grace_sec:
        How long a graceful stop (first signal, or ``stop_runner_loop()``) lets
        running invocations finish before killing and rerouting them. < 0
        (default): as long as they take; 0: at once (pynenc's own runners'
        behaviour: every running invocation is KILLED and REROUTED on stop).
    :cvar ConfigField[int] cpp_runner_metrics_port:
        Serves Prometheus metrics (the engine's and the app's storage gauges, see
        ``docs/metrics.md``) on ``http://<cpp_runner_metrics_addr>:<port>/metrics``
        while the runner runs. 0 (default): off. Needs ``prometheus_client``
        (``pip install 'pynenc-cpp[metrics]'``).
    :cvar ConfigField[str] cpp_runner_metrics_addr:
        The address the metrics server listens on (default ``127.0.0.1``; ``0.0.0.0``
        for every interface).
    :cvar ConfigField[bool] cpp_runner_take_ahead:
        A worker's finish also takes and starts its next invocation where the
        storage does both in one operation (SQLite: one write transaction; Redis:
        one round trip, made only while the queue is not empty). True (default);
        False: every take is its own operation.
    :cvar ConfigField[int] cpp_runner_prefetch:
        K, the most invocations a worker holds: a take that leaves the queue
        non-empty also claims (PENDING) up to K - 1 more in the same operation
        (one script on Redis, one transaction on SQLite), held for this runner's
        workers in queue order. 1 (default, chosen by measurement:
        ``docs/performance.md``): no prefetch; a finish takes the next one
        (``cpp_runner_take_ahead``), which already makes one operation a task.
        A claimed invocation's RUNNING change is its run's own operation, and one
        held longer than pynenc's ``max_pending_seconds`` (a long task ahead of it)
        is recovered and run elsewhere (``docs/runner.md``).
    :cvar ConfigField[bool] cpp_runner_trigger_wake:
        Runs pynenc's trigger loop when the store records a valid condition (a
        status, result or exception a trigger watches, ``emit_event``) and at each
        cron slot, on a thread of the runner, instead of only on pynenc's atomic
        service (``atomic_service_check_interval_minutes``). True (default) with a
        pynenc-cpp trigger; False: triggers fire on the atomic service only.
        Cron conditions still need pynenc's ``enable_scheduler`` (``docs/trigger_store.md``).
    """

    cpp_runner_workers = ConfigField(0)
    cpp_runner_task_timeout_sec = ConfigField(0.0)
    cpp_runner_heartbeat_interval_sec = ConfigField(0.0)
    cpp_runner_retrieve_wait_sec = ConfigField(5.0)
    cpp_runner_stop_grace_sec = ConfigField(-1.0)
    cpp_runner_metrics_port = ConfigField(0)
    cpp_runner_metrics_addr = ConfigField("127.0.0.1")
    cpp_runner_take_ahead = ConfigField(True)
    cpp_runner_prefetch = ConfigField(1)
    cpp_runner_trigger_wake = ConfigField(True)


class CppRunner(
    EngineStart,
    RunnerStop,
    TimerTicks,
    TimeoutRecords,
    DeadRunnerRecovery,
    ResultWaits,
    BaseRunner,
):
    """A runner whose loop, worker pool, timers and shutdown run in C++."""

    def __init__(
        self,
        app: Pynenc,
        runner_cache: dict[str, Any] | None = None,
        runner_context: RunnerContext | None = None,
    ) -> None:
        self._engine: Any = None
        self._metrics_server: Any = None
        self._trigger_wake: TriggerWake | None = None
        self._stop_requests = 0
        self._abort_deadline: float | None = None
        self._grace_deadline: float | None = None
        # Timeouts whose FAILED could not be stored (storage unreachable): stored on a
        # later heartbeat tick, so the invocation does not stay RUNNING under a live runner.
        # (error, whether a lost attempt may have stored it already)
        self._unrecorded_timeouts: dict[InvocationId, tuple[TaskTimeoutError, bool]] = {}
        # Native recovery waits until this runner's own heartbeats have been stored
        # without a stall for a whole dead-after time (``_heartbeat``).
        self._last_heartbeat_ok: float | None = None
        self._heartbeats_steady_since: float | None = None
        super().__init__(app, runner_cache, runner_context)

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()
        state["_engine"] = None
        state["_metrics_server"] = None
        state["_trigger_wake"] = None
        state["_unrecorded_timeouts"] = {}
        state.pop("_unrecorded_lock", None)
        state.pop("_wait_memo", None)  # a threading.local: per process, rebuilt lazily
        return state

    @cached_property
    def conf(self) -> ConfigCppRunner:
        return ConfigCppRunner(
            config_values=self.app.config_values,
            config_filepath=self.app.config_filepath,
        )

    @staticmethod
    def mem_compatible() -> bool:
        """True: the workers are threads of this process."""
        return True

    @property
    def max_parallel_slots(self) -> int:
        return self.workers

    def get_active_child_runner_ids(self) -> list[str]:
        """No child runners: the workers are threads sharing this runner's id."""
        return []

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Starts the engine and waits for it in C++ (GIL released, signals handled)."""
        context.set_current_runner(self.app.app_id, self)
        self.on_start()
        unwatch = watch_signals(self._engine)
        # Short slices only where a signal handler could run and no watch ends the
        # slice when a signal comes (see ``_signal_wake``).
        on_main = threading.current_thread() is threading.main_thread()
        slow_signals = on_main and unwatch is None
        try:
            while True:
                # Until the next deadline, at most a tick; a deadline set meanwhile
                # (a stop from a handler or another thread) nudges the wait.
                tick = self._run_tick()
                if self._engine.wait(tick, _SIGNAL_SLICE_SEC if slow_signals else tick):
                    break
                if not self.running and self._engine.state == "running":
                    self._engine.stop()  # `running` cleared without stop_runner_loop
                if self._grace_deadline is not None and time.monotonic() > self._grace_deadline:
                    self._grace_deadline = None
                    self.logger.warning(
                        f"CppRunner:{self.runner_id} stop grace period over: killing what still runs"
                    )
                    self._abort()
                if self._abort_deadline is not None and time.monotonic() > self._abort_deadline:
                    self.logger.warning(
                        f"CppRunner:{self.runner_id} exiting with interrupted workers still busy"
                    )
                    break
        except KeyboardInterrupt:
            self.logger.warning(f"KeyboardInterrupt received. Stopping runner:{self.runner_id}...")
            self._abort()
        finally:
            if unwatch is not None:
                unwatch()
            self.on_stop()
            context.clear_current_runner(self.app.app_id)

    def _run_tick(self) -> float:
        """How long ``run`` may wait before it must look at its deadlines again."""
        tick = _RUN_TICK_SEC
        now = time.monotonic()
        for deadline in (self._grace_deadline, self._abort_deadline):
            if deadline is not None:
                tick = min(tick, max(deadline - now, 0.0) + 0.01)
        return tick

    def runner_loop_iteration(self) -> None:
        """Not used: the loop runs in C++ (see ``run``)."""
        time.sleep(self.conf.runner_loop_sleep_time_sec)

    # ------------------------------------------------------- hooks (engine threads)

    def _on_thread_started(self, worker: int) -> None:
        context.set_current_runner(self.app.app_id, self)
        context.set_current_app(self.app)

    def _claim(self, invocation_id: InvocationId) -> DistributedInvocation | None:
        """pynenc's ``get_additional_invocations_to_run`` for one retrieved id."""
        orchestrator = self.app.orchestrator
        native = getattr(orchestrator, "claim_for_run", None)
        if native is not None:  # claimed and, for a free task, RUNNING already
            return native(invocation_id, self.runner_context, start=True)
        to_reroute: set[InvocationId] = set()
        try:
            invocation = claim_one(orchestrator, invocation_id, self.runner_context, to_reroute)
        except InvocationStatusError as ex:  # another runner got there first
            self.logger.debug(f"invocation:{invocation_id} not claimed: {ex}")
            return None
        if to_reroute:
            orchestrator.reroute_invocations(to_reroute, self.runner_context)
        return invocation

    def _execute_taken(self, invocation_id: str, claim: Any) -> PendingFinish | None:
        """``_execute`` of an id the engine took and claimed (``take_for_runner``):
        ``claim`` is the claim's outcome or its error. Returns what the engine is to
        store after it (the orchestrator's ``run_invocation_to_finish``, completed by
        ``_finished_taken``); None when the run is over."""
        inv_id = InvocationId(invocation_id)
        orchestrator = self.app.orchestrator
        invocation = self._claimed(
            inv_id, lambda: orchestrator.claimed_for_run(inv_id, self.runner_context, claim)
        )
        if invocation is None:
            self._forget_started()
            return None
        return self._guarded_run(
            invocation, orchestrator.run_invocation_to_finish, invocation, self.runner_context
        )

    def _finished_taken(self, state: FinishState, outcome: object) -> None:
        """The engine stored the result ``_execute_taken`` left (``outcome``: the store's
        tuple or error) and Python has work left: the orchestrator's
        ``complete_finish``, ended as ``_run`` ends a run."""
        self._guarded_run(state[0], self.app.orchestrator.complete_finish, state, outcome)

    def _execute(self, invocation_id: str, claimed: bool) -> None:
        inv_id = InvocationId(invocation_id)
        if claimed:  # from next_blocking: claimed by the orchestrator already
            try:
                invocation = self.app.state_backend.get_invocation(inv_id)
            except WorkerInterrupted:
                return  # timed out or killed: its status was set by whoever interrupted it
            except Exception:
                self.logger.exception(f"invocation:{inv_id} unreadable; left to recovery")
                return
            self._run(invocation)
        else:
            self._run(self._claimed(inv_id, lambda: self._claim(inv_id)))

    def _claimed(
        self, inv_id: InvocationId, claim: Callable[[], DistributedInvocation | None]
    ) -> DistributedInvocation | None:
        """``claim()``, or None when it failed (the id is then routed back)."""
        try:
            return claim()
        except WorkerInterrupted:
            self._forget_started()
            return None  # timed out or killed: its status was set by whoever interrupted it
        except Exception:
            self.logger.exception(f"invocation:{inv_id} could not be claimed; routing it back")
            self._route_back(inv_id)
            self._forget_started()
            return None

    def _forget_started(self) -> None:
        forget = getattr(self.app.orchestrator, "forget_started", None)
        if forget is not None:
            forget()  # a run that ended before its RUNNING step leaves no note behind

    def _run(self, invocation: DistributedInvocation | None) -> None:
        """Runs a claimed invocation on this worker (None: nothing to run)."""
        if invocation is None:
            self._forget_started()
            return
        # A native orchestrator runs it with less Python between the steps of
        # pynenc's ``DistributedInvocation.run`` (same steps and outcomes).
        orchestrator = self.app.orchestrator
        if isinstance(orchestrator, CppNativeOrchestrator):
            self._guarded_run(
                invocation, orchestrator.run_invocation, invocation, self.runner_context
            )
        else:
            self._guarded_run(invocation, invocation.run, self.runner_context)

    def _guarded_run[T](
        self, invocation: DistributedInvocation, step: Callable[..., T], *args: Any
    ) -> T | None:
        """``step(*args)``, a step of running ``invocation`` on this worker; what it
        raises ends the run as below (None is returned then)."""
        try:
            return step(*args)
        except WorkerInterrupted:
            return None  # timed out or killed: its status was set by whoever interrupted it
        except Exception as exc:
            # Normally pynenc stored the task's exception and logged it before
            # re-raising; if the failure came from storing the outcome itself
            # (e.g. the backend went away), the invocation would stay ours and
            # RUNNING while this runner lives: report it as FAILED instead.
            self._fail_if_still_ours(invocation, exc)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, other BaseExceptions
            self._fail(invocation, exc)
        finally:
            self._forget_started()
        return None

    def _fail_if_still_ours(self, invocation: DistributedInvocation, exc: Exception) -> None:
        """Set FAILED an invocation that ``run`` left PENDING or RUNNING after ``exc``."""
        try:
            status = self.app.orchestrator.get_invocation_status(invocation.invocation_id)
        except Exception:
            self.logger.exception(f"invocation:{invocation.invocation_id} status unreadable")
            return
        if status not in (InvocationStatus.PENDING, InvocationStatus.RUNNING):
            return
        error = self._aborted(invocation, exc, "failed outside its task body")
        try:
            self.app.orchestrator.set_invocation_exception(invocation, error, self.runner_context)
        except Exception:
            self.logger.exception(f"invocation:{invocation.invocation_id} not set FAILED")

    def _aborted(
        self, invocation: DistributedInvocation, exc: BaseException, how: str
    ) -> TaskAbortedError:
        """The error an invocation is reported FAILED with when ``exc`` ended it outside
        its task's own body (``how``), logged."""
        error = TaskAbortedError(
            f"invocation:{invocation.invocation_id} {how} with "
            f"{type(exc).__name__}({exc!s}); reported as FAILED"
        )
        self.logger.error(str(error))
        return error

    def _fail(self, invocation: DistributedInvocation, exc: BaseException) -> None:
        error = self._aborted(invocation, exc, "ended its worker thread")
        try:
            self.app.orchestrator.set_invocation_exception(invocation, error, self.runner_context)
        except InvocationStatusError as ex:
            self.logger.warning(f"invocation:{invocation.invocation_id} not set FAILED: {ex}")

    def _on_timeout(self, invocation_id: str, thread_ident: int) -> None:
        inv_id = InvocationId(invocation_id)
        timeout = float(self.conf.cpp_runner_task_timeout_sec)
        error = TaskTimeoutError(
            f"invocation:{inv_id} ran longer than cpp_runner_task_timeout_sec={timeout}; "
            "it was interrupted and its worker replaced"
        )
        self.logger.error(str(error))
        self._record_timeout(inv_id, error)
        interrupt_thread(thread_ident)

    def _route_back(self, invocation_id: InvocationId) -> None:
        """Put an id taken from the broker but not run back in its queue."""
        try:
            status = self.app.orchestrator.get_invocation_status(invocation_id)
            if status.is_available_for_run():
                invocation = self.app.state_backend.get_invocation(invocation_id)
                self.app.orchestrator.route_invocation(invocation)
            elif not status.is_final():
                self._kill_and_reroute(invocation_id)
        except Exception:
            self.logger.exception(f"invocation:{invocation_id} could not be routed back")

    def _fallback_next(self) -> str | None:
        for queue_name in self.queue_names_for_retrieval():
            invocation_id = self.app.broker.retrieve_invocation(queue_name)
            if invocation_id:
                self.note_queue_retrieved(queue_name)
                return str(invocation_id)
        return None

    def _next_blocking(self) -> str | None:
        try:
            for invocation_id in self.app.orchestrator.get_blocking_invocations_to_run(
                1, set(), self.runner_context
            ):
                return str(invocation_id)
        except Exception:
            self.logger.exception("CppRunner: reading blocking invocations failed")
        return None

    def _report_error(self, message: str) -> None:
        self.logger.error(f"CppRunner:{self.runner_id} {message}")

    # ---------------------------------------------------------- waiting for results

    def waiting_for_results(
        self,
        running_invocation_id: InvocationId | None,
        result_invocation_ids: list[InvocationId],
        runner_args: dict[str, Any] | None = None,
    ) -> None:
        """Blocks until one of ``result_invocation_ids`` is final (or a while passed).

        From outside the runner (``running_invocation_id`` None, e.g. a client
        reading ``invocation.result``) this blocks in the engine orchestrator's
        ``wait_any_final`` with the GIL released instead of sleeping
        ``invocation_wait_results_sleep_time_sec`` blindly; without a pynenc-cpp
        orchestrator, or while the ``result_wait`` shortcut is off
        (``pynenc_cpp._shortcuts``), it is pynenc's own. Inside the runner see
        ``_waiting_for_results``.
        """
        if running_invocation_id:
            self._waiting_for_results(running_invocation_id, result_invocation_ids, runner_args)
            return
        if "result_wait" not in _shortcuts.of_app(self.app) or not self._wait_any_final(
            result_invocation_ids
        ):
            super().waiting_for_results(running_invocation_id, result_invocation_ids, runner_args)

    def _waiting_for_results(
        self,
        running_invocation_id: InvocationId,
        result_invocation_ids: list[InvocationId],
        runner_args: dict[str, Any] | None = None,
    ) -> None:
        """The waiting worker stops counting as a slot (another worker takes its
        place) and blocks with the GIL released until a result is final (engine
        orchestrator), else sleeps ``invocation_wait_results_sleep_time_sec``."""
        del running_invocation_id, runner_args
        if self._engine is not None:
            self._engine.mark_waiting()
        if not self._wait_any_final(result_invocation_ids):
            time.sleep(self.conf.invocation_wait_results_sleep_time_sec)
