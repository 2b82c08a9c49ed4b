"""A storage outage is ridden out, not turned into failures.

``ride_out`` on its own (a fake clock, a callable that fails), then the whole
engine: a real ``pynenc runner start`` CppRunner on a real redis-server with
``appendfsync always``, the server SIGKILLed in the middle of a burst and
restarted on the same append-only file a second later. Every task body appends
one line to an O_APPEND ledger, so executions are counted independently of the
status history.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import DistributedInvocation, InvocationStatus
from pynenc.runner.runner_context import RunnerContext

from pynenc_cpp import BackendConnectionError, BackendError, BadConfig, CppRunner, _core
from pynenc_cpp._outage import SETTLED, no_ride_out, ride_out
from pynenc_cpp.errors import IllegalTransition
from pynenc_cpp.runner import TaskTimeoutError
from tests_py import runner_tasks as rt
from tests_py.redis_server import RedisServer
from tests_py.test_cpp_runner import FAST, runner_env, start_runner, stop, wait_until

# ---------------------------------------------------------------- ride_out alone


class Flaky:
    """Fails with ``error`` the first ``failures`` calls, then returns ``value``."""

    def __init__(self, failures: int, error: Exception, value: object = "ok") -> None:
        self.failures, self.error, self.value, self.calls = failures, error, value, 0

    def __call__(self) -> object:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.value


def lost() -> BackendConnectionError:
    return BackendConnectionError("connection to redis at 127.0.0.1:1 failed: reset")


def test_connection_errors_are_retried_with_backoff_until_the_call_succeeds() -> None:
    sleeps: list[float] = []
    call = Flaky(6, lost())
    assert ride_out(call, budget_sec=60, what="t", sleep=sleeps.append) == "ok"
    assert call.calls == 7
    assert sleeps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]


def test_the_last_error_is_raised_once_the_budget_is_spent() -> None:
    call = Flaky(10**6, lost())
    start = time.monotonic()
    with pytest.raises(BackendConnectionError):
        ride_out(call, budget_sec=0.3, what="t")
    assert 2 <= call.calls <= 6
    assert time.monotonic() - start < 2


def test_a_zero_budget_never_retries() -> None:
    call = Flaky(1, lost())
    with pytest.raises(BackendConnectionError):
        ride_out(call, budget_sec=0, what="t", sleep=lambda _s: None)
    assert call.calls == 1


def test_the_runners_management_duties_do_not_ride_out_an_outage() -> None:
    """They run on the timer thread with the task-timeout watchdog: an outage fails
    them at once (logged; the next tick runs them again) instead of holding the
    watchdog for the ride-out budget (seen in CI: a timeout not recorded for 60 s)."""
    app = PynencBuilder().app_id(f"mgmt-{uuid.uuid4().hex[:8]}").cpp_mem().build()
    runner = CppRunner(app)
    call = Flaky(10**6, lost())
    sleeps: list[float] = []

    def duties() -> None:
        ride_out(call, budget_sec=60, what="duties", sleep=sleeps.append)

    runner._check_atomic_services = duties  # type: ignore[method-assign]
    runner._management()  # the error is logged, not raised
    assert call.calls == 1
    assert sleeps == []


def test_other_backend_errors_are_not_retried() -> None:
    call = Flaky(1, BackendError("redis at h:1: WRONGTYPE"))
    with pytest.raises(BackendError, match="WRONGTYPE"):
        ride_out(call, budget_sec=60, what="t", sleep=lambda _s: None)
    assert call.calls == 1


class AppliedThenRefused:
    """First call: the connection is lost after the write was applied; second: the
    status machine refuses to apply it again."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        if self.calls == 1:
            raise lost()
        raise IllegalTransition("success -> success is not allowed")


def test_a_write_found_applied_after_a_lost_connection_is_not_sent_again() -> None:
    call = AppliedThenRefused()
    out = ride_out(call, budget_sec=60, what="t", settled=lambda: True, sleep=lambda _s: None)
    assert out is SETTLED
    assert call.calls == 1  # asked before sending again: the write is never repeated


