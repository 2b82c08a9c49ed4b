"""Status reads that read ahead (``pynenc_cpp._read_ahead``): on Redis a thread that
reads the results of invocations it submitted, one by one, reads the next ones
already final in the same round trip, and is served them without another read;
never a record that a purge since, or time, made stale."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc
from pynenc.exceptions import InvocationNotFoundError

from pynenc_cpp._read_ahead import _MAX_TRIES, READ_AHEAD_IDS, ReadAhead
from pynenc_cpp.orchestrator import _record
from tests_py import runner_tasks as rt
from tests_py.test_cpp_runner import running
from tests_py.test_result_wait import _CountingLifecycle, build_app

DEADLINE_SEC = 20.0


# ---- the class on its own ----------------------------------------------------------


def _raw(status: str) -> tuple[str, int, None]:
    return (status, 1, None)


def test_candidates_are_the_later_submissions_not_read_yet() -> None:
    ahead = ReadAhead(ttl_sec=60.0, limit=3)
    ahead.submitted(["a", "b", "c", "d", "e"])
    assert ahead.candidates("zz") == []  # not submitted by this thread
    assert ahead.candidates("a") == ["b", "c", "d"]
    ahead.read(["b", "c", "d"], True, [("c", _raw("success"), "1")], generation=0)
    # c was found final: kept, no longer a candidate; b and d were not final.
    assert ahead.candidates("b") == ["d", "e"]
    kept = ahead.take("c", generation=0)
    assert kept == (_raw("success"), "1", 0)
    assert ahead.take("c", generation=0) is None  # served once


def test_nothing_is_kept_when_the_status_asked_for_was_not_final() -> None:
    ahead = ReadAhead(ttl_sec=60.0, limit=2)
    ahead.submitted(["a", "b", "c"])
    candidates = ahead.candidates("a")
    ahead.read(candidates, False, [], generation=0)
    assert ahead.take("b", generation=0) is None
    assert ahead.candidates("b") == ["c"]  # and its tries were not counted


def test_an_id_not_final_is_read_ahead_a_bounded_number_of_times() -> None:
    readers = [f"r{k}" for k in range(_MAX_TRIES)]
    ahead = ReadAhead(ttl_sec=60.0, limit=len(readers) + 1)
    ahead.submitted([*readers, "slow"])
    for reader in readers:
        candidates = ahead.candidates(reader)
        assert "slow" in candidates
        ahead.read(candidates, True, [], generation=0)  # none of them final
    assert "slow" not in ahead._thread().position  # given up on
    assert ahead._thread().tries == {}


def test_a_kept_record_is_stale_after_a_purge_or_its_time_to_live() -> None:
    ahead = ReadAhead(ttl_sec=0.05, limit=4)
    ahead.submitted(["a", "b", "c"])
    ahead.read(
        ahead.candidates("a"), True, [("b", _raw("success"), "2"), ("c", _raw("failed"), None)], 7
    )
    assert ahead.take("b", generation=8) is None  # a purge began after the read
    time.sleep(0.1)
    assert ahead.take("c", generation=7) is None  # older than its time to live


def test_each_thread_reads_ahead_of_its_own_submissions() -> None:
    ahead = ReadAhead(ttl_sec=60.0, limit=4)
    ahead.submitted(["a", "b"])
    seen: dict[str, Any] = {}

    def other() -> None:
        seen["candidates"] = ahead.candidates("a")
        ahead.read(["b"], True, [("b", _raw("success"), "1")], 0)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen["candidates"] == []
    assert ahead.take("b", generation=0) is None  # kept on the other thread only
    assert ahead.candidates("a") == ["b"]


def test_the_submissions_kept_are_bounded() -> None:
    from pynenc_cpp import _read_ahead

    ahead = ReadAhead(ttl_sec=60.0, limit=2)
    many = [f"i{k}" for k in range(2 * _read_ahead._MAX_SUBMITTED + 10)]
    ahead.submitted(many)
    state = ahead._thread()
    assert len(state.ids) <= 2 * _read_ahead._MAX_SUBMITTED
    assert len(state.position) == len(state.ids)
    assert ahead.candidates(many[0]) == []  # dropped with the oldest half
    last = many[-3]
    assert ahead.candidates(last) == many[-2:]


# ---- on the engine ----------------------------------------------------------------


def _wait_final(app: Pynenc, invocation_ids: list[str]) -> None:
    """Until each id is final, read from the engine directly (no status read of
    the orchestrator, which would read ahead)."""
    engine = app.orchestrator._engine  # type: ignore[attr-defined]
    deadline = time.monotonic() + DEADLINE_SEC
    for invocation_id in invocation_ids:
        while not _record(engine.status_record(invocation_id)).status.is_final():
            assert time.monotonic() < deadline, f"{invocation_id} not final in time"
            time.sleep(0.01)


def _counting(app: Pynenc, monkeypatch: pytest.MonkeyPatch) -> _CountingLifecycle:
    orchestrator = app.orchestrator
    lifecycle = orchestrator._lifecycle()  # type: ignore[attr-defined]
    assert lifecycle is not None, "native mode expected"
    counting = _CountingLifecycle(lifecycle)
    monkeypatch.setattr(orchestrator, "_lifecycle", lambda: counting)
    return counting


def test_results_read_one_by_one_are_read_ahead_on_redis(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = build_app("redis", tmp_path, request, cached_status_time=0)
    n = 3 * READ_AHEAD_IDS + 5
    with running(app):
        invs = [rt.add(i, i) for i in range(n)]
        failing = rt.boom()
        _wait_final(app, [*(inv.invocation_id for inv in invs), failing.invocation_id])
        counting = _counting(app, monkeypatch)
        assert [inv.result for inv in invs] == [2 * i for i in range(n)]
        with pytest.raises(ValueError):
            _ = failing.result  # read ahead as FAILED: its exception read on its own
    # This thread's reads (the runner's thread in this process reads its own, such as
    # the status of a core task its start-up triggers ran).
    me = threading.get_ident()
    reads = [e for e in counting.log if e[1] == "read" and e[0] == me]
    # One read per READ_AHEAD_IDS + 1 results (the first and its ahead ids).
    assert len(reads) <= -(-(n + 1) // (READ_AHEAD_IDS + 1)) + 1, reads
    assert {e[2] for e in reads} <= {inv.invocation_id for inv in [*invs, failing]}


def test_a_purge_drops_what_was_read_ahead(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = build_app("redis", tmp_path, request, cached_status_time=0)
    with running(app):
        a, b = rt.add(1, 1), rt.add(2, 2)
        _wait_final(app, [a.invocation_id, b.invocation_id])
        assert a.result == 2  # reads b ahead
        assert b.invocation_id in app.orchestrator._read_ahead._thread().kept  # type: ignore[attr-defined]
        counting = _counting(app, monkeypatch)
        app.orchestrator.purge()
        with pytest.raises((InvocationNotFoundError, KeyError)):
            app.orchestrator.get_invocation_status_record(b.invocation_id)
    me = threading.get_ident()  # not the runner's thread, which reads its own invocations
    assert [e[1:3] for e in counting.log if e[0] == me] == [("read", b.invocation_id)]


@pytest.mark.parametrize("backend", ["mem", "sqlite"])
def test_only_redis_reads_ahead(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = build_app(backend, tmp_path, request)
    assert app.orchestrator._read_ahead is None  # type: ignore[attr-defined]


def test_what_is_kept_is_bounded_and_stale_records_leave_it() -> None:
    from pynenc_cpp import _read_ahead

    ahead = ReadAhead(ttl_sec=60.0, limit=READ_AHEAD_IDS)
    ids = [f"i{k}" for k in range(4 * _read_ahead._MAX_KEPT)]
    ahead.submitted(ids)
    for start in range(0, len(ids) - READ_AHEAD_IDS, READ_AHEAD_IDS + 1):
        candidates = ahead.candidates(ids[start])
        ahead.read(candidates, True, [(c, _raw("success"), "1") for c in candidates], 0)
        assert len(ahead._thread().kept) <= _read_ahead._MAX_KEPT
    # A read after a purge (a new generation) keeps none of the older records.
    ahead.submitted(["p", "q"])
    ahead.read(ahead.candidates("p"), True, [("q", _raw("success"), "1")], generation=1)
    assert list(ahead._thread().kept) == ["q"]
