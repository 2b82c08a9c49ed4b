"""Blocking result wait: ``invocation.result`` and tasks waiting on tasks block in
the engine orchestrator's ``wait_any_final`` instead of sleeping
``invocation_wait_results_sleep_time_sec`` blindly.

The sleep time is set to 30 s while each test gives its results 20 s: a blind
sleep could never deliver them in time, so arriving at all proves the waiter was
woken (no timing assertions on how fast).
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import CppRunner, _core
from pynenc_cpp.errors import InvalidArgument
from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import running

ALL = ["mem", "sqlite", "redis"]
SLOW_SLEEP = {"runner_loop_sleep_time_sec": 0.01, "invocation_wait_results_sleep_time_sec": 30.0}
RESULT_DEADLINE_SEC = 20.0


def build_app(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, **config: Any
) -> Pynenc:
    builder = PynencBuilder().app_id(f"wait-{uuid.uuid4().hex[:10]}")
    if backend == "mem":
        builder = builder.cpp_mem()
    elif backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "wait.db")
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"))
    app = builder.cpp_runner(workers=1).custom_config(**SLOW_SLEEP, **config).build()
    rt.use(app)
    return app


def within_deadline(fn: Callable[[], Any]) -> Any:
    """fn() in a thread; fails the test if it does not return in RESULT_DEADLINE_SEC."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 (re-raised below)
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(RESULT_DEADLINE_SEC)
    assert not thread.is_alive(), "the result did not arrive: the waiter was not woken"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("backend", ALL)
def test_client_result_wakes_when_the_task_finishes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    with running(app):
        got = within_deadline(lambda: [rt.add(i, 100).result for i in range(5)])
    assert got == [i + 100 for i in range(5)]


@pytest.mark.parametrize("backend", ALL)
def test_result_arrives_with_pynencs_default_status_cache(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # cached_status_time left at pynenc's default (0.1 s): the wait returns while the
    # invocation's cached status is still non-final; the loop must still end.
    app = build_app(backend, tmp_path, request)
    with running(app):
        got = within_deadline(lambda: [rt.add(i, 7).result for i in range(3)])
    assert got == [7, 8, 9]


@pytest.mark.parametrize("backend", ALL)
def test_task_waiting_on_tasks_wakes_inside_the_runner(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    with running(app):
        assert within_deadline(lambda: rt.parent_sum(4).result) == sum(i + i for i in range(4))


@pytest.mark.parametrize("backend", ALL)
def test_failed_task_result_raises_promptly(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    with running(app):
        inv = rt.boom()
        with pytest.raises(ValueError, match="boom from the task"):
            within_deadline(lambda: inv.result)


def test_runner_without_engine_orchestrator_falls_back_to_sleeping() -> None:
    app = (
        PynencBuilder()
        .app_id(f"wait-fallback-{uuid.uuid4().hex[:8]}")
        .memory()
        .cpp_runner(workers=1)
        .custom_config(invocation_wait_results_sleep_time_sec=0.01)
        .build()
    )
    runner = app.runner
    assert isinstance(runner, CppRunner)
    assert not isinstance(getattr(app.orchestrator, "_engine", None), _core.Orchestrator)
    assert runner._wait_any_final(["some-id"]) is False  # type: ignore[list-item]
    runner.waiting_for_results(None, ["some-id"])  # type: ignore[list-item]  (sleeps, returns)


def test_wait_any_final_binding_rejects_bad_input() -> None:
    orch = _core.Orchestrator("memory://", f"wait-bind-{uuid.uuid4().hex[:8]}")
    with pytest.raises(InvalidArgument):
        orch.wait_any_final([], 0.1)
    with pytest.raises(InvalidArgument):
        orch.wait_any_final(["a"], math.nan)
    assert orch.wait_any_final(["unknown"], 0.0) is None
    orch.register([("a", "mod.task", "mod.task:a")], "r")
    assert orch.wait_any_final(["a"], -1.0) is None
    for status in ("pending", "running", "success"):
        orch.transition("a", status, "r")
    assert orch.wait_any_final(["unknown", "a"], math.inf) == "a"