def test_a_lost_write_the_server_ran_late_is_settled_after_its_refusal() -> None:
    """Not applied when asked, then refused when sent again: asked once more."""
    answers = iter([False, True])
    call = AppliedThenRefused()
    out = ride_out(
        call, budget_sec=60, what="t", settled=lambda: next(answers), sleep=lambda _s: None
    )
    assert out is SETTLED
    assert call.calls == 2


def test_a_lost_connection_while_asking_is_ridden_out_without_sending_again() -> None:
    asked = Flaky(2, lost(), value=True)
    call = AppliedThenRefused()
    out = ride_out(call, budget_sec=60, what="t", settled=asked, sleep=lambda _s: None)
    assert out is SETTLED
    assert (call.calls, asked.calls) == (1, 3)


def test_a_write_not_applied_is_sent_again_once_asked() -> None:
    asked: list[bool] = []
    call = Flaky(1, lost())
    out = ride_out(
        call,
        budget_sec=60,
        what="t",
        settled=lambda: asked.append(True) or False,
        sleep=lambda _s: None,
    )
    assert out == "ok"
    assert (call.calls, asked) == (2, [True])


def test_a_refusal_that_is_not_the_writes_outcome_is_raised() -> None:
    with pytest.raises(IllegalTransition):
        ride_out(
            AppliedThenRefused(),
            budget_sec=60,
            what="t",
            settled=lambda: False,
            sleep=lambda _s: None,
        )
    # A refusal without an earlier lost connection never asks `settled`.
    asked: list[bool] = []
    with pytest.raises(IllegalTransition):
        ride_out(
            Flaky(1, IllegalTransition("x")),
            budget_sec=60,
            what="t",
            settled=lambda: asked.append(True) or True,
        )
    assert asked == []


def test_a_refusal_after_only_unsent_commands_is_raised() -> None:
    """A connect failure sent nothing: a refusal afterwards is someone else's change."""

    class NotSentThenRefused(AppliedThenRefused):
        def __call__(self) -> object:
            self.calls += 1
            if self.calls == 1:
                exc = lost()
                exc.maybe_applied = False  # type: ignore[attr-defined]
                raise exc
            raise IllegalTransition("running -> running is not allowed")

    asked: list[bool] = []
    with pytest.raises(IllegalTransition):
        ride_out(
            NotSentThenRefused(),
            budget_sec=60,
            what="t",
            settled=lambda: asked.append(True) or True,
            sleep=lambda _s: None,
        )
    assert asked == []


def test_no_ride_out_turns_retries_off_on_its_thread_only() -> None:
    with no_ride_out():
        call = Flaky(1, lost())
        with pytest.raises(BackendConnectionError):
            ride_out(call, budget_sec=60, what="t", sleep=lambda _s: None)
        assert call.calls == 1
        other: list[object] = []
        worker = threading.Thread(
            target=lambda: other.append(
                ride_out(Flaky(1, lost()), budget_sec=60, what="t", sleep=lambda _s: None)
            )
        )
        worker.start()
        worker.join()
        assert other == ["ok"]
    assert ride_out(Flaky(1, lost()), budget_sec=60, what="t", sleep=lambda _s: None) == "ok"


def test_bad_budget_is_a_clear_error(tmp_path: Path) -> None:
    # Refused when the app is built, before any component opens its storage.
    builder = (
        PynencBuilder()
        .app_id(f"budget-{uuid.uuid4().hex[:6]}")
        .cpp_sqlite(path=tmp_path / "b.db")
        .custom_config(cpp_outage_budget_sec=-1)
    )
    with pytest.raises(BadConfig, match="cpp_outage_budget_sec=-1"):
        builder.build()


def test_engine_connection_errors_are_backend_connection_errors(
    redis_server: RedisServer,
) -> None:
    broker = _core.Broker(redis_server.url + "?connect_timeout_ms=200", "conn-err")
    redis_server.stop()
    try:
        with pytest.raises(BackendConnectionError, match=str(redis_server.port)) as info:
            broker.route(["x"], "q", 0.0)
        assert isinstance(info.value, BackendError)
        assert not isinstance(info.value, ConnectionError)  # see bindings/errors.cc
        assert info.value.maybe_applied is False  # refused: nothing was sent
    finally:
        redis_server.start()


