"""The actor examples run as the README says: the job coordinator and the counter."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.timeout(120)
def test_jobs_example_prints_two_jobs_pending() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "actors_jobs.py")],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "2 jobs pending"


@pytest.mark.timeout(180)
def test_counter_example_survives_the_sigkill_of_its_node() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "actors_counter.py")],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    killed = re.search(r"SIGKILL (server-\d) \(it ran the counter\) after 101", out.stdout)
    assert killed, out.stdout
    # Up to the result (the servers' graceful stops afterwards hand the counter over again).
    before = out.stdout.split('{"confirmed"')[0]
    starts = re.findall(r"\[(server-\d)\] counter starts, generation (\d+)\.(\d+)", before)
    assert len(starts) == 2 and starts[0][0] == killed.group(1) and starts[1][0] != killed.group(1)
    assert int(starts[1][1]) > int(starts[0][1])  # a new term after the failover
    result = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("{")))
    assert result == {"confirmed": 200, "count": 200}
    assert "the counter survived" in out.stdout
