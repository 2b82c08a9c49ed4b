"""The engine's outcomes cross to Python as struct sequences (``bindings/structs.h``):
``_core.StatusRecord``, ``_core.Claim``, ``_core.Change`` and ``_core.Finish`` are
tuples with named fields, so a caller unpacks one as before or reads a field by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc

from pynenc_cpp import _core
from tests_py.cpp_apps import BACKENDS, build_cpp_app

_task_app = Pynenc()


@_task_app.task
def add(x: int, y: int) -> int:
    return x + y


@pytest.fixture(params=BACKENDS)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pynenc]:
    built = build_cpp_app(request.param, request, tmp_path, "structs")
    add.app = built
    yield built
    built.purge()


def _lifecycle(app: Pynenc) -> _core.Lifecycle:
    lifecycle = app.orchestrator._lifecycle()
    assert lifecycle is not None
    return lifecycle


def test_a_claim_a_change_and_a_finish_have_named_fields(app: Pynenc) -> None:
    invocation = add(1, 2)
    inv_id = invocation.invocation_id
    task_key = add.task_id.key
    lifecycle = _lifecycle(app)
    lifecycle.set_task_runs_freely(task_key)

    claim = lifecycle.claim(inv_id, "runner-s", "runner-s", start=False)
    assert isinstance(claim, _core.Claim) and isinstance(claim, tuple)
    assert claim.kind == "claimed"
    assert isinstance(claim.record, _core.StatusRecord)
    assert claim.record.status == "pending"
    assert claim.record.runner_id == "runner-s"
    assert claim.record.timestamp_us > 0
    assert claim.invocation is not None and claim.invocation["invocation_id"] == inv_id
    kind, record, record_dict, watched = claim  # still a tuple of four
    assert (kind, record, record_dict, watched) == tuple(claim)
    assert watched is claim.status_watched
    assert "kind='claimed'" in repr(claim)

    change = lifecycle.change_status(inv_id, "running", "runner-s", "runner-s")
    assert isinstance(change, _core.Change)
    assert change.record.status == "running" and change.record.runner_id == "runner-s"
    assert isinstance(change.status_watched, bool)
    assert len(change) == 2

    finish = lifecycle.finish_success(inv_id, "3", "runner-s", "runner-s", task_key)
    assert isinstance(finish, _core.Finish)
    record, status_watched, outcome_watched = finish
    assert record.status == "success"
    assert record.timestamp_us >= change.record.timestamp_us
    assert (status_watched, outcome_watched) == (finish.status_watched, finish.outcome_watched)
    assert invocation.result == 3


def test_a_status_record_compares_equal_to_its_tuple(app: Pynenc) -> None:
    invocation = add(2, 2)
    record = app.orchestrator._engine.status_record(invocation.invocation_id)
    assert isinstance(record, _core.StatusRecord)
    assert record == (record.status, record.runner_id, record.timestamp_us)
    assert record.status == "registered"


def test_an_unavailable_claim_has_no_invocation(app: Pynenc) -> None:
    invocation = add(3, 3)
    lifecycle = _lifecycle(app)
    lifecycle.set_task_runs_freely(add.task_id.key)
    assert lifecycle.claim(invocation.invocation_id, "runner-a", "runner-a").kind == "claimed"
    again = lifecycle.claim(invocation.invocation_id, "runner-b", "runner-b")
    assert again.kind == "not_available"
    assert again.invocation is None