# ------------------------------------------------ a retry lost on the wire (native)


class LostRetry:
    """The app's composite operations, but ``retry`` is lost on the wire once: it
    does ``applied`` of the real work, ``meanwhile`` runs, then the connection
    fails as if after the command was sent."""

    def __init__(self, inner: object, applied: str, meanwhile: Callable[[], None]) -> None:
        self.inner, self.applied, self.meanwhile, self.calls = inner, applied, meanwhile, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def retry(self, inv_id: str, queue: str, priority: float, runner_id: str, *rest: object):
        self.calls += 1
        if self.calls > 1:
            return self.inner.retry(inv_id, queue, priority, runner_id, *rest)
        if self.applied == "all":
            self.inner.retry(inv_id, queue, priority, runner_id, *rest)
        elif self.applied == "status":  # a multi-command retry cut after its first step
            ctx_id = rest[0]
            self.inner.change_status(inv_id, InvocationStatus.RETRY, runner_id, ctx_id, None, False)
        self.meanwhile()
        raise lost()


def native_app(backend: str, request: pytest.FixtureRequest) -> Pynenc:
    builder = PynencBuilder().app_id(f"lost-retry-{uuid.uuid4().hex[:8]}")
    if backend == "mem":
        builder = builder.cpp_mem()
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"))
    app = builder.custom_config(cpp_outage_budget_sec=5.0).build()
    rt.use(app)
    return app


def running(app: Pynenc, runner: RunnerContext) -> DistributedInvocation:
    claimed = app.orchestrator.claim_for_run(app.broker.retrieve_invocation(), runner)
    assert claimed is not None
    app.orchestrator.set_invocation_status(claimed.invocation_id, InvocationStatus.RUNNING, runner)
    return claimed


def retry_through(
    app: Pynenc, monkeypatch: pytest.MonkeyPatch, applied: str, meanwhile: Callable[[], None]
) -> tuple[DistributedInvocation, LostRetry]:
    runner = RunnerContext(runner_cls="CppRunner", runner_id="runner-a", pid=1, hostname="h")
    rt.add(1, 2)
    inv = running(app, runner)
    orch = app.orchestrator
    lost_retry = LostRetry(orch._lifecycle(), applied, lambda: meanwhile())
    monkeypatch.setattr(orch, "_lifecycle", lambda: lost_retry)
    orch.set_invocation_retry(inv, ValueError("again"), runner)
    return inv, lost_retry


