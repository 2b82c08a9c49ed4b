"""The ``pynenc-cpp`` command, run as a subprocess (as a user runs it) against real
SQLite files and real redis-servers: ``info`` before and after a runner did the
work, ``doctor``'s warnings for settings that can lose acknowledged work, ``purge``
only when confirmed, clear errors for a missing file or an unreachable server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus

from pynenc_cpp import _core
from tests_py import runner_tasks as rt
from tests_py.redis_server import RedisServer, free_port, raw_reply
from tests_py.test_cpp_runner import FAST, ROOT, runner_env, start_runner, stop, wait_until
from tests_py.test_redis_urls import start
from tests_py.test_redis_urls import stop as stop_server


def cli(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pynenc_cpp", "--app", "tests_py.runner_tasks", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def info(env: dict[str, str]) -> dict[str, Any]:
    out = cli(env, "info", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def sqlite_app(path: Path, **config: Any) -> Pynenc:
    app = (
        PynencBuilder()
        .app_id(f"cli-{uuid.uuid4().hex[:8]}")
        .cpp_sqlite(path=path, **config)
        .custom_config(**FAST)
        .build()
    )
    rt.use(app)
    return app


def redis_app(url: str) -> Pynenc:
    app = (
        PynencBuilder()
        .app_id(f"cli-{uuid.uuid4().hex[:8]}")
        .cpp_redis(url)
        .custom_config(**FAST)
        .build()
    )
    rt.use(app)
    return app


@pytest.fixture
def aof_always_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", appendonly=True, appendfsync="always").start()
    yield server
    server.stop()


# ---------------------------------------------------------------- info


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_info_shows_the_queue_then_the_work_a_runner_did(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        app = sqlite_app(tmp_path / "cli.db")
    else:
        app = redis_app(request.getfixturevalue("redis_url"))
    env = runner_env(app, backend)
    invs = [rt.add(i, i) for i in range(3)]

    before = info(env)
    assert before["app_id"] == app.app_id
    assert before["queues"] == {"default": 3}
    assert before["invocations_by_status"] == {"registered": 3}
    assert before["waiting_for_a_runner"] == 3
    assert before["runners_alive"] == []
    oldest = before["oldest_waiting"]
    assert oldest["invocation_id"] == invs[0].invocation_id
    assert oldest["status"] == "registered" and oldest["age_sec"] >= 0

    proc = start_runner(env, tmp_path / "runner.log")
    try:
        assert [inv.result for inv in invs] == [0, 2, 4]
        wait_until(lambda: len(info(env)["runners_alive"]) == 1, timeout=30)
        after = info(env)
    finally:
        stop(proc)
    assert after["queues"] == {"default": 0}
    # The runner's own pynenc core tasks (recovery, ...) are invocations too.
    assert set(after["invocations_by_status"]) == {"success"}
    assert after["invocations_by_status"]["success"] >= 3
    assert after["oldest_waiting"] is None
    (runner,) = after["runners_alive"]
    assert runner["runner_id"] and runner["queues"] == []  # every queue
    assert runner["heartbeat_age_sec"] < 30

    text = cli(env, "info")
    assert text.returncode == 0, text.stderr
    assert f"app {app.app_id}" in text.stdout
    assert "success" in text.stdout and "runners alive: 1" in text.stdout


def test_info_watch_refreshes_the_given_number_of_times(tmp_path: Path) -> None:
    app = sqlite_app(tmp_path / "watch.db")
    env = runner_env(app, "sqlite")
    rt.add(1, 1)
    out = cli(env, "info", "--json", "--watch", "0.05", "--times", "3")
    assert out.returncode == 0, out.stderr
    reports = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(reports) == 3
    assert all(r["queues"] == {"default": 1} for r in reports)


# ---------------------------------------------------------------- doctor


def doctor(env: dict[str, str], *flags: str) -> tuple[int, dict[str, Any]]:
    out = cli(env, "doctor", "--json", *flags)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return out.returncode, json.loads(out.stdout)


def test_doctor_on_sqlite_defaults_warns_about_synchronous_normal_and_exits_0(
    tmp_path: Path,
) -> None:
    """The default ``synchronous=NORMAL`` loses work only when the machine crashes:
    advice, so a health check passes on a correct default install; ``--strict``
    makes a warning fail."""
    app = sqlite_app(tmp_path / "normal.db")
    rt.add(1, 2)  # the engine opened the file: WAL, its schema
    env = runner_env(app, "sqlite")
    rc, report = doctor(env)
    facts = dict(report["facts"])
    assert report["backend"] == "sqlite"
    assert facts["file"] == str(tmp_path / "normal.db")
    assert facts["journal_mode"] == "wal"
    assert "orchestrator v" in facts["schema"] and "broker v" in facts["schema"]
    assert (rc, report["errors"]) == (0, [])
    assert any("synchronous=NORMAL" in w for w in report["warnings"])
    assert doctor(env, "--strict")[0] == 1
    text = cli(env, "doctor")
    assert text.returncode == 0, text.stderr
    assert "1 warning(s):" in text.stdout and "! synchronous=NORMAL" in text.stdout
    assert "error(s)" not in text.stdout

    full = sqlite_app(tmp_path / "full.db", synchronous="full")
    rt.add(1, 2)
    env = runner_env(full, "sqlite", {"PYNENC__CPP_SQLITE_SYNCHRONOUS": "full"})
    rc, report = doctor(env, "--strict")
    assert (rc, report["errors"], report["warnings"]) == (0, [], [])
    assert dict(report["facts"])["synchronous (this URI's connections)"] == "FULL"


def test_doctor_on_a_missing_sqlite_file_is_an_error_and_creates_nothing(
    tmp_path: Path,
) -> None:
    app = sqlite_app(tmp_path / "never.db")
    out = cli(runner_env(app, "sqlite"), "doctor")
    assert out.returncode == 2
    assert "no SQLite database at" in out.stderr
    assert "Traceback" not in out.stderr
    for command in ("info", "purge"):
        out = cli(runner_env(app, "sqlite"), command, "--yes" if command == "purge" else "--json")
        assert out.returncode == 2 and "no SQLite database at" in out.stderr, out.stderr
    assert not (tmp_path / "never.db").exists()


def test_doctor_on_redis_warns_without_aof_and_not_with_appendfsync_always(
    aof_always_server: RedisServer, redis_url: str
) -> None:
    """A server without AOF loses acknowledged work at its next restart: an error
    (exit 1 without --strict); ``appendfsync always`` gives neither."""
    env = runner_env(redis_app(redis_url), "redis")
    rc, report = doctor(env)
    assert rc == 1
    assert dict(report["facts"])["aof_enabled"] == "0"
    assert any("appendonly is off" in e for e in report["errors"])
    assert not any("appendonly" in w for w in report["warnings"])
    text = cli(env, "doctor").stdout
    assert "1 error(s): settings that lose acknowledged work" in text
    assert "  x appendonly is off" in text

    rc, report = doctor(runner_env(redis_app(aof_always_server.url), "redis"), "--strict")
    facts = dict(report["facts"])
    assert (facts["aof_enabled"], facts["appendfsync"]) == ("1", "always")
    assert facts["redis_version"].count(".") == 2
    assert (rc, report["errors"], report["warnings"]) == (0, [], [])


def test_doctor_on_redis_reports_the_key_layout_and_an_earlier_version_s_keys(
    aof_always_server: RedisServer,
) -> None:
    """``key_layout``: none before anything is stored, this version's once a state
    backend opened the app; a marker of an earlier layout, or the indexes an
    earlier version kept, are warnings (a process of that version may still run)
    until a component of this version opens the app and upgrades them."""
    app = redis_app(aof_always_server.url)
    env = runner_env(app, "redis")
    state, orch = f"pynenc:{{{app.app_id}}}:state:", f"pynenc:{{{app.app_id}}}:orchestrator:"
    rc, report = doctor(env, "--strict")  # a server that loses nothing: no other warning
    assert (rc, report["warnings"]) == (0, [])
    assert dict(report["facts"])["key_layout"].startswith("none yet")

    _core.StateBackend(aof_always_server.url, app.app_id)
    _core.Orchestrator(aof_always_server.url, app.app_id).register([("inv-1", "mod.t", "mod.t:a")])
    rc, report = doctor(env, "--strict")
    assert (rc, dict(report["facts"])["key_layout"], report["warnings"]) == (0, "2", [])

    # As an earlier version leaves the app: layout 1 had no marker, and kept
    # the orchestrator's times index.
    raw_reply(aof_always_server.port, "DEL", state + "layout")
    raw_reply(aof_always_server.port, "ZADD", orch + "times", "1", "00000000000000000001inv-1")
    rc, report = doctor(env, "--strict")
    assert dict(report["facts"])["key_layout"] == "1"
    assert rc == 1  # --strict: a warning fails
    assert any("has key layout 1 and this version writes layout 2" in w for w in report["warnings"])
    assert any("still has indexes an earlier version wrote" in w for w in report["warnings"])

    _core.StateBackend(aof_always_server.url, app.app_id)
    _core.Orchestrator(aof_always_server.url, app.app_id)
    rc, report = doctor(env, "--strict")
    assert (rc, dict(report["facts"])["key_layout"], report["warnings"]) == (0, "2", [])


def test_doctor_on_an_unreachable_server_is_an_error_without_the_password(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "gone")  # a free port, never started
    url = f"redis://:s3cr3t@127.0.0.1:{server.port}/0?connect_timeout_ms=300"
    out = cli(runner_env(redis_app(url), "redis"), "doctor")
    assert out.returncode == 2
    assert str(server.port) in out.stderr
    assert "s3cr3t" not in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


# ---------------------------------------------------------------- purge


def test_purge_only_when_confirmed_with_the_app_id(tmp_path: Path) -> None:
    app = sqlite_app(tmp_path / "purge.db")
    env = runner_env(app, "sqlite")
    for i in range(2):
        rt.add(i, i)
    refused = cli(env, "purge", stdin="yes\n")
    assert refused.returncode == 2
    assert "nothing was purged" in refused.stderr
    assert app.orchestrator.count_invocations() == 2

    done = cli(env, "purge", stdin=f"{app.app_id}\n")
    assert done.returncode == 0, done.stderr
    assert app.orchestrator.count_invocations() == 0
    assert app.broker.count_invocations() == 0

    rt.add(5, 5)
    assert cli(env, "purge", "--yes").returncode == 0
    assert app.orchestrator.count_invocations(statuses=[InvocationStatus.REGISTERED]) == 0


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "pynenc-cpp"
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for command in ("info", "doctor", "purge"):
        assert command in out.stdout


def test_doctor_says_when_config_get_is_refused_to_the_acl_user(tmp_path: Path) -> None:
    port = free_port()
    proc = start(
        ["--port", str(port), "--dir", str(tmp_path),
         "--user", "default", "off",
         "--user", "app", "on", ">pw-1", "~*", "&*", "+@all", "-config"],
        socket.socket(socket.AF_INET),
        ("127.0.0.1", port),
    )  # fmt: skip
    try:
        rc, report = doctor(runner_env(redis_app(f"redis://app:pw-1@127.0.0.1:{port}/0"), "redis"))
    finally:
        stop_server(proc)
    assert rc == 1  # AOF off: an error
    assert "unreadable (CONFIG GET refused" in dict(report["facts"])["config"]
    assert any("CONFIG GET is refused" in w for w in report["warnings"])  # advice
    assert any("appendonly is off" in e for e in report["errors"])
    assert dict(report["facts"])["aof_enabled"] == "0"  # INFO still answers


def test_without_app_the_configuration_alone_is_used_but_never_one_of_several_apps(
    tmp_path: Path,
) -> None:
    app = sqlite_app(tmp_path / "conf.db")
    rt.add(1, 1)
    env = runner_env(app, "sqlite")
    empty = tmp_path / "empty"
    empty.mkdir()

    def run(cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pynenc_cpp", "info", "--json"],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    out = run(empty)  # no app here: PYNENC__* alone name the file and the app id
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["queues"] == {"default": 1}

    several = tmp_path / "several"
    several.mkdir()
    for name in ("one", "two"):
        (several / f"{name}.py").write_text("from pynenc import Pynenc\napp = Pynenc()\n")
    out = run(several)
    assert out.returncode == 2
    assert "Multiple Pynenc() instances" in out.stderr


def test_info_lists_a_sigkilled_runner_apart_with_its_work_and_a_stopped_one_not_at_all(
    tmp_path: Path,
) -> None:
    """A runner stopped gracefully (SIGTERM) forgets its heartbeat row, so ``info``
    no longer counts it; one SIGKILLed while running a task is listed apart once its
    heartbeat is older than dead-after, with the RUNNING invocation it holds and when
    the recovery of dead runners takes it. ``doctor`` says how long that is."""
    import signal

    app = sqlite_app(tmp_path / "cli.db")
    env = runner_env(app, "sqlite", {"PYNENC__RUNNER_CONSIDERED_DEAD_AFTER_MINUTES": "0.05"})
    first = start_runner(env, tmp_path / "first.log")
    try:
        assert rt.add(1, 2).result == 3
        wait_until(lambda: len(info(env)["runners_alive"]) == 1, timeout=30)
        os.kill(first.pid, signal.SIGTERM)
        assert first.wait(30) == 0
    finally:
        stop(first)
    after_stop = info(env)
    assert after_stop["runners_alive"] == [] and after_stop["runners_dead"] == []

    second = start_runner(env, tmp_path / "second.log")
    try:
        inv = rt.hang(60)
        wait_until(lambda: inv.status == InvocationStatus.RUNNING, timeout=30)
        os.killpg(second.pid, signal.SIGKILL)
        second.wait(10)
    finally:
        stop(second)
    wait_until(lambda: len(info(env)["runners_dead"]) == 1, timeout=30)
    report = info(env)
    assert report["runners_alive"] == []
    (dead,) = report["runners_dead"]
    assert dead["running"] == [inv.invocation_id] and dead["pending"] == []
    assert dead["heartbeat_age_sec"] > 3.0 and dead["recovered_by"]
    text = cli(env, "info").stdout
    assert "runners presumed dead (no heartbeat for dead-after): 1" in text
    assert inv.invocation_id in text and "recovered by" in text
    doctor = cli(env, "doctor").stdout
    assert "dead runner's work waits" in doctor and "dead-after 3 s" in doctor


# ---------------------------------------------------------------- no app, no backend


def bare_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it in ``cwd``, with no PYNENC__ setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYNENC__")}
    return subprocess.run(
        [str(Path(sys.executable).parent / "pynenc-cpp"), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["info", "doctor"])
def test_no_app_found_is_a_one_line_error_with_exit_2(command: str, tmp_path: Path) -> None:
    out = bare_cli(tmp_path, command)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"pynenc-cpp {command}: no app found: no Pynenc() instance in ")
    assert "pass --app MODULE" in line


@pytest.mark.parametrize("command", ["info", "doctor"])
@pytest.mark.parametrize("how", ["--app", "found"])
def test_an_app_without_a_pynenc_cpp_backend_is_a_one_line_error_with_exit_2(
    command: str, how: str, tmp_path: Path
) -> None:
    (tmp_path / "plain.py").write_text("from pynenc import Pynenc\n\napp = Pynenc()\n")
    args = ["--app", "plain", command] if how == "--app" else [command]
    out = bare_cli(tmp_path, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "app pynenc" in line and "has no pynenc-cpp backend" in line
    assert "MemOrchestrator" in line
