"""Smoke test of bench/profile_serial.py: a short run on memory and on Redis.

Checks that the tool runs and that its figures hang together (each serial task's
parts add up to its total, the Redis commands it lists were sent by both
processes), never speed: figures belong to the benchmark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
M = 30


def _run(stack: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "profile_serial.py"), "--stack", stack]
        + ["--m", str(M), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def _parts_add_up(r: dict[str, object]) -> None:
    assert r["m"] == M
    for name in ("submit", "to body", "to result", "total"):
        part = r[name]
        assert isinstance(part, dict)
        assert 0 < part["p50"] <= part["p90"] <= part["p99"], (name, part)
    # A task's parts are consecutive spans of one clock: no part's median can
    # exceed the total's p99.
    total = r["total"]
    assert isinstance(total, dict)
    parts = [r[n] for n in ("submit", "to body", "to result")]
    assert all(isinstance(p, dict) and p["p50"] <= total["p99"] for p in parts)


@pytest.mark.timeout(240)
def test_memory_run_splits_each_task() -> None:
    r = _run("cpp-mem")
    _parts_add_up(r)
    assert "commands" not in r


@pytest.mark.timeout(240)
def test_redis_run_lists_what_each_process_sent() -> None:
    r = _run("cpp-redis")
    _parts_add_up(r)
    commands = r["commands"]
    assert isinstance(commands, list) and commands
    senders = {c["sent by"] for c in commands}
    assert senders == {"client", "runner"}, commands
    # Every serial task submits once (a client script) and is taken once (a runner
    # script): each process sends at least one script per task.
    for who in ("client", "runner"):
        scripts = sum(
            c["per task"] for c in commands if c["sent by"] == who and c["what"].startswith("EVAL")
        )
        assert scripts >= 1.0, (who, commands)
