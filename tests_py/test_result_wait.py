"""Blocking result wait: ``invocation.result`` and tasks waiting on tasks block in
the engine orchestrator's ``wait_any_final`` instead of sleeping
``invocation_wait_results_sleep_time_sec`` blindly.

The sleep time is set to 30 s while each test gives its results 20 s: a blind
sleep could never deliver them in time, so arriving at all proves the waiter was
woken (no timing assertions on how fast).
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import CppRunner, _core
from pynenc_cpp.errors import InvalidArgument
from pynenc_cpp.orchestrator import _record
from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import running

ALL = ["mem", "sqlite", "redis"]
SLOW_SLEEP = {"runner_loop_sleep_time_sec": 0.01, "invocation_wait_results_sleep_time_sec": 30.0}
RESULT_DEADLINE_SEC = 20.0


def build_app(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    native: bool = True,
    **config: Any,
) -> Pynenc:
    builder = PynencBuilder().app_id(f"wait-{uuid.uuid4().hex[:10]}")
    if backend == "mem":
        builder = builder.cpp_mem(native=native)
    elif backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / "wait.db", native=native)
    else:
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"), native=native)
    app = builder.cpp_runner(workers=1).custom_config(**SLOW_SLEEP, **config).build()
    rt.use(app)
    return app


def within_deadline(fn: Callable[[], Any]) -> Any:
    """fn() in a thread; fails the test if it does not return in RESULT_DEADLINE_SEC."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 (re-raised below)
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(RESULT_DEADLINE_SEC)
    assert not thread.is_alive(), "the result did not arrive: the waiter was not woken"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("backend", ALL)
def test_client_result_wakes_when_the_task_finishes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    with running(app):
        got = within_deadline(lambda: [rt.add(i, 100).result for i in range(5)])
    assert got == [i + 100 for i in range(5)]


