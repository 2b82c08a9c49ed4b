"""``CppNativeOrchestrator.run_invocation``: CppRunner's lean copy of pynenc's
``DistributedInvocation.run``, checked against pynenc's own ``run`` on every backend.

Each scenario runs twice on the same app, once through pynenc's ``run`` and once
through ``run_invocation``, and must leave the same status history, outcome, error
and trigger reports (and the expected ones: both could be wrong the same way). The
digest of the ``run`` it follows is checked with every shortcut's in
``tests_py/test_shortcuts.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, context
from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.invocation import DistributedInvocation, InvocationStatus
from pynenc.runner.runner_context import RunnerContext
from pynenc.trigger import TriggerBuilder

from pynenc_cpp.native import CppNativeOrchestrator
from tests_py.cpp_apps import BACKENDS, build_cpp_app

S = InvocationStatus

_task_app = Pynenc()
_children: list[DistributedInvocation] = []


@_task_app.task
def add(x: int, y: int) -> int:
    return x + y


@_task_app.task
async def add_async(x: int, y: int) -> int:
    await asyncio.sleep(0)
    return x + y


@_task_app.task
def boom(x: int) -> int:
    raise ValueError(f"boom {x}")


@_task_app.task(retry_for=(KeyError,), max_retries=1)
def flaky(x: int) -> int:
    raise KeyError(x)


@_task_app.task(running_concurrency=ConcurrencyControlType.TASK)
def one_at_a_time(x: int) -> int:
    return x * 10


@_task_app.task
def parent(x: int) -> int:
    _children.append(add(x, x))  # submitted from inside: the running one is its parent
    return x


@_task_app.task
def watched(x: int) -> int:
    return x


@_task_app.task
def takes_func(func: int) -> int:
    return func  # pynenc's run_task_sync(func, **kwargs) never gets here: a TypeError


TASKS = (add, add_async, boom, flaky, one_at_a_time, parent, watched, takes_func)


@pytest.fixture(params=[(b, level) for b in BACKENDS for level in ("info", "warning")])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pynenc]:
    """Each backend at pynenc's default INFO level and above it: ``run_invocation``
    completes the result's store in Python only for what needs it (a log line, a
    watching trigger, an error), so both ways are compared with pynenc's ``run``."""
    backend, level = request.param
    app = build_cpp_app(backend, request, tmp_path, "runinv")
    app.conf.logging_level = level
    app.logger.setLevel(level.upper())
    for task in TASKS:
        task.app = app
    assert isinstance(app.orchestrator, CppNativeOrchestrator)
    yield app
    app.purge()


RUNNER = RunnerContext(runner_cls="TestRunner", runner_id="runner-a", pid=1, hostname="h")

#: How each side runs a claimed invocation.
SIDES: dict[str, Callable[[Pynenc, DistributedInvocation], None]] = {
    "pynenc": lambda app, inv: inv.run(RUNNER),
    "lean": lambda app, inv: app.orchestrator.run_invocation(inv, RUNNER),  # type: ignore[attr-defined]
}


def _statuses(app: Pynenc, inv: DistributedInvocation) -> list[InvocationStatus]:
    return [h.status_record.status for h in app.state_backend.get_history(inv.invocation_id)]


def _result(app: Pynenc, inv: DistributedInvocation) -> object:
    """The invocation's result, or its error's type; never waits (a run that left
    it not final fails the test instead of hanging it)."""
    status = app.orchestrator.get_invocation_status(inv.invocation_id)
    if not status.is_final():
        return f"not final: {status.value}"
    try:
        return inv.result
    except Exception as exc:
        return type(exc)


def _claim_and_run(
    app: Pynenc, inv: DistributedInvocation, side: str
) -> tuple[object, DistributedInvocation]:
    """Claims the next routed id as CppRunner does (start=True) and runs it on
    ``side``: (what it returned or raised, the claimed invocation)."""
    claimed = app.orchestrator.claim_for_run(  # type: ignore[attr-defined]
        app.broker.retrieve_invocation(), RUNNER, start=True
    )
    assert claimed is not None and claimed.invocation_id == inv.invocation_id
    try:
        outcome: object = SIDES[side](app, claimed)
    except Exception as exc:  # run raises the task's error after storing it
        outcome = type(exc)
    return outcome, claimed


