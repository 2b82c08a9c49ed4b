"""Trigger reports noted before a status change and made by the sweep when their
runner died first (``pynenc_cpp._pending_reports``).

The whole fault (a runner SIGKILLed between a SUCCESS and its report, a live runner
making the report) is the guarantees suite's
``test_a_status_trigger_fires_once_when_its_runner_dies_between_the_status_and_its_report``;
here: what is noted when, and what the sweep does with each kind of note.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus
from pynenc.trigger.conditions import StatusContext

from pynenc_cpp._pending_reports import NOTED, PendingReport, PendingReports, note_id
from tests_py import trigger_tasks as tt
from tests_py.test_cpp_runner import ALL, FAST, running, wait_until

MODES = ["native", "mixed"]
DEAD = "runner-that-died"
DEAD_AFTER_SEC = 180.0


def _app(backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> Pynenc:
    native = mode == "native"
    builder = PynencBuilder().app_id(f"pending-reports-{uuid.uuid4().hex[:8]}")
    if backend == "mem":
        builder = builder.cpp_mem(native=native)
    elif backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "reports.db", native=native)
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"), native=native)
    app = (
        builder.cpp_runner(workers=2)
        .custom_config(**FAST, atomic_service_check_interval_minutes=60)
        .build()
    )
    tt.use(app, cron=False)
    app.register_deferred_triggers()  # as a runner does when it starts
    return app


def _notes(app: Pynenc) -> PendingReports:
    notes = app.trigger.pending_reports  # type: ignore[attr-defined]
    assert isinstance(notes, PendingReports)
    return notes


def _stored(app: Pynenc) -> dict[str, PendingReport]:
    return {
        nid: PendingReport.from_json(text) for nid, text in _notes(app)._engine.pending_reports()
    }


def _receipts(app: Pynenc) -> list[str]:
    return list(app.orchestrator.get_existing_invocations(tt.send_receipt))


def _status_conditions_of(app: Pynenc, invocation_id: str) -> list[str]:
    return [
        vc_id
        for vc_id, vc in app.trigger.get_valid_conditions().items()
        if isinstance(vc.context, StatusContext) and vc.context.invocation_id == invocation_id
    ]


def test_the_noted_statuses_are_the_final_ones_and_retry() -> None:
    assert InvocationStatus.SUCCESS in NOTED and InvocationStatus.FAILED in NOTED
    assert InvocationStatus.RETRY in NOTED
    # Recovery passes an invocation through these again, with the same report ids.
    assert InvocationStatus.RUNNING not in NOTED and InvocationStatus.PENDING not in NOTED


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ALL)
def test_a_watched_success_is_noted_before_its_report_and_cleared_after(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """While the SUCCESS of ``order_placed`` (watched by the receipt's trigger) is
    reported, its note (and only it) is stored, under a runner id the sweep sees
    heartbeating; once the receipt is done no note is left."""
    app = _app(backend, mode, tmp_path, request)
    seen: dict[str, dict[str, PendingReport]] = {}
    trigger: Any = app.trigger
    report = trigger.report_tasks_status

    def watching(invocation_ids: list[str], status: InvocationStatus | None = None) -> None:
        if status == InvocationStatus.SUCCESS:
            for iid in invocation_ids:
                seen[str(iid)] = _stored(app)
        report(invocation_ids, status)

    trigger.report_tasks_status = watching
    with running(app):
        order = tt.order_placed(str(tmp_path / "ledger"), "t1")
        wait_until(lambda: len(_receipts(app)) == 1)
        receipt = _receipts(app)[0]
        wait_until(lambda: app.orchestrator.get_invocation_status(receipt).is_final())
        live = {r.runner_id for r in app.orchestrator.get_active_runners()}
    order_id = str(order.invocation_id)
    at_report = seen[order_id]
    assert list(at_report) == [note_id(order_id, InvocationStatus.SUCCESS)]
    note = at_report[note_id(order_id, InvocationStatus.SUCCESS)]
    assert note.status == InvocationStatus.SUCCESS
    assert note.runner_id in live  # the sweep judges a note by its runner's heartbeat
    assert time.time() - note.noted_at < 60
    assert _stored(app) == {}
    assert app.orchestrator.get_invocation_status(order_id) == InvocationStatus.SUCCESS


def _success_without_report(app: Pynenc, tmp_path: Path, tag: str) -> str:
    """An order moved to SUCCESS by a runner that died before reporting it: the
    transitions are made on the engine directly, no report follows."""
    order = tt.order_placed(str(tmp_path / "ledger"), tag)
    engine: Any = app.orchestrator._engine  # type: ignore[attr-defined]
    iid = str(order.invocation_id)
    for status in (InvocationStatus.PENDING, InvocationStatus.RUNNING, InvocationStatus.SUCCESS):
        engine.transition(iid, status, DEAD)
    app.state_backend.set_result(order.invocation_id, tag)
    return iid


def _note(app: Pynenc, iid: str, status: InvocationStatus, runner: str, age: float) -> str:
    note = PendingReport(iid, status, runner, time.time() - age)
    _notes(app)._engine.note_pending_reports([(note.note_id, note.to_json())])
    return note.note_id


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ALL)
def test_the_sweep_makes_the_report_a_dead_runner_owed_once(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A dead runner's note of a SUCCESS it made: the sweep reports it (the valid
    condition pynenc would have recorded), clears the note, and the trigger fires
    once; the same report made again (a second sweep racing the first) fires
    nothing more."""
    app = _app(backend, mode, tmp_path, request)
    iid = _success_without_report(app, tmp_path, "t1")
    assert _status_conditions_of(app, iid) == []
    nid = _note(app, iid, InvocationStatus.SUCCESS, DEAD, age=10)
    assert _notes(app).replay(lambda: {"some-live-runner"}, DEAD_AFTER_SEC) == 1
    assert len(_status_conditions_of(app, iid)) == 1
    assert _stored(app) == {}
    assert _notes(app).replay(lambda: set(), DEAD_AFTER_SEC) == 0
    with running(app):
        wait_until(lambda: len(_receipts(app)) == 1)
        wait_until(lambda: _status_conditions_of(app, iid) == [])
        # Noted again: the runner's own sweep makes the report a second time.
        assert nid == _note(app, iid, InvocationStatus.SUCCESS, DEAD, age=10)
        wait_until(lambda: _stored(app) == {})
        wait_until(lambda: _status_conditions_of(app, iid) == [])  # looked at, not fired
        time.sleep(0.5)
    assert len(_receipts(app)) == 1
    receipt = app.state_backend.get_invocation(_receipts(app)[0])
    assert receipt.call.arguments.kwargs["tag"] == "t1"


@pytest.mark.parametrize("backend", ALL)
def test_the_sweep_leaves_notes_a_live_runner_may_still_be_making(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A note younger than dead-after of a live runner, and a young note of a runner
    with no heartbeat, are left alone; a live runner's note older than dead-after is
    made (its runner is stuck or lost it)."""
    app = _app(backend, "native", tmp_path, request)
    young_live = _note(
        app, _success_without_report(app, tmp_path, "a"), InvocationStatus.SUCCESS, "live", 30
    )
    young_dead = _note(
        app, _success_without_report(app, tmp_path, "b"), InvocationStatus.SUCCESS, DEAD, 1
    )
    old_live = _note(
        app, _success_without_report(app, tmp_path, "c"), InvocationStatus.SUCCESS, "live", 200
    )
    assert _notes(app).replay(lambda: {"live"}, DEAD_AFTER_SEC) == 1
    assert set(_stored(app)) == {young_live, young_dead}
    assert old_live not in _stored(app)


@pytest.mark.parametrize("backend", ALL)
def test_the_sweep_forgets_notes_of_changes_never_made_or_gone(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A dead runner's note of a change it never made (the invocation is still
    REGISTERED) is cleared without a report; a note of an invocation no longer
    stored, and a malformed note, are cleared; a live runner's note of a change not
    made yet is kept."""
    app = _app(backend, "native", tmp_path, request)
    registered = str(tt.order_placed(str(tmp_path / "ledger"), "r").invocation_id)
    never = _note(app, registered, InvocationStatus.SUCCESS, DEAD, 30)
    pending_live = _note(app, registered, InvocationStatus.FAILED, "live", 30)
    gone = _note(app, "no-such-invocation", InvocationStatus.SUCCESS, DEAD, 30)
    _notes(app)._engine.note_pending_reports([("garbage", "{not json")])
    assert _notes(app).replay(lambda: {"live"}, DEAD_AFTER_SEC) == 0
    assert set(_stored(app)) == {pending_live}
    assert never not in _stored(app) and gone not in _stored(app)
    assert _status_conditions_of(app, registered) == []


@pytest.mark.parametrize("backend", ALL)
def test_an_unwatched_task_is_never_noted(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``send_receipt`` has no condition sourced from it: its changes write no note
    (the watched answer is kept per task, so no lookup per change either)."""
    app = _app(backend, "native", tmp_path, request)
    notes = _notes(app)
    assert notes.watches(tt.order_placed.task_id.key)
    assert not notes.watches(tt.send_receipt.task_id.key)
    written: list[Any] = []
    engine = notes._engine
    original = engine.note_pending_reports

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(engine, name)

        def note_pending_reports(self, items: Any) -> None:
            written.append(items)
            original(items)

    notes._engine = Spy()
    receipt = tt.send_receipt(str(tmp_path / "ledger"), "x")
    with running(app):
        wait_until(lambda: app.orchestrator.get_invocation_status(receipt.invocation_id).is_final())
    assert written == []
