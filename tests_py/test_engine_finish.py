"""CppRunner's engine stores a task's result after the run's Python returns
(``run_invocation_to_finish``, ``docs/runner.md``), on mem, SQLite and Redis.

What Python still does after that store (an error's handling, the trigger
reports, the INFO log line) happens only where it has work, and must happen
exactly as it did when the store was made from Python.
"""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, context
from pynenc.invocation import InvocationStatus
from pynenc.trigger import TriggerBuilder

from tests_py.cpp_apps import build_cpp_app
from tests_py.test_cpp_runner import running, wait_until

S = InvocationStatus
ALL = ["mem", "sqlite", "redis"]

_task_app = Pynenc()
_results: list[weakref.ref[Any]] = []


class Payload:
    """A result jsonpickle stores by its fields; the test keeps only a weak reference."""

    def __init__(self, n: int) -> None:
        self.n = n


@_task_app.task
def double(x: int) -> int:
    return 2 * x


@_task_app.task
def on_double(x: int) -> int:
    return x


@_task_app.task
def kills_itself() -> int:
    """Moves its own invocation to KILLED, as an immediate stop would; the SUCCESS
    that would follow its return is refused by the status machine."""
    app_id = kills_itself.app.app_id
    invocation = context.get_dist_invocation_context(app_id)
    runner_ctx = context.get_runner_context(app_id)
    assert invocation is not None and runner_ctx is not None
    kills_itself.app.orchestrator.set_invocation_status(
        invocation.invocation_id, S.KILLED, runner_ctx
    )
    return 1


@_task_app.task
def payload(n: int) -> Payload:
    out = Payload(n)
    _results.append(weakref.ref(out))
    return out


TASKS = (double, on_double, kills_itself, payload)


def _app(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, level: str = "warning"
) -> Pynenc:
    # Above INFO (the default here): only an error or a trigger watching the outcome
    # sends the engine back to Python after its store.
    app = build_cpp_app(
        backend,
        request,
        tmp_path,
        "engine-finish",
        then=lambda builder: (
            builder.logging_level(level)
            .cpp_runner(workers=1)
            .custom_config(
                runner_loop_sleep_time_sec=0.01, invocation_wait_results_sleep_time_sec=0.01
            )
        ),
    )
    for task in TASKS:
        task.app = app
    return app


def _statuses(app: Pynenc, invocation_id: str) -> list[InvocationStatus]:
    return [h.status_record.status for h in app.state_backend.get_history(invocation_id)]


