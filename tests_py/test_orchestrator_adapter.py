"""CppMemOrchestrator / CppBlockingControl used directly through an app.

The app is pynenc's memory() app with only the orchestrator swapped in (as
PYNENC_CPP_ONLY=orchestrator does), so the base-class side effects (history,
trigger reports, routing) run against pynenc's own components.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.exceptions import (
    InvocationStatusError,
    InvocationStatusOwnershipError,
    InvocationStatusTransitionError,
)
from pynenc.invocation import DistributedInvocation, InvocationStatus, InvocationStatusRecord
from pynenc.orchestrator.atomic_service import (
    ActiveRunnerInfo,
    AtomicServiceExecutionStatus,
    AtomicServiceRun,
)
from pynenc.runner.runner_context import RunnerContext

import pynenc_cpp
from pynenc_cpp import _core
from pynenc_cpp.orchestrator import (
    CppBlockingControl,
    CppMemOrchestrator,
    UnregisteredInvocationTransitionError,
)

S = InvocationStatus


@pytest.fixture
def app() -> Pynenc:
    return (
        PynencBuilder()
        .app_id(f"orch-adapter-{uuid.uuid4().hex[:8]}")
        .memory()
        .custom_config(orchestrator_cls="CppMemOrchestrator")
        .build()
    )


@pytest.fixture
def orch(app: Pynenc) -> CppMemOrchestrator:
    assert isinstance(app.orchestrator, CppMemOrchestrator)
    return app.orchestrator


_task_app = Pynenc()


@_task_app.task
def add(x: int, y: int) -> int:
    return x + y


@_task_app.task
def other() -> None:
    return None


@pytest.fixture
def tasks(app: Pynenc) -> dict:
    """The module's tasks, bound to the app under test."""
    add.app = app
    other.app = app
    return {"add": add, "other": other}


def ctx(runner_id: str) -> RunnerContext:
    return RunnerContext(runner_cls="TestRunner", runner_id=runner_id, pid=1, hostname="h")


def new_invocation(task, *args) -> DistributedInvocation:  # noqa: ANN001
    inv = task(*args)
    assert isinstance(inv, DistributedInvocation)
    return inv


def test_every_abstract_member_is_implemented() -> None:
    assert CppMemOrchestrator.__abstractmethods__ == frozenset()
    assert CppBlockingControl.__abstractmethods__ == frozenset()
    assert pynenc_cpp.CppMemOrchestrator is CppMemOrchestrator


def test_blocking_control_shares_the_engine(orch: CppMemOrchestrator) -> None:
    assert isinstance(orch.blocking_control, CppBlockingControl)
    assert orch.blocking_control is orch.blocking_control
    assert orch.blocking_control._engine is orch._engine


def test_register_returns_registered_record_and_routes(
    app: Pynenc, orch: CppMemOrchestrator, tasks: dict
) -> None:
    inv = new_invocation(tasks["add"], 1, 2)  # route_call -> register_new_invocations
    record = orch.get_invocation_status_record(inv.invocation_id)
    assert isinstance(record, InvocationStatusRecord)
    assert record.status == S.REGISTERED
    assert record.timestamp.tzinfo is not None
    assert abs(record.timestamp - datetime.now(UTC)) < timedelta(seconds=5)
    assert list(orch.get_task_invocation_ids(tasks["add"].task_id)) == [inv.invocation_id]
    assert list(orch.get_call_invocation_ids(inv.call.call_id)) == [inv.invocation_id]
    assert orch.get_invocation_retries(inv.invocation_id) == 0
    assert app.broker.count_invocations() == 1
    history = app.state_backend.get_history(inv.invocation_id)
    assert [h.status_record.status for h in history] == [S.REGISTERED]


def test_transitions_return_records_and_raise_pynenc_errors(
    orch: CppMemOrchestrator, tasks: dict
) -> None:
    inv = new_invocation(tasks["add"], 1, 2)
    iid = inv.invocation_id
    pending = orch._atomic_status_transition(iid, S.PENDING, "r1")
    assert (pending.status, pending.runner_id) == (S.PENDING, "r1")
    assert orch.get_invocation_status_record(iid) == pending

    with pytest.raises(InvocationStatusOwnershipError) as own:
        orch._atomic_status_transition(iid, S.RUNNING, "r2")
    assert own.value.from_status == S.PENDING
    assert own.value.to_status == S.RUNNING
    assert own.value.current_owner == "r1"
    assert own.value.attempted_owner == "r2"

    with pytest.raises(InvocationStatusTransitionError) as bad:
        orch._atomic_status_transition(iid, S.SUCCESS, "r1")
    assert bad.value.from_status == S.PENDING
    assert bad.value.to_status == S.SUCCESS
    assert S.RUNNING in bad.value.allowed_statuses


