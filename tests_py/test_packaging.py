"""Packaging: the plugin entry point, typing files and complete adapters (the wheel as a
user gets it: tests_py/test_wheel.py)."""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from pynenc import PynencBuilder
from pynenc.broker.base_broker import BaseBroker
from pynenc.client_data_store.base_client_data_store import BaseClientDataStore
from pynenc.orchestrator.base_orchestrator import BaseOrchestrator
from pynenc.state_backend.base_state_backend import BaseStateBackend
from pynenc.trigger.base_trigger import BaseTrigger

import pynenc_cpp
from pynenc_cpp import _core, _shortcuts

ROOT = Path(__file__).resolve().parents[1]

ADAPTERS = [
    (getattr(pynenc_cpp, f"Cpp{backend}{stem}"), base)
    for backend in ("Mem", "Sqlite")
    for stem, base in [
        ("Broker", BaseBroker),
        ("Orchestrator", BaseOrchestrator),
        ("StateBackend", BaseStateBackend),
        ("Trigger", BaseTrigger),
        ("ClientDataStore", BaseClientDataStore),
    ]
]


def test_pynenc_is_a_range_that_the_installed_release_is_in() -> None:
    """pynenc-cpp depends on any pynenc 0.4 release (not one pinned release), the
    installed one is in that range, and so is the one its shortcuts were written
    against (``_shortcuts.WRITTEN_AGAINST``; tests_py/test_shortcuts.py checks them)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pynenc_reqs = [Requirement(r) for r in project["dependencies"]]
    pynenc_reqs = [r for r in pynenc_reqs if r.name == "pynenc"]
    assert [str(r.specifier) for r in pynenc_reqs] == ["<0.5,>=0.4.0"]
    spec = pynenc_reqs[0].specifier
    assert importlib.metadata.version("pynenc") in spec
    assert _shortcuts.WRITTEN_AGAINST in spec
    assert "0.4.99" in spec and "0.5.0" not in spec and "0.3.1" not in spec
    # The test extra's pynenc (with its monitor) is the same range.
    extra = [Requirement(r) for r in project["optional-dependencies"]["test"]]
    assert {str(r.specifier) for r in extra if r.name == "pynenc"} == {str(spec)}


def test_entry_point_registers_builder_method() -> None:
    eps = importlib.metadata.entry_points(group="pynenc.plugins")
    ours = [ep for ep in eps if ep.value == "pynenc_cpp.builder:CppPlugin"]
    assert len(ours) == 1
    assert {"cpp_mem", "cpp_sqlite"} <= set(dir(PynencBuilder()))


@pytest.mark.parametrize("adapter,base", ADAPTERS, ids=lambda c: c.__name__)
def test_adapter_implements_every_abstract_member(adapter: type, base: type) -> None:
    assert issubclass(adapter, base)
    assert base.__abstractmethods__, "pynenc's ABC should declare abstract members"
    assert not inspect.isabstract(adapter), sorted(adapter.__abstractmethods__)


def test_typing_files_ship_with_the_package() -> None:
    pkg = Path(pynenc_cpp.__file__).parent
    assert (pkg / "py.typed").exists()
    stubs = pkg / "_core"
    root = (stubs / "__init__.pyi").read_text()
    text = "".join(p.read_text() for p in sorted(stubs.glob("*.pyi")))
    public = [n for n in dir(_core) if not n.startswith("_")]
    submodules = [n for n in public if inspect.ismodule(getattr(_core, n))]
    assert submodules, "the extension registers its subsystems as submodules"
    missing = [n for n in submodules if not (stubs / f"{n}.pyi").is_file()]
    missing += [
        n
        for n in public
        if n not in submodules and f"class {n}" not in text and f"def {n}(" not in text
    ]
    assert not missing, f"_core/*.pyi lack {missing}; regenerate them (docs/building.md)"
    # Every public name is importable from the root, as the adapters spell it.
    unexported = [n for n in public if f"'{n}'" not in root and f'"{n}"' not in root]
    assert not unexported, f"_core/__init__.pyi does not export {unexported}"


def test_a_source_tree_without_the_extension_says_so(tmp_path: Path) -> None:
    """``python/`` on the path without a build: the stubs' directory ``_core/`` would
    import as an empty namespace package; the package says what is missing instead."""
    out = subprocess.run(
        [sys.executable, "-S", "-c", "import pynenc_cpp"],
        env={"PYTHONPATH": str(ROOT / "python"), "PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ImportError: pynenc_cpp._core, the compiled engine, is missing" in out.stderr


def _documented(obj: object) -> bool:
    """pybind11 docstrings start with the signature; require text beyond it."""
    lines = [line for line in (obj.__doc__ or "").splitlines() if line.strip()]
    return any(
        "(" not in line or not line.strip().startswith(getattr(obj, "__name__", "?"))
        for line in lines
    )


def test_every_binding_has_a_docstring() -> None:
    undocumented = []
    for name in dir(_core):
        if name.startswith("_"):
            continue
        obj = getattr(_core, name)
        if not _documented(obj):
            undocumented.append(name)
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if callable(member) and not _documented(member):
                    undocumented.append(f"{name}.{attr}")
    assert not undocumented, undocumented
