"""Writes ``redis_layout2_store.json``: a Redis store of key layout 2 as text, and
what every query answered on it (``tests_py/test_redis_store_dump.py`` reads it).

Run once, with an engine that writes layout 2, from the repository root:
``.venv/bin/python -m tests_py.data.make_redis_store tests_py/data/redis_layout2_store.json [ENGINE]``
(ENGINE names the engine when ``_core`` is not this checkout's build; the
committed file was made with 0121a66's engine, the last to write the
orchestrator's ``times``, ``ttimes:<t>`` and ``call:<c>`` indexes).
The file stays as it was written then: a later version's test loads it into a
fresh server and must give the same answers (issue 51: a store of layout 2 is
upgraded when opened). It is text, not an RDB file, so it is reviewable and does
not depend on the server's version.

The store is made through the engine's components (``_core``), as pynenc's steps
and the runners write it: invocations in every status a store holds between
steps (registered and queued, pending, running under a live and a dead runner,
paused, retry, success with a result, failed with an exception, rerouted),
history rows, a parent and its children, a workflow, indexed arguments of a task
under concurrency control, a wait, an auto-purge mark, runner heartbeats and
queued ids.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pynenc_cpp import _core
from tests_py.redis_server import RedisServer

APP = "layout2-fixture"
TASKS = ("mod.add", "mod.fail", "mod.cc")


def text(b: bytes) -> Any:
    """A Redis string as JSON: text when it is UTF-8, else {"b64": ...}."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(b).decode()}


def raw(v: Any) -> bytes:
    return base64.b64decode(v["b64"]) if isinstance(v, dict) else str(v).encode()


def populate(url: str) -> dict[str, Any]:
    """Writes the store; returns its invocation ids by role."""
    orch = _core.Orchestrator(url, APP)
    state = _core.StateBackend(url, APP)
    broker = _core.Broker(url, APP)
    ids: dict[str, Any] = {}

    def new(role: str, task: str, args: str, **extra: str) -> str:
        inv = f"{role}-0001"
        rec = {
            "invocation_id": inv,
            "call_id": f"{task}:{args}",
            "task_id": task,
            "arguments_id": args,
            "serialized_arguments": json.dumps({"x": role}),
            **extra,
        }
        state.upsert_invocations([rec])
        orch.register([(inv, task, f"{task}:{args}")])
        ids[role] = inv
        return inv

    def hist(inv: str, ts: int, status: str) -> None:
        state.add_histories([inv], ts, status, json.dumps({"invocation_id": inv, "st": status}))

    t = 1_796_000_000_000_000
    for n, role in enumerate(("queued", "pending", "running_live", "running_dead", "paused",
                              "retry", "success", "failed", "rerouted", "parent")):  # fmt: skip
        task = "mod.fail" if role == "failed" else "mod.add"
        inv = new(role, task, f"args{n}")
        hist(inv, t + 10 * n, "registered")
    for role in ("child_a", "child_b"):
        inv = new(role, "mod.add", role, parent_invocation_id=ids["parent"])
        hist(inv, t + 200, "registered")
    wf = new("workflow", "mod.add", "wf", workflow_id="wf-1", workflow_type="mod.flow")
    state.store_workflow_run("wf-1", "mod.flow")
    state.store_workflow_sub_invocation("wf-1", ids["child_a"])
    state.set_workflow_data("wf-1", "k", '"v"')
    hist(wf, t + 300, "registered")
    for k in range(3):
        inv = new(f"cc{k}", "mod.cc", f"cc{k}")
        orch.index_arguments(inv, {"key": f'"{k % 2}"'})
    broker.route([ids["queued"], ids["cc0"]], "default", 0.0)

    orch.register_heartbeats(["runner-live"])
    moves = {
        "pending": [("pending", "runner-live")],
        "running_live": [("pending", "runner-live"), ("running", "runner-live")],
        "running_dead": [("pending", "runner-gone"), ("running", "runner-gone")],
        "paused": [("pending", "runner-live"), ("running", "runner-live"), ("paused", "runner-live")],
        "retry": [("pending", "runner-live"), ("running", "runner-live"), ("retry", "runner-live")],
        "success": [("pending", "runner-live"), ("running", "runner-live"), ("success", "runner-live")],
        "failed": [("pending", "runner-live"), ("running", "runner-live"), ("failed", "runner-live")],
        "rerouted": [("pending", "runner-gone"), ("rerouted", "runner-gone")],
    }  # fmt: skip
    for role, steps in moves.items():
        for k, (status, runner) in enumerate(steps):
            orch.transition(ids[role], status, runner)
            hist(ids[role], t + 1_000 + 10 * k, status)
    orch.increment_retries(ids["retry"])
    state.set_result(ids["success"], '{"value": 3}')
    state.set_exception(ids["failed"], '{"error": "ValueError", "message": "no"}')
    orch.schedule_auto_purge(ids["success"])
    orch.waiting_for_results(ids["parent"], [ids["child_a"], ids["child_b"]])
    return ids


