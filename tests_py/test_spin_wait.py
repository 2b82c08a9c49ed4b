"""``cpp_spin_wait_us``: how long a waiter of the memory and SQLite backends polls
before it sleeps (core/spin_wait.h). Checked at build and when a component opens its
storage, set process-wide from the app's config, and every value keeps tasks and
their results flowing (a budget only moves when a waiter sleeps, never whether it
wakes). No timing assertions: the machines are noisy (bench/ measures the effect)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from pynenc import PynencBuilder

from pynenc_cpp import BadConfig, _core
from pynenc_cpp._component import spin_wait_us
from pynenc_cpp.config import MAX_SPIN_WAIT_US, ConfigCpp, spin_wait_problem
from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import running
from tests_py.test_result_wait import within_deadline


@pytest.fixture(autouse=True)
def _restore_budget() -> Iterator[None]:
    saved = _core.spin_wait_us()
    yield
    _core.set_spin_wait_us(saved)


def test_the_default_is_the_engines() -> None:
    assert ConfigCpp().cpp_spin_wait_us == 500
    assert MAX_SPIN_WAIT_US == 10_000


@pytest.mark.parametrize("good", [0, 1, 500, 10_000, "250", " 42 "])
def test_whole_microseconds_in_range_are_accepted(good: object) -> None:
    assert spin_wait_problem(good) is None


@pytest.mark.parametrize("bad", [-1, 10_001, 1.5, True, "fast", "", "-3"])
def test_anything_else_is_refused_at_build_naming_it(bad: object) -> None:
    assert spin_wait_problem(bad) == (
        f"cpp_spin_wait_us={bad!r}: expected whole microseconds from 0 to 10000"
    )
    builder = PynencBuilder().app_id("spin-bad").cpp_mem().custom_config(cpp_spin_wait_us=bad)
    with pytest.raises(ValueError, match="cpp_spin_wait_us="):
        builder.build()


def test_a_value_the_builder_did_not_see_is_refused_when_the_storage_opens() -> None:
    for bad in ("soon", None):
        conf = cast("ConfigCpp", SimpleNamespace(cpp_spin_wait_us=bad))
        with pytest.raises(BadConfig, match=f"cpp_spin_wait_us={bad!r}"):
            spin_wait_us(conf)
    with pytest.raises(ValueError, match="between 0 and 10000"):
        _core.set_spin_wait_us(-1)


def test_the_apps_value_reaches_the_engine_when_its_storage_opens() -> None:
    _core.set_spin_wait_us(7)
    app = (
        PynencBuilder()
        .app_id(f"spin-{uuid.uuid4().hex[:8]}")
        .cpp_mem()
        .custom_config(cpp_spin_wait_us=1234)
        .build()
    )
    assert _core.spin_wait_us() == 7  # nothing opened yet
    _ = app.broker.storage  # type: ignore[attr-defined]
    assert _core.spin_wait_us() == 1234


@pytest.mark.parametrize("budget", [0, 500, MAX_SPIN_WAIT_US])
@pytest.mark.parametrize("backend", ["mem", "sqlite"])
def test_serial_tasks_and_a_burst_complete_with_any_budget(
    backend: str, budget: int, tmp_path: Path
) -> None:
    # Serial tasks are the case the spin is for: the worker waits for the next submit
    # and the client for the result, each event coming while the other spins (or,
    # at 0, sleeps). A burst then has both workers and the client contend.
    builder = PynencBuilder().app_id(f"spin-{uuid.uuid4().hex[:8]}")
    if backend == "mem":
        builder = builder.cpp_mem()
    else:
        builder = builder.cpp_sqlite(path=tmp_path / "spin.db")
    app = builder.cpp_runner(workers=2).custom_config(cpp_spin_wait_us=budget).build()
    rt.use(app)
    with running(app):
        assert _core.spin_wait_us() == budget
        serial = within_deadline(lambda: [rt.add(i, 1).result for i in range(30)])
        burst = rt.add.parallelize([(i, 2) for i in range(60)])
        results = sorted(within_deadline(lambda: list(burst.results)))
    assert serial == [i + 1 for i in range(30)]
    assert results == [i + 2 for i in range(60)]