def _run_scenario(
    app: Pynenc, monkeypatch: pytest.MonkeyPatch, side: str, submit: Callable[[], Any]
) -> dict[str, Any]:
    """Submits, claims and runs (again while it is routed again, as after a retry);
    what it left behind."""
    reports: list[tuple[InvocationStatus, str]] = []
    original = app.trigger.report_tasks_status

    def spy(ids: list, status: Any = None) -> None:
        reports.extend((status, str(i)) for i in ids)
        original(ids, status)

    monkeypatch.setattr(app.trigger, "report_tasks_status", spy)
    inv = submit()
    outcomes = []
    while app.broker.count_invocations():
        outcome, _ = _claim_and_run(app, inv, side)
        outcomes.append(outcome)
    monkeypatch.undo()
    final = app.orchestrator.get_invocation_status(inv.invocation_id)
    result = _result(app, inv)
    return {
        "history": _statuses(app, inv),
        "final": final,
        "outcomes": outcomes,
        "result": result,
        "reported": [status for status, iid in reports if iid == inv.invocation_id],
        "retries": app.orchestrator.get_invocation_retries(inv.invocation_id),
    }


def _warm(app: Pynenc, task: Any, *args: Any) -> None:
    """One run first: a task's first claim checks its concurrency control (PENDING
    only); later claims of a task that runs freely start it (RUNNING). What that run
    submitted (or routed again) is run too, so the broker is empty after."""
    _claim_and_run(app, task(*args), "pynenc")
    while app.broker.count_invocations():
        claimed = app.orchestrator.claim_for_run(  # type: ignore[attr-defined]
            app.broker.retrieve_invocation(), RUNNER, start=True
        )
        assert claimed is not None
        try:
            claimed.run(RUNNER)
        except Exception:
            pass  # stored as the invocation's outcome; only an empty broker matters here


#: name: (task, its arguments, what both sides must leave)
SCENARIOS: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {
    "success": (add, (1, 2), {"final": S.SUCCESS, "result": 3, "outcomes": [None]}),
    "coroutine task": (add_async, (2, 3), {"final": S.SUCCESS, "result": 5, "outcomes": [None]}),
    "exception": (
        boom,
        (1,),
        {"final": S.FAILED, "result": ValueError, "outcomes": [ValueError]},
    ),
    "retry, then max retries": (
        flaky,
        (1,),
        # first run: RETRY and routed again (nothing raised); second: FAILED, raised
        {"final": S.FAILED, "result": KeyError, "outcomes": [None, KeyError], "retries": 1},
    ),
    "concurrency-controlled task": (
        one_at_a_time,
        (4,),
        {"final": S.SUCCESS, "result": 40, "outcomes": [None]},
    ),
    "an argument named func": (
        takes_func,
        (7,),
        {"final": S.FAILED, "result": TypeError, "outcomes": [TypeError]},
    ),
}