@pytest.mark.parametrize("level", ["warning", "info"])
@pytest.mark.parametrize("backend", ALL)
def test_the_result_is_stored_after_the_runs_python_returns(
    backend: str,
    level: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = _app(backend, tmp_path, request, level)
    orchestrator = app.orchestrator
    run_to_finish = orchestrator.run_invocation_to_finish  # type: ignore[attr-defined]
    seen: list[tuple[InvocationStatus, Any]] = []

    def spy(invocation: Any, runner_ctx: Any) -> Any:
        pending = run_to_finish(invocation, runner_ctx)
        if invocation.task.task_id == double.task_id:  # not pynenc's own core tasks
            seen.append((orchestrator.get_invocation_status(invocation.invocation_id), pending))
        return pending

    monkeypatch.setattr(orchestrator, "run_invocation_to_finish", spy)
    with running(app):
        invocations = [double(i) for i in range(5)]
        assert [inv.result for inv in invocations] == [0, 2, 4, 6, 8]
    # Each run returned its result unstored; the engine stored it afterwards.
    assert len(seen) == 5
    assert all(status == S.RUNNING and pending is not None for status, pending in seen)
    for inv in invocations:
        assert _statuses(app, inv.invocation_id) == [S.REGISTERED, S.PENDING, S.RUNNING, S.SUCCESS]
    app.purge()


class _Lines(logging.Handler):
    """Keeps the messages of the app's logger (pynenc's loggers do not propagate)."""

    def __init__(self, app: Pynenc, level: int) -> None:
        super().__init__(level)
        self.lines: list[str] = []
        self.app, self.level_before = app, app.logger.level

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> list[str]:
        self.app.logger.addHandler(self)
        self.app.logger.setLevel(self.level)
        return self.lines

    def __exit__(self, *exc: object) -> None:
        self.app.logger.removeHandler(self)
        self.app.logger.setLevel(self.level_before)


@pytest.mark.parametrize("backend", ALL)
def test_a_store_refused_by_the_status_machine_is_logged_and_the_worker_goes_on(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = _app(backend, tmp_path, request)
    with _Lines(app, logging.WARNING) as lines, running(app):
        killed = kills_itself()
        wait_until(lambda: S.KILLED in _statuses(app, killed.invocation_id))
        # The refused SUCCESS went through pynenc's handling of a lost transition.
        conflict = f"invocation:{killed.invocation_id} status transition conflict"
        wait_until(lambda: any(conflict in line for line in lines))
        assert double(21).result == 42  # the only worker carries on
    history = _statuses(app, killed.invocation_id)
    assert S.SUCCESS not in history
    assert history[-1] == S.KILLED
    app.purge()


@pytest.mark.parametrize("backend", ALL)
def test_triggers_watching_the_status_and_the_result_get_their_reports(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(backend, tmp_path, request)
    trigger = app.trigger
    trigger.register_task_triggers(  # type: ignore[attr-defined]
        on_double, TriggerBuilder().on_status(double, statuses=[S.SUCCESS])
    )
    trigger.register_task_triggers(  # type: ignore[attr-defined]
        on_double, TriggerBuilder().on_result(double, filter_result=8)
    )
    statuses: list[tuple[Any, str]] = []
    results: list[tuple[str, Any]] = []
    report_status, report_result = trigger.report_tasks_status, trigger.report_invocation_result

    def spy_status(ids: list[Any], status: Any = None) -> None:
        statuses.extend((status, str(i)) for i in ids)
        report_status(ids, status)

    def spy_result(invocation: Any, result: Any) -> None:
        results.append((str(invocation.invocation_id), result))
        report_result(invocation, result)

    monkeypatch.setattr(trigger, "report_tasks_status", spy_status)
    monkeypatch.setattr(trigger, "report_invocation_result", spy_result)
    with running(app):
        inv = double(4)
        assert inv.result == 8
        wait_until(lambda: (S.SUCCESS, inv.invocation_id) in statuses)
        wait_until(lambda: (inv.invocation_id, 8) in results)
    reported = [s for s, i in statuses if i == inv.invocation_id]
    # The submit reports REGISTERED after routing, so the worker's reports may come
    # first; the worker's own come in the order of its changes, each once.
    assert sorted(reported) == sorted([S.REGISTERED, S.PENDING, S.RUNNING, S.SUCCESS])
    assert [s for s in reported if s != S.REGISTERED] == [S.PENDING, S.RUNNING, S.SUCCESS]
    app.purge()


@pytest.mark.parametrize("backend", ALL)
def test_the_success_log_line_is_still_written_at_info(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = _app(backend, tmp_path, request)
    with _Lines(app, logging.INFO) as lines, running(app):
        inv = double(3)
        assert inv.result == 6
        expected = f"invocation:{inv.invocation_id} status:success"
        wait_until(lambda: any(expected in line for line in lines))
    app.purge()


@pytest.mark.parametrize("backend", ALL)
def test_an_idle_worker_does_not_keep_its_last_result_alive(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = _app(backend, tmp_path, request)
    _results.clear()
    with running(app):
        assert payload(7).result.n == 7
        assert len(_results) == 1
        # Released once the worker's take finds the queue empty (one wait slice).
        alive: Callable[[], bool] = lambda: _results[0]() is not None  # noqa: E731
        wait_until(lambda: gc.collect() >= 0 and not alive(), timeout=10.0)
    app.purge()
