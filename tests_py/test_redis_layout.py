"""The Redis key layout across an upgrade: the indexes earlier layouts kept
(orchestrator ``all``, ``status:<s>``, ``times``, ``ttimes:<t>`` and
``call:<c>``, state ``hinv:<id>``) are unlinked when the components are opened,
and what those layouts stored still reads the same (counts, pages, task and
call look-ups, recovery scans, histories), because every read now goes to the
keys every layout keeps."""

from __future__ import annotations

import subprocess
import uuid

from pynenc_cpp import _core
from tests_py.redis_server import RedisServer


def _cli(server: RedisServer, *args: str) -> str:
    out = subprocess.run(
        ["redis-cli", "-p", str(server.port), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=10,
    )
    return out.stdout.strip()


def test_indexes_of_the_earlier_layout_are_unlinked_and_its_data_still_reads(
    redis_server: RedisServer,
) -> None:
    app = f"layout-{uuid.uuid4().hex[:6]}"
    po, ps = f"pynenc:{{{app}}}:orchestrator:", f"pynenc:{{{app}}}:state:"
    orch = _core.Orchestrator(redis_server.url, app)
    state = _core.StateBackend(redis_server.url, app)
    ids = [f"inv-{i}" for i in range(4)]
    for i in ids:
        task = "mod.task_a" if i != "inv-3" else "mod.task_b"
        orch.register([(i, task, f"{task}:args-{i}")])
    orch.transition("inv-1", "pending", "runner-x")
    orch.transition("inv-1", "running", "runner-x")
    orch.transition("inv-2", "pending", "runner-x")
    orch.transition("inv-2", "running", "runner-x")
    state.add_histories(["inv-1"], 1_000, "registered", '{"n": 1}')
    state.add_histories(["inv-1"], 3_000, "running", '{"n": 3}')
    state.add_histories(["inv-1"], 2_000, "pending", '{"n": 2}')
    retired = (po + "all", po + "status:running", po + "times", po + "ttimes:mod.task_a")
    assert _cli(redis_server, "EXISTS", *retired, po + "call:mod.task_a:args-inv-0") == "0"
    assert _cli(redis_server, "EXISTS", ps + "hinv:inv-1") == "0"
    pages = {
        "all": orch.list_invocations(),
        "task_a": orch.list_invocations("mod.task_a"),
        "running": orch.list_invocations(None, ["running"]),
        "second": orch.list_invocations(None, [], 2, 1),
    }
    assert pages["all"] == ["inv-2", "inv-1", "inv-3", "inv-0"]

    # What the earlier layout kept beside the same data.
    _cli(redis_server, "ZADD", po + "all", "1", "inv-0", "2", "inv-1", "3", "inv-2", "4", "inv-3")
    _cli(redis_server, "ZADD", po + "status:registered", "1", "inv-0", "4", "inv-3")
    _cli(redis_server, "ZADD", po + "status:running", "2", "inv-1", "3", "inv-2")
    members = [f"{n:020d}inv-{n - 1}" for n in range(1, 5)]
    _cli(redis_server, "ZADD", po + "times", *(x for m in members for x in ("1", m)))
    _cli(
        redis_server, "ZADD", po + "ttimes:mod.task_a", *(x for m in members[:3] for x in ("1", m))
    )
    _cli(redis_server, "ZADD", po + "ttimes:mod.task_b", "1", members[3])
    for n, i in enumerate(ids):
        task = "mod.task_a" if i != "inv-3" else "mod.task_b"
        _cli(redis_server, "ZADD", f"{po}call:{task}:args-{i}", str(n + 1), i)
    entries = _cli(redis_server, "HVALS", ps + "hkey:inv-1").split("\n")
    assert len(entries) == 3
    for entry in entries:  # its position, then its value
        _cli(redis_server, "ZADD", ps + "hinv:inv-1", "0", entry[:32])
    _cli(redis_server, "DEL", ps + "layout")

    orch2 = _core.Orchestrator(redis_server.url, app)
    state2 = _core.StateBackend(redis_server.url, app)
    keys = (po + "all", po + "status:registered", po + "status:running", ps + "hinv:inv-1")
    assert _cli(redis_server, "EXISTS", *keys, *retired) == "0"
    assert _cli(redis_server, "EXISTS", po + "ttimes:mod.task_b") == "0"
    assert _cli(redis_server, "EXISTS", *(f"{po}call:mod.task_a:args-{i}" for i in ids)) == "0"
    assert _cli(redis_server, "GET", ps + "layout") == "2"
    assert orch2.list_invocations() == pages["all"]
    assert orch2.list_invocations("mod.task_a") == pages["task_a"] == ["inv-2", "inv-1", "inv-0"]
    assert orch2.list_invocations(None, ["running"]) == pages["running"] == ["inv-2", "inv-1"]
    assert orch2.list_invocations(None, [], 2, 1) == pages["second"] == ["inv-1", "inv-3"]
    assert orch2.task_invocations("mod.task_a") == ["inv-0", "inv-1", "inv-2"]
    assert orch2.call_invocations("mod.task_a:args-inv-1") == ["inv-1"]
    assert orch2.call_invocations("mod.task_b:args-inv-1") == []
    assert orch2.call_invocations("no-colon") == []

    assert orch2.count_invocations() == 4
    assert orch2.count_invocations("mod.task_a") == 3
    assert orch2.count_invocations(None, ["running"]) == 2
    assert orch2.count_invocations("mod.task_a", ["registered"]) == 1
    assert orch2.count_invocations("mod.task_b", ["registered", "running"]) == 1
    # Owners with no heartbeat count as dead: both, in registration order.
    assert orch2.running_for_recovery(1) == ["inv-1", "inv-2"]
    assert [h for h in state2.get_history("inv-1")] == ['{"n": 1}', '{"n": 2}', '{"n": 3}']


def test_recovery_scan_keeps_registration_order_after_status_changes(
    redis_server: RedisServer,
) -> None:
    """The scan reads the status's time page, scored by the time of the change;
    it must still answer in registration order."""
    app = f"layout-{uuid.uuid4().hex[:6]}"
    orch = _core.Orchestrator(redis_server.url, app)
    ids = [f"inv-{i:02d}" for i in range(12)]
    orch.register([(i, "mod.task", f"call-{i}") for i in ids])
    for i in reversed(ids):  # the last registered changes status first
        orch.transition(i, "pending", "runner-y")
        orch.transition(i, "running", "runner-y")
    assert orch.running_for_recovery(1) == ids
    orch.transition("inv-05", "success", "runner-y")
    assert orch.running_for_recovery(1) == [i for i in ids if i != "inv-05"]
    assert orch.count_invocations(None, ["running"]) == 11
    assert orch.count_invocations("mod.task", ["success"]) == 1


def test_task_pages_read_the_same_by_either_walk(redis_server: RedisServer) -> None:
    """A page filtered by task merges the status pages, skipping other tasks'
    entries, or walks the task's index and sorts it, whichever reads fewer
    entries: small pages of a large task take the merge, a page as large as the
    task the walk. Both give the same order: newest status time first, ties
    newest registration first."""
    app = f"layout-{uuid.uuid4().hex[:6]}"
    orch = _core.Orchestrator(redis_server.url, app)
    ids = [f"inv-{i:02d}" for i in range(40)]
    orch.register([(i, "mod.a" if n % 4 else "mod.b", f"mod.x:{i}") for n, i in enumerate(ids)])
    for n, i in enumerate(ids):
        if n % 3 == 0 or n % 5 == 0:
            orch.transition(i, "pending", "runner-z")
        if n % 5 == 0:
            orch.transition(i, "running", "runner-z")
    a_ids = [i for n, i in enumerate(ids) if n % 4]
    for statuses in ([], ["registered"], ["pending", "running"]):
        whole = orch.list_invocations("mod.a", statuses, 1_000)  # the walk
        paged: list[str] = []
        while len(paged) < len(whole) + 1:
            page = orch.list_invocations("mod.a", statuses, 2, len(paged))  # the merge
            if not page:
                break
            paged.extend(page)
        assert paged == whole
        assert orch.count_invocations("mod.a", statuses) == len(whole)
        records = {i: orch.status_record(i) for i in whole}
        assert set(whole) <= set(a_ids)
        if not statuses:
            assert sorted(whole) == a_ids
        keys = [(records[i][2], ids.index(i)) for i in whole]
        assert keys == sorted(keys, reverse=True)


def test_layout_mark_survives_a_purge(redis_server: RedisServer) -> None:
    app = f"layout-{uuid.uuid4().hex[:6]}"
    ps = f"pynenc:{{{app}}}:state:"
    state = _core.StateBackend(redis_server.url, app)
    state.add_histories(["inv-a"], 1_000, "registered", "{}")
    state.purge()
    assert _cli(redis_server, "GET", ps + "layout") == "2"
    assert state.get_history("inv-a") == []


def test_history_entries_of_layout_1_still_read_and_move_when_replaced(
    redis_server: RedisServer,
) -> None:
    """Layout 1 kept a history entry's position in ``hkey:<id>`` and its value in
    the app's ``hist`` hash; layout 2 keeps both in ``hkey:<id>``. Entries of
    layout 1 read the same by invocation and by time range, and a replaced one
    moves into ``hkey:<id>``."""
    app = f"layout-{uuid.uuid4().hex[:6]}"
    ps = f"pynenc:{{{app}}}:state:"
    state = _core.StateBackend(redis_server.url, app)
    state.add_histories(["inv-1", "inv-2"], 1_000, "registered", '{"n": 1}')
    state.add_histories(["inv-1"], 2_000, "running", '{"n": 2}')
    state.add_histories(["inv-2"], 3_000, "running", '{"n": 3}')
    # Rewritten as layout 1 stored them.
    for inv in ("inv-1", "inv-2"):
        lines = _cli(redis_server, "HGETALL", ps + "hkey:" + inv).split("\n")
        for field, entry in zip(lines[::2], lines[1::2], strict=True):
            assert len(entry) > 32
            _cli(redis_server, "HSET", ps + "hist", entry[:32], entry[32:])
            _cli(redis_server, "HSET", ps + "hkey:" + inv, field, entry[:32])
    assert _cli(redis_server, "HLEN", ps + "hist") == "4"

    assert state.get_history("inv-1") == ['{"n": 1}', '{"n": 2}']
    jsons, cursor = state.history_in_range(0, 10_000)
    assert jsons == ['{"n": 1}', '{"n": 1}', '{"n": 2}', '{"n": 3}'] and cursor is None
    assert state.history_in_range(1_500, 3_000)[0] == ['{"n": 2}', '{"n": 3}']

    state.add_histories(["inv-2"], 3_000, "running", '{"n": 33}')  # replaces, in place
    assert _cli(redis_server, "HLEN", ps + "hist") == "3"
    assert state.get_history("inv-2") == ['{"n": 1}', '{"n": 33}']
    assert state.history_in_range(2_500, 10_000)[0] == ['{"n": 33}']


def test_history_range_reads_past_a_position_whose_entry_was_replaced(
    redis_server: RedisServer,
) -> None:
    """A time-page member can outlive its entry (the same id's key written again
    at a new position by a step that took every row as new); pages skip it and
    still hold as many entries as asked for."""
    app = f"layout-{uuid.uuid4().hex[:6]}"
    ps = f"pynenc:{{{app}}}:state:"
    state = _core.StateBackend(redis_server.url, app)
    for i in range(5):
        state.add_histories([f"inv-{i}"], 1_000 * (i + 1), "registered", f'{{"n": {i}}}')
    members = _cli(redis_server, "ZRANGE", ps + "htime", "0", "-1").split("\n")
    assert len(members) == 5
    for m in members[:3]:  # three orphan positions before the entries they sort with
        _cli(redis_server, "ZADD", ps + "htime", "0", m[:16] + "0" * 16 + m[32:])
    pages: list[str] = []
    after = None
    while True:
        jsons, after = state.history_in_range(0, 10_000, after, 2)
        assert len(jsons) == 2 or after is None
        pages.extend(jsons)
        if after is None:
            break
    assert pages == [f'{{"n": {i}}}' for i in range(5)]
