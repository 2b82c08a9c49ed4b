"""
The C++ runner loop.
"""

from __future__ import annotations

import collections.abc
import typing

__all__: list[str] = [
    "PendingFinish",
    "RunnerCallbacks",
    "RunnerEngine",
    "RunnerSettings",
    "RunnerSource",
]

class PendingFinish:
    """
    A task's result that its run left for CppRunner's engine to store
    (pynenc_cpp._run.run_invocation_to_finish): the engine stores it with the GIL
    released, then calls finished_taken(state, outcome) where Python has work left.
    """
    def __init__(
        self,
        invocation_id: str,
        serialized: str,
        task_key: str,
        release_waiters: bool,
        runner_id: str,
        state: typing.Any,
        logs: bool,
    ) -> None:
        """
        The result `serialized` of the task `task_key` that invocation `invocation_id`
        ran for `runner_id`, left to store; `state` is handed back to finished_taken.
        """
    @property
    def invocation_id(self) -> str: ...
    @property
    def logs(self) -> bool:
        """
        Python writes the status change's log line: finished_taken is always
        called.
        """
    @property
    def release_waiters(self) -> bool:
        """
        Whether the final status releases the invocations waiting on it.
        """
    @property
    def runner_id(self) -> str: ...
    @property
    def serialized(self) -> str: ...
    @property
    def state(self) -> typing.Any:
        """
        Python's own, handed back to finished_taken.
        """
    @property
    def task_key(self) -> str: ...

class RunnerSettings:
    """
    How a RunnerEngine runs: checked when made (ValueError).
    """
    def __init__(
        self,
        workers: typing.SupportsInt | typing.SupportsIndex,
        task_timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
        heartbeat_interval_sec: typing.SupportsFloat | typing.SupportsIndex,
        management_interval_sec: typing.SupportsFloat | typing.SupportsIndex,
        retrieve_wait_sec: typing.SupportsFloat | typing.SupportsIndex = 5.0,
        idle_backoff_sec: typing.SupportsFloat | typing.SupportsIndex = 0.01,
        take_ahead: bool = True,
        prefetch: typing.SupportsInt | typing.SupportsIndex = 1,
    ) -> None:
        """
        `workers` threads; 0 disables an interval or the task timeout. With
        `take_ahead`, a worker's finish also takes its next invocation where the storage
        does both in one operation (SQLite, Redis: Lifecycle.FinishThenTake). With
        `prefetch` K > 1, a take that leaves the queue non-empty also claims up to K - 1
        more in one operation (Lifecycle.take_and_claim), held for this engine's workers.
        """

class RunnerSource:
    """
    Where a RunnerEngine's workers take invocations from.
    """
    def __init__(
        self,
        broker: typing.Any = None,
        queues: collections.abc.Sequence[str] = [],
        lifecycle: typing.Any = None,
        runner_id: str | None = None,
        runner_context_id: str = "",
        fallback_next: typing.Any = None,
    ) -> None:
        """
        `broker`: an engine Broker to block on over `queues`, or None to poll
        `fallback_next() -> str | None` (GIL held, the settings' idle_backoff_sec between
        empty answers). With `lifecycle` (a native Lifecycle over `broker`), workers take
        and claim in one step (Lifecycle.take_and_start for runner_id /
        runner_context_id).
        """

class RunnerCallbacks:
    """
    The callables a RunnerEngine's threads call, with the GIL.
    """
    def __init__(
        self,
        execute: typing.Any,
        execute_taken: typing.Any = None,
        finished_taken: typing.Any = None,
        next_blocking: typing.Any = None,
        heartbeat: typing.Any = None,
        management: typing.Any = None,
        timed_out: typing.Any = None,
        thread_started: typing.Any = None,
        report_error: typing.Any = None,
    ) -> None:
        """
        execute(id, claimed), next_blocking() -> str | None, heartbeat(), management(),
        timed_out(id, thread_ident), thread_started(worker_index), report_error(message).
        With a source's lifecycle, workers call execute_taken(id, claim) instead, claim as
        take_and_start returns it; it returns None, or a task's serialized result left to
        store (PendingFinish), which the worker stores with the GIL
        released, then calls finished_taken(state, outcome) when the store failed, a
        trigger watches it or a log line is due.
        """

