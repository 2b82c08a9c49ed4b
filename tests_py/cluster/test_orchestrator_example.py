"""examples/orchestrator.py --demo: the filesystem example (gateway + two workers)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orchestrator.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(out: str, label: str) -> list[str]:
    """Every status line printed for ``label``, in order."""
    return re.findall(rf"^  {re.escape(label)} +(.*)$", out, re.M)


@pytest.mark.timeout(180)
def test_orchestrator_demo_places_queries_and_applies_crash_strategies() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "--port", str(_free_port())],
        capture_output=True,
        text=True,
        timeout=150,
    )
    text = out.stdout
    assert out.returncode == 0, text + out.stderr
    assert "demo done" in text
    # Placed by constraints on the worker with the volume, queried from the gateway.
    photos, docs, scratch = (_status(text, f"storage/{x}") for x in ("photos", "docs", "scratch"))
    assert photos[0].startswith("running") and " on store-a " in photos[0]
    assert docs[0].startswith("running") and " on store-b " in docs[0]
    assert "'node': 'store-a', 'entries': ['beach.jpg', 'cat.jpg']" in text
    assert "'node': 'store-b', 'content': 'hello from docs'" in text
    # SIGKILL store-a: photos waits for that node (WaitForReturn), scratch moves.
    assert photos[1].startswith("waiting_for_return") and "waiting up to 6000 ms" in photos[1]
    assert scratch[1].startswith("running") and " on store-b " in scratch[1]
    assert "generation 2.0" in scratch[1]
    # store-a restarted with the same node id: photos runs there again, next seq.
    assert photos[2].startswith("running") and " on store-a " in photos[2]
    assert "generation 1.1" in photos[2]
    assert "[store-a] started storage/photos (generation 1.1)" in text
    # SIGKILL store-b: no other node has volume=docs, and the reason says so.
    assert docs[-1].startswith("unplaced")
    assert "required_metadata {volume=docs} ruled out 1" in docs[-1]
    assert scratch[-1].startswith("running") and " on store-a " in scratch[-1]
