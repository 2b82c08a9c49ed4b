"""bench/cluster_failover.py and bench/actors.py run end to end (figures printed; no timing
assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cluster_failover.py"
ACTORS = BENCH.with_name("actors.py")


@pytest.mark.timeout(300)
def test_failover_bench_quick_run_prints_the_figures() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--trials", "2"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 trials" in out.stdout
    assert out.stdout.count("  trial ") == 2
    for name in ("crash detection", "failover"):
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith(name))
        for field in ("p50", "p95", "p99", "max", "target p99"):
            assert field in line
        assert "PASS" in line or "FAIL" in line


@pytest.mark.timeout(300)
def test_actor_bench_quick_run_prints_the_figures() -> None:
    out = subprocess.run(
        [sys.executable, str(ACTORS), "--quick", "--no-peers"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("pynenc-cpp: ask p50")
    for label in (
        "ask round trip p50 (ms)",
        "failover p99 (ms)",
        "graceful handover p50 (ms)",
    ):
        line = next(ln for ln in lines if ln.startswith(label))
        assert float(line[len(label) :].split()[0]) > 0  # measured, whatever the figure
    assert any(ln.startswith("wrote bench/results/actors-") for ln in lines)
