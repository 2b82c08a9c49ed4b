"""Apps configured as pynenc's own samples do: ``[tool.pynenc]`` in ``pyproject.toml``
or a YAML file named by ``PYNENC__FILEPATH``, naming the ``Cpp*`` classes
and the ``cpp_*`` settings. A client process and a ``pynenc runner start`` process
each read the file on their own; nothing is passed to them but the file (and the
working directory, for ``pyproject.toml``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests_py.test_cpp_runner import stop

TASKS = """
from pynenc import Pynenc

import pynenc_cpp  # noqa: F401  (registers the Cpp* classes for pynenc's name lookup)

app = Pynenc()


@app.task
def add(x: int, y: int) -> int:
    return x + y
"""

CLIENT = """
import json

import tasks

app = tasks.app
invocations = [tasks.add(i, 1) for i in range(10)]
print(json.dumps({
    "app_id": app.app_id,
    "classes": sorted(
        type(c).__name__
        for c in (app.orchestrator, app.broker, app.state_backend, app.trigger,
                  app.client_data_store, app.runner)
    ),
    "synchronous": app.orchestrator.cpp_conf.cpp_sqlite_synchronous,
    "redis_url": app.orchestrator.cpp_conf.cpp_redis_url,
    "workers": app.runner.conf.cpp_runner_workers,
    "outage_budget": app.orchestrator.outage_budget_sec,
    "results": [inv.result for inv in invocations],
}))
"""


def settings(backend: str, tmp_path: Path, redis_url: str | None) -> dict[str, object]:
    stem = {"sqlite": "Sqlite", "redis": "Redis"}[backend]
    values: dict[str, object] = {
        "app_id": f"cfg-file-{uuid.uuid4().hex[:8]}",
        "orchestrator_cls": f"Cpp{stem}NativeOrchestrator",
        "broker_cls": f"Cpp{stem}Broker",
        "state_backend_cls": f"Cpp{stem}StateBackend",
        "trigger_cls": f"Cpp{stem}Trigger",
        "client_data_store_cls": f"Cpp{stem}ClientDataStore",
        "runner_cls": "CppRunner",
        "cpp_runner_workers": 3,
        "cpp_outage_budget_sec": 30.0,
    }
    if backend == "sqlite":
        values["cpp_sqlite_path"] = str(tmp_path / "app.db")
        values["cpp_sqlite_synchronous"] = "full"
    else:
        values["cpp_redis_url"] = redis_url
    return values


def as_toml(values: dict[str, object]) -> str:
    lines = ["[tool.pynenc]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]  # JSON scalars are TOML
    return "\n".join(lines) + "\n"


def as_yaml(values: dict[str, object]) -> str:
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items())  # JSON is YAML


def clean_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without any PYNENC__ setting, tasks importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYNENC__")}
    env["PYTHONPATH"] = str(tmp_path)
    return env


def write_project(tmp_path: Path, fmt: str, values: dict[str, object]) -> dict[str, str]:
    """The tasks module and the config file; the environment that points at it."""
    (tmp_path / "tasks.py").write_text(TASKS)
    (tmp_path / "client.py").write_text(CLIENT)
    env = clean_env(tmp_path)
    if fmt == "pyproject":
        (tmp_path / "pyproject.toml").write_text(as_toml(values))
    else:
        config = tmp_path / "pynenc.yaml"
        config.write_text(as_yaml(values))
        env["PYNENC__FILEPATH"] = str(config)
    return env


def run_client(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "client.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def serve_and_call(
    project: Path, client_dir: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``pynenc runner start`` in ``project`` and the client in ``client_dir``, the
    runner stopped after the client, also on failure: (client, the runner's log)."""
    with open(project / "runner.log", "wb") as log:
        runner = subprocess.Popen(
            [sys.executable, "-m", "pynenc", "--app", "tasks.app", "runner", "start"],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        client = run_client(client_dir, env)
    finally:
        stop(runner)
    return client, (project / "runner.log").read_text()


@pytest.mark.parametrize("fmt", ["pyproject", "yaml"])
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_client_and_runner_processes_read_the_config_file(
    fmt: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else None
    values = settings(backend, tmp_path, redis_url)
    env = write_project(tmp_path, fmt, values)
    client, runner_log = serve_and_call(tmp_path, tmp_path, env)
    assert client.returncode == 0, client.stderr[-3000:] + runner_log[-3000:]
    seen = json.loads(client.stdout.strip().splitlines()[-1])
    stem = {"sqlite": "Sqlite", "redis": "Redis"}[backend]
    assert seen["app_id"] == values["app_id"]
    assert seen["classes"] == sorted(
        [
            f"Cpp{stem}NativeOrchestrator",
            f"Cpp{stem}Broker",
            f"Cpp{stem}StateBackend",
            f"Cpp{stem}Trigger",
            f"Cpp{stem}ClientDataStore",
            "CppRunner",
        ]
    )
    assert seen["workers"] == 3
    assert seen["outage_budget"] == 30.0
    if backend == "sqlite":
        assert seen["synchronous"] == "full"
        assert (tmp_path / "app.db").exists()
    else:
        assert seen["redis_url"] == redis_url
    assert seen["results"] == [i + 1 for i in range(10)]  # run by the runner process
    assert "CppRunner" in runner_log and values["app_id"] in runner_log


def test_a_wrong_class_name_is_a_clear_error(tmp_path: Path) -> None:
    values = settings("sqlite", tmp_path, None)
    values["broker_cls"] = "CppSqliteBrokr"
    env = write_project(tmp_path, "pyproject", values)
    client = run_client(tmp_path, env)
    assert client.returncode != 0
    assert "Unknown subclass: CppSqliteBrokr" in client.stderr


def test_a_missing_sqlite_path_is_a_clear_error(tmp_path: Path) -> None:
    values = settings("sqlite", tmp_path, None)
    del values["cpp_sqlite_path"]
    env = write_project(tmp_path, "yaml", values)
    client = run_client(tmp_path, env)
    assert client.returncode != 0
    assert "BadConfig: cpp_sqlite_path is not set" in client.stderr
    assert "[tool.pynenc]" in client.stderr and "PYNENC__FILEPATH" in client.stderr
    assert not list(tmp_path.glob("*.db"))  # nothing was created anywhere near


def test_a_bad_setting_in_the_file_is_a_clear_error(tmp_path: Path) -> None:
    values = settings("sqlite", tmp_path, None)
    values["cpp_sqlite_synchronous"] = "sometimes"
    env = write_project(tmp_path, "pyproject", values)
    client = run_client(tmp_path, env)
    assert client.returncode != 0
    assert "cpp_sqlite_synchronous='sometimes'" in client.stderr


def test_a_relative_sqlite_path_in_a_config_file_is_one_file_for_every_process(
    tmp_path: Path,
) -> None:
    """``cpp_sqlite_path = "data/app.db"`` in a YAML file of a subfolder names a file in
    that subfolder: the runner started from the project folder and the client started
    from another folder open the same file (the client gets the runner's results)."""
    values = settings("sqlite", tmp_path, None)
    values["cpp_sqlite_path"] = "data/app.db"
    (tmp_path / "conf" / "data").mkdir(parents=True)
    (tmp_path / "conf" / "pynenc.yaml").write_text(as_yaml(values))
    (tmp_path / "tasks.py").write_text(TASKS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "client.py").write_text(CLIENT)
    env = clean_env(tmp_path)
    env["PYNENC__FILEPATH"] = str(tmp_path / "conf" / "pynenc.yaml")
    client, runner_log = serve_and_call(tmp_path, elsewhere, env)
    assert client.returncode == 0, client.stderr[-3000:] + runner_log[-3000:]
    assert json.loads(client.stdout.strip().splitlines()[-1])["results"] == [
        i + 1 for i in range(10)
    ]
    assert (tmp_path / "conf" / "data" / "app.db").is_file()
    assert not list(elsewhere.rglob("*.db")) and not (tmp_path / "data").exists()


def test_a_relative_sqlite_path_from_env_is_resolved_where_the_app_is_configured(
    tmp_path: Path,
) -> None:
    """``PYNENC__CPP_SQLITE_PATH=rel.db``: the process that configures the app resolves
    it against its working directory and rewrites the variable, so a process it
    starts from another directory opens the same file."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    script = """
import os, subprocess, sys
from pynenc import Pynenc
app = Pynenc()
print(app.orchestrator.engine_uri.split("?")[0])
child = "from pynenc import Pynenc; print(Pynenc().orchestrator.engine_uri.split('?')[0])"
print(subprocess.run([sys.executable, "-c", child], cwd=sys.argv[1], check=True,
                     capture_output=True, text=True).stdout.strip())
"""
    env = clean_env(tmp_path)
    env.update(
        {f"PYNENC__{k.upper()}": str(v) for k, v in settings("sqlite", tmp_path, None).items()}
    )
    env["PYNENC__CPP_SQLITE_PATH"] = "rel.db"
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "b")],
        cwd=tmp_path / "a", env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [f"sqlite://{tmp_path / 'a' / 'rel.db'}"] * 2


def test_a_wrong_value_from_the_file_stops_runner_start_naming_setting_and_file(
    tmp_path: Path,
) -> None:
    values = settings("sqlite", tmp_path, None)
    values["cpp_runner_workers"] = "four"
    env = write_project(tmp_path, "pyproject", values)
    out = subprocess.run(
        [sys.executable, "-m", "pynenc", "--app", "tasks.app", "runner", "start"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0
    assert (
        f"cpp_runner_workers='four' (from [tool.pynenc] in "
        f"{tmp_path / 'pyproject.toml'}): expected a whole number >= 0"
    ) in out.stderr + out.stdout
    assert "TypeError" not in out.stderr + out.stdout and "Traceback" not in out.stderr
