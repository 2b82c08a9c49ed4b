"""Smoke test of bench/submit_alone.py on memory: it runs, times one engine call per
submit, and its figures hang together; never speed (figures belong to the benchmark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
N = 1500


@pytest.mark.timeout(180)
def test_memory_run_times_each_submits_engine_call() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "submit_alone.py"), "--stack", "cpp-mem"]
        + ["--n", str(N), "--json"],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    assert r["n"] == N and r["engine_calls"] == N  # one engine call per task(...)
    assert 0 < r["engine_p50_us"] < r["wall_p50_us"]
    assert r["rest_p50_us"] == pytest.approx(r["wall_p50_us"] - r["engine_p50_us"])
    assert r["cpu_us_per_submit"] > 0 and r["submits_per_s"] > 0