@pytest.mark.parametrize("backend", ALL)
def test_result_arrives_with_pynencs_default_status_cache(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # cached_status_time left at pynenc's default (0.1 s): the wait returns while the
    # invocation's cached status is still non-final; the loop must still end.
    app = build_app(backend, tmp_path, request)
    with running(app):
        got = within_deadline(lambda: [rt.add(i, 7).result for i in range(3)])
    assert got == [7, 8, 9]


#: A status cache longer than RESULT_DEADLINE_SEC: a result that waited for the cache
#: to lapse could not arrive in time.
LONG_STATUS_CACHE_SEC = 60.0


@pytest.mark.parametrize("native", [True, False], ids=["native", "mixed"])
@pytest.mark.parametrize("backend", ALL)
def test_a_wait_that_finds_the_result_final_ends_the_status_cache(
    backend: str, native: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # pynenc's invocation.result loops while its invocation's cached status is not
    # final; the wait that found the invocation final puts the final status there,
    # so a result, a failure and a group's results arrive long before the cache lapses.
    app = build_app(
        backend, tmp_path, request, native=native, cached_status_time=LONG_STATUS_CACHE_SEC
    )
    with running(app):
        invs = [rt.hang(0.2), rt.add(1, 2)]
        assert within_deadline(lambda: [inv.result for inv in invs]) == ["finished", 3]
        assert all(inv.status.is_final() for inv in invs)
        failed = rt.boom()
        with pytest.raises(ValueError, match="boom from the task"):
            within_deadline(lambda: failed.result)
        group = rt.add.parallelize([(i, 10) for i in range(4)])
        assert sorted(within_deadline(lambda: list(group.results))) == [10, 11, 12, 13]


@pytest.mark.parametrize("backend", ALL)
def test_fetched_by_id_or_awaited_by_a_task_the_result_is_not_held_by_the_status_cache(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The object a client rebuilds from an id (the state backend's get_invocation,
    # the task's own object gone) is one the wait updates; and inside the runner (a
    # task waiting on the tasks it called) the same.
    app = build_app(backend, tmp_path, request, cached_status_time=LONG_STATUS_CACHE_SEC)
    with running(app):
        invocation_id = rt.hang(0.2).invocation_id
        fetched = app.state_backend.get_invocation(invocation_id)
        assert within_deadline(lambda: fetched.result) == "finished"
        assert within_deadline(lambda: rt.parent_sum(4).result) == sum(i + i for i in range(4))


@pytest.mark.parametrize("backend", ALL)
def test_task_waiting_on_tasks_wakes_inside_the_runner(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    with running(app):
        assert within_deadline(lambda: rt.parent_sum(4).result) == sum(i + i for i in range(4))


@pytest.mark.parametrize("backend", ALL)
def test_failed_task_result_raises_promptly(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    with running(app):
        inv = rt.boom()
        with pytest.raises(ValueError, match="boom from the task"):
            within_deadline(lambda: inv.result)


def test_runner_without_engine_orchestrator_falls_back_to_sleeping() -> None:
    app = (
        PynencBuilder()
        .app_id(f"wait-fallback-{uuid.uuid4().hex[:8]}")
        .memory()
        .cpp_runner(workers=1)
        .custom_config(invocation_wait_results_sleep_time_sec=0.01)
        .build()
    )
    runner = app.runner
    assert isinstance(runner, CppRunner)
    assert not isinstance(getattr(app.orchestrator, "_engine", None), _core.Orchestrator)
    assert runner._wait_any_final(["some-id"]) is False  # type: ignore[list-item]
    runner.waiting_for_results(None, ["some-id"])  # type: ignore[list-item]  (sleeps, returns)


def test_wait_any_final_binding_rejects_bad_input() -> None:
    orch = _core.Orchestrator("memory://", f"wait-bind-{uuid.uuid4().hex[:8]}")
    with pytest.raises(InvalidArgument):
        orch.wait_any_final([], 0.1)
    with pytest.raises(InvalidArgument):
        orch.wait_any_final(["a"], math.nan)
    assert orch.wait_any_final(["unknown"], 0.0) is None
    orch.register([("a", "mod.task", "mod.task:a")], "r")
    assert orch.wait_any_final(["a"], -1.0) is None
    for status in ("pending", "running", "success"):
        orch.transition("a", status, "r")
    assert orch.wait_any_final(["unknown", "a"], math.inf) == "a"


class _CountingLifecycle:
    """Delegates to the engine lifecycle, logging ``read_final`` (and
    ``read_final_ahead``) and ``wait_any_final`` calls as (thread, call, invocation id, the wait's record)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.log: list[tuple[int, str, str, Any]] = []
        self.armed: list[tuple[str, bool]] = []  # each read's (id, arm), in order

    def read_final(self, invocation_id: str, max_result_bytes: int, arm: bool = False) -> Any:
        self.log.append((threading.get_ident(), "read", invocation_id, None))
        self.armed.append((invocation_id, arm))
        return self._inner.read_final(invocation_id, max_result_bytes, arm)

    def read_final_ahead(
        self, invocation_id: str, ahead: list[str], max_result_bytes: int, arm: bool = False
    ) -> Any:
        self.log.append((threading.get_ident(), "read", invocation_id, None))
        self.armed.append((invocation_id, arm))
        return self._inner.read_final_ahead(invocation_id, ahead, max_result_bytes, arm)

    def wait_any_final(self, ids: list[str], *args: Any) -> Any:
        got = self._inner.wait_any_final(ids, *args)
        if got is not None:
            self.log.append((threading.get_ident(), "wait", got[0], got[1]))
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.parametrize("backend", ALL)
def test_the_status_read_after_a_wait_comes_with_the_wait(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Native mode: the wait reads the final record and result in the same engine call
    # (on Redis in the wait's own round trips), so the status read pynenc's
    # invocation.result makes after it reads nothing, and the result is the task's.
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    orchestrator = app.orchestrator
    lifecycle = orchestrator._lifecycle()  # type: ignore[attr-defined]
    assert lifecycle is not None, "native mode expected"
    counting = _CountingLifecycle(lifecycle)
    monkeypatch.setattr(orchestrator, "_lifecycle", lambda: counting)
    with running(app):
        # hang(0.3) takes long enough that the client is blocked when it ends.
        invs = [rt.hang(0.3) for _ in range(3)]
        got = within_deadline(lambda: [inv.result for inv in invs])
    assert got == ["finished"] * 3
    waits = [(i, e) for i, e in enumerate(counting.log) if e[1] == "wait" and e[3] is not None]
    assert waits, "no wait came back with its record"
    ids = {inv.invocation_id for inv in invs}
    for at, (thread, _, inv_id, _) in waits:
        assert inv_id in ids
        # The waiting thread's next call is not a read of that id: the wait read it.
        after = [e for e in counting.log[at + 1 :] if e[0] == thread]
        assert not after or after[0][1:3] != ("read", inv_id), counting.log


@pytest.mark.parametrize("cache", [0, 0.1])
def test_the_first_status_read_arms_the_wait_that_follows(
    cache: float, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis, native: pynenc's result reads the status of the invocation this thread
    # submitted, then waits; that first read registers the wait (arm=True), later
    # ones do not, and the result is the task's.
    app = build_app("redis", tmp_path, request, cached_status_time=cache)
    orchestrator = app.orchestrator
    counting = _CountingLifecycle(orchestrator._lifecycle())  # type: ignore[attr-defined]
    monkeypatch.setattr(orchestrator, "_lifecycle", lambda: counting)
    with running(app):
        for k in range(3):

            def submit_and_wait() -> tuple[str, Any]:
                inv = rt.hang(0.2)  # submitted by the thread that reads its result
                return inv.invocation_id, inv.result

            invocation_id, result = within_deadline(submit_and_wait)
            assert result == "finished"
            arms = [arm for i, arm in counting.armed if i == invocation_id]
            assert arms and arms[0] is True, (k, arms)
            assert not any(arms[1:]), (k, arms)


@pytest.mark.parametrize("backend", ["redis"])
def test_a_wait_with_its_record_serves_one_read_only(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # What a wait read is served to the very next status read of the thread, once,
    # and only for its id: any other read drops it; the record is the stored one.
    app = build_app(backend, tmp_path, request, cached_status_time=0)
    orchestrator = app.orchestrator
    with running(app):
        a, b = rt.add(1, 2), rt.add(3, 4)
        assert within_deadline(lambda: (a.result, b.result)) == (3, 7)
        assert orchestrator.wait_any_final([a.invocation_id], 5.0) == a.invocation_id  # type: ignore[attr-defined]
        note = orchestrator._final_seen.note  # type: ignore[attr-defined]
        assert note is not None and note[0] == a.invocation_id and note[2] == "3"
        stored = _record(orchestrator._engine.status_record(a.invocation_id))  # type: ignore[attr-defined]
        record = orchestrator.get_invocation_status_record(a.invocation_id)
        assert orchestrator._final_seen.note is None  # type: ignore[attr-defined]
        assert record == stored
        assert orchestrator.wait_any_final([a.invocation_id], 5.0) == a.invocation_id  # type: ignore[attr-defined]
        orchestrator.get_invocation_status_record(b.invocation_id)  # another id: dropped
        assert orchestrator._final_seen.note is None  # type: ignore[attr-defined]
        # A purge begun after the wait, or time passed: the read goes to the engine.
        lifecycle = orchestrator._lifecycle()  # type: ignore[attr-defined]
        counting = _CountingLifecycle(lifecycle)
        orchestrator._lifecycle = lambda: counting  # type: ignore[attr-defined]
        for stale in ("purge", "time"):
            assert orchestrator.wait_any_final([a.invocation_id], 5.0) == a.invocation_id  # type: ignore[attr-defined]
            note = orchestrator._final_seen.note  # type: ignore[attr-defined]
            if stale == "purge":
                app.state_backend._purges += 1  # type: ignore[attr-defined]
            else:
                orchestrator._final_seen.note = (*note[:4], note[4] - 2.0)  # type: ignore[attr-defined]
            before = len(counting.log)
            assert orchestrator.get_invocation_status_record(a.invocation_id) == stored
            assert [e[1:3] for e in counting.log[before:]] == [("read", a.invocation_id)]


def test_lifecycle_wait_any_final_binding_rejects_bad_input(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app("mem", tmp_path, request)
    lifecycle = app.orchestrator._lifecycle()  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument):
        lifecycle.wait_any_final([], 0.1, 1024)
    with pytest.raises(InvalidArgument):
        lifecycle.wait_any_final(["a"], math.nan, 1024)
    assert lifecycle.wait_any_final(["unknown"], 0.0, 1024) is None
