"""The app ``bench/concurrency.py``'s runner processes serve (``pynenc --app
bench.concurrency_app runner start``): the guarantees suite's tasks
(``tests_py.runner_tasks``, configured from the ``PYNENC__*`` environment) and the
orchestrators of the "ungated" rows.

``Ungated*Orchestrator`` override pynenc's candidate check with itself, so the
gate of ``pynenc_cpp._concurrency`` steps aside (it stands in only for pynenc's own
checks): the check is made in Python and the status changed in another call, as
pynenc-cpp did before issue 48. Used by the benchmark only, to show that run's
figures beside the gated ones.
"""

from __future__ import annotations

from typing import Any

from pynenc.conf.config_task import ConcurrencyControlType

from pynenc_cpp.native import CppRedisNativeOrchestrator, CppSqliteNativeOrchestrator
from tests_py.runner_tasks import app, flaky, keyed_order, restock  # noqa: F401


class UngatedSqliteOrchestrator(CppSqliteNativeOrchestrator):
    def is_candidate_to_run_by_concurrency_control(self, invocation: Any) -> bool:
        return bool(super().is_candidate_to_run_by_concurrency_control(invocation))


class UngatedRedisOrchestrator(CppRedisNativeOrchestrator):
    def is_candidate_to_run_by_concurrency_control(self, invocation: Any) -> bool:
        return bool(super().is_candidate_to_run_by_concurrency_control(invocation))


@app.task(running_concurrency=ConcurrencyControlType.KEYS, key_arguments=("sku",))
def keyed_noop(sku: str) -> str:
    """Running concurrency by ``sku``; the bench gives each call its own key."""
    return sku


@app.task
def free_noop(sku: str) -> str:
    """``keyed_noop`` without concurrency control."""
    return sku
