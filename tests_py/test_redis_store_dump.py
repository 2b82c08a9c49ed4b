"""A Redis store an earlier engine wrote, opened by this one (issue 51: a store of
layout 2 is upgraded when opened).

``tests_py/data/redis_layout2_store.json`` is a store of key layout 2 as text
(every key of its app, written by 0121a66's engine, with the orchestrator's
``times``, ``ttimes:<t>`` and ``call:<c>`` indexes this version no longer keeps)
and what every query answered on it then; ``tests_py/data/make_redis_store.py``
made it. Loaded into a fresh redis-server, it must answer the same queries the
same way, lose the indexes this version dropped, and take new work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pynenc_cpp import _core
from tests_py.data.make_redis_store import APP, answers, command, raw
from tests_py.redis_server import RedisServer

DUMP = Path(__file__).parent / "data" / "redis_layout2_store.json"


def load(port: int, keys: list[dict[str, Any]]) -> None:
    """Writes every key of the dump as it was stored."""
    for k in keys:
        key, value = raw(k["key"]), k["value"]
        if k["type"] == "string":
            command(port, b"SET", key, raw(value))
        elif k["type"] == "hash":
            command(port, b"HSET", key, *(raw(x) for pair in value for x in pair))
        elif k["type"] == "zset":
            command(port, b"ZADD", key, *(x for m, s in value for x in (s.encode(), raw(m))))
        elif k["type"] == "set":
            command(port, b"SADD", key, *(raw(m) for m in value))
        elif k["type"] == "list":
            command(port, b"RPUSH", key, *(raw(m) for m in value))
        else:
            raise AssertionError(f"unexpected type in the dump: {k['type']}")
        if k["ttl_ms"] > 0:
            command(port, b"PEXPIRE", key, str(k["ttl_ms"]).encode())


@pytest.fixture
def dump() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DUMP.read_text())
    return data


@pytest.fixture
def loaded(tmp_path: Path, dump: dict[str, Any]) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    try:
        load(server.port, dump["keys"])
        yield server
    finally:
        server.stop()


def _keys(port: int) -> set[str]:
    return {k.decode() for k in command(port, b"KEYS", f"pynenc:{{{APP}}}:*".encode())}


def test_a_layout_2_store_answers_every_query_as_it_did(
    loaded: RedisServer, dump: dict[str, Any]
) -> None:
    assert dump["layout"] == "2" and dump["app_id"] == APP
    po = f"pynenc:{{{APP}}}:orchestrator:"
    before = _keys(loaded.port)
    assert len(before) == len(dump["keys"])
    retired = {
        k for k in before if k == po + "times" or k.startswith((po + "ttimes:", po + "call:"))
    }
    assert po + "times" in retired and len(retired) > 10

    now = answers(loaded.url, dump["answers"]["ids"])
    assert now == dump["answers"]
    assert _keys(loaded.port) == before - retired  # the dropped indexes, nothing else


def test_a_layout_2_store_takes_new_work(loaded: RedisServer, dump: dict[str, Any]) -> None:
    ids = dump["answers"]["ids"]
    orch = _core.Orchestrator(loaded.url, APP)
    state = _core.StateBackend(loaded.url, APP)
    broker = _core.Broker(loaded.url, APP)
    # What was queued comes out first, in its order; then what is routed now.
    state.upsert_invocations(
        [{"invocation_id": "new-0001", "call_id": "mod.add:new", "task_id": "mod.add",
          "arguments_id": "new", "serialized_arguments": "{}"}]
    )  # fmt: skip
    orch.register([("new-0001", "mod.add", "mod.add:new")])
    broker.route(["new-0001"], "default", 0.0)
    taken = [broker.retrieve("default", 0) for _ in range(4)]
    assert taken == [ids["queued"], ids["cc0"], "new-0001", None]
    for status in ("pending", "running", "success"):
        orch.transition("new-0001", status, "runner-new")
    state.set_result("new-0001", "7")
    counts = dump["answers"]["counts"]
    assert orch.count_invocations() == counts["all"] + 1
    assert orch.count_invocations(None, ["success"]) == counts["status:success"] + 1
    assert orch.count_invocations("mod.add", ["success"]) == counts["task:mod.add:success"] + 1
    assert orch.list_invocations(None, [], 1) == ["new-0001"]
    assert orch.call_invocations("mod.add:new") == ["new-0001"]
    assert orch.task_invocations("mod.add")[-1] == "new-0001"
    assert state.get_result("new-0001") == "7"
    # The old invocations still move: the one running under a dead runner is recovered.
    decade = 10 * 365 * 24 * 3600 * 1_000_000
    assert orch.running_for_recovery(decade) == [ids["running_dead"]]
    orch.transition_from_owner(ids["running_dead"], "running_recovery", None, "runner-gone")
    assert orch.running_for_recovery(decade) == []
