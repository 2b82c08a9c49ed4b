"""The trigger loop woken by the engine (``pynenc_cpp._trigger_wake``, issue 48).

The engine's ``wait_valid_conditions`` on every backend, and a ``CppRunner`` whose
status trigger fires at once although pynenc's atomic service (the only other
place triggers fire) runs once an hour here. Cross-process firing, exactly once
under several runners and kills, and cron slots are the guarantees suite's
(``tests_py/chaos/test_guarantees.py``); the latency figures are
``bench/triggers.py``'s.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc
from pynenc.invocation import InvocationStatus
from pynenc.trigger.arguments import create_argument_filter
from pynenc.trigger.conditions import CronCondition, StatusCondition

from pynenc_cpp import InvalidArgument, _trigger_wake
from pynenc_cpp._cron import latest_slot, next_cron_time
from pynenc_cpp._trigger_wake import TriggerWake
from tests_py import trigger_tasks as tt
from tests_py.test_cpp_runner import ALL, build_app, running, wait_until

#: pynenc's atomic service runs once at a runner's start and then once an hour:
#: a trigger that fires during a test was fired by the wake.
HOURLY = {"atomic_service_check_interval_minutes": 60}


def _app(backend: str, tmp_path: Path, request: pytest.FixtureRequest, **config: object) -> Pynenc:
    app = build_app(backend, tmp_path, request, workers=2, config={**HOURLY, **config})
    tt.use(app, cron=False)
    return app


def _receipts(app: Pynenc) -> list[str]:
    """The ids of every ``send_receipt`` invocation."""
    return list(app.orchestrator.get_existing_invocations(tt.send_receipt))


@pytest.mark.parametrize("backend", ALL)
def test_wait_valid_conditions_wakes_on_a_recording(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = _app(backend, tmp_path, request)
    engine = app.trigger._engine  # type: ignore[attr-defined]
    woke, cursor = engine.wait_valid_conditions("", 10.0)
    assert woke and cursor  # arms at once
    assert engine.wait_valid_conditions(cursor, 0.02) == (False, cursor)
    timer = threading.Timer(0.05, engine.record_valid_conditions, [[("v", "{}")]])
    timer.start()
    try:
        woke, cursor = engine.wait_valid_conditions(cursor, 30.0)
    finally:
        timer.join()
    assert woke
    timer = threading.Timer(0.05, engine.nudge_valid_conditions_waiter, [cursor])
    timer.start()
    try:
        assert engine.wait_valid_conditions(cursor, 30.0)[0]
    finally:
        timer.join()
    with pytest.raises(InvalidArgument, match="NaN"):
        engine.wait_valid_conditions(cursor, float("nan"))


@pytest.mark.parametrize("backend", ALL)
def test_a_status_trigger_fires_without_waiting_for_the_atomic_service(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each SUCCESS of ``order_placed`` starts one ``send_receipt`` within seconds,
    although pynenc's atomic service runs once an hour here."""
    app = _app(backend, tmp_path, request)
    ledger = str(tmp_path / "ledger")
    with running(app) as runner:
        orders = [tt.order_placed(ledger, f"o{i}") for i in range(5)]
        wait_until(lambda: len(_receipts(app)) == 5, timeout=30)
        receipts = _receipts(app)
        wait_until(
            lambda: all(
                app.orchestrator.get_invocation_status(i) == InvocationStatus.SUCCESS
                for i in receipts
            )
        )
        assert runner._trigger_wake is not None and runner._trigger_wake.iterations >= 1
    assert {o.result for o in orders} == {f"o{i}" for i in range(5)}
    lines = Path(ledger).read_text().split("\n")
    assert sorted(ln.split()[1] for ln in lines if ln.startswith("receipt")) == [
        f"o{i}" for i in range(5)
    ]
    assert runner._trigger_wake is None  # stopped with the runner


