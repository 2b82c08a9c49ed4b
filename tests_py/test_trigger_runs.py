"""A trigger run starts its task once, also when its firer dies before recording it
(``pynenc_cpp._trigger_runs``).

pynenc's loop claims a run, starts the task, records the run, then clears the valid
condition. Here the first firer "dies" right after the start: its
``store_trigger_run`` raises a ``BaseException`` (pynenc catches only ``Exception``
there), so nothing after it runs, as under SIGKILL, and its claim is made to expire
at once. The next iteration claims the same run again: without
``_trigger_runs`` it starts a second receipt (these tests then fail with two).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc
from pynenc.invocation import InvocationStatus
from pynenc.orchestrator.atomic_service import AtomicServiceRun

from pynenc_cpp import _trigger_runs
from pynenc_cpp.trigger import CppTrigger
from tests_py import trigger_tasks as tt
from tests_py.test_cpp_runner import ALL, build_app, running, wait_until

MODES = ["native", "mixed"]
#: pynenc's atomic service runs at a runner's start, then hourly; the wake is off:
#: the tests fire the trigger themselves.
QUIET = {"atomic_service_check_interval_minutes": 60, "cpp_runner_trigger_wake": False}


class _Killed(BaseException):
    """The firer dies here (pynenc's record step catches ``Exception`` only)."""


class _FirstClaimExpires:
    """The trigger store, with the first claim of a run made to expire at once (its
    claimer is dead: the next loop may claim it again)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.claimed: list[str] = []

    def claim_trigger_run(self, run_id: str, expiration_seconds: int) -> bool:
        first = run_id not in self.claimed
        self.claimed.append(run_id)
        return bool(self._engine.claim_trigger_run(run_id, 0 if first else expiration_seconds))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def _app(backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> Pynenc:
    app = build_app(
        backend, tmp_path, request, workers=2, config={**QUIET, "cpp_native": mode == "native"}
    )
    tt.use(app, cron=False)
    return app


def _receipts(app: Pynenc) -> list[str]:
    return list(app.orchestrator.get_existing_invocations(tt.send_receipt))


def _iteration(app: Pynenc) -> None:
    app.trigger._process_loop_iteration(AtomicServiceRun(runner_id="test-loop"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ALL)
def test_a_run_whose_firer_died_before_its_record_starts_its_task_once(
    backend: str,
    mode: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = _app(backend, mode, tmp_path, request)
    ledger = str(tmp_path / "ledger")
    # The order's SUCCESS reported, not fired: no runner here (pynenc's atomic service,
    # which runs when a runner starts, could fire it first).
    app.register_deferred_triggers()
    order = tt.order_placed(ledger, "o1")
    app.trigger.report_tasks_status([order.invocation_id], InvocationStatus.SUCCESS)
    assert app.trigger.get_valid_conditions()
    trigger = app.trigger
    assert isinstance(trigger, CppTrigger)
    store = _FirstClaimExpires(trigger._engine)
    monkeypatch.setattr(trigger, "_engine", store)

    def dies(run: Any) -> None:
        raise _Killed

    monkeypatch.setattr(trigger, "store_trigger_run", dies)
    with pytest.raises(_Killed):
        _iteration(app)
    first = _receipts(app)
    assert len(first) == 1
    [run_id] = store.claimed
    assert app.trigger.get_valid_conditions()  # left behind, as by a dead runner

    monkeypatch.undo()
    monkeypatch.setattr(trigger, "_engine", store)
    _iteration(app)  # claims the run again: the receipt started already is the run's
    assert store.claimed == [run_id, run_id]
    assert _receipts(app) == first
    assert first[0] == _trigger_runs.run_invocation_id(app.app_id, run_id)
    record = trigger.get_trigger_run(run_id)
    assert record is not None and record.triggered_invocation_id == first[0]
    assert app.trigger.get_valid_conditions() == {}
    _iteration(app)
    assert _receipts(app) == first

    with running(app):  # the receipt runs, once
        wait_until(
            lambda: app.orchestrator.get_invocation_status(first[0]) == InvocationStatus.SUCCESS
        )
    receipts = [ln for ln in Path(ledger).read_text().splitlines() if ln.startswith("receipt")]
    assert len(receipts) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ALL)
def test_a_run_invocation_left_unregistered_or_unrouted_is_routed(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """pynenc's mixed-mode route is several steps: a firer may die after the upsert
    (no status) or after the registration (REGISTERED, not in a queue). The next
    claimer finds the invocation and finishes its start; a started one is left as
    it is."""
    app = _app(backend, mode, tmp_path, request)
    ledger = str(tmp_path / "ledger")
    app.register_deferred_triggers()
    orchestrator = app.orchestrator
    routed_before = app.broker.count_invocations()

    def made(run_id: str, register: bool) -> Any:
        invocation_id = _trigger_runs.run_invocation_id(app.app_id, run_id)
        with _trigger_runs.fixed_invocation_id(invocation_id):
            assert _trigger_runs.is_fixed()
            from pynenc.arguments import Arguments
            from pynenc.call import Call

            from pynenc_cpp import _submit

            call = Call(tt.send_receipt, Arguments(kwargs={"path": ledger, "tag": run_id}))
            invocation = _submit.new_invocation(call, None, None, stored=False)
            assert not _trigger_runs.is_fixed()  # taken once
        assert invocation.invocation_id == invocation_id
        app.state_backend.upsert_invocations([invocation])
        if register:
            orchestrator._register_new_invocations([invocation])
        return invocation

    def must_not_run() -> Any:
        raise AssertionError("a run whose invocation exists started another")

    unregistered = made("run-a", register=False)
    with pytest.raises(KeyError):
        orchestrator.get_invocation_status(unregistered.invocation_id)
    got = _trigger_runs.execute_run(app, "run-a", must_not_run)
    assert got.invocation_id == unregistered.invocation_id
    assert orchestrator.get_invocation_status(got.invocation_id) == InvocationStatus.REGISTERED
    assert app.broker.count_invocations() == routed_before + 1

    unrouted = made("run-b", register=True)
    assert app.broker.count_invocations() == routed_before + 1
    got = _trigger_runs.execute_run(app, "run-b", must_not_run)
    assert got.invocation_id == unrouted.invocation_id
    assert app.broker.count_invocations() == routed_before + 2

    # A new run: started by ``execute`` with the run's id.
    fresh = _trigger_runs.execute_run(
        app,
        "run-c",
        lambda: app.trigger.execute_task(tt.send_receipt.task_id, {"path": ledger, "tag": "c"}),
    )
    assert fresh.invocation_id == _trigger_runs.run_invocation_id(app.app_id, "run-c")
    assert app.broker.count_invocations() == routed_before + 3

    with running(app):  # each runs once (a second delivery finds it taken)
        wait_until(
            lambda: all(
                orchestrator.get_invocation_status(i.invocation_id) == InvocationStatus.SUCCESS
                for i in (unregistered, unrouted, fresh)
            )
        )
    receipts = [ln for ln in Path(ledger).read_text().splitlines() if ln.startswith("receipt")]
    assert len(receipts) == 3


def test_run_invocation_ids_follow_from_the_app_and_the_run() -> None:
    a = _trigger_runs.run_invocation_id("app", "run")
    assert a == _trigger_runs.run_invocation_id("app", "run")
    assert str(uuid.UUID(a)) == a  # pynenc's UUID text form
    assert a != _trigger_runs.run_invocation_id("app", "run2")
    assert a != _trigger_runs.run_invocation_id("app2", "run")
    assert _trigger_runs.take_fixed_id() is None
    with _trigger_runs.fixed_invocation_id(a):
        assert _trigger_runs.take_fixed_id() == a
        assert _trigger_runs.take_fixed_id() is None


@pytest.mark.parametrize("backend", ALL)
def test_an_old_invocation_under_a_run_id_is_an_earlier_firing_and_a_new_one_starts(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some run ids come back (pynenc's ExceptionContext ids name only the exception
    type): an invocation found under the run's id that was registered more than
    ``REUSE_WITHIN_SEC`` ago is an earlier firing, and the run starts its own, with
    a new id."""
    app = _app(backend, "native", tmp_path, request)
    ledger = str(tmp_path / "ledger")

    def start() -> Any:
        return app.trigger.execute_task(tt.send_receipt.task_id, {"path": ledger, "tag": "x"})

    first = _trigger_runs.execute_run(app, "run-again", start)
    assert first.invocation_id == _trigger_runs.run_invocation_id(app.app_id, "run-again")
    recent = _trigger_runs.execute_run(app, "run-again", start)
    assert recent.invocation_id == first.invocation_id  # its firer died: the same one
    monkeypatch.setattr(_trigger_runs, "REUSE_WITHIN_SEC", 0.0)
    later = _trigger_runs.execute_run(app, "run-again", start)
    assert later.invocation_id != first.invocation_id
    assert len(_receipts(app)) == 2


def test_a_missing_invocation_is_told_by_pynencs_error_too() -> None:
    """pynenc's own state backends raise ``InvocationNotFoundError`` (not a
    ``KeyError``) for an unknown id: the run then starts its invocation."""
    from pynenc.exceptions import InvocationNotFoundError

    class Backend:
        def get_invocation(self, invocation_id: str) -> Any:
            raise InvocationNotFoundError(invocation_id)

    class App:
        app_id = "pynencs-own"
        state_backend = Backend()

    started: list[str | None] = []

    def start() -> Any:
        started.append(_trigger_runs.take_fixed_id())
        return "invocation"

    assert _trigger_runs.execute_run(App(), "run", start) == "invocation"  # type: ignore[arg-type]
    assert started == [_trigger_runs.run_invocation_id("pynencs-own", "run")]


@pytest.mark.parametrize("backend", ["mem"])
def test_a_claim_left_by_a_loop_step_that_raised_is_not_taken_for_a_later_start(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pynenc's loop calls the user's argument provider between the claim and the
    start: if it raised, the claim's run id must not be given to a later,
    unrelated ``execute_task`` on that thread (past the claim's 60 s)."""
    from pynenc_cpp import trigger as trigger_module

    app = _app(backend, "native", tmp_path, request)
    trigger = app.trigger
    assert isinstance(trigger, CppTrigger)
    assert trigger.claim_trigger_run("run-left")
    monkeypatch.setattr(trigger_module, "_CLAIM_SEC", 0.0)
    later = trigger.execute_task(tt.send_receipt.task_id, {"path": str(tmp_path / "l"), "tag": "y"})
    assert later.invocation_id != _trigger_runs.run_invocation_id(app.app_id, "run-left")


@pytest.mark.parametrize("backend", ALL)
def test_an_exception_trigger_fires_for_each_failure_of_the_same_type(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pynenc's ExceptionContext id names only the exception type: two failures with
    ValueError give one trigger-run id. The second, once the first run's claim has
    expired (made to expire at once here), fires a second apology, as pynenc's own
    triggers do; the first run's leftover condition alone does not fire again."""
    from pynenc.trigger.conditions import ExceptionContext

    app = _app(backend, "native", tmp_path, request)
    trigger = app.trigger
    assert isinstance(trigger, CppTrigger)
    engine = trigger._engine

    class ClaimsExpireAtOnce(_FirstClaimExpires):
        def claim_trigger_run(self, run_id: str, expiration_seconds: int) -> bool:
            return bool(engine.claim_trigger_run(run_id, 0))

    monkeypatch.setattr(trigger, "_engine", ClaimsExpireAtOnce(engine))
    app.register_deferred_triggers()

    def failed(tag: str) -> None:
        """payment_failed(tag) failed with ValueError, as pynenc's run reports it
        (report_invocation_failure, its status FAILED)."""
        inv = tt.payment_failed(tag)
        context = ExceptionContext(
            call_id=inv.call.call_id,
            invocation_id=inv.invocation_id,
            arguments=inv.call.arguments,
            disable_cache_args=(),
            status=InvocationStatus.FAILED,
            exception_type="ValueError",
            exception_message=tag,
        )
        for condition in trigger.get_conditions_sourced_from_task(
            tt.payment_failed.task_id, ExceptionContext
        ):
            trigger.validate_and_record_condition(condition, context)

    def apologies() -> list[str]:
        return list(app.orchestrator.get_existing_invocations(tt.send_apology))

    failed("p1")
    _iteration(app)
    assert len(apologies()) == 1
    assert trigger.get_valid_conditions() == {}
    failed("p2")
    _iteration(app)
    fired = apologies()
    assert len(fired) == 2, fired  # the same run id, another failure
    _iteration(app)
    assert len(apologies()) == 2
