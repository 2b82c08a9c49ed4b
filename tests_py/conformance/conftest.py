"""Runs pynenc's exported conformance suites (``pynenc_tests``) against pynenc-cpp.

pynenc's suites take the app under test from the ``app_instance`` fixture (unit
and most integration suites) or ``app_combination_instance`` (the runner
combination suites); both are overridden here to build pynenc-cpp apps, once
per backend. Tests that pynenc-cpp does not run are listed, each with its
reason, in ``exclusions.py`` and in docs/conformance.md.

``app_instance`` is parametrized over backend x mode: ``cpp_mem-native`` uses
``CppMemNativeOrchestrator`` (each hot-path step one engine call),
``cpp_mem-mixed`` pynenc's own orchestration code over the native components.

Environment knobs:
  ``PYNENC_CPP_CONFORMANCE=slice``    the representative slice ``make test`` (CI) runs:
      every suite, each backend in one mode (cpp_mem and cpp_sqlite native,
      cpp_redis mixed; both modes covered); ``full`` (the default, and
      ``make conformance``) runs every backend in both modes
  ``PYNENC_CPP_BACKENDS=mem,sqlite``  which backends to parametrize (default: all built)
  ``PYNENC_CPP_MODES=native,mixed``   which modes to parametrize (default: both)
  ``PYNENC_CPP_ONLY=<component>``     swap only that component (broker,
      orchestrator, state_backend, trigger, client_data_store) into pynenc's own
      app of the same family, to work on one component at a time.
"""

from __future__ import annotations

import ctypes
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator

import psutil
import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc_tests.conftest import *  # noqa: F403  (pynenc's shared fixtures)

from pynenc_cpp.builder import components
from tests_py.conformance.exclusions import EXCLUDED, RERUNS, TIMING_SENSITIVE
from tests_py.redis_server import FIXTURE_PIDS

ALL_BACKENDS = ("mem", "sqlite", "redis")
BACKENDS = tuple(
    b for b in os.environ.get("PYNENC_CPP_BACKENDS", ",".join(ALL_BACKENDS)).split(",") if b
)
ALL_MODES = ("native", "mixed")
MODES = tuple(m for m in os.environ.get("PYNENC_CPP_MODES", ",".join(ALL_MODES)).split(",") if m)
for _mode in MODES:
    if _mode not in ALL_MODES:
        raise ValueError(f"PYNENC_CPP_MODES: unknown mode {_mode!r}; expected {ALL_MODES}")
CONFORMANCE = os.environ.get("PYNENC_CPP_CONFORMANCE", "full")
if CONFORMANCE not in ("full", "slice"):
    raise ValueError(f"PYNENC_CPP_CONFORMANCE: expected 'full' or 'slice', got {CONFORMANCE!r}")
# The slice: one mode per backend, both modes covered (docs/conformance.md).
SLICE_MODE = {"mem": "native", "sqlite": "native", "redis": "mixed"}


def backend_modes() -> list[tuple[str, str]]:
    """The (backend, mode) pairs every suite runs on."""
    return [(b, m) for b in BACKENDS for m in MODES if CONFORMANCE == "full" or SLICE_MODE[b] == m]


def build_app(backend: str, db_path: str, redis_url: str = "", native: bool = True) -> Pynenc:
    """A fresh pynenc-cpp app on `backend` ("mem", "sqlite", "redis"), unique app id.

    `native` picks the mode: native orchestrator (default) or mixed mode.
    """
    builder = PynencBuilder().app_id(f"cpp-conf-{uuid.uuid4().hex[:8]}")
    only = os.environ.get("PYNENC_CPP_ONLY")
    if only:
        key = f"{only}_cls"
        ours = components(backend.capitalize(), native=native)
        if key not in ours:
            raise ValueError(f"PYNENC_CPP_ONLY={only!r}: expected one of {sorted(ours)}")
        base = builder.memory() if backend == "mem" else builder.sqlite(sqlite_db_path=db_path)
        return base.custom_config(**{key: ours[key], "cpp_sqlite_path": db_path + ".cpp"}).build()
    if backend == "mem":
        return builder.cpp_mem(native=native).build()
    if backend == "redis":
        return builder.cpp_redis(redis_url, native=native).build()
    return builder.cpp_sqlite(path=db_path, native=native).build()


@pytest.fixture
def cpp_db_path() -> Iterator[str]:
    """A path for a new SQLite file in a fresh temp dir (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="pynenc-cpp-conf-") as d:
        yield os.path.join(d, "app.db")


@pytest.fixture(params=[f"cpp_{b}-{m}" for b, m in backend_modes()])
def app_instance(request: pytest.FixtureRequest, cpp_db_path: str) -> Pynenc:
    backend, mode = request.param.removeprefix("cpp_").split("-")
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    return build_app(backend, cpp_db_path, redis_url, native=mode == "native")


_PR_SET_CHILD_SUBREAPER = 36


def pytest_configure(config: pytest.Config) -> None:
    """Become a child subreaper: processes orphaned by a test (e.g. the workers of a
    runner that pynenc's suite SIGKILLs) are re-parented to pytest, not to init,
    so ``reap_leftover_processes`` can find and stop them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@pytest.fixture(autouse=True)
def reap_leftover_processes() -> Iterator[None]:
    """Kill every process a test left behind.

    pynenc 0.4.0's ``test_runner_reroutes_on_real_os_signal[...-sigkill]`` kills a
    runner process whose worker processes never notice their parent died; they
    would poll the (deleted) database forever and slow every later test.
    Servers owned by fixtures (the session's redis-server) are spared.
    """
    yield
    leftovers = [p for p in psutil.Process().children(recursive=True) if p.pid not in FIXTURE_PIDS]
    for proc in leftovers:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(leftovers, timeout=10)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = item.originalname if hasattr(item, "originalname") else item.name
        reason = EXCLUDED.get(name)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"excluded (docs/conformance.md): {reason}"))
        if name in TIMING_SENSITIVE:
            item.add_marker(pytest.mark.flaky(reruns=RERUNS))
