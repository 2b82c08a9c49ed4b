"""CppRunner's main thread and signals: ``run`` on the main thread sleeps through
its whole tick while idle, and a signal still ends its wait at once
(``pynenc_cpp._signal_wake``, ``RunnerEngine.watch_signals``)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pynenc.invocation import InvocationStatus

from pynenc_cpp import CppRunner
from pynenc_cpp._signal_wake import watch_signals
from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import (
    build_app,
    runner_env,
    start_runner,
    statuses,
    stop,
    wait_until,
)


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> Iterator[None]:
    """A runner started on the main thread installs pynenc's SIGINT/SIGTERM handlers:
    put pytest's back afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def _voluntary_switches(pid: int, tid: int) -> int:
    """How many times the thread ``tid`` of ``pid`` blocked and was woken."""
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc")


def test_an_idle_runners_main_thread_sleeps_until_a_signal(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``pynenc runner start`` runs CppRunner on the main thread. Idle, that thread
    wakes for its 5 s tick (and a GIL hand-off now and then), not every 100 ms to
    let signal handlers run: a signal ends its wait by itself. It still stops at
    once on SIGTERM."""
    app = build_app("sqlite", tmp_path, request)
    proc = start_runner(runner_env(app, "sqlite"), tmp_path / "runner.log")
    try:
        assert rt.add(1, 2).result == 3  # running, and idle from here on
        time.sleep(1.0)
        before = _voluntary_switches(proc.pid, proc.pid)
        time.sleep(3.0)
        woke = _voluntary_switches(proc.pid, proc.pid) - before
        # 100 ms slices made at least 30 in 3 s; the 5 s tick makes 0 or 1, plus hand-offs.
        assert woke < 20, f"the idle main thread woke {woke} times in 3 s"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop(proc)


def _thread_wakeups(pid: int, name: str) -> int:
    """Voluntary context switches so far of the threads of ``pid`` named ``name``."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            total += _voluntary_switches(pid, int(tid))
        except (OSError, AssertionError):
            continue  # the thread ended meanwhile
    return total


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_an_idle_runners_workers_and_timer_sleep_through_their_waits(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An idle runner's two workers block on the broker for a whole retrieve wait
    (5 s; SQLite's safety poll 5 s, a Redis BLPOP slice 3 s, each then one pop),
    not 0.5 s; on Redis no longer in 100 ms BLPOP slices with a pop after each (a
    stop ends the wait through the broker's interrupt list instead). The timer
    ticks at most every 5 s by default. The old waits made about 15 worker wake-ups
    in 4 s on SQLite and 130 on Redis, and 4 timer ticks (4 and 20 wake-ups). The runner then
    still takes new work at once and stops at once on SIGTERM."""
    app = build_app(backend, tmp_path, request)
    proc = start_runner(runner_env(app, backend), tmp_path / "runner.log")
    try:
        assert rt.add(1, 2).result == 3  # running, and idle from here on
        time.sleep(1.5)
        workers, timer = (_thread_wakeups(proc.pid, n) for n in ("pynenc-worker", "pynenc-timer"))
        time.sleep(4.0)
        workers = _thread_wakeups(proc.pid, "pynenc-worker") - workers
        timer = _thread_wakeups(proc.pid, "pynenc-timer") - timer
        # Measured: about 2 (SQLite) and 8 (Redis: a BLPOP and a pop a 3 s slice).
        assert workers < (24 if backend == "redis" else 10), (
            f"2 idle workers woke {workers} times in 4 s"
        )
        # One tick at most in 4 s; on Redis each tick's engine calls are round trips
        # (a wake-up each, about 5 a tick), on SQLite about one a tick.
        assert timer < (12 if backend == "redis" else 4), (
            f"the idle timer woke {timer} times in 4 s"
        )
        started = time.monotonic()
        assert rt.add(2, 3).result == 5
        assert time.monotonic() - started < 2.0, "new work waited for a wait to end"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert time.monotonic() - started < 2.5, "the stop waited for a wait to end"
    finally:
        stop(proc)


def test_a_signal_handler_runs_while_run_waits_on_the_main_thread(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``run`` on this (the main) thread: a handler stops it; the wakeup fd it set
    while running is taken away when it returns."""
    app = build_app("mem", tmp_path, request)
    runner = app.runner
    assert isinstance(runner, CppRunner)
    seen: dict[str, Any] = {}

    def on_alarm(signum: int, frame: object) -> None:
        fd = signal.set_wakeup_fd(-1)  # what run() set: put back at once
        signal.set_wakeup_fd(fd)
        seen["wakeup_fd"] = fd
        seen["state"] = runner._engine.state
        runner.stop_runner_loop()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        runner.run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert seen["state"] == "running"
    assert seen["wakeup_fd"] != -1  # the runner's watch was set during run()
    assert signal.set_wakeup_fd(-1) == -1  # and removed when run() returned
    assert runner._engine.state == "stopped"


class _Engine:
    """Records watch_signals' calls (a stand-in for RunnerEngine's two methods)."""

    def __init__(self) -> None:
        self.watched: list[int] = []
        self.unwatched = 0

    def watch_signals(self, fd: int) -> None:
        self.watched.append(fd)

    def unwatch_signals(self) -> None:
        self.unwatched += 1


def test_watch_signals_sets_and_undoes_the_wakeup_fd() -> None:
    engine = _Engine()
    undo = watch_signals(engine)
    assert undo is not None and len(engine.watched) == 1
    fd = engine.watched[0]
    try:
        current = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(current)
        assert current not in (-1, fd)  # Python writes to its end, the engine reads ours
    finally:
        undo()
    assert engine.unwatched == 1
    assert signal.set_wakeup_fd(-1) == -1
    with pytest.raises(OSError):
        os.fstat(fd)  # closed by undo


def test_watch_signals_keeps_another_wakeup_fd() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    try:
        engine = _Engine()
        assert watch_signals(engine) is None
        assert engine.watched == []
        assert signal.set_wakeup_fd(write_fd) == write_fd  # still the other one
    finally:
        signal.set_wakeup_fd(-1)
        os.close(read_fd)
        os.close(write_fd)


def test_watch_signals_off_the_main_thread_does_nothing() -> None:
    engine = _Engine()
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(watch_signals(engine)))
    thread.start()
    thread.join(10)
    assert out == [None] and engine.watched == []
    assert signal.set_wakeup_fd(-1) == -1


def test_a_signal_ends_a_long_wait_slice(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """With the watch, a signal ends ``wait`` as it comes: its handler (here a stop)
    runs at once, not when the 30 s slice is over."""
    app = build_app("mem", tmp_path, request)
    runner = app.runner
    assert isinstance(runner, CppRunner)
    runner.on_start()
    engine = runner._engine
    hits: list[int] = []

    def on_usr1(signum: int, frame: object) -> None:
        hits.append(signum)
        engine.stop()

    previous = signal.signal(signal.SIGUSR1, on_usr1)
    undo = watch_signals(engine)
    assert undo is not None
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        start = time.monotonic()
        # Ended by the signal, after its handler ran (a stop: the engine drains).
        assert engine.wait(60.0, 30.0) is False
        elapsed = time.monotonic() - start
        assert engine.state in ("draining", "stopped")
    finally:
        timer.cancel()
        undo()
        signal.signal(signal.SIGUSR1, previous)
        runner.on_stop()
    assert hits == [signal.SIGUSR1]
    assert elapsed < 20.0, f"the handler ran only when the slice ended ({elapsed:.1f} s)"


def test_nudge_ends_a_wait(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``nudge`` (what a new stop deadline does) ends a wait that would last a minute;
    the engine keeps running."""
    app = build_app("mem", tmp_path, request)
    runner = app.runner
    assert isinstance(runner, CppRunner)
    runner.on_start()
    engine = runner._engine
    timer = threading.Timer(0.2, engine.nudge)
    try:
        timer.start()
        start = time.monotonic()
        assert engine.wait(60.0, 30.0) is False
        elapsed = time.monotonic() - start
        assert engine.state == "running"
    finally:
        timer.cancel()
        runner.stop_runner_loop()
        runner.on_stop()
    assert elapsed < 20.0, f"the wait ran {elapsed:.1f} s"


def test_a_stop_grace_period_ends_on_time_and_kills_what_still_runs(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``cpp_runner_stop_grace_sec``: a graceful stop lets a running invocation go on
    for the grace period, then kills and reroutes it, and ``run`` returns (long
    before the task's 60 s)."""
    app = build_app("mem", tmp_path, request, config={"cpp_runner_stop_grace_sec": 0.3})
    runner = app.runner
    assert isinstance(runner, CppRunner)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    inv = rt.hang(60)
    wait_until(lambda: InvocationStatus.RUNNING in statuses(app, inv.invocation_id))
    start = time.monotonic()
    runner.stop_runner_loop()
    thread.join(30)
    assert not thread.is_alive()
    assert time.monotonic() - start < 20.0
    assert InvocationStatus.KILLED in statuses(app, inv.invocation_id)
    assert inv.status == InvocationStatus.REROUTED