def answers(url: str, ids: dict[str, str]) -> dict[str, Any]:
    """What every query of the components answers on the store."""
    orch = _core.Orchestrator(url, APP)
    state = _core.StateBackend(url, APP)
    statuses = sorted({orch.status_record(i)[0] for i in ids.values()})
    out: dict[str, Any] = {"ids": ids, "invocations": {}}
    for role, inv in ids.items():
        st, owner, ts = orch.status_record(inv)
        entry: dict[str, Any] = {
            "record": [st, owner, ts],
            "history": state.get_history(inv),
            "invocation": state.get_invocation(inv),
            "retries": orch.retries(inv),
        }
        if st == "success":
            entry["result"] = state.get_result(inv)
        if st == "failed":
            entry["exception"] = state.get_exception(inv)
        out["invocations"][role] = entry
    out["counts"] = {
        "all": orch.count_invocations(),
        **{f"status:{s}": orch.count_invocations(None, [s]) for s in statuses},
        **{f"task:{t}": orch.count_invocations(t) for t in TASKS},
        **{f"task:{t}:{s}": orch.count_invocations(t, [s]) for t in TASKS for s in statuses},
    }
    out["pages"] = {
        "all": orch.list_invocations(),
        "all:offset3:limit4": orch.list_invocations(None, [], 4, 3),
        **{f"status:{s}": orch.list_invocations(None, [s]) for s in statuses},
        **{f"task:{t}": orch.list_invocations(t) for t in TASKS},
        "task:mod.add:running+paused": orch.list_invocations("mod.add", ["running", "paused"]),
    }
    out["tasks"] = {t: orch.task_invocations(t) for t in TASKS}
    out["calls"] = {
        f"{t}:{a}": orch.call_invocations(f"{t}:{a}") for t, a in (("mod.add", "args1"), ("mod.cc", "cc2"))
    }  # fmt: skip
    # Timeouts of ten years: the answers must not depend on when they are asked
    # (runner-live's heartbeat stays live, runner-gone never had one).
    decade = 10 * 365 * 24 * 3600 * 1_000_000
    out["recovery"] = {
        "running": orch.running_for_recovery(decade),
        "pending": orch.pending_for_recovery(0),
        "pending_of_dead": orch.pending_of_dead_runners(decade),
    }
    out["existing"] = {
        "cc key 0": orch.existing_invocations("mod.cc", {"key": '"0"'}, []),
        "cc key 1 registered": orch.existing_invocations("mod.cc", {"key": '"1"'}, ["registered"]),
    }
    out["blocking"] = orch.blocking_invocations(10)
    out["children"] = state.child_invocations(ids["parent"])
    out["workflow"] = {
        "by_id": state.invocation_ids_by_workflow("wf-1"),
        "subs": state.workflow_sub_invocations("wf-1"),
        "types": state.workflow_types(),
        "data": state.get_workflow_data("wf-1", "k"),
    }
    pages, after = [], None
    while True:
        jsons, after = state.history_in_range(0, 2**62, after, 7)
        pages.append(jsons)
        if after is None:
            break
    out["history_range"] = pages
    out["invocations_in_range"] = state.invocations_in_range(0, 2**62)
    return out


def command(port: int, *args: bytes) -> Any:
    """One command to a local server, binary-safe, and its decoded reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return _read(s.makefile("rb"))


def dump_keys(port: int) -> list[dict[str, Any]]:
    """Every key of the app: its name, type, time to live (ms, -1: none) and value."""

    def cmd(*args: bytes) -> Any:
        return command(port, *args)

    keys = sorted(cmd(b"KEYS", b"pynenc:{" + APP.encode() + b"}:*"))
    out = []
    for k in keys:
        kind = cmd(b"TYPE", k).decode()
        ttl = int(cmd(b"PTTL", k))
        if kind == "string":
            value: Any = text(cmd(b"GET", k))
        elif kind == "hash":
            flat = cmd(b"HGETALL", k)
            value = [[text(flat[i]), text(flat[i + 1])] for i in range(0, len(flat), 2)]
        elif kind == "zset":
            flat = cmd(b"ZRANGE", k, b"0", b"-1", b"WITHSCORES")
            value = [[text(flat[i]), flat[i + 1].decode()] for i in range(0, len(flat), 2)]
        elif kind == "set":
            value = sorted(text(m) for m in cmd(b"SMEMBERS", k))
        elif kind == "list":
            value = [text(m) for m in cmd(b"LRANGE", k, b"0", b"-1")]
        else:
            raise RuntimeError(f"unexpected type {kind} of {k!r}")
        out.append({"key": text(k), "type": kind, "ttl_ms": ttl, "value": value})
    return out


def _read(f: Any) -> Any:
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b":":
        return int(rest)
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [_read(f) for _ in range(int(rest))]
    raise RuntimeError(f"unexpected reply {line!r}")


def main() -> int:
    out = Path(sys.argv[1])
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    ).stdout.strip()
    # The engine that wrote the store, when it is not this checkout's (argv[2]).
    engine = sys.argv[2] if len(sys.argv) > 2 else f"the engine of {commit}"
    with tempfile.TemporaryDirectory() as d:
        server = RedisServer(Path(d) / "redis").start()
        try:
            ids = populate(server.url)
            result = {
                "made_by": f"tests_py/data/make_redis_store.py at {commit}, with {engine}",
                "layout": "2",
                "app_id": APP,
                "keys": dump_keys(server.port),
                "answers": answers(server.url, ids),
            }
        finally:
            server.stop()
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {len(result['keys'])} keys")
    return 0


if __name__ == "__main__":
    sys.exit(main())
