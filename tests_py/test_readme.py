"""The README runs as written: its code blocks are read from README.md (so an edit
that breaks one fails here) and run as a user runs them, in a fresh folder, with
nothing substituted but paths and ports:

* the builder snippet as ``tasks.py``, served by the README's ``pynenc ... runner
  start`` (a real process), called by the README's client snippet, inspected by the
  README's ``pynenc-cpp info`` / ``doctor`` commands;
* the plain ``Pynenc()`` app with the README's ``[tool.pynenc]`` file, the same way;
* the cluster snippet, as two nodes that elect one master.

Every process a test starts is stopped by it (SIGTERM, then SIGKILL), also on failure.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests_py.procs import orphan_guard
from tests_py.redis_server import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent


def blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced code block of the README."""
    found = re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(), flags=re.M | re.S)
    return [(lang, text) for lang, text in found]


def block(lang: str, *needles: str) -> str:
    """The one README block in ``lang`` that holds every needle."""
    hits = [text for kind, text in blocks() if kind == lang and all(n in text for n in needles)]
    assert len(hits) == 1, f"README.md: expected one {lang} block with {needles}, got {len(hits)}"
    return hits[0]


def commands(console: str) -> list[list[str]]:
    """The ``$ `` lines of a console block, without their trailing comments."""
    lines = [line.removeprefix("$ ") for line in console.splitlines() if line.startswith("$ ")]
    return [shlex.split(line, comments=True) for line in lines]


def user_env() -> dict[str, str]:
    """A user's shell: the virtualenv's scripts first on PATH, no PYNENC__ setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYNENC__")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


class Processes:
    """Processes started by a test, each in a session of its own, stopped at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=user_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=orphan_guard(),
            )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group: pynenc's forked workers too
            except ProcessLookupError:
                pass
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def processes() -> Iterator[Processes]:
    procs = Processes()
    try:
        yield procs
    finally:
        procs.stop_all()


def run(argv: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=timeout
    )


def serve_call_and_inspect(tmp_path: Path, processes: Processes, app_id: str) -> None:
    """The README's ``runner start`` command serves tasks.py; its client snippet gets
    the result; its ``info`` and ``doctor`` commands report on the app."""
    (serve,) = [c for c in commands(block("console", "runner start")) if "runner" in c]
    runner = processes.start(serve, tmp_path, tmp_path / "runner.log")
    try:
        client = run([sys.executable, "-c", block("python", "from tasks import add")], tmp_path, 20)
    except subprocess.TimeoutExpired:
        pytest.fail("no result in 20 s: " + (tmp_path / "runner.log").read_text()[-3000:])
    log = (tmp_path / "runner.log").read_text()
    assert client.returncode == 0, client.stderr[-3000:] + log[-3000:]
    assert client.stdout.strip() == "3"
    assert runner.poll() is None, log[-3000:]
    assert "CppRunner" in log

    info_cmd, doctor_cmd = commands(block("console", "pynenc-cpp --app tasks info"))
    assert info_cmd[-1] == "info" and doctor_cmd[-1] == "doctor"
    info = run(info_cmd, tmp_path)
    assert info.returncode == 0, info.stderr
    assert info.stdout.startswith(f"app {app_id}  storage sqlite://")
    assert re.search(r"^  success +[1-9]", info.stdout, flags=re.M), info.stdout
    assert "runners alive: 1" in info.stdout
    doctor = run(doctor_cmd, tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr  # the defaults: advice only
    assert "! synchronous=NORMAL" in doctor.stdout
    strict = run([*doctor_cmd, "--strict"], tmp_path)
    assert strict.returncode == 1, strict.stdout + strict.stderr


def test_the_builder_snippet_is_served_by_the_runner_start_command(
    tmp_path: Path, processes: Processes
) -> None:
    snippet = block("python", "PynencBuilder().app_id(", ".cpp_sqlite(")
    (tmp_path / "tasks.py").write_text(snippet)
    app_id = re.search(r'app_id\("([^"]+)"\)', snippet)
    assert app_id is not None
    serve_call_and_inspect(tmp_path, processes, app_id[1])
    assert (tmp_path / "demo.db").is_file()  # the snippet's relative path, in its folder


def test_the_pyproject_snippet_configures_a_plain_app(tmp_path: Path, processes: Processes) -> None:
    (tmp_path / "tasks.py").write_text(block("python", "app = Pynenc()"))
    toml = block("toml", "[tool.pynenc]", "cpp_sqlite_path")

    def into_tmp(match: re.Match[str]) -> str:  # an absolute path: moved into the test's folder
        return f'{match[1]}"{tmp_path / "var" / Path(match[2]).name}"'

    toml = re.sub(r'(cpp_sqlite_path\s*=\s*)"(/[^"]*)"', into_tmp, toml)
    (tmp_path / "var").mkdir()
    (tmp_path / "pyproject.toml").write_text(toml)
    app_id = re.search(r'^app_id\s*=\s*"([^"]+)"', toml, flags=re.M)
    assert app_id is not None
    serve_call_and_inspect(tmp_path, processes, app_id[1])
    assert list(tmp_path.rglob("tasks.db")), "the file [tool.pynenc] names"


def test_the_cluster_snippet_elects_one_master_of_two_nodes(
    tmp_path: Path, processes: Processes
) -> None:
    snippet = block("python", "run_cluster(", "ClusterConfig(")
    ports = re.findall(r"127\.0\.0\.1:(\d+)", snippet)
    assert len(set(ports)) == 2, snippet
    free = [str(free_port()), str(free_port())]
    state_dir = re.search(r'state_dir="([^"]+)"', snippet)
    assert state_dir is not None
    logs = []
    for n in range(2):
        node = snippet
        for old, new in zip(ports, free, strict=True):
            node = node.replace(old, new)
        own = re.search(r"port=(\d+)", node)
        assert own is not None and own[1] == free[0]
        node = node.replace(f"port={free[0]}", f"port={free[n]}")
        node = node.replace(state_dir[1], str(tmp_path / f"node{n}"))
        logs.append(tmp_path / f"node{n}.log")
        processes.start([sys.executable, "-u", "-c", node], tmp_path, logs[-1])

    deadline = time.monotonic() + 30
    masters: list[str] = []
    while time.monotonic() < deadline:
        texts = [log.read_text() for log in logs]
        masters = [t for t in texts if re.search(r"^master \d+", t, flags=re.M)]
        if masters and all(t.strip() for t in texts):
            break
        time.sleep(0.1)
    texts = [log.read_text() for log in logs]
    assert len(masters) == 1, texts  # exactly one of the two runs the work
    assert all("Traceback" not in t for t in texts), texts
