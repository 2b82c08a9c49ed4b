"""pynenc's runner-combination suite (every runner x serializer) on pynenc-cpp.

pynenc builds one combination per runner, in a memory family (runners that
share the process) and an SQLite family (every runner, including the ones that
fork processes). Here the memory family runs on ``cpp_mem`` and the SQLite
family on ``cpp_sqlite`` and on ``cpp_redis``; child processes rebuild the
components from the config alone (environment variables, as pynenc's own
fixture does).
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from _pytest.monkeypatch import MonkeyPatch
from pynenc import Pynenc
from pynenc.serializer.base_serializer import BaseSerializer
from pynenc.util.subclasses import get_all_subclasses
from pynenc_tests import util
from pynenc_tests.integration.combinations.all_tests import *  # noqa: F403
from pynenc_tests.integration.combinations.conftest import *  # noqa: F403
from pynenc_tests.integration.combinations.conftest import (
    AppComponents,
    build_test_combinations,
)

from pynenc_cpp import CppRunner
from pynenc_cpp.builder import components
from tests_py.conformance.conftest import backend_modes


def _with_every_serializer(combos: list[AppComponents]) -> list[AppComponents]:
    """pynenc pairs each runner with one serializer (cycling); CppRunner, ours, is
    combined with every serializer pynenc has."""
    serializers = sorted(get_all_subclasses(BaseSerializer), key=lambda cls: cls.__name__)  # type: ignore[type-abstract]
    out: list[AppComponents] = []
    for combo in combos:
        if combo.runner is not CppRunner:
            out.append(combo)
            continue
        out += [dataclasses.replace(combo, serializer=s) for s in serializers]
    return out


def _cpp_combinations() -> list[tuple[str, str, AppComponents]]:
    """pynenc's combinations, the memory family on cpp_mem and the SQLite family
    (every runner, including process runners) on cpp_sqlite and on cpp_redis;
    CppRunner with every serializer; each in the modes ``backend_modes()`` gives."""
    out: list[tuple[str, str, AppComponents]] = []
    for combo in _with_every_serializer(build_test_combinations()):
        backends = ("sqlite", "redis") if combo.family.is_sqlite else ("mem",)
        out += [(b, m, combo) for b, m in backend_modes() if b in backends]
    return out


def _combination_id(param: tuple[str, str, AppComponents]) -> str:
    backend, mode, combo = param
    family = combo.combination_id.split(" ", 1)[1]
    return f"Cpp{backend.capitalize()}-{mode} {family}"


@pytest.fixture(params=_cpp_combinations(), ids=_combination_id)
def app_combination_instance(
    request: pytest.FixtureRequest, monkeypatch: MonkeyPatch, cpp_db_path: str
) -> Pynenc:
    backend, mode, combo = request.param
    ours = components(backend.capitalize(), native=mode == "native")
    test_module, test_name = util.get_module_name(request)
    env = {
        "PYNENC__APP_ID": f"{test_module}.{test_name}.{uuid.uuid4().hex[:8]}",
        "PYNENC__SERIALIZER_CLS": combo.serializer.__name__,
        "PYNENC__RUNNER_CLS": combo.runner.__name__,
        "PYNENC__LOGGING_LEVEL": "info",
        "PYNENC__PRINT_ARGUMENTS": "False",
        "PYNENC__RUNNER_LOOP_SLEEP_TIME_SEC": "0.01",
        "PYNENC__INVOCATION_WAIT_RESULTS_SLEEP_TIME_SEC": "0.01",
    }
    env.update({f"PYNENC__{key.upper()}": cls for key, cls in ours.items()})
    if combo.runner.__name__ == "CppRunner":
        # pynenc's contract for a stop (stop_runner_loop() or one SIGTERM) is that
        # running invocations are KILLED and REROUTED at once; CppRunner's default
        # first stop is graceful, so the suite runs it with no grace period.
        env["PYNENC__CPP_RUNNER_STOP_GRACE_SEC"] = "0"
        env["PYNENC__CPP_RUNNER_WORKERS"] = "2"
    if backend == "sqlite":
        env["PYNENC__CPP_SQLITE_PATH"] = cpp_db_path
    if backend == "redis":
        env["PYNENC__CPP_REDIS_URL"] = request.getfixturevalue("redis_url")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Pynenc()
