"""The README's demo prints correct results computed through pynenc-cpp."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_correct_results(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYNENC_CPP_DEMO_DB": str(tmp_path / "demo.db")},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "components: CppSqliteBroker, CppSqliteNativeOrchestrator, CppSqliteStateBackend, "
        "CppSqliteTrigger, CppSqliteClientDataStore"
    )
    for label, value in [
        ("add(2, 3)", "5"),
        ("fibonacci(30)", "832040"),
        ("sum_of_squares(10)", "385"),
    ]:
        row = next(line for line in lines if line.startswith(label))
        assert f"= {value} " in row and row.rstrip().endswith("[success] ok"), row
    assert lines[1] == f"database: {tmp_path / 'demo.db'}"
    assert (tmp_path / "demo.db").exists()
