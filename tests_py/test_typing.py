"""The package's types are checked: ``mypy --strict`` over ``python/pynenc_cpp``
(settings in pyproject.toml's ``[tool.mypy]``), and the committed ``_core/*.pyi`` stubs are
what ``scripts/gen_stubs.sh`` generates from the built extension, so the stub a
user's type checker reads cannot drift from the bindings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_passes_mypy_strict(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found" in out.stdout


def test_a_user_program_is_checked_against_the_stub(tmp_path: Path) -> None:
    """A call with a wrong argument type to the engine is a mypy error (the stub is
    read, not Any)."""
    program = tmp_path / "user.py"
    program.write_text(
        "from pynenc_cpp import _core\n"
        "broker = _core.Broker('memory://', 'app')\n"
        "broker.route(['id'], 'queue', 'not a priority')\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "c"),
            str(program),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'Argument 3 to "route" of "Broker"' in out.stdout, out.stdout


def test_the_committed_stubs_are_what_the_extension_generates() -> None:
    generated = ROOT / "build" / "stub-check" / "_core"
    generated.parent.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        ["bash", "scripts/gen_stubs.sh", str(generated)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    committed = ROOT / "python" / "pynenc_cpp" / "_core"
    names = sorted(p.name for p in committed.glob("*.pyi"))
    assert sorted(p.name for p in generated.glob("*.pyi")) == names, (
        "python/pynenc_cpp/_core/ has other stub files than the extension's submodules: "
        "run `bash scripts/gen_stubs.sh` and commit the result"
    )
    stale = [n for n in names if (generated / n).read_text() != (committed / n).read_text()]
    assert not stale, (
        f"python/pynenc_cpp/_core/{stale} stale: run `bash scripts/gen_stubs.sh` and commit it"
    )