@pytest.mark.parametrize("warm", [False, True], ids=["first run", "after a run"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_lean_run_leaves_what_pynencs_run_leaves(
    app: Pynenc, monkeypatch: pytest.MonkeyPatch, scenario: str, warm: bool
) -> None:
    """Both sides from a task's first claim (the concurrency check made at the claim)
    and after a run of it (a task that runs freely is then started by its claim)."""
    task, args, expected = SCENARIOS[scenario]
    if warm:
        _warm(app, task, *args)
    seen = {side: _run_scenario(app, monkeypatch, side, lambda: task(*args)) for side in SIDES}
    assert seen["lean"] == seen["pynenc"]
    for key, value in {"retries": 0, **expected}.items():
        assert seen["lean"][key] == value, key
    assert seen["lean"]["history"][0] == S.REGISTERED
    assert seen["lean"]["history"][-1] == expected["final"]
    assert S.RUNNING in seen["lean"]["history"]


def test_trigger_reports_of_a_watched_task_are_pynencs(
    app: Pynenc, monkeypatch: pytest.MonkeyPatch
) -> None:
    app.trigger.register_task_triggers(
        add, TriggerBuilder().on_status(watched, statuses=[S.RUNNING, S.SUCCESS])
    )
    _warm(app, watched, 0)
    seen = {side: _run_scenario(app, monkeypatch, side, lambda: watched(7)) for side in SIDES}
    assert seen["lean"] == seen["pynenc"]
    assert seen["lean"]["reported"] == [S.REGISTERED, S.PENDING, S.RUNNING, S.SUCCESS]


def test_an_invocation_submitted_from_inside_has_the_running_one_as_parent(
    app: Pynenc,
) -> None:
    _warm(app, parent, 0)
    _children.clear()
    inv = parent(5)
    outcome, claimed = _claim_and_run(app, inv, "lean")
    assert outcome is None and _result(app, inv) == 5
    [child] = _children[-1:]
    assert child.parent_invocation_id == inv.invocation_id
    stored = app.state_backend.get_invocation(child.invocation_id)
    assert stored.parent_invocation_id == inv.invocation_id


def test_the_callers_invocation_context_is_restored(app: Pynenc) -> None:
    """As pynenc's run: the invocation is the thread's current one while it runs, and
    what was current before is current again after (also after an error)."""
    _warm(app, parent, 0)
    _warm(app, boom, 0)
    outer = add(9, 9)
    app.broker.retrieve_invocation()  # outer only stands in as the caller's context
    previous = context.swap_dist_invocation_context(app.app_id, outer)
    try:
        for task, args in ((parent, (1,)), (boom, (2,))):
            _children.clear()
            inv = task(*args)
            _claim_and_run(app, inv, "lean")
            assert context.get_dist_invocation_context(app.app_id) is outer
            if task is parent:  # while it ran, it was the current one
                assert _children[-1].parent_invocation_id == inv.invocation_id
                app.broker.retrieve_invocation()  # its child, not run here
        assert context.get_runner_context(app.app_id) is RUNNER
    finally:
        context.swap_dist_invocation_context(app.app_id, previous)


def test_a_replaced_task_function_is_checked_again(app: Pynenc) -> None:
    """The asyncio check is kept per function object: a task whose function was
    replaced (sync <-> async) is called the right way."""
    _warm(app, add, 0, 0)
    orch = app.orchestrator

    async def async_sum(x: int, y: int) -> int:
        return x + y + 100

    def sync_sum(x: int, y: int) -> int:
        return x + y + 200

    for func, expected in ((async_sum, 102), (sync_sum, 202), (async_sum, 102)):
        inv = add(1, 1)
        claimed = orch.claim_for_run(app.broker.retrieve_invocation(), RUNNER, start=True)
        assert claimed is not None
        task = claimed.task
        original = task.func
        task.func = func  # type: ignore[assignment]
        try:
            orch.run_invocation(claimed, RUNNER)
        finally:
            task.func = original  # type: ignore[method-assign]
        assert _result(app, inv) == expected


def test_a_patched_run_is_what_runs(app: Pynenc, monkeypatch: pytest.MonkeyPatch) -> None:
    """An invocation whose ``run`` is not pynenc's own (patched here, or a subclass
    overriding it) is run by that ``run``."""
    calls: list[str] = []
    original = DistributedInvocation.run

    def patched(self: DistributedInvocation, runner_ctx: RunnerContext, *args: Any) -> None:
        calls.append(self.invocation_id)
        original(self, runner_ctx, *args)

    monkeypatch.setattr(DistributedInvocation, "run", patched)
    _warm(app, add, 0, 0)
    inv = add(4, 4)
    assert _claim_and_run(app, inv, "lean")[0] is None
    assert calls[-1] == inv.invocation_id and _result(app, inv) == 8


@pytest.mark.parametrize(
    "check", ["is_authorize_to_run_by_concurrency_control", "_is_authorize_by_concurrency_control"]
)
def test_a_patched_concurrency_check_is_asked_even_for_a_free_task(
    app: Pynenc, monkeypatch: pytest.MonkeyPatch, check: str
) -> None:
    """pynenc's own check is skipped for a task that runs freely (it would say yes at
    once); a replaced one is asked, and its no is what pynenc's run does with it:
    rerouted, then the RUNNING step refused (a warning, nothing raised). A claim does
    not start the task while such a check is in place (it could not be rerouted
    from RUNNING)."""
    _warm(app, add, 0, 0)
    assert app.orchestrator.take_for_runner(RUNNER) is not None  # type: ignore[attr-defined]
    seen = {}
    for side in SIDES:
        asked: list[str] = []

        def refuse(invocation: DistributedInvocation, *_: Any, asked: list[str] = asked) -> bool:
            asked.append(invocation.invocation_id)
            return False

        monkeypatch.setattr(app.orchestrator, check, refuse)
        # No claim-and-start while the check may refuse: PENDING, as pynenc claims.
        assert app.orchestrator.take_for_runner(RUNNER) is None  # type: ignore[attr-defined]
        inv = add(6, 6)
        outcome, _ = _claim_and_run(app, inv, side)
        monkeypatch.undo()
        seen[side] = (outcome, asked == [inv.invocation_id], _statuses(app, inv)[-1])
        _claim_and_run(app, inv, "pynenc")  # the rerouted one, run to the end
        assert _result(app, inv) == 12
    assert seen["lean"] == seen["pynenc"] == (None, True, S.REROUTED)
