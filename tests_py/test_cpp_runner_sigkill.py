"""A CppRunner process is SIGKILLed while it runs invocations: after pynenc's
recovery of RUNNING invocations of dead runners, every one of them completes
on another runner; none is lost, none reaches SUCCESS twice.

Real processes (``pynenc runner start``), a real SQLite file / redis-server and
a real SIGKILL. Each execution appends one line to a file (O_APPEND), so the
test counts executions independently of the status history.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus
from pynenc.runner.runner_context import RunnerContext

from pynenc_cpp import CppRunner
from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import FAST, runner_env, start_runner, stop, wait_until
from tests_py.test_cpp_runner import build_app as build_runner_app

DEAD_AFTER_MINUTES = "0.05"  # 3 s without a heartbeat: the runner is dead
SLOW_SEC = 4.0
N_INVOCATIONS = 4


def build_app(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Pynenc:
    builder = PynencBuilder().app_id(f"cpp-sigkill-{uuid.uuid4().hex[:10]}")
    if backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "sigkill.db")
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"))
    app = (
        builder.cpp_runner(workers=N_INVOCATIONS)
        .custom_config(runner_considered_dead_after_minutes=float(DEAD_AFTER_MINUTES), **FAST)
        .build()
    )
    rt.use(app)
    return app


def recovery_task(app: Pynenc):  # noqa: ANN201 - pynenc's Task
    """pynenc's own core task that recovers RUNNING invocations of dead runners."""
    app.register_core_tasks()
    return next(
        task
        for task in app._tasks.values()
        if task.task_id.key.endswith("recover_running_invocations")
    )


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_sigkilled_runner_invocations_complete_once_elsewhere(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request)
    log = tmp_path / "executions.log"
    env = runner_env(
        app,
        backend,
        {
            "PYNENC__CPP_RUNNER_WORKERS": str(N_INVOCATIONS),
            "PYNENC__RUNNER_CONSIDERED_DEAD_AFTER_MINUTES": DEAD_AFTER_MINUTES,
        },
    )
    first = start_runner(env, tmp_path / "runner1.log")
    second = None
    try:
        invs = [rt.slow_append(str(log), f"inv{i}", SLOW_SEC) for i in range(N_INVOCATIONS)]
        wait_until(lambda: all(i.status == InvocationStatus.RUNNING for i in invs))
        # RUNNING is stored just before the body starts: wait until every body has
        # written its line, so the kill lands while they run.
        wait_until(lambda: log.exists() and len(log.read_text().split()) == N_INVOCATIONS)
        owners = {
            app.orchestrator.get_invocation_status_record(i.invocation_id).runner_id for i in invs
        }
        assert len(owners) == 1  # all on the first runner
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        assert all(i.status == InvocationStatus.RUNNING for i in invs)  # orphaned

        second = start_runner(env, tmp_path / "runner2.log")
        recover = recovery_task(app)
        deadline = time.monotonic() + 120
        while not all(i.status == InvocationStatus.SUCCESS for i in invs):
            assert time.monotonic() < deadline, [i.status for i in invs]
            recover()  # routed; the second runner runs it (no-op until the first is dead)
            time.sleep(1.0)
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        stop(first)
        if second is not None:
            stop(second)

    executions = Counter(log.read_text().split())
    for i, inv in enumerate(invs):
        history = [h.status_record.status for h in app.state_backend.get_history(inv.invocation_id)]
        assert history.count(InvocationStatus.SUCCESS) == 1, history
        assert InvocationStatus.RUNNING_RECOVERY in history, history
        assert inv.result == f"inv{i}"
        # Once on the killed runner, once after recovery: never a third time.
        assert executions[f"inv{i}"] == 2, executions
        final_owner = app.orchestrator.get_invocation_status_record(inv.invocation_id)
        assert final_owner.status == InvocationStatus.SUCCESS


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_live_cpprunner_recovers_a_dead_runners_invocations_by_itself(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Native recovery: no recovery task is routed and pynenc's cron cannot fire
    during the test; the second runner alone moves the dead runner's RUNNING
    invocations to RUNNING_RECOVERY and runs them, once the dead-after time
    (3 s) passed."""
    app = build_app(backend, tmp_path, request)
    log = tmp_path / "executions.log"
    env = runner_env(
        app,
        backend,
        {
            "PYNENC__CPP_RUNNER_WORKERS": str(N_INVOCATIONS),
            "PYNENC__RUNNER_CONSIDERED_DEAD_AFTER_MINUTES": DEAD_AFTER_MINUTES,
            # The cron backstop never fires within the test (once a year).
            "PYNENC__RECOVER_RUNNING_INVOCATIONS_CRON": "0 0 1 1 *",
            "PYNENC__RECOVER_PENDING_INVOCATIONS_CRON": "0 0 1 1 *",
        },
    )
    first = start_runner(env, tmp_path / "runner1.log")
    second = None
    try:
        invs = [rt.slow_append(str(log), f"inv{i}", SLOW_SEC) for i in range(N_INVOCATIONS)]
        wait_until(lambda: all(i.status == InvocationStatus.RUNNING for i in invs))
        # RUNNING is stored just before the body starts: wait until every body has
        # written its line, so the kill lands while they run.
        wait_until(lambda: log.exists() and len(log.read_text().split()) == N_INVOCATIONS)
        owners = {
            app.orchestrator.get_invocation_status_record(i.invocation_id).runner_id for i in invs
        }
        assert len(owners) == 1  # all on the first runner
        second = start_runner(env, tmp_path / "runner2.log")
        # The second runner is up (its heartbeat is in) before the first dies.
        wait_until(lambda: len(app.orchestrator.get_active_runners()) >= 2)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        killed_at = time.monotonic()
        deadline = killed_at + 90
        while not all(i.status == InvocationStatus.SUCCESS for i in invs):
            assert time.monotonic() < deadline, [i.status for i in invs]
            time.sleep(0.1)
        print(f"native recovery: all final {time.monotonic() - killed_at:.1f} s after SIGKILL")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        stop(first)
        if second is not None:
            stop(second)
    executions = Counter(log.read_text().split())
    for i, inv in enumerate(invs):
        history = [h.status_record.status for h in app.state_backend.get_history(inv.invocation_id)]
        assert history.count(InvocationStatus.SUCCESS) == 1, history
        assert InvocationStatus.RUNNING_RECOVERY in history, history
        assert inv.result == f"inv{i}"
        assert executions[f"inv{i}"] == 2, executions  # on the killed runner, then once more
    # Recovered by the live CppRunner itself, not by pynenc's recovery core task.
    text = (tmp_path / "runner2.log").read_text(errors="replace")
    recovered = [
        int(n) for n in re.findall(r"recovered (\d+) invocation\(s\) \(running_recovery\)", text)
    ]
    assert sum(recovered) == N_INVOCATIONS, text[-2000:]


def test_native_recovery_waits_a_dead_after_time_once_its_own_heartbeats_stalled(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A runner whose own heartbeats stopped for half a dead-after time or more (it
    was frozen, or the storage stalled every writer) declares nobody dead until its
    heartbeats have been steady for a whole dead-after time: the others it would
    find stale were stalled too. A fresh start has seen no stall."""
    app = build_app("sqlite", tmp_path, request)  # dead after 3 s; ticks of 0.75 s
    runner = CppRunner(app)
    assert runner._steady_heartbeats(now=100.0)  # fresh start
    assert runner._steady_heartbeats(now=100.75)
    assert runner._steady_heartbeats(now=101.5)
    assert not runner._steady_heartbeats(now=106.0)  # a 4.5 s gap: stalled
    assert not runner._steady_heartbeats(now=107.0)
    assert not runner._steady_heartbeats(now=108.0)
    assert runner._steady_heartbeats(now=109.0)  # steady for 3 s again
    assert runner._steady_heartbeats(now=110.5)  # 1.5 s: within three ticks of 0.75 s
    assert not runner._steady_heartbeats(now=113.0)  # 2.5 s: more than three ticks


@pytest.mark.parametrize("backend", ["mem", "sqlite", "redis"])
def test_native_recovery_takes_a_dead_runners_pending_claims_at_dead_after_time(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A runner killed between claiming an invocation (PENDING) and running it:
    its claim is recovered once the runner counts as dead (here 0.6 s), not after
    ``max_pending_seconds`` (an hour here). The PENDING claims of a live runner,
    and of an owner that never heartbeated (pynenc's own runners claim under such
    ids), are left to the age limit."""
    app = build_runner_app(
        backend,
        tmp_path,
        request,
        config={"runner_considered_dead_after_minutes": 0.01, "max_pending_seconds": 3600},
    )
    owners = ["dead-runner", "live-runner", "never-heartbeated"]
    app.orchestrator.register_runner_heartbeats(owners[:2])
    invs = {owner: rt.add(1, n) for n, owner in enumerate(owners)}
    for owner, inv in invs.items():
        ctx = RunnerContext(runner_cls="TestRunner", runner_id=owner, pid=1, hostname="h")
        app.orchestrator.set_invocation_status(inv.invocation_id, InvocationStatus.PENDING, ctx)
    runner = CppRunner(app)
    runner._recover_dead_runners()
    assert all(i.status == InvocationStatus.PENDING for i in invs.values())  # nobody dead yet
    time.sleep(0.8)
    app.orchestrator.register_runner_heartbeats(["live-runner"])
    queued = app.broker.count_invocations()
    runner._recover_dead_runners()
    assert app.broker.count_invocations() == queued + 1  # the recovered one, routed again

    def statuses(inv) -> list[InvocationStatus]:  # noqa: ANN001
        return [h.status_record.status for h in app.state_backend.get_history(inv.invocation_id)]

    recovered = statuses(invs["dead-runner"])
    assert recovered[-2:] == [InvocationStatus.PENDING_RECOVERY, InvocationStatus.REROUTED]
    assert invs["live-runner"].status == InvocationStatus.PENDING
    assert invs["never-heartbeated"].status == InvocationStatus.PENDING


@pytest.mark.parametrize("native", [True, False], ids=["native", "mixed"])
@pytest.mark.parametrize("backend", ["mem", "sqlite", "redis"])
def test_native_recovery_leaves_an_invocation_a_live_runner_started_since_it_looked(
    backend: str, native: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The race the chaos suite caught (one body run twice): a sweep finds X RUNNING
    under a dead runner; before its change, another runner recovers X and a live one
    claims and starts it again. RUNNING_RECOVERY overrides ownership, so an unfenced
    change would take X from the live runner, which then runs it a second time. The
    sweep's change is fenced on the owner it found dead: here the race happens between
    its read of X's record and its change (the worst place), and X stays the live
    runner's."""
    app = build_runner_app(
        backend,
        tmp_path,
        request,
        config={
            "runner_considered_dead_after_minutes": 0.01,
            "max_pending_seconds": 3600,
            "cpp_native": "true" if native else "false",
        },
    )
    orch = app.orchestrator

    def ctx(runner_id: str) -> RunnerContext:
        return RunnerContext(runner_cls="TestRunner", runner_id=runner_id, pid=1, hostname="h")

    orch.register_runner_heartbeats(["dead-runner"])
    inv = rt.add(2, 3)
    iid = inv.invocation_id
    orch.set_invocation_status(iid, InvocationStatus.PENDING, ctx("dead-runner"))
    orch.set_invocation_status(iid, InvocationStatus.RUNNING, ctx("dead-runner"))
    time.sleep(0.8)  # dead-after is 0.6 s
    orch.register_runner_heartbeats(["live-runner"])
    read_record = orch.get_invocation_status_record

    def read_then_race(invocation_id):  # noqa: ANN001, ANN202
        seen = read_record(invocation_id)  # RUNNING under the dead runner
        if invocation_id == iid and seen.runner_id == "dead-runner":
            for status, runner in [
                (InvocationStatus.RUNNING_RECOVERY, "rescuer"),
                (InvocationStatus.REROUTED, "rescuer"),
                (InvocationStatus.PENDING, "live-runner"),
                (InvocationStatus.RUNNING, "live-runner"),
            ]:
                orch.set_invocation_status(iid, status, ctx(runner))
        return seen

    request.getfixturevalue("monkeypatch").setattr(
        orch, "get_invocation_status_record", read_then_race
    )
    queued = app.broker.count_invocations()
    CppRunner(app)._recover_dead_runners()
    record = read_record(iid)
    assert (record.status, record.runner_id) == (InvocationStatus.RUNNING, "live-runner")
    history = [h.status_record.status for h in app.state_backend.get_history(iid)]
    assert history[-1] == InvocationStatus.RUNNING
    assert history.count(InvocationStatus.RUNNING_RECOVERY) == 1  # the rescuer's only
    assert app.broker.count_invocations() == queued  # not routed again