class _ClaimHeldOnce:
    """The trigger store with its first claim refused, as when another runner holds
    that claim (and then dies before recording the run)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.refused: list[str] = []

    def claim_trigger_run(self, run_id: str, expiration_seconds: int) -> bool:
        if not self.refused:
            self.refused.append(run_id)
            return False
        return bool(self._engine.claim_trigger_run(run_id, expiration_seconds))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


@pytest.mark.parametrize("backend", ALL)
def test_a_condition_another_runner_claimed_fires_once_the_claim_is_gone(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pynenc's loop clears every condition it looked at, also one whose run another
    runner had claimed: were that runner to die before starting the task, the receipt
    would never fire. ``CppTrigger`` keeps such a condition, so it fires once the claim
    is gone (the wake looks again while conditions are left, every
    ``_IDLE_CHECK_SEC``, shortened here). Nothing records a condition again here.
    Without the kept condition this fails."""
    monkeypatch.setattr(_trigger_wake, "_IDLE_CHECK_SEC", 0.3)
    app = _app(backend, tmp_path, request)
    held = _ClaimHeldOnce(app.trigger._engine)  # type: ignore[attr-defined]
    monkeypatch.setattr(app.trigger, "_engine", held)
    with running(app):
        assert tt.order_placed(str(tmp_path / "ledger"), "o").result == "o"
        wait_until(lambda: len(_receipts(app)) == 1, timeout=30)
    assert len(held.refused) == 1
    time.sleep(0.5)
    assert len(_receipts(app)) == 1
    assert app.trigger.get_valid_conditions() == {}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_with_the_wake_off_triggers_wait_for_the_atomic_service(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``cpp_runner_trigger_wake=False``: the order's trigger waits for pynenc's
    atomic service (an hour away here), as with pynenc's own runners."""
    app = _app(backend, tmp_path, request, cpp_runner_trigger_wake=False)
    with running(app) as runner:
        assert runner._trigger_wake is None
        order = tt.order_placed(str(tmp_path / "ledger"), "o")
        assert order.result == "o"
        time.sleep(2.0)
        assert _receipts(app) == []
        # What the wake would have fired is waiting as a valid condition.
        assert app.trigger.get_valid_conditions()


def test_next_cron_time_follows_pynencs_cron_rules_judged_at_the_slot() -> None:
    """Due now while the latest slot is in its check window and not run; else the
    next slot pynenc's rules accept judged at the slot, as ``CppTrigger`` judges:
    a run stored late (20 s before 10:01) makes 10:01 too soon (50 s interval)."""
    now = datetime(2026, 12, 6, 10, 0, 30, tzinfo=UTC)
    every_minute = CronCondition("* * * * *")
    hourly = CronCondition("0 * * * *")
    status = StatusCondition(
        tt.order_placed.task_id, [InvocationStatus.SUCCESS], create_argument_filter(None)
    )
    ran = {
        every_minute.condition_id: datetime(2026, 12, 6, 10, 0, tzinfo=UTC),
        hourly.condition_id: datetime(2026, 12, 6, 10, 0, tzinfo=UTC),
    }
    last = ran.get
    assert next_cron_time([hourly, status, every_minute], now, last) == datetime(
        2026, 12, 6, 10, 1, tzinfo=UTC
    )
    ran[every_minute.condition_id] = datetime(2026, 12, 6, 10, 0, 40, tzinfo=UTC)
    assert next_cron_time([every_minute], now + timedelta(seconds=15), last) == datetime(
        2026, 12, 6, 10, 2, tzinfo=UTC
    )
    # Never run and its slot (10:00) is within the check window: due now.
    assert next_cron_time([every_minute], now, lambda _cid: None) == now
    # Never run, its slot (10:00) out of the window (60 s): the next slot.
    later = now + timedelta(minutes=5, seconds=45)  # 10:06:15
    assert next_cron_time([hourly], later, lambda _cid: None) == datetime(
        2026, 12, 6, 11, 0, tzinfo=UTC
    )
    assert next_cron_time([status], now, last) is None


def test_latest_slot_is_the_slot_at_or_before_now() -> None:
    at = datetime(2026, 12, 6, 10, 1, tzinfo=UTC)
    assert latest_slot("* * * * *", at) == at
    assert latest_slot("* * * * *", at + timedelta(seconds=30)) == at
    assert latest_slot("*/5 * * * *", at + timedelta(minutes=6)) == datetime(
        2026, 12, 6, 10, 5, tzinfo=UTC
    )
    assert latest_slot("0 * * * *", at) == datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def test_a_stop_before_the_start_leaves_no_thread_and_stops_twice(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A runner stopped from another thread while it starts: the wake stopped first
    never starts its thread, and stopping again is harmless."""
    app = _app("mem", tmp_path, request)
    wake = TriggerWake.for_runner(app.runner)
    assert wake is not None
    wake.stop()
    wake.start()
    assert wake._thread is None
    wake.stop()
    started = TriggerWake.for_runner(app.runner)
    assert started is not None
    started.start()
    thread = started._thread
    assert thread is not None and thread.is_alive()
    started.stop()
    started.stop()
    assert not thread.is_alive()
