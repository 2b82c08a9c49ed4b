"""pynenc's monitor (``pynenc monitor``, pynmon) on our backends: an app with
history, a trigger and parent/child workflows, run by a real ``pynenc runner start``
CppRunner, then the monitor started as pynenc's own CLI starts it and its pages
fetched over HTTP: every page answers 200 and shows the app's data."""

from __future__ import annotations

import re
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


def visible_text(html: str) -> str:
    """The page's text as a reader sees it: no scripts, styles or tags, spaces folded."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


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
    add_key, flow_key = rt.add.task_id.key, rt.sum_flow.task_id.key
    pid = parent.invocation_id
    n_success = app.orchestrator.count_invocations(statuses=[InvocationStatus.SUCCESS])
    n_total = app.orchestrator.count_invocations()
    # The trigger's `noted` invocations may still be queued when the runner stops.
    n_pending = app.broker.count_invocations()
    broker_cls = {"sqlite": "CppSqliteBroker", "redis": "CppRedisBroker"}[backend]

    with monitor(env, tmp_path / "monitor.log") as base:
        # Each page's visible text must show these (lists load through their
        # htmx partials, the */refresh pages).
        pages = {
            "/": [app.app_id],
            "/invocations/": [pid[:8]],
            f"/invocations/{pid}": [
                f"Invocation ID: {pid}",
                "Status: SUCCESS",
                f"Task ID: {flow_key}",
            ],
            f"/invocations/{child}": [f"Invocation ID: {child}", "Status: SUCCESS", add_key],
            f"/invocations/{pid}/family-tree": [child[:8]],
            "/tasks/refresh": [add_key, flow_key, rt.noted.task_id.key],
            f"/tasks/{add_key}": [add_key],
            "/runners/refresh": [runner.runner_id, "CppRunner"],
            f"/runners/{runner.runner_id}": [runner.runner_id],
            f"/triggers/{trigger.trigger_id}": [
                f"Task: {rt.noted.task_id.key}",
                f"Task Id {add_key}",
                "Statuses SUCCESS",
            ],
            "/workflows/refresh": [f"{flow_key} 1 {pid[:8]}"],
            f"/workflows/{flow_key}": [flow_key, pid[:8]],
            "/broker/refresh": [broker_cls, f"Pending Invocations {n_pending}"],
            "/orchestrator/refresh": [f"SUCCESS {n_success}", f"Total: {n_total}"],
        }
        failures = []
        for path, needles in pages.items():
            status, body = get(base + path)
            text = visible_text(body)
            missing = [n for n in needles if n not in text]
            if status != 200 or missing:
                failures.append(f"{path}: HTTP {status}, missing {missing}")
    assert failures == [], failures
