"""The README's demo prints correct results computed through pynenc-cpp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_correct_results() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "components: CppMemBroker, CppMemOrchestrator, CppMemStateBackend, CppMemTrigger, "
        "CppMemClientDataStore"
    )
    for label, value in [
        ("add(2, 3)", "5"),
        ("fibonacci(30)", "832040"),
        ("sum_of_squares(10)", "385"),
    ]:
        row = next(line for line in lines if line.startswith(label))
        assert f"= {value} " in row and row.rstrip().endswith("[success] ok"), row
