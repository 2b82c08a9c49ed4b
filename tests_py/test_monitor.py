"""pynenc's monitor (``pynenc monitor``, pynmon) on our backends: an app with
history, a trigger and parent/child workflows, run by a real ``pynenc runner start``
CppRunner, then the monitor started as pynenc's own CLI starts it and its pages
fetched over HTTP: every page answers 200 and shows the app's data."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus
from pynenc.trigger import TriggerBuilder

from tests_py import runner_tasks as rt
from tests_py.redis_server import free_port
from tests_py.test_cpp_runner import FAST, ROOT, runner_env, start_runner, stop, wait_until


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextmanager
def monitor(env: dict[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pynenc", "--app", "tests_py.runner_tasks", "monitor",
             "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return get(base + "/health")[0] == 200
        except OSError:
            return False

    try:
        wait_until(healthy, timeout=60)
        yield base
    finally:
        stop(proc)


def build_app(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Pynenc:
    builder = PynencBuilder().app_id(f"monitor-{uuid.uuid4().hex[:8]}")
    if backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "monitor.db")
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"))
    app = builder.custom_config(**FAST).build()
    rt.use(app)
    return app


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_pynenc_monitor_shows_the_apps_data_on_every_page(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request)
    app.trigger.register_task_triggers(
        rt.noted, TriggerBuilder().on_status(rt.add, statuses=[InvocationStatus.SUCCESS])
    )
    (condition,) = app.trigger.get_conditions_sourced_from_task(rt.add.task_id)
    (trigger,) = app.trigger.get_triggers_for_condition(condition.condition_id)
    env = runner_env(app, backend)
    proc = start_runner(env, tmp_path / "runner.log")
    try:
        parent = rt.sum_flow(3)  # a workflow with three children
        assert parent.result == 0 + 2 + 4
        wait_until(lambda: bool(app.orchestrator.get_active_runners()), timeout=30)
        (runner,) = app.orchestrator.get_active_runners()
    finally:
        stop(proc)
    child = next(
        i
        for i in app.orchestrator.get_task_invocation_ids(rt.add.task_id)
        if app.state_backend.get_invocation(i).parent_invocation_id is not None
    )
    add_key = rt.add.task_id.key
    parent_key = rt.sum_flow.task_id.key

    with monitor(env, tmp_path / "monitor.log") as base:
        pages = {
            "/": [app.app_id],
            "/invocations/": [parent.invocation_id[:8]],
            f"/invocations/{parent.invocation_id}": [parent.invocation_id, "sum_flow", "success"],
            f"/invocations/{child}": [child, "add"],
            f"/invocations/{parent.invocation_id}/family-tree": [child[:8]],
            "/tasks/": ["sum_flow", "add"],
            f"/tasks/{add_key}": ["add"],
            "/runners/": [runner.runner_id[:8]],
            f"/runners/{runner.runner_id}": [runner.runner_id[:8]],
            f"/triggers/{trigger.trigger_id}": ["noted", "add"],
            "/workflows/": ["sum_flow"],
            f"/workflows/{parent_key}": ["sum_flow", parent.invocation_id[:8]],
            "/broker/": ["default"],
            "/orchestrator/": ["success"],
        }
        failures = []
        for path, needles in pages.items():
            status, body = get(base + path)
            missing = [n for n in needles if n.lower() not in body.lower()]
            if status != 200 or missing:
                failures.append(f"{path}: HTTP {status}, missing {missing}")
    assert failures == [], failures
