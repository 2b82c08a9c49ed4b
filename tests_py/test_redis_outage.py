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
from collections.abc import Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus

from pynenc_cpp import BackendConnectionError, BackendError, BadConfig, _core
from pynenc_cpp._outage import SETTLED, no_ride_out, ride_out
from pynenc_cpp.errors import IllegalTransition
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


def test_a_write_found_applied_after_a_lost_connection_is_settled() -> None:
    call = AppliedThenRefused()
    out = ride_out(call, budget_sec=60, what="t", settled=lambda: True, sleep=lambda _s: None)
    assert out is SETTLED
    assert call.calls == 2


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
    app = (
        PynencBuilder()
        .app_id(f"budget-{uuid.uuid4().hex[:6]}")
        .cpp_sqlite(path=tmp_path / "b.db")
        .custom_config(cpp_outage_budget_sec=-1)
        .build()
    )
    with pytest.raises(BadConfig, match="cpp_outage_budget_sec=-1"):
        _ = app.orchestrator


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
