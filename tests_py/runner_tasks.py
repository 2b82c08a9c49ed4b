"""Tasks for the CppRunner tests, importable by the test process and by runner
subprocesses (``pynenc --app tests_py.runner_tasks.app runner start``).

``app`` is configured from the ``PYNENC__*`` environment variables in a
subprocess; in-process tests move every task to their own app with ``use(app)``.
"""

from __future__ import annotations

import os
import sys
import time

from pynenc import Pynenc
from pynenc.conf.config_task import ConcurrencyControlType

import pynenc_cpp  # noqa: F401  (registers the Cpp* classes for pynenc's name lookup)

app = Pynenc()


class CustomBaseError(BaseException):
    """Not an Exception: pynenc's handlers do not catch it."""


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def slow_append(path: str, tag: str, seconds: float) -> str:
    """Appends `tag` to `path` (one O_APPEND write per execution), then sleeps."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tag}\n".encode())
    finally:
        os.close(fd)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)
    return tag


def _ledger(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@app.task
def ledger_add(path: str, tag: str, x: int, y: int, seconds: float) -> int:
    """Returns ``x + y``; appends ``start <tag> <pgid>`` to `path` when the body
    starts and ``end <tag> <pgid>`` once it has its result (the chaos suite counts
    executions and finished bodies per process group from these lines)."""
    pgid = os.getpgid(0)
    _ledger(path, f"start {tag} {pgid}\n")
    if seconds > 0:
        time.sleep(seconds)
    _ledger(path, f"end {tag} {pgid}\n")
    return x + y


@app.task
def boom() -> None:
    raise ValueError("boom from the task")


@app.task
def exit_task() -> None:
    sys.exit(3)


@app.task
def interrupt_task() -> None:
    raise KeyboardInterrupt


@app.task
def base_exception_task() -> None:
    raise CustomBaseError("not an Exception")


@app.task
def hang(seconds: float) -> str:
    """Busy in Python for `seconds` (small sleeps, so an async exception lands)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)
    return "finished"


@app.task
def parent_sum(n: int) -> int:
    """Waits for `n` child invocations (each waits in the runner)."""
    children = [add(i, i) for i in range(n)]
    return sum(child.result for child in children)


@app.task
def grandparent(n: int) -> int:
    """Two levels of waiting: with one worker this needs extra slots twice."""
    return parent_sum(n).result + 1


@app.workflow
def sum_flow(n: int) -> int:
    """A workflow (pynenc records its runs) whose `n` children run in the runner."""
    children = [add(i, i) for i in range(n)]
    return sum(child.result for child in children)


@app.task
def noted() -> str:
    """A trigger target (tests register conditions that run it)."""
    return "noted"


def _stamp(path: str, kind: str, tag: str, key: str) -> None:
    """One guarantees-ledger line: ``<kind> <tag> <key> <pgid> <monotonic ns>``
    (CLOCK_MONOTONIC is one clock for every process of the machine)."""
    _ledger(path, f"{kind} {tag} {key} {os.getpgid(0)} {time.monotonic_ns()}\n")


@app.task(
    running_concurrency=ConcurrencyControlType.KEYS,
    key_arguments=("sku",),
    reroute_on_concurrency_control=True,
)
def keyed_order(path: str, sku: str, tag: str, seconds: float) -> str:
    """At most one body per `sku` at a time (rerouted while another runs): the
    guarantees suite reads the overlaps off the ledger's start / end lines."""
    _stamp(path, "start", tag, sku)
    time.sleep(seconds)
    _stamp(path, "end", tag, sku)
    return tag


@app.task(
    registration_concurrency=ConcurrencyControlType.KEYS,
    key_arguments=("sku",),
    running_concurrency=ConcurrencyControlType.KEYS,
    reroute_on_concurrency_control=True,
)
def restock(path: str, sku: str, seconds: float) -> str:
    """Registration concurrency by `sku`: calls made while one is REGISTERED share it."""
    _stamp(path, "start", sku, sku)
    time.sleep(seconds)
    _stamp(path, "end", sku, sku)
    return sku


class FlakyError(Exception):
    """Raised by ``flaky`` while its attempts last (a retriable error)."""


@app.task(retry_for=(FlakyError,), max_retries=2)
def flaky(path: str, tag: str, fails: int) -> str:
    """Fails its first `fails` attempts (counted in the ledger), then returns `tag`:
    the suite checks no invocation ran more than 1 + max_retries times."""
    _stamp(path, "start", tag, tag)
    attempts = sum(1 for line in open(path) if line.split()[:2] == ["start", tag])
    if attempts <= fails:
        _stamp(path, "end", tag, tag)
        raise FlakyError(f"{tag} attempt {attempts}")
    _stamp(path, "end", tag, tag)
    return tag


TASKS = [
    add,
    noted,
    sum_flow,
    slow_append,
    ledger_add,
    boom,
    exit_task,
    interrupt_task,
    base_exception_task,
    hang,
    parent_sum,
    grandparent,
    keyed_order,
    restock,
    flaky,
]


def use(target: Pynenc) -> None:
    """Moves every task of this module to `target` (like pynenc's own combination tests)."""
    for task in TASKS:
        task.app = target
        task._conf = None
        target._tasks[task.task_id] = task