class RunnerEngine:
    """
    The C++ loop of CppRunner: worker threads (one persistent Python thread state each)
    retrieving from an engine broker with the GIL released, a timer thread for
    heartbeats, management duties and the task-timeout watchdog. Thread-safe.
    """
    def __init__(
        self, settings: RunnerSettings, source: RunnerSource, callbacks: RunnerCallbacks
    ) -> None:
        """
        Builds a stopped engine: `settings` (RunnerSettings), where its workers take
        invocations from (RunnerSource) and the Python callables its threads call
        (RunnerCallbacks).
        """
    def abort(self) -> list:
        """
        Immediate stop: returns [(invocation_id, thread_ident)] of what was running.
        """
    def mark_waiting(self) -> bool:
        """
        From a task on one of this engine's workers: its worker waits for results and
        stops counting as a slot until the task returns. False off a worker thread.
        """
    def nudge(self) -> None:
        """
        Ends the wait() in progress at once (it returns False, after signal handlers
        ran): a caller changed something the waiting thread must look at.
        """
    def on_worker_thread(self) -> bool:
        """
        True when called from one of this engine's worker threads.
        """
    def running(self) -> list:
        """
        [(invocation_id, thread_ident)] being executed (timed-out ones excluded).
        """
    def start(self) -> None:
        """
        Starts the workers and the timer thread.
        """
    def stop(self) -> None:
        """
        Graceful stop: no more retrieval; running invocations finish.
        """
    def take_held(self) -> list[str]:
        """
        Invocations finishes took ahead and prefetches claimed that no worker ran;
        from here on nothing is taken ahead or prefetched. For stop(): the caller
        routes them back (take_orphans returns the ones left after this).
        """
    def take_orphans(self) -> list[str]:
        """
        Invocation ids retrieved after stop() or abort() and not run, and those finishes
        took ahead or prefetches claimed that no worker ran (from here on nothing is taken
        ahead or prefetched); the caller routes them again.
        """
    def unwatch_signals(self) -> None:
        """
        Ends the watch of watch_signals(); a no-op without one.
        """
    def wait(
        self,
        timeout_sec: typing.SupportsFloat | typing.SupportsIndex,
        slice_sec: typing.SupportsFloat | typing.SupportsIndex = 0.1,
    ) -> bool:
        """
        Waits (GIL released, signal handlers run between slices) until every worker and
        the timer exited after stop()/abort(). True if they did within `timeout_sec`;
        False when the time is over or nudge() (or a watched signal) ended the wait.
        """
    def watch_signals(self, fd: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        A byte readable on `fd` (the read end of the pipe given to
        signal.set_wakeup_fd) ends the wait() in progress at once (it runs the signal
        handlers and returns False), so wait() can use long slices. The bytes are
        read and discarded. `fd` must stay open until unwatch_signals().
        """
    @property
    def executed(self) -> int:
        """
        Invocations handed to execute() so far.
        """
    @property
    def live_workers(self) -> int:
        """
        Workers alive and not abandoned.
        """
    @property
    def prefetched(self) -> int:
        """
        Invocations claimed by prefetches (Lifecycle.take_and_claim).
        """
    @property
    def state(self) -> str:
        """
        created, running, draining, stopped or aborted.
        """
    @property
    def taken_ahead(self) -> int:
        """
        Invocations a finish took and started ahead, with its own
        operation (Lifecycle.FinishThenTake), and a worker then ran.
        """
    @property
    def waiting(self) -> int:
        """
        Workers whose task waits for results.
        """
