"""Runs pynenc's exported conformance suites (``pynenc_tests``) against pynenc-cpp.

pynenc's suites take the app under test from the ``app_instance`` fixture; here
it is overridden to build a ``cpp_mem()`` app. Tests that pynenc-cpp does not
run are listed, each with its reason, in ``exclusions.py`` and in
docs/conformance.md; a test here checks both lists agree.

``PYNENC_CPP_ONLY=<component>`` (broker, orchestrator, state_backend, trigger,
client_data_store) swaps only that component into pynenc's own memory app: a
development aid for working on one component at a time.
"""

from __future__ import annotations

import os
import uuid

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc_tests.conftest import *  # noqa: F403  (pynenc's shared fixtures)

from pynenc_cpp.builder import MEM_COMPONENTS
from tests_py.conformance.exclusions import EXCLUDED


def build_cpp_mem_app() -> Pynenc:
    builder = PynencBuilder().app_id(f"cpp-conf-{uuid.uuid4().hex[:8]}")
    only = os.environ.get("PYNENC_CPP_ONLY")
    if only:
        key = f"{only}_cls"
        if key not in MEM_COMPONENTS:
            raise ValueError(f"PYNENC_CPP_ONLY={only!r}: expected one of {sorted(MEM_COMPONENTS)}")
        return builder.memory().custom_config(**{key: MEM_COMPONENTS[key]}).build()
    return builder.cpp_mem().build()


@pytest.fixture(params=["cpp_mem"])
def app_instance(request: pytest.FixtureRequest) -> Pynenc:
    return build_cpp_mem_app()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = item.originalname if hasattr(item, "originalname") else item.name
        reason = EXCLUDED.get(name)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"excluded (docs/conformance.md): {reason}"))