def test_unknown_invocation_is_a_key_error(orch: CppMemOrchestrator) -> None:
    with pytest.raises(KeyError):
        orch.get_invocation_status_record("missing")
    with pytest.raises(KeyError):
        orch.get_invocation_status("missing")
    with pytest.raises(KeyError):
        orch.increment_invocation_retries("missing")
    assert orch.get_invocation_retries("missing") == 0
    # A transition is both the documented KeyError and pynenc's transition error.
    with pytest.raises(UnregisteredInvocationTransitionError) as exc:
        orch._atomic_status_transition("missing", S.KILLED, "r1")
    assert isinstance(exc.value, KeyError)
    assert isinstance(exc.value, InvocationStatusError)
    assert exc.value.from_status is None
    assert exc.value.allowed_statuses == frozenset({S.REGISTERED})


def test_bad_input_gives_clear_exceptions(orch: CppMemOrchestrator) -> None:
    with pytest.raises(ValueError, match="unknown invocation status 'bogus'"):
        orch._engine.transition("x", "bogus", None)
    with pytest.raises(ValueError, match="limit and offset"):
        orch.get_invocation_ids_paginated(limit=-1)
    with pytest.raises(ValueError, match="max_num_invocations"):
        list(orch.blocking_control.get_blocking_invocations(-1))
    with pytest.raises(ValueError, match="unknown atomic service execution status"):
        orch._engine.record_atomic_service_start("r", "run", None, "sleeping", "")
    with pytest.raises(TypeError):
        orch._engine.transition(123, S.PENDING, None)
    with pytest.raises(_core.BadConfig, match="unknown scheme 'nosuch'"):
        _core.Orchestrator("nosuch://localhost", "app")
    assert orch.filter_by_status([], frozenset({S.REGISTERED})) == []


def test_set_invocation_status_final_releases_waiters_and_purges(
    app: Pynenc, orch: CppMemOrchestrator, tasks: dict
) -> None:
    waiter = new_invocation(tasks["other"])
    waited = new_invocation(tasks["add"], 1, 2)
    orch.waiting_for_results(waiter.invocation_id, [waited.invocation_id])
    assert list(orch.get_blocking_invocations(5)) == [waited.invocation_id]

    runner = ctx("runner-1")
    for status in (S.PENDING, S.RUNNING, S.SUCCESS):
        orch.set_invocation_status(waited.invocation_id, status, runner)
    assert list(orch.get_blocking_invocations(5)) == []
    history = app.state_backend.get_history(waited.invocation_id)
    assert [h.status_record.status for h in history][-1] == S.SUCCESS

    orch.conf.auto_final_invocation_purge_hours = 1.0
    orch.auto_purge()
    assert orch.get_invocation_status(waited.invocation_id) == S.SUCCESS
    orch.conf.auto_final_invocation_purge_hours = 0.0
    orch.auto_purge()
    with pytest.raises(KeyError):
        orch.get_invocation_status(waited.invocation_id)
    assert list(orch.get_task_invocation_ids(tasks["add"].task_id)) == []


def test_queries_by_arguments_status_and_pages(orch: CppMemOrchestrator, tasks: dict) -> None:
    add = tasks["add"]
    invs = [new_invocation(add, i, 0) for i in range(4)]
    for inv in invs:
        orch.index_arguments_for_concurrency_control(inv)
    orch._atomic_status_transition(invs[1].invocation_id, S.PENDING, "r")
    x1 = invs[1].call.serialized_arguments["x"]

    assert list(orch.get_existing_invocations(add, {"x": x1})) == [invs[1].invocation_id]
    assert list(orch.get_existing_invocations(add, {"x": x1}, [S.REGISTERED])) == []
    assert set(orch.get_existing_invocations(add, None, [S.REGISTERED])) == {
        invs[i].invocation_id for i in (0, 2, 3)
    }
    assert orch.filter_by_status([i.invocation_id for i in invs], frozenset({S.PENDING})) == [
        invs[1].invocation_id
    ]
    assert orch.filter_final([i.invocation_id for i in invs]) == []

    page = orch.get_invocation_ids_paginated(limit=2)
    assert page[0] == invs[1].invocation_id  # newest status first
    everything = orch.get_invocation_ids_paginated(limit=10)
    assert sorted(everything) == sorted(i.invocation_id for i in invs)
    assert orch.get_invocation_ids_paginated(limit=2, offset=2) == everything[2:4]
    assert orch.count_invocations() == 4
    assert orch.count_invocations(task_id=add.task_id, statuses=[S.PENDING]) == 1
    assert orch.count_invocations(task_id=tasks["other"].task_id) == 0


def test_racing_transitions_through_the_adapter(orch: CppMemOrchestrator, tasks: dict) -> None:
    inv = new_invocation(tasks["add"], 5, 5)
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def claim(i: int) -> None:
        barrier.wait()
        try:
            orch._atomic_status_transition(inv.invocation_id, S.PENDING, f"r{i}")
            result = "won"
        except InvocationStatusTransitionError:
            result = "lost"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]


