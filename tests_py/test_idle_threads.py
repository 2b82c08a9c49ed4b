"""Smoke test of bench/idle_threads.py: a short window on SQLite.

Checks that the tool runs, finds the runner's named threads and reports figures
that hang together, never speed or a wake-up count (those belong to the benchmark
and to tests_py/test_runner_signals.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(180)
def test_an_idle_sqlite_runner_is_taken_apart_by_thread(tmp_path: Path) -> None:
    out = tmp_path / "idle.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "idle_threads.py"), "--window", "1"]
        + ["--backends", "sqlite", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert list(result) == ["sqlite"]
    threads = result["sqlite"]["threads"]
    # The engine names its threads: two workers, the timer, the signal watch.
    assert threads["pynenc-worker"]["threads"] == 2
    assert threads["pynenc-timer"]["threads"] == 1
    for name, row in threads.items():
        assert row["wakeups"] >= 0 and row["cpu_ms"] >= 0, (name, row)
    assert result["sqlite"]["process_cpu_s_per_10s"] >= 0
    assert "pynenc-worker" in proc.stdout and "wake-ups/10s" in proc.stdout
