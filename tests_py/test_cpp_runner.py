"""CppRunner on cpp_mem / cpp_sqlite / cpp_redis: in a thread of this process and
as a real ``pynenc runner start`` subprocess with real signals.

Covers results, task exceptions, tasks that end their thread (SystemExit,
KeyboardInterrupt, other BaseExceptions), the task timeout, waiting tasks with a
single worker, graceful and immediate shutdown, the polling fallback for a
broker that is not pynenc-cpp's, and the configuration paths.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus

from pynenc_cpp import CppRunner, TaskAbortedError, TaskTimeoutError
from tests_py import runner_tasks as rt
from tests_py.procs import orphan_guard

ROOT = Path(__file__).resolve().parents[1]
FAST = {"runner_loop_sleep_time_sec": 0.01, "invocation_wait_results_sleep_time_sec": 0.01}


def build_app(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    *,
    config: dict[str, Any] | None = None,
    **runner: Any,
) -> Pynenc:
    """A fresh app on `backend` with CppRunner (`runner`: cpp_runner() arguments) and
    FAST plus `config` as custom configuration."""
    builder = PynencBuilder().app_id(f"cpp-runner-{uuid.uuid4().hex[:10]}")
    if backend == "mem":
        builder = builder.cpp_mem()
    elif backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "runner.db")
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"))
    app = builder.cpp_runner(**runner).custom_config(**FAST, **(config or {})).build()
    rt.use(app)
    return app


@contextmanager
def running(app: Pynenc) -> Iterator[CppRunner]:
    """The app's CppRunner running in a thread; stopped (gracefully) on exit."""
    runner = app.runner
    assert isinstance(runner, CppRunner)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    wait_until(lambda: runner._engine is not None and runner._engine.state == "running")
    try:
        yield runner
    finally:
        runner.stop_runner_loop()
        thread.join(60)
        assert not thread.is_alive(), "run() did not return after stop_runner_loop()"


