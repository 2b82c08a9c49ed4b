"""Smoke test of bench/peers.py: a quick run of a cheap subset of systems.

Checks correctness only (every system ran, every task's result came back, the
JSON has its documented shape), never speed: figures belong to the benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# pynenc-cpp (mem: runner in-process; sqlite: a runner process) on pynenc's
# ThreadRunner, and Celery's threads pool (.venv-bench) on the benchmark's Redis.
SYSTEMS = ["cpp-mem-mixed-thread", "cpp-sqlite-mixed-thread", "celery-threads"]
N, M = 40, 10


@pytest.fixture(scope="module")
def bench_venvs() -> None:
    """The peers' virtualenv these systems need (.venv-bench), made the way `make
    bench-peers` makes it."""
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "bench_setup.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BENCH_VENVS": "peers"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.timeout(240)
def test_quick_run_completes_every_task(bench_venvs: None, tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "peers.py"),
            "--quick",
            "--systems",
            ",".join(SYSTEMS),
            "-n",
            str(N),
            "-m",
            str(M),
            "--idle-s",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())

    assert doc["params"]["n"] == N and doc["params"]["m"] == M and doc["params"]["rounds"] == 1
    assert set(doc["summary"]) == set(SYSTEMS) == set(doc["raw"]) == set(doc["systems"])
    for name in SYSTEMS:
        summary, runs = doc["summary"][name], doc["raw"][name]
        assert summary["status"] == "ok", (name, summary, runs)
        assert summary["errors"] == []
        assert summary["s1_completed"] == [N]
        assert summary["s2_completed"] == [M]
        (run,) = runs
        assert run["s1"]["n"] == N and run["s1"]["completed"] == N
        assert run["s2"]["m"] == M and run["s2"]["completed"] == M
        assert run["s3"]["idle_s"] == 1 and run["s3"]["processes"] >= 1
        for key in ("s1_submit_rate", "s1_completion_rate", "s2_p50_ms", "s2_p99_ms"):
            assert isinstance(summary[key], float) and summary[key] > 0, (name, key)
        assert summary["s3_cpu_s_per_10s"] >= 0
        # The worker is a separate process except on the in-memory backend.
        assert doc["systems"][name]["venv"] in ("main", "bench")

    # The table names every system and the ratio column of the Celery baseline.
    for name in SYSTEMS:
        assert name in proc.stdout
    assert "x celery-threads" not in proc.stdout  # not a default baseline
    assert "S1 done/s" in proc.stdout


def test_unknown_system_is_a_clear_error() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peers.py"), "--systems", "no-such-system"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown systems ['no-such-system']" in proc.stderr


def test_unavailable_system_is_skipped_with_its_reason() -> None:
    """A skipped system keeps its reason in the summary and the table."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import peers  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    summary = peers.summarise([{"status": "skipped", "reason": "CppRunner not available"}])
    assert summary == {"status": "skipped", "reason": "CppRunner not available"}
    table = peers.render_table({"cpp-redis-native-cpprunner": summary}, [])
    assert "SKIPPED" in table and "CppRunner not available" in table


def test_a_worker_that_dies_fails_the_round_with_its_log(tmp_path: Path) -> None:
    """The driver's watcher reports a dead worker at once, with its log's tail."""
    script = f"""
import subprocess, sys, threading
sys.path.insert(0, {str(ROOT / "bench")!r})
import peers
log = open({str(tmp_path / "app-worker.log")!r}, "wb")
proc = subprocess.Popen([sys.executable, "-c", "print('worker boom'); raise SystemExit(3)"],
                        stdout=log, stderr=subprocess.STDOUT)
adapter = type("A", (), {{"procs": [proc]}})()
peers._watch_workers(adapter, {{"workdir": {str(tmp_path)!r}, "app_id": "app"}}, threading.Event())
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PEERS-RESULT "))
    result = json.loads(line[len("PEERS-RESULT ") :])
    assert result["status"] == "error"
    assert "worker exited 3" in result["error"] and "worker boom" in result["error"]
