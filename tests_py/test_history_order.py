"""Mixed mode: a status change's history row sorts where the change was made.

pynenc's orchestrator changes a status and then, in a second step, appends its
history row. When two threads change one invocation (a worker's RUNNING and a
stop's KILLED), the rows can be written in the other order. pynenc's checker
(``check_all_status_transitions``) sorts rows by their timestamps, so a row dated
when it was written made an ordered history look like KILLED -> RUNNING. Rows are
dated by their status records, which the engine stamps at the change itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc
from pynenc.invocation import InvocationStatus
from pynenc.invocation.status import InvocationStatusRecord
from pynenc.runner.runner_context import RunnerContext
from pynenc_tests.conftest import check_all_status_transitions

from tests_py.cpp_apps import BACKENDS, build_cpp_app

S = InvocationStatus
RUNNER = RunnerContext(runner_cls="TestRunner", runner_id="runner-a", pid=1, hostname="h")

_task_app = Pynenc()


@_task_app.task
def noop() -> None:
    return None


@pytest.fixture(params=BACKENDS)
def mixed_app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pynenc]:
    app = build_cpp_app(request.param, request, tmp_path, "histord", native=False)
    noop.app = app
    yield app
    app.purge()


def _statuses(app: Pynenc, invocation_id: str) -> list[InvocationStatus]:
    history = sorted(app.state_backend.get_history(invocation_id), key=lambda h: h.timestamp)
    return [h.status_record.status for h in history]


def test_rows_written_out_of_order_sort_in_the_order_of_the_changes(mixed_app: Pynenc) -> None:
    app = mixed_app
    orchestrator = app.orchestrator
    invocation = noop()
    inv_id = invocation.invocation_id
    orchestrator.set_invocation_status(inv_id, S.PENDING, RUNNER)

    # The worker's RUNNING: the change is made, its row is not written yet ...
    running = orchestrator._atomic_status_transition(inv_id, S.RUNNING, RUNNER.runner_id)
    # ... when the stop's KILLED (change and row) is made in full ...
    orchestrator.set_invocation_status(inv_id, S.KILLED, RUNNER)
    # ... and only then the worker's row.
    app.state_backend.add_history(inv_id, running, RUNNER)

    assert _statuses(app, inv_id)[-3:] == [S.PENDING, S.RUNNING, S.KILLED]
    check_all_status_transitions(app)


def test_a_row_is_dated_by_its_status_record(mixed_app: Pynenc) -> None:
    app = mixed_app
    invocation = noop()
    inv_id = invocation.invocation_id
    registered = app.orchestrator.get_invocation_status_record(inv_id)
    pending = InvocationStatusRecord(S.PENDING, "runner-a")
    app.state_backend.add_history(inv_id, pending, RUNNER)
    rows = app.state_backend.get_history(inv_id)
    assert [r.status_record.status for r in rows] == [S.REGISTERED, S.PENDING]
    assert rows[0].timestamp == registered.timestamp  # add_histories, at registration
    assert rows[1].timestamp == pending.timestamp
    assert rows[1].runner_context_id == RUNNER.runner_id