def test_heartbeats_and_recovery(orch: CppMemOrchestrator, tasks: dict) -> None:
    orch.register_runner_heartbeats(["b", "a"], can_run_atomic_service=True, consumed_queues=["q"])
    orch.register_runner_heartbeats(["c"])
    runners = orch.get_active_runners()
    assert [r.runner_id for r in runners] == ["a", "b", "c"]
    assert all(isinstance(r, ActiveRunnerInfo) for r in runners)
    assert runners[0].consumed_queues == ("q",)
    assert runners[0].allow_to_run_atomic_service is True
    assert runners[0].creation_time.tzinfo is not None
    assert [r.runner_id for r in orch.get_active_runners(can_run_atomic_service=False)] == ["c"]

    inv = new_invocation(tasks["add"], 7, 7)
    orch._atomic_status_transition(inv.invocation_id, S.PENDING, "ghost")
    orch._atomic_status_transition(inv.invocation_id, S.RUNNING, "ghost")
    assert list(orch.get_running_invocations_for_recovery()) == [inv.invocation_id]
    orch.register_runner_heartbeats(["ghost"])
    assert list(orch.get_running_invocations_for_recovery()) == []
    assert list(orch._get_running_invocations_for_recovery(-1.0)) == [inv.invocation_id]

    other = new_invocation(tasks["add"], 8, 8)
    orch._atomic_status_transition(other.invocation_id, S.PENDING, "a")
    assert list(orch.get_pending_invocations_for_recovery()) == []
    orch.app.conf.max_pending_seconds = 0.0
    assert list(orch.get_pending_invocations_for_recovery()) == [other.invocation_id]


def test_atomic_service_records(app: Pynenc, orch: CppMemOrchestrator) -> None:
    start = datetime.now(UTC) - timedelta(seconds=30)
    run1 = AtomicServiceRun(runner_id="r1", atomic_service_run_id="run-1")
    assert orch.record_atomic_service_execution_start(run1, start) is True
    assert run1.started_at == start

    run2 = AtomicServiceRun(runner_id="r2", atomic_service_run_id="run-2")
    assert orch.record_atomic_service_execution_start(run2, None) is False
    assert run2.started_at is not None and run2.started_at > start

    active = orch.get_active_atomic_service_executions()
    assert [e.atomic_service_run_id for e in active] == ["run-1"]
    assert active[0].start_time == start and active[0].end_time is None

    end = start + timedelta(seconds=2)
    orch.finalize_atomic_service_execution(run1, end, AtomicServiceExecutionStatus.COMPLETED)
    orch.finalize_atomic_service_execution(
        run1, end + timedelta(seconds=5), AtomicServiceExecutionStatus.ABANDONED, "late"
    )
    rows = orch.get_atomic_service_executions_in_timerange(
        start - timedelta(seconds=1), datetime.now(UTC) + timedelta(seconds=1)
    )
    assert [(e.atomic_service_run_id, e.status) for e in rows] == [
        ("run-2", AtomicServiceExecutionStatus.BLOCKED),
        ("run-1", AtomicServiceExecutionStatus.COMPLETED),
    ]
    assert rows[0].reason == "prior_running:run-1 runner:r1"
    assert rows[1].end_time == end
    longer = orch.get_atomic_service_executions_in_timerange(
        start - timedelta(seconds=1), datetime.now(UTC), min_duration_seconds=1.5
    )
    assert [e.atomic_service_run_id for e in longer] == ["run-1"]
    assert (
        orch.get_atomic_service_executions_in_timerange(
            start, datetime.now(UTC), runner_id="nobody"
        )
        == []
    )

    app.conf.atomic_service_execution_retention_minutes = 0.1  # 6 s
    app.conf.atomic_service_execution_max_records = 0
    assert orch.purge_atomic_service_executions() == 1  # run-1 ended 28 s ago
    remaining = orch.get_atomic_service_executions_in_timerange(
        start - timedelta(seconds=1), datetime.now(UTC)
    )
    assert [e.atomic_service_run_id for e in remaining] == ["run-2"]


def test_purge_forgets_everything(orch: CppMemOrchestrator, tasks: dict) -> None:
    inv = new_invocation(tasks["add"], 1, 1)
    orch.register_runner_heartbeats(["r"])
    orch.record_atomic_service_execution_start(
        AtomicServiceRun(runner_id="r", atomic_service_run_id="x"), None
    )
    orch.purge()
    assert orch.count_invocations() == 0
    assert orch.get_active_runners() == []
    assert orch.get_active_atomic_service_executions() == []
    with pytest.raises(KeyError):
        orch.get_invocation_status(inv.invocation_id)


def test_apps_do_not_share_state(tasks: dict, orch: CppMemOrchestrator) -> None:
    other_app = (
        PynencBuilder()
        .app_id("orch-adapter-other")
        .memory()
        .custom_config(orchestrator_cls="CppMemOrchestrator")
        .build()
    )
    new_invocation(tasks["add"], 2, 2)
    assert orch.count_invocations() == 1
    assert other_app.orchestrator.count_invocations() == 0