def wait_until(pred: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def statuses(app: Pynenc, invocation_id: str) -> list[InvocationStatus]:
    return [h.status_record.status for h in app.state_backend.get_history(invocation_id)]


def reopened(app: Pynenc, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Pynenc:
    """The same app (id and storage, "sqlite" or "redis") in a new app object with a
    two-worker CppRunner, as a restarted process has it."""
    builder = PynencBuilder().app_id(app.app_id)
    if backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "runner.db")
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"))
    second = builder.cpp_runner(workers=2).custom_config(**FAST).build()
    rt.use(second)
    return second


ALL = ["mem", "sqlite", "redis"]


@pytest.mark.parametrize("backend", ALL)
def test_results_are_correct(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    app = build_app(backend, tmp_path, request, workers=2)
    with running(app) as runner:
        invocations = [rt.add(i, 10) for i in range(40)]
        assert [inv.result for inv in invocations] == [i + 10 for i in range(40)]
        # `executed` counts execute calls that have returned: the last result can be
        # read while its worker is still on its way out of the call.
        wait_until(lambda: runner._engine.executed >= 40, timeout=10.0)
        assert runner.max_parallel_slots == 2
    for inv in invocations:
        history = statuses(app, inv.invocation_id)
        assert history[-1] == InvocationStatus.SUCCESS
        assert history.count(InvocationStatus.RUNNING) == 1


@pytest.mark.parametrize("backend", ALL)
def test_task_exception_takes_pynencs_exception_path(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, workers=1)
    with running(app):
        inv = rt.boom()
        with pytest.raises(ValueError, match="boom from the task"):
            _ = inv.result
        assert rt.add(1, 2).result == 3  # the worker carries on
    assert inv.status == InvocationStatus.FAILED


@pytest.mark.parametrize("backend", ["mem", "sqlite"])
@pytest.mark.parametrize("task_name", ["exit_task", "interrupt_task", "base_exception_task"])
def test_task_ending_its_thread_is_failed_and_worker_survives(
    backend: str, task_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, workers=1)
    with running(app) as runner:
        inv = getattr(rt, task_name)()
        with pytest.raises(TaskAbortedError):
            _ = inv.result
        # The only worker still runs tasks.
        assert rt.add(2, 3).result == 5
        assert runner._engine.live_workers == 1
    assert inv.status == InvocationStatus.FAILED
    assert InvocationStatus.RUNNING in statuses(app, inv.invocation_id)


@pytest.mark.parametrize("backend", ["mem", "sqlite"])
def test_failure_storing_the_outcome_is_reported_not_left_running(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task succeeds, but storing its result fails and so does pynenc's own
    attempt to store that failure (as if the backend dropped both calls): the
    runner reports the invocation FAILED instead of leaving it RUNNING for ever."""
    app = build_app(backend, tmp_path, request, workers=1)
    orchestrator = app.orchestrator
    store_result, store_exception = (
        orchestrator.set_invocation_result,
        orchestrator.set_invocation_exception,
    )
    dropped: list[str] = []

    def drop_once(store: Callable[..., None], name: str) -> Callable[..., None]:
        def flaky(invocation: Any, value: Any, runner_ctx: Any) -> None:
            # Only the test's task: pynenc's core tasks run on the same worker.
            if invocation.task.task_id == rt.add.task_id and name not in dropped:
                dropped.append(name)
                raise RuntimeError(f"{name} unavailable")
            store(invocation, value, runner_ctx)

        return flaky

    monkeypatch.setattr(orchestrator, "set_invocation_result", drop_once(store_result, "result"))
    monkeypatch.setattr(
        orchestrator, "set_invocation_exception", drop_once(store_exception, "exception")
    )
    with running(app):
        inv = rt.add(1, 1)
        with pytest.raises(TaskAbortedError, match="failed outside its task body"):
            _ = inv.result
        assert rt.add(2, 2).result == 4  # the worker carries on
    assert dropped == ["result", "exception"]
    assert statuses(app, inv.invocation_id)[-1] == InvocationStatus.FAILED


@pytest.mark.parametrize("backend", ALL)
def test_task_past_timeout_is_failed_and_its_worker_replaced(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, workers=1, task_timeout_sec=0.5)
    with running(app) as runner:
        inv = rt.hang(60)
        with pytest.raises(TaskTimeoutError, match="cpp_runner_task_timeout_sec=0.5"):
            _ = inv.result
        # The slot was replaced: the single-worker runner still runs tasks.
        assert rt.add(4, 4).result == 8
        # The hung task was interrupted (it never reaches SUCCESS).
        wait_until(lambda: runner._engine.running() == [])
    assert inv.status == InvocationStatus.FAILED
    assert InvocationStatus.SUCCESS not in statuses(app, inv.invocation_id)


@pytest.mark.parametrize("backend", ALL)
def test_waiting_tasks_do_not_deadlock_a_single_worker(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, workers=1)
    with running(app) as runner:
        assert rt.grandparent(3).result == (0 + 2 + 4) + 1
        assert rt.parent_sum(5).result == 20
        # Extra workers retire once nothing waits.
        wait_until(lambda: runner._engine.live_workers == 1 and runner._engine.waiting == 0)


@pytest.mark.parametrize("backend", ALL)
def test_a_finish_takes_the_next_invocation_where_the_storage_does_both_at_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """On SQLite a worker's finish also takes and starts its next invocation, in the
    same transaction (Lifecycle.FinishThenTake), on Redis in the same pipeline as
    the finish's script; the engine's next take hands it out. On memory every take
    is its own operation."""
    app = build_app(backend, tmp_path, request, workers=2)
    invocations = [rt.add(i, 1) for i in range(60)]  # queued before the runner starts
    with running(app) as runner:
        assert [inv.result for inv in invocations] == [i + 1 for i in range(60)]
        wait_until(lambda: runner._engine.executed >= 60, timeout=10.0)
        taken_ahead = runner._engine.taken_ahead
    if backend == "mem":
        assert taken_ahead == 0
    else:
        assert taken_ahead > 0
    for inv in invocations:
        assert statuses(app, inv.invocation_id) == [
            InvocationStatus.REGISTERED,
            InvocationStatus.PENDING,
            InvocationStatus.RUNNING,
            InvocationStatus.SUCCESS,
        ]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_take_ahead_off_makes_every_take_its_own(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``cpp_runner_take_ahead = False``: finishes take nothing ahead."""
    app = build_app(backend, tmp_path, request, workers=2, config={"cpp_runner_take_ahead": False})
    invocations = [rt.add(i, 1) for i in range(40)]
    with running(app) as runner:
        assert [inv.result for inv in invocations] == [i + 1 for i in range(40)]
        wait_until(lambda: runner._engine.executed >= 40, timeout=10.0)
        assert runner._engine.taken_ahead == 0


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_stop_mid_burst_leaves_nothing_taken_ahead_behind(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Stopping while finishes take ahead: what was taken and not run goes back
    (take_orphans), so a second runner finishes every invocation."""
    app = build_app(backend, tmp_path, request, workers=2)
    invocations = [rt.add(i, 2) for i in range(300)]
    with running(app) as runner:
        wait_until(lambda: runner._engine.executed >= 20, timeout=30.0)
    # The same app (id and storage) in a new app object, as a restarted process has it.
    second = reopened(app, backend, tmp_path, request)
    with running(second):
        wait_until(
            lambda: all(inv.status.is_final() for inv in invocations),
            timeout=60.0,
        )
    assert all(inv.status == InvocationStatus.SUCCESS for inv in invocations)
    assert [inv.result for inv in invocations] == [i + 2 for i in range(300)]


@pytest.mark.parametrize("backend", ALL)
def test_a_prefetching_runner_claims_ahead_and_runs_each_invocation_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``cpp_runner_prefetch = 4``: a take that leaves the queue non-empty claims up
    to 3 more in the same operation (Lifecycle.take_and_claim); each then runs with
    its own RUNNING change, and every status history is pynenc's."""
    app = build_app(backend, tmp_path, request, workers=2, prefetch=4)
    assert app.runner.prefetch == 4
    invocations = [rt.add(i, 1) for i in range(80)]  # queued before the runner starts
    with running(app) as runner:
        assert [inv.result for inv in invocations] == [i + 1 for i in range(80)]
        wait_until(lambda: runner._engine.executed >= 80, timeout=10.0)
        assert runner._engine.prefetched > 0
    # Each ran once: one PENDING and one RUNNING row each (pynenc's recovery tasks
    # run on the same engine, so its execution count is not the tasks').
    for inv in invocations:
        assert statuses(app, inv.invocation_id) == [
            InvocationStatus.REGISTERED,
            InvocationStatus.PENDING,
            InvocationStatus.RUNNING,
            InvocationStatus.SUCCESS,
        ]


@pytest.mark.parametrize("backend", ALL)
def test_a_task_another_orchestrator_of_the_app_learned_runs_freely_is_prefetched(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """pynenc builds an app's components lazily, without a lock: a runner starting its
    engine while a client submits may each build an orchestrator, and the engine then
    takes with one's lifecycle while the claims (which learn that a task runs freely)
    are made by the other. What is learned is shared by every lifecycle over the app's
    storage (``_storage.Learned``), so the engine's takes start the task by themselves
    and prefetch. Here the second orchestrator is made on purpose, after the engine
    started; without the sharing nothing is ever prefetched (the graceful-stop test
    below failed 1 run in 4-7 that way)."""
    app = build_app(backend, tmp_path, request, workers=1, prefetch=4)
    with running(app) as runner:
        first = app.orchestrator
        app._orchestrator = None  # the next use builds another, as a racing thread would
        assert rt.slow_append(str(tmp_path / "warm.log"), "warm", 0.0).result == "warm"
        assert app.orchestrator is not first
        group = rt.slow_append.parallelize(
            [(str(tmp_path / "x.log"), f"t{i}", 0.3) for i in range(4)]
        )
        for inv in group.invocations:
            assert inv.result is not None
        assert runner._engine is not None and runner._engine.prefetched >= 1


@pytest.mark.parametrize("backend", ALL)
def test_a_graceful_stop_routes_back_what_was_prefetched_at_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """One worker, prefetch 4, four slow tasks routed together: a take starts one and
    claims the next ones (PENDING, held). A graceful stop routes those back at once
    (take_held), while the started one still runs, not after it ends nor after
    pynenc's pending recovery; every task then runs once, on a second runner."""
    app = build_app(backend, tmp_path, request, workers=1, prefetch=4)
    log = tmp_path / "executions.log"
    runner = app.runner
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    # Once run, the task is known to run freely (a claim then moves it by itself).
    assert rt.slow_append(str(tmp_path / "warm.log"), "warm", 0.0).result == "warm"
    group = rt.slow_append.parallelize([(str(log), f"t{i}", 2.0) for i in range(4)])
    invs = list(group.invocations)

    def status(inv: Any) -> InvocationStatus:
        return app.orchestrator.get_invocation_status(inv.invocation_id)  # not the cache

    # (pynenc's recovery tasks, queued when the runner starts, are never claimed
    # ahead: a batch may stop at one, so which of the four are held is not fixed.)
    wait_until(
        lambda: (
            any(status(i) == InvocationStatus.RUNNING for i in invs)
            and any(status(i) == InvocationStatus.PENDING for i in invs)
        ),
        timeout=10.0,
    )
    started = [i for i in invs if status(i) == InvocationStatus.RUNNING]
    held = [i for i in invs if status(i) == InvocationStatus.PENDING]
    assert len(started) == 1 and held
    assert runner._engine.prefetched >= len(held)
    runner.stop_runner_loop()
    # Routed back before the started task ends (it runs 2 s).
    assert status(started[0]) == InvocationStatus.RUNNING
    for inv in held:
        assert status(inv).is_available_for_run(), status(inv)
        assert statuses(app, inv.invocation_id)[-3:] == [
            InvocationStatus.PENDING,
            InvocationStatus.KILLED,
            InvocationStatus.REROUTED,
        ]
    thread.join(30)
    assert not thread.is_alive()
    assert status(started[0]) == InvocationStatus.SUCCESS
    if backend == "mem":  # its storage lives in this process, with the app
        return
    second = reopened(app, backend, tmp_path, request)
    with running(second):
        assert sorted(inv.result for inv in invs) == [f"t{i}" for i in range(4)]
    assert sorted(log.read_text().split()) == ["t0", "t1", "t2", "t3"], "each ran once"


@pytest.mark.parametrize("backend", ["mem", "sqlite"])
def test_graceful_stop_lets_running_invocations_finish(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, workers=2)
    log = tmp_path / "executions.log"
    runner = app.runner
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    invs = [rt.slow_append(str(log), f"t{i}", 1.0) for i in range(2)]
    wait_until(lambda: all(i.status == InvocationStatus.RUNNING for i in invs))
    runner.stop_runner_loop()
    late = rt.add(1, 1)  # routed after the stop: stays queued for another runner
    thread.join(30)
    assert not thread.is_alive()
    for inv in invs:
        assert inv.status == InvocationStatus.SUCCESS
    assert late.status == InvocationStatus.REGISTERED
    assert sorted(log.read_text().split()) == ["t0", "t1"]


@pytest.mark.parametrize("backend", ["mem", "sqlite"])
def test_immediate_stop_kills_and_reroutes_running_invocations(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, workers=2)
    runner = app.runner
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    invs = [rt.hang(60) for _ in range(2)]
    wait_until(
        lambda: all(InvocationStatus.RUNNING in statuses(app, i.invocation_id) for i in invs)
    )
    runner.stop_runner_loop()  # graceful...
    runner.stop_runner_loop()  # ...then immediate
    thread.join(30)
    assert not thread.is_alive()
    for inv in invs:
        assert InvocationStatus.KILLED in statuses(app, inv.invocation_id)
        assert inv.status == InvocationStatus.REROUTED
    # Queued again for another runner (the count may include pynenc's cron core tasks).
    assert app.broker.count_invocations() >= 2


def test_broker_that_is_not_pynenc_cpp_is_polled(tmp_path: Path) -> None:
    app = (
        PynencBuilder()
        .app_id(f"cpp-runner-fallback-{uuid.uuid4().hex[:8]}")
        .cpp_mem()
        .cpp_runner(workers=2)
        .custom_config(broker_cls="MemBroker", **FAST)
        .build()
    )
    rt.use(app)
    assert type(app.broker).__name__ == "MemBroker"
    with running(app) as runner:
        assert runner._engine_broker() is None
        assert [rt.add(i, i).result for i in range(10)] == [2 * i for i in range(10)]
        assert rt.grandparent(2).result == 3


def test_config_from_environment_selects_cpp_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNENC__RUNNER_CLS", "CppRunner")
    monkeypatch.setenv("PYNENC__CPP_RUNNER_WORKERS", "3")
    monkeypatch.setenv("PYNENC__CPP_RUNNER_TASK_TIMEOUT_SEC", "7.5")
    app = Pynenc(config_values={"app_id": f"cpp-runner-env-{uuid.uuid4().hex[:8]}"})
    assert isinstance(app.runner, CppRunner)
    assert app.runner.max_parallel_slots == 3
    assert app.runner.conf.cpp_runner_task_timeout_sec == 7.5
    assert app.runner.mem_compatible()
    assert app.runner.get_active_child_runner_ids() == []


def test_builder_rejects_bad_runner_options() -> None:
    with pytest.raises(ValueError, match="workers"):
        PynencBuilder().cpp_runner(workers=-1)
    with pytest.raises(TypeError, match="workers"):
        PynencBuilder().cpp_runner(workers="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="task_timeout_sec"):
        PynencBuilder().cpp_runner(task_timeout_sec=-1)
    with pytest.raises(ValueError, match="prefetch"):
        PynencBuilder().cpp_runner(prefetch=0)
    with pytest.raises(TypeError, match="prefetch"):
        PynencBuilder().cpp_runner(prefetch="4")  # type: ignore[arg-type]


def test_a_bad_prefetch_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNENC__RUNNER_CLS", "CppRunner")
    monkeypatch.setenv("PYNENC__CPP_RUNNER_PREFETCH", "0")
    app = Pynenc(config_values={"app_id": f"cpp-runner-env-{uuid.uuid4().hex[:8]}"})
    with pytest.raises(
        ValueError,
        match=r"cpp_runner_prefetch='0' \(from env PYNENC__CPP_RUNNER_PREFETCH\): "
        r"expected a whole number from 1 to 1000",
    ):
        _ = app.runner.prefetch


# ---------------------------------------------------------------- subprocesses


def runner_env(app: Pynenc, backend: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a ``pynenc runner start`` child using the same storage as `app`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    cfg = app.config_values or {}
    stem = {"sqlite": "Sqlite", "redis": "Redis"}[backend]
    for kind in ("broker", "orchestrator", "state_backend", "trigger", "client_data_store"):
        env[f"PYNENC__{kind.upper()}_CLS"] = cfg[f"{kind}_cls"]
    assert cfg["broker_cls"] == f"Cpp{stem}Broker"
    env["PYNENC__APP_ID"] = app.app_id
    env["PYNENC__CPP_NATIVE"] = str(cfg.get("cpp_native", "true"))
    env["PYNENC__RUNNER_CLS"] = "CppRunner"
    env["PYNENC__CPP_RUNNER_WORKERS"] = "2"
    env["PYNENC__LOGGING_LEVEL"] = "info"
    env["PYNENC__RUNNER_LOOP_SLEEP_TIME_SEC"] = "0.01"
    if backend == "sqlite":
        env["PYNENC__CPP_SQLITE_PATH"] = cfg["cpp_sqlite_path"]
    else:
        env["PYNENC__CPP_REDIS_URL"] = cfg["cpp_redis_url"]
    env.update(extra or {})
    return env


def start_runner(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pynenc", "--app", "tests_py.runner_tasks", "runner", "start"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # A group of its own: stop() kills the worker processes pynenc's
            # runners fork along with it (killing the leader alone orphaned them).
            start_new_session=True,
            preexec_fn=orphan_guard(),
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Kills the process and, for one started by start_runner (a group leader), every
    process of its group, whatever state it is in."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # no such group: not a group leader
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_pynenc_runner_start_runs_tasks(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request)
    proc = start_runner(runner_env(app, backend), tmp_path / "runner.log")
    try:
        invs = [rt.add(i, 1) for i in range(20)]
        assert [inv.result for inv in invs] == [i + 1 for i in range(20)]
        assert rt.grandparent(2).result == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop(proc)
    assert "CppRunner" in (tmp_path / "runner.log").read_text()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_is_graceful(
    backend: str, signum: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request)
    log = tmp_path / "executions.log"
    proc = start_runner(runner_env(app, backend), tmp_path / "runner.log")
    try:
        invs = [rt.slow_append(str(log), f"g{i}", 1.5) for i in range(2)]
        wait_until(lambda: all(i.status == InvocationStatus.RUNNING for i in invs))
        proc.send_signal(signum)
        assert proc.wait(30) == 0
    finally:
        stop(proc)
    for inv in invs:
        assert inv.status == InvocationStatus.SUCCESS  # finished, none left RUNNING
    assert sorted(log.read_text().split()) == ["g0", "g1"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_second_signal_is_immediate_and_reroutes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request)
    log = tmp_path / "executions.log"
    proc = start_runner(runner_env(app, backend), tmp_path / "runner.log")
    try:
        invs = [rt.slow_append(str(log), f"i{i}", 30) for i in range(2)]
        wait_until(lambda: all(i.status == InvocationStatus.RUNNING for i in invs))
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        stop(proc)
    for inv in invs:
        history = statuses(app, inv.invocation_id)
        assert InvocationStatus.KILLED in history, history
        assert inv.status == InvocationStatus.REROUTED, history
    # Back in the queue, nothing lost (the count may include pynenc's cron core tasks).
    assert app.broker.count_invocations() >= 2


@pytest.mark.parametrize("backend", ALL)
def test_workers_take_and_claim_in_one_engine_call(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A native orchestrator over the engine broker: each worker's retrieve also
    claims and starts (Lifecycle.take_and_start; one script on Redis), and Python
    gets the claim's outcome (claimed_for_run) instead of claiming."""
    app = build_app(backend, tmp_path, request, workers=2)
    orchestrator: Any = app.orchestrator
    taken: list[tuple[str, str]] = []
    claimed_for_run = orchestrator.claimed_for_run

    def spy(invocation_id: Any, runner_ctx: Any, claim: Any) -> Any:
        taken.append((str(invocation_id), claim[0]))
        return claimed_for_run(invocation_id, runner_ctx, claim)

    def no_claim(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("claim_for_run called: the take path was not used")

    orchestrator.claimed_for_run = spy
    orchestrator.claim_for_run = no_claim
    with running(app):
        invocations = [rt.add(i, i) for i in range(20)]
        assert [inv.result for inv in invocations] == [2 * i for i in range(20)]
    ids = {str(inv.invocation_id) for inv in invocations}
    ours = [(i, kind) for i, kind in taken if i in ids]  # the runner's own core tasks aside
    assert {i for i, _ in ours} == ids
    assert len(ours) == len(ids), "an id taken twice"
    # The first of a task needs pynenc's concurrency check; later ones start at once.
    assert sum(kind == "started" for _, kind in ours) >= len(ids) - 2
    history = app.state_backend.get_history(invocations[-1].invocation_id)
    assert [h.status_record.status for h in history] == [
        InvocationStatus.REGISTERED,
        InvocationStatus.PENDING,
        InvocationStatus.RUNNING,
        InvocationStatus.SUCCESS,
    ]


def test_native_claim_for_run_is_used_when_the_orchestrator_has_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app("sqlite", tmp_path, request, workers=2)
    runner = app.runner
    claimed: list[str] = []

    def claim_for_run(invocation_id: str, runner_ctx: Any, start: bool = False) -> Any:
        claimed.append(invocation_id)
        assert runner_ctx is runner.runner_context
        assert start  # the runner runs what it claims at once, on the same thread
        invocation = app.state_backend.get_invocation(invocation_id)
        if invocation.arguments.kwargs == {"x": 2, "y": 2}:
            return None  # "not to be run now": the runner leaves it alone
        app.orchestrator.set_invocation_status(invocation_id, InvocationStatus.PENDING, runner_ctx)
        return invocation

    app.orchestrator.claim_for_run = claim_for_run  # type: ignore[attr-defined]
    # Without the one-step take, the runner claims each id it retrieves.
    app.orchestrator.take_for_runner = lambda runner_ctx: None  # type: ignore[attr-defined]
    with running(app):
        first = rt.add(1, 1)
        assert first.result == 2
        second = rt.add(2, 2)
        wait_until(lambda: second.invocation_id in claimed)
    assert first.invocation_id in claimed
    assert second.status == InvocationStatus.REGISTERED
