"""Several ``pynenc runner start`` processes on one ``cpp_sqlite`` file (issue 15, item 1).

Three runner processes (pynenc's ``MultiThreadRunner``, which forks its worker
processes, and ``CppRunner``) share one SQLite file while a client submits quick
``add`` tasks and a few slow ones and waits for every result. Before the fix a
forked worker held the write lock for the whole busy timeout (a write nested in
another write, through another ``Database`` object of the same file, began a
second transaction instead of joining the first): runners logged ``database
stayed locked`` and their loops died, and the client waited for ever.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
from pynenc import PynencBuilder

from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import runner_env, start_runner, stop

pytestmark = pytest.mark.timeout(240)


def results_within(invocations: list, seconds: float) -> list:
    """Every invocation's result, or a failure naming how many were still pending."""
    out: list = [None] * len(invocations)
    done = threading.Event()

    def collect() -> None:
        for i, inv in enumerate(invocations):
            out[i] = inv.result
        done.set()

    threading.Thread(target=collect, daemon=True).start()
    if not done.wait(seconds):
        pending = sum(1 for v in out if v is None)
        pytest.fail(f"{pending} of {len(invocations)} results not ready after {seconds} s")
    return out


@pytest.mark.parametrize("runner_cls", ["MultiThreadRunner", "CppRunner"])
def test_three_runner_processes_share_one_sqlite_file(runner_cls: str, tmp_path: Path) -> None:
    app = (
        PynencBuilder()
        .app_id(f"cpp-many-{uuid.uuid4().hex[:10]}")
        .cpp_sqlite(path=tmp_path / "shared.db")
        .build()
    )
    rt.use(app)
    env = runner_env(app, "sqlite", {"PYNENC__RUNNER_CLS": runner_cls})
    logs = [tmp_path / f"runner{k}.log" for k in range(3)]
    procs = [start_runner(env, log) for log in logs]
    try:
        invs = [rt.add(i, i) for i in range(60)]
        slow = [rt.slow_append(str(tmp_path / "ledger"), f"s{i}", 1.0 + i % 3) for i in range(4)]
        assert results_within(invs, 90) == [2 * i for i in range(60)]
        assert results_within(slow, 90) == [f"s{i}" for i in range(4)]
    finally:
        for p in procs:
            stop(p)
    text = "".join(log.read_text(errors="replace") for log in logs)
    assert "stayed locked" not in text
    assert sorted((tmp_path / "ledger").read_text().split()) == [f"s{i}" for i in range(4)]
