"""A ``CppRunner``'s trigger loop, woken by the engine instead of a timer.

pynenc fires triggers in ``BaseTrigger.trigger_loop_iteration``, which its runners
call from the atomic service: every ``atomic_service_check_interval_minutes`` (5 by
default), spread over the runners. A status trigger then fires minutes after its
event, and a ``* * * * *`` cron task runs a few times in ten minutes.

``TriggerWake`` runs pynenc's own loop body (``_process_loop_iteration``: cron check,
valid conditions, trigger-run claims, ``execute_task``, run records) on a thread of
its own, at the moments it can have work:

* when valid conditions are recorded by any process on the store (a status, result
  or exception report, ``emit_event``): the engine's ``wait_valid_conditions``
  blocks with the GIL released and returns when ``record_valid_conditions`` runs
  anywhere (SQLite: the file's wake board; Redis: a note per waiter; memory: a
  condition variable). A recording made while the loop is busy is remembered, so
  none is missed between a read and the next wait;
* every ``_IDLE_CHECK_SEC`` while valid conditions are left after an iteration (a
  trigger run another runner claimed is retried by the others when that claim
  expires, if its runner died before recording the run);
* when a cron condition is next due (``_cron.next_cron_time``: the first slot
  pynenc's rules accept, judged at the slot as ``CppTrigger``'s
  ``check_time_based_triggers`` judges it), when pynenc's ``enable_scheduler`` is
  on. The cron conditions are read again every ``_IDLE_CHECK_SEC`` (new ones are
  picked up then).

Every runner of the app runs it: which one fires a trigger is decided as in pynenc,
by the store's atomic ``claim_trigger_run`` and ``store_last_cron_execution``, so
each event and cron slot fires once however many runners are woken. pynenc's atomic
service still runs its own iteration (and the event purge) on its interval.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pynenc.orchestrator.atomic_service import AtomicServiceRun

from pynenc_cpp._cron import next_cron_time

if TYPE_CHECKING:
    from pynenc.runner.base_runner import BaseRunner

#: The longest wait without a wake-up (new cron conditions are read this often).
_IDLE_CHECK_SEC = 10.0
#: The shortest time between two loop iterations that cron conditions ask for.
_MIN_CRON_GAP_SEC = 0.05
#: After an error (storage unreachable), the pause before the loop tries again.
_RETRY_SEC = 1.0
#: How long ``stop`` waits for an iteration under way.
_STOP_JOIN_SEC = 5.0


class TriggerWake:
    """The evented trigger loop of one runner (``cpp_runner_trigger_wake``)."""

    def __init__(self, runner: BaseRunner, engine: Any) -> None:
        self._runner = runner
        self._app = runner.app
        self._engine = engine  # the app trigger's _core.TriggerStore
        self._stopping = threading.Event()
        self._cursor = ""
        # start and stop may race (a runner stopped from another thread while it
        # starts): the thread is started and taken under this lock.
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.iterations = 0  # loop iterations run (for tests and info)

    @classmethod
    def for_runner(cls, runner: BaseRunner) -> TriggerWake | None:
        """The loop for ``runner``'s app, or None when its trigger is not an engine
        trigger (pynenc's own trigger keeps the atomic service's interval)."""
        from pynenc_cpp.trigger import CppTrigger

        trigger = runner.app.trigger
        if not isinstance(trigger, CppTrigger):
            return None
        return cls(runner, trigger._engine)

    def start(self) -> None:
        """Starts the loop's thread, unless ``stop`` came first."""
        with self._lock:
            if self._stopping.is_set() or self._thread is not None:
                return
            thread = threading.Thread(
                target=self._loop, name=f"trigger-wake-{self._runner.runner_id}", daemon=True
            )
            thread.start()
            self._thread = thread

    def stop(self) -> None:
        """Ends the loop for good: the wait under way returns at once; an iteration
        under way (a trigger being fired) is waited for, up to ``_STOP_JOIN_SEC``."""
        self._stopping.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None or thread is threading.current_thread():
            return
        if self._cursor:
            try:
                self._engine.nudge_valid_conditions_waiter(self._cursor)
            except Exception:  # unreachable storage: the wait ends on its timeout
                pass
        thread.join(_STOP_JOIN_SEC)

    # ------------------------------------------------------------------ loop

    def _loop(self) -> None:
        logger = self._app.logger
        next_cron: datetime | None = None
        next_look = 0.0  # monotonic time of the next read of the cron conditions
        # Valid conditions may outlive an iteration: one whose trigger run another
        # runner claimed (60 s) is left to it, and if that runner dies before the run
        # is recorded nothing records a condition again to wake anyone. So while an
        # iteration may have left some, each idle timeout looks, and iterates once more.
        leftovers = False
        failing = False
        while not self._stopping.is_set():
            timeout = _IDLE_CHECK_SEC
            if next_cron is not None:
                timeout = min(timeout, (next_cron - datetime.now(UTC)).total_seconds())
            try:
                woke, self._cursor = self._engine.wait_valid_conditions(
                    self._cursor, max(timeout, 0.0)
                )
                if self._stopping.is_set():
                    return
                now = datetime.now(UTC)
                cron_due = next_cron is not None and now >= next_cron
                if woke or cron_due:
                    self._iterate()
                    leftovers = True
                elif leftovers:
                    leftovers = bool(self._app.trigger.get_valid_conditions())
                    if leftovers:
                        self._iterate()
                if cron_due or time.monotonic() >= next_look:
                    next_cron = self._next_cron(now)
                    next_look = time.monotonic() + _IDLE_CHECK_SEC
                if failing:
                    logger.info(f"trigger wake of runner {self._runner.runner_id}: working again")
                failing = False
            except Exception:
                if not failing:
                    logger.warning(
                        f"trigger wake of runner {self._runner.runner_id} failed; triggers "
                        f"fire on the atomic service until it works again (retry every "
                        f"{_RETRY_SEC:g} s)",
                        exc_info=True,
                    )
                failing = True
                self._cursor = ""  # arm again: a recording meanwhile may be lost
                self._stopping.wait(_RETRY_SEC)

    def _iterate(self) -> None:
        """One pass of pynenc's trigger loop body (no event purge: the atomic
        service keeps that on its interval)."""
        run = AtomicServiceRun(runner_id=self._runner.runner_id)
        self._app.trigger._process_loop_iteration(run)
        self.iterations += 1

    def _next_cron(self, now: datetime) -> datetime | None:
        trigger = self._app.trigger
        if not trigger.conf.enable_scheduler:
            return None
        due = next_cron_time(trigger._get_all_conditions(), now, trigger.get_last_cron_execution)
        # Not sooner than _MIN_CRON_GAP_SEC: a condition due now whose run another
        # runner is storing this very moment is not read again in a tight loop.
        soonest = now + timedelta(seconds=_MIN_CRON_GAP_SEC)
        return None if due is None else max(due, soonest)
