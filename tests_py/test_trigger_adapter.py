"""CppMemTrigger used directly: conversions, engine semantics and bad input."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.identifiers.task_id import TaskId
from pynenc.invocation.status import InvocationStatus
from pynenc.models.trigger_definition_dto import TriggerDefinitionDTO
from pynenc.trigger.arguments import create_argument_filter
from pynenc.trigger.base_trigger import BaseTrigger
from pynenc.trigger.conditions import (
    CompositeLogic,
    CronCondition,
    CronContext,
    EventCondition,
    ResultContext,
    StatusCondition,
    StatusContext,
    ValidCondition,
)
from pynenc.trigger.monitoring import (
    EventRecord,
    TriggerRunParticipant,
    TriggerRunRecord,
)

from pynenc_cpp import InvalidArgument
from pynenc_cpp.trigger import CppMemTrigger

TASK = TaskId("tests.module", "func")


def _app() -> Pynenc:
    return (
        PynencBuilder()
        .app_id(f"trigger-adapter-{uuid.uuid4().hex[:8]}")
        .memory()
        .custom_config(trigger_cls="CppMemTrigger")
        .build()
    )


@pytest.fixture
def app() -> Pynenc:
    return _app()


@pytest.fixture
def trigger(app: Pynenc) -> CppMemTrigger:
    trg = app.trigger
    assert isinstance(trg, CppMemTrigger)
    return trg


def _race(n: int, fn: Callable[[int], bool]) -> int:
    """Run ``fn(i)`` on ``n`` threads released together; count True results."""
    barrier = threading.Barrier(n)
    results: list[bool] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        barrier.wait()
        ok = fn(i)
        with lock:
            results.append(ok)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(results)


def test_implements_every_abstract_member() -> None:
    assert CppMemTrigger.__abstractmethods__ == frozenset()
    assert issubclass(CppMemTrigger, BaseTrigger)
    assert len(BaseTrigger.__abstractmethods__) == 35


def test_conditions_round_trip_and_source_task_filter(trigger: CppMemTrigger) -> None:
    status = StatusCondition(TASK, [InvocationStatus.SUCCESS], create_argument_filter(None))
    cron = CronCondition("*/5 * * * *")
    trigger.register_condition(status)
    trigger.register_condition(cron)

    got = trigger.get_condition(status.condition_id)
    assert got is not None and got.condition_id == status.condition_id
    assert trigger.get_condition(cron.condition_id) == cron
    assert trigger.get_condition("missing") is None
    assert [c.condition_id for c in trigger._get_all_conditions()] == [
        status.condition_id,
        cron.condition_id,
    ]
    # register_condition wired the source-task index from the condition itself.
    ids = [c.condition_id for c in trigger.get_conditions_sourced_from_task(TASK)]
    assert ids == [status.condition_id]
    only_status = trigger.get_conditions_sourced_from_task(TASK, StatusContext)
    assert [c.condition_id for c in only_status] == [status.condition_id]
    assert trigger.get_conditions_sourced_from_task(TASK, ResultContext) == []
    assert trigger.get_conditions_sourced_from_task(TaskId("x", "y")) == []


def test_triggers_round_trip_and_clean(trigger: CppMemTrigger) -> None:
    dto = TriggerDefinitionDTO(
        trigger_id="t1",
        task_id=TASK,
        condition_ids=["c1", "c2"],
        logic=CompositeLogic.OR,
        argument_provider_json='{"x": 1}',
    )
    other = TriggerDefinitionDTO("t2", TaskId("m", "other"), ["c1"], CompositeLogic.AND, None)
    trigger.register_trigger(dto)
    trigger.register_trigger(other)

    assert trigger._get_trigger("t1") == dto
    assert trigger._get_trigger("nope") is None
    assert trigger.get_triggers_for_condition("c1") == [dto, other]
    trigger.clean_task_trigger_definitions(TASK)
    assert trigger._get_trigger("t1") is None
    assert trigger.get_triggers_for_condition("c1") == [other]
    assert trigger.get_triggers_for_condition("c2") == []


def test_valid_conditions_record_get_clear(trigger: CppMemTrigger) -> None:
    cond = CronCondition("0 * * * *")
    first = ValidCondition(cond, CronContext(timestamp=datetime(2024, 1, 1, tzinfo=UTC)))
    second = ValidCondition(cond, CronContext(timestamp=datetime(2024, 1, 2, tzinfo=UTC)))
    trigger.record_valid_condition(first)
    trigger.record_valid_conditions([second, first])

    got = trigger.get_valid_conditions()
    assert list(got) == [first.valid_condition_id, second.valid_condition_id]
    assert got[second.valid_condition_id] == second
    trigger.clear_valid_conditions([first])
    assert list(trigger.get_valid_conditions()) == [second.valid_condition_id]


def test_cron_store_is_compare_and_set(trigger: CppMemTrigger) -> None:
    t0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
    t1 = t0 + timedelta(minutes=1)
    assert trigger.get_last_cron_execution("c") is None
    assert trigger.store_last_cron_execution("c", t0) is True
    # None means "never executed": a second first-claim loses.
    assert trigger.store_last_cron_execution("c", t1) is False
    assert trigger.store_last_cron_execution("c", t1, expected_last_execution=t1) is False
    assert trigger.store_last_cron_execution("c", t1, expected_last_execution=t0) is True
    got = trigger.get_last_cron_execution("c")
    assert got == t1 and got.tzinfo == UTC
    # Naive datetimes are taken as UTC.
    assert trigger.store_last_cron_execution(
        "c", t1 + timedelta(minutes=1), expected_last_execution=t1.replace(tzinfo=None)
    )


def test_racing_first_cron_claims_have_one_winner(trigger: CppMemTrigger) -> None:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    wins = _race(
        12, lambda i: trigger.store_last_cron_execution("cron", base + timedelta(seconds=i))
    )
    assert wins == 1


def test_racing_trigger_run_claims_have_one_winner(trigger: CppMemTrigger) -> None:
    assert _race(12, lambda i: trigger.claim_trigger_run("run-1")) == 1
    assert trigger.claim_trigger_run("run-1") is False
    assert trigger.claim_trigger_run("run-1", expiration_seconds=0) is False
    assert trigger.claim_trigger_run("run-2", expiration_seconds=0) is True
    assert trigger.claim_trigger_run("run-2", expiration_seconds=0) is True


def test_event_json_is_pynenc_serialization(app: Pynenc, trigger: CppMemTrigger) -> None:
    ts = datetime(2024, 5, 1, 8, 30, 15, 123456, tzinfo=UTC)
    event = EventRecord(
        event_id="e1",
        event_code="user.created",
        payload={"n": 1, "name": "x"},
        timestamp=ts,
        matched_condition_ids=["c1"],
        valid_condition_ids=["vc1"],
        emitted_by_invocation_id="inv-1",
        emitted_by_task_id="tasks.t",
        emitted_by_runner_context_id="ctx-1",
    )
    trigger.store_event(event)

    json_str, triggered = trigger._engine.get_event("e1")
    assert json_str == event.to_json(app)
    assert triggered == []
    got = trigger.get_event("e1")
    assert got is not None
    assert got.payload == {"n": 1, "name": "x"}
    assert got.timestamp == ts
    assert got.matched and not got.triggered

    trigger.link_trigger_run_to_events(["e1"], "inv-9", trigger_run_id="r1")
    assert trigger.get_event("e1").triggered_invocation_ids == ["inv-9"]  # type: ignore[union-attr]
    assert trigger.get_invocations_triggered_by_event("e1") == ["inv-9"]
    assert [e.event_id for e in trigger.get_events(triggered=True)] == ["e1"]
    assert trigger.count_events(emitted_by_task_id="tasks.t") == 1
    assert trigger.get_events_emitted_by_invocation("inv-1")[0].event_id == "e1"

    page = trigger.get_event_markers_in_timerange(ts, ts, state="triggered")
    assert page.total == 1 and not page.truncated
    marker = page.markers[0]
    assert marker.timestamp == ts and marker.timestamp.tzinfo == UTC
    assert marker.matched and marker.triggered
    assert marker.emitted_by_runner_context_id == "ctx-1"


def test_trigger_runs_are_found_through_participants(trigger: CppMemTrigger) -> None:
    now = datetime.now(UTC)
    run = TriggerRunRecord(
        trigger_run_id="r1",
        trigger_id="t",
        task_id_key="tasks.x",
        logic_value="and",
        triggered_invocation_id="inv-out",
        executed_at=now,
        participants=[
            TriggerRunParticipant(
                context_type="EventContext", valid_condition_id="vc-e", event_id="e1"
            ),
            TriggerRunParticipant(
                context_type="StatusContext", valid_condition_id="vc-s", source_invocation_id="src"
            ),
        ],
        atomic_service_run_id="asr-1",
    )
    trigger.store_trigger_run(run)

    assert trigger.get_trigger_run("r1") == run
    assert trigger.get_trigger_runs_for_event("e1") == [run]
    assert trigger.get_trigger_runs_sourced_by_invocation("src") == [run]
    assert trigger.get_trigger_runs_for_valid_condition("vc-s") == [run]
    assert trigger.get_trigger_runs_for_invocation("inv-out") == [run]
    assert trigger.get_referenced_atomic_service_run_ids() == {"asr-1"}
    assert trigger.get_trigger_runs_in_timerange(now, now) == [run]
    assert trigger.get_trigger_runs_in_timerange(now, now, task_id_key="other") == []
    assert trigger.get_trigger_runs_in_timerange(now, now, limit=0) == []


def test_retention_primitives(trigger: CppMemTrigger) -> None:
    now = datetime.now(UTC)
    trigger.conf.event_max_records = 1
    trigger.conf.trigger_run_max_records = 1
    trigger.store_event(EventRecord("old", "x", timestamp=now - timedelta(days=3)))
    trigger.store_event(EventRecord("mid", "x", timestamp=now - timedelta(hours=1)))
    trigger.store_event(EventRecord("new", "x", timestamp=now))
    for rid, ev in (("r-old", "old"), ("r-mid", "mid"), ("r-new", "new")):
        trigger.store_trigger_run(
            TriggerRunRecord(rid, "t", "tasks.x", "and", event_ids=[ev], executed_at=now)
        )

    assert trigger._age_purge_events(now - timedelta(days=1)) == ["old"]
    assert trigger._cap_purge_events() == ["mid"]
    assert trigger._cascade_delete_runs_for_events(["old", "mid"]) == 2
    assert trigger._age_purge_trigger_runs(now - timedelta(days=1)) == 0
    assert trigger._cap_purge_trigger_runs() == 0
    assert trigger.get_trigger_run("r-new") is not None


def test_a_recorded_trigger_run_is_not_claimed_again(trigger: CppMemTrigger) -> None:
    """A run whose record is stored (its task was started) cannot be claimed once
    its claim expired: a runner that died before clearing the valid condition does
    not make the trigger fire twice."""
    assert trigger.claim_trigger_run("r", expiration_seconds=0)
    assert trigger.claim_trigger_run("r", expiration_seconds=0)  # expired: claimable
    trigger.store_trigger_run(TriggerRunRecord("r", "t", "tasks.x", "and"))
    assert trigger.claim_trigger_run("r", expiration_seconds=0) is False
    assert trigger.claim_trigger_run("other", expiration_seconds=0)


def test_purge_clears_engine_state(trigger: CppMemTrigger) -> None:
    trigger.register_condition(EventCondition("e", create_argument_filter(None)))
    trigger.store_event(EventRecord("e1", "e"))
    assert trigger.claim_trigger_run("r")
    trigger.purge()
    assert trigger._get_all_conditions() == []
    assert trigger.list_event_codes() == []
    assert trigger.claim_trigger_run("r")


def test_apps_do_not_share_trigger_state() -> None:
    first, second = _app(), _app()
    first.trigger.store_event(EventRecord("e1", "x"))
    assert second.trigger.get_event("e1") is None


def test_bad_input_raises_clear_errors(trigger: CppMemTrigger) -> None:
    with pytest.raises(InvalidArgument, match="limit must be >= 0"):
        trigger.get_events(limit=-1)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        trigger.get_events(offset=-5)
    with pytest.raises(ValueError, match="unknown event marker state 'sideways'"):
        trigger.get_event_markers_in_timerange(
            datetime.now(UTC), datetime.now(UTC), state="sideways"
        )
    with pytest.raises(ValueError, match="expiration_seconds"):
        trigger.claim_trigger_run("r", expiration_seconds=-1)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        trigger.get_trigger_runs_in_timerange(datetime.now(UTC), datetime.now(UTC), limit=-1)
    with pytest.raises(TypeError):
        trigger.get_event(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        trigger._engine.store_event("e", "code", "not-an-int", "{}")