@pytest.mark.parametrize("backend", ["mem", "redis"])
def test_a_landed_retry_claimed_again_by_the_same_runner_is_not_applied_twice(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry landed and was routed; before its sender learns it, another worker of
    the same runner (same runner id) claims the invocation again. Sending the retry
    again would move that new run to RETRY and queue a second copy."""
    app = native_app(backend, request)
    runner = RunnerContext(runner_cls="CppRunner", runner_id="runner-a", pid=1, hostname="h")
    inv, lost_retry = retry_through(app, monkeypatch, "all", lambda: running(app, runner))
    iid = inv.invocation_id
    assert lost_retry.calls == 1  # not sent again
    record = app.orchestrator.get_invocation_status_record(iid)
    assert (record.status, record.runner_id) == (InvocationStatus.RUNNING, "runner-a")
    assert app.orchestrator.get_invocation_retries(iid) == 1
    assert app.broker.count_invocations() == 0
    history = [h.status_record.status for h in app.state_backend.get_history(iid)]
    assert history.count(InvocationStatus.RETRY) == 1, history


@pytest.mark.parametrize("backend", ["mem", "redis"])
def test_a_retry_cut_after_its_status_gets_its_count_and_route(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = native_app(backend, request)
    inv, lost_retry = retry_through(app, monkeypatch, "status", lambda: None)
    assert lost_retry.calls == 1
    assert app.orchestrator.get_invocation_status(inv.invocation_id) == InvocationStatus.RETRY
    assert app.orchestrator.get_invocation_retries(inv.invocation_id) == 1
    assert app.broker.count_invocations() == 1


@pytest.mark.parametrize("backend", ["mem", "redis"])
def test_a_retry_lost_before_it_was_applied_is_sent_again(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = native_app(backend, request)
    inv, lost_retry = retry_through(app, monkeypatch, "nothing", lambda: None)
    assert lost_retry.calls == 2
    assert app.orchestrator.get_invocation_status(inv.invocation_id) == InvocationStatus.RETRY
    assert app.orchestrator.get_invocation_retries(inv.invocation_id) == 1
    assert app.broker.count_invocations() == 1


# ------------------------------------------------------ a real server, restarted

N_TASKS = 300
BODY_SEC = 0.01


@pytest.fixture
def aof_always_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", appendonly=True, appendfsync="always").start()
    yield server
    server.stop()


def build_app(url: str) -> Pynenc:
    app = (
        PynencBuilder()
        .app_id(f"outage-{uuid.uuid4().hex[:10]}")
        .cpp_redis(url)
        .cpp_runner(workers=2)
        .custom_config(cpp_outage_budget_sec=60.0, **FAST)
        .build()
    )
    rt.use(app)
    return app


def ledger_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_redis_killed_mid_burst_and_restarted_loses_and_fails_nothing(
    aof_always_server: RedisServer, tmp_path: Path
) -> None:
    app = build_app(aof_always_server.url)
    ledger = tmp_path / "ledger.log"
    runner_log = tmp_path / "runner.log"
    proc = start_runner(runner_env(app, "redis"), runner_log)
    try:
        invs = [rt.slow_append(str(ledger), f"t{i}", BODY_SEC) for i in range(N_TASKS)]
        acknowledged = {inv.invocation_id: f"t{i}" for i, inv in enumerate(invs)}
        # A client waiting on the results through the outage.
        results: dict[str, object] = {}
        errors: list[BaseException] = []

        def wait_results() -> None:
            try:
                for inv in invs:
                    results[inv.invocation_id] = inv.result
            except BaseException as exc:  # reported by the assertions below
                errors.append(exc)

        waiter = threading.Thread(target=wait_results)
        waiter.start()
        wait_until(lambda: len(ledger_lines(ledger)) >= N_TASKS // 6, timeout=60)
        aof_always_server.stop(signal.SIGKILL)
        done_at_kill = len(ledger_lines(ledger))
        time.sleep(1.0)
        aof_always_server.start()  # same port, same append-only file
        restarted = time.monotonic()
        waiter.join(120)
        drained_sec = time.monotonic() - restarted
        assert not waiter.is_alive(), "the client is still waiting two minutes later"
        statuses = Counter(inv.status for inv in invs)
    finally:
        stop(proc)
    assert errors == []
    log_text = runner_log.read_text()
    assert done_at_kill < N_TASKS, "the burst ended before the kill: nothing was tested"
    assert statuses == Counter({InvocationStatus.SUCCESS: N_TASKS}), log_text[-4000:]
    assert results == acknowledged
    runs = Counter(ledger_lines(ledger))
    assert set(runs) == set(acknowledged.values())
    # A body runs again only if the outage hit between its start and its RUNNING
    # record (at most one per worker); none that succeeded is reported FAILED.
    reruns = sum(n - 1 for n in runs.values())
    print(  # figures for docs/reliability.md (pytest -s)
        f"redis outage: {N_TASKS} invocations, {done_at_kill} run before the kill, "
        f"{reruns} re-run(s), all final {drained_sec:.2f} s after the restart"
    )
    assert reruns <= 2, runs.most_common(4)
    assert "TaskAbortedError" not in log_text


def test_a_task_timing_out_during_an_outage_is_failed_once_the_server_is_back(
    aof_always_server: RedisServer, tmp_path: Path
) -> None:
    """The watchdog does not wait for the storage, so the FAILED of a timeout that
    fires while the server is down is kept and stored on a later heartbeat tick;
    the invocation does not stay RUNNING under a runner that lives on."""
    app = build_app(aof_always_server.url)
    ledger = tmp_path / "ledger.log"
    runner_log = tmp_path / "runner.log"
    env = runner_env(app, "redis", {"PYNENC__CPP_RUNNER_TASK_TIMEOUT_SEC": "1"})
    proc = start_runner(env, runner_log)
    try:
        inv = rt.slow_append(str(ledger), "long", 60.0)
        wait_until(lambda: len(ledger_lines(ledger)) == 1, timeout=60)
        aof_always_server.stop(signal.SIGKILL)
        wait_until(lambda: "FAILED is stored when it answers" in runner_log.read_text(), 30)
        aof_always_server.start()
        wait_until(lambda: inv.status == InvocationStatus.FAILED, timeout=30)
        with pytest.raises(Exception, match="cpp_runner_task_timeout_sec=1"):
            _ = inv.result
        assert ledger_lines(ledger) == ["long"]
    finally:
        stop(proc)


def test_a_timeout_stored_before_its_connection_was_lost_is_reported_not_stored_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watchdog's FAILED landed but its reply was lost: on the next tick the
    runner finds it FAILED, makes the trigger reports the lost attempt never made,
    and does not send it again."""
    app = (
        PynencBuilder()
        .app_id(f"landed-timeout-{uuid.uuid4().hex[:8]}")
        .cpp_mem()
        .cpp_runner(workers=1)
        .build()
    )
    rt.use(app)
    runner = CppRunner(app)
    rt.add(1, 2)
    inv = running(app, runner.runner_context)
    original = app.orchestrator.set_invocation_exception
    sent: list[str] = []

    def landed_then_lost(invocation: DistributedInvocation, exc: Exception, ctx: object) -> None:
        sent.append(invocation.invocation_id)
        original(invocation, exc, ctx)
        raise lost()

    reports: list[tuple[str, str]] = []
    monkeypatch.setattr(app.orchestrator, "set_invocation_exception", landed_then_lost)
    monkeypatch.setattr(
        app.trigger,
        "report_invocation_failure",
        lambda invocation, exc: reports.append((invocation.invocation_id, type(exc).__name__)),
    )
    error = TaskTimeoutError("ran longer than cpp_runner_task_timeout_sec=1")
    assert runner._record_timeout(inv.invocation_id, error) is False
    assert inv.invocation_id in runner._unrecorded_timeouts

    runner._record_timeouts()  # the next heartbeat tick
    assert runner._unrecorded_timeouts == {}
    assert sent == [inv.invocation_id]  # not sent again
    assert reports == [(inv.invocation_id, "TaskTimeoutError")]
    assert app.orchestrator.get_invocation_status(inv.invocation_id) == InvocationStatus.FAILED


def test_trigger_reads_on_the_status_change_path_ride_out_a_restart(
    aof_always_server: RedisServer,
) -> None:
    """pynenc reports every status change and result to the trigger, which first
    reads the conditions sourced from the task (mixed mode: from pynenc's own
    ``set_invocation_status`` inside ``DistributedInvocation.run``). That read
    failing on a restarting server made pynenc fail an invocation whose body had not
    run (found by the chaos suite, redis restart in mixed mode): it is ridden out."""
    app = build_app(aof_always_server.url)
    inv = rt.add(1, 2)
    task_id = inv.call.task.task_id
    assert app.trigger.get_conditions_sourced_from_task(task_id) == []
    aof_always_server.stop(signal.SIGKILL)
    # Longer than the client's own connect retries (2 s): the read sees the outage.
    restarter = threading.Timer(3.0, aof_always_server.start)
    restarter.start()
    try:
        start = time.monotonic()
        assert app.trigger.get_conditions_sourced_from_task(task_id) == []
        app.trigger.report_tasks_status([inv.invocation_id], InvocationStatus.RUNNING)
        assert time.monotonic() - start >= 2.9  # it waited for the server
    finally:
        restarter.join()
    assert app.orchestrator.get_invocation_status(inv.invocation_id) == InvocationStatus.REGISTERED
