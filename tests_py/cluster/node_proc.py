"""A cluster node in its own process, for the fault tests and the failover benchmark.

Runs ``run_cluster`` with a config built from the command line and records, each
as one JSON line appended with a single ``write(2)`` (so SIGKILL never tears one):

* ``--work-log``: ``{"event": "work_start"|"work_stop", "name", "node", "pid",
  "mono_ms", "epoch", "lease_until_mono_ms", "reason"}`` from the start/stop callbacks;
* ``--events-log``: ``{"kind", "member", "address", "state", "mono_ms", "name"}`` per
  membership event;
* ``--status-file``: the node's status and members, rewritten atomically every 50 ms.

With ``--writer-type T`` the node offers actor type ``T``: each instance writes
``<name>:<generation>:<n>`` under its label to the ``--fenced-store`` every
``--write-interval-ms`` (and once more when stopped, as a stale owner flushing its
state would), stamped with its generation, and appends to the work log
``{"event": "actor_start"|"actor_stop"|"write_ok"|"write_rejected", "label", "term",
"seq", "generation", "mono_ms", "reason"}``. ``--submit-singleton LABEL=ANCHOR``
(``leader``, ``class:<c>`` or ``node:<id>``) submits a singleton of that type once
a leader answers.

``mono_ms`` is ``time.monotonic() * 1000`` (CLOCK_MONOTONIC, shared by every process
of the machine, the clock of the activation log). Prints one line
``READY {"address": ..., "node": ...}`` once started. SIGTERM or SIGINT stop the
node gracefully (``handle.stop()``: the work stops, Leaving is sent) and exit 0.
A startup failure prints ``FAILED <type>: <message>`` and exits 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from pynenc_cpp.cluster import (
    Activation,
    ClusterConfig,
    FencedStore,
    InstanceContext,
    MemberEvent,
    SingletonAnchor,
    SingletonSpec,
    StaleGeneration,
    run_cluster,
)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class JsonLog:
    """Appends JSON lines with O_APPEND, one write(2) per record."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else -1

    def write(self, record: dict[str, Any]) -> None:
        if self.fd >= 0:
            os.write(self.fd, (json.dumps(record, sort_keys=True) + "\n").encode())


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--name", default="node")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seeds", default="", help="comma-separated host:port")
    p.add_argument("--quorum", type=int, default=0)
    p.add_argument("--secret", default="")
    p.add_argument("--cluster-name", default="pynenc-cpp-faults")
    p.add_argument("--heartbeat-ms", type=int, default=100)
    p.add_argument("--suspect-ms", type=int, default=300)
    p.add_argument("--stabilize-ms", type=int, default=200)
    p.add_argument("--state-dir", default="")
    p.add_argument("--activation-log", default="")
    p.add_argument("--work-log", default="")
    p.add_argument("--events-log", default="")
    p.add_argument("--status-file", default="")
    p.add_argument("--node-class", default="")
    p.add_argument("--generation-source", default="memory://")
    p.add_argument("--fenced-store", default="")
    p.add_argument("--writer-type", default="")
    p.add_argument("--write-interval-ms", type=int, default=20)
    p.add_argument("--submit-singleton", default="", help="LABEL=leader|class:<c>|node:<id>")
    return p.parse_args(argv)


class Writer:
    """An instance that keeps writing to a fenced store under its generation."""

    def __init__(
        self, ctx: InstanceContext, name: str, store: FencedStore, log: Any, interval: float
    ):
        self.ctx, self.name, self.store, self.log, self.interval = ctx, name, store, log, interval
        self.stopped = threading.Event()
        self.n = 0
        self.record("actor_start")
        self.thread = threading.Thread(target=self.run, name=f"writer-{ctx.label}", daemon=True)
        self.thread.start()

    def record(self, event: str, reason: str = "") -> None:
        g = self.ctx.generation
        self.log.write(
            {
                "event": event,
                "name": self.name,
                "label": self.ctx.label,
                "term": g.term,
                "seq": g.seq,
                "generation": g.packed,
                "mono_ms": _now_ms(),
                "reason": reason,
            }
        )

    def write(self) -> None:
        self.n += 1
        try:
            self.store.write(
                self.ctx.label,
                f"{self.name}:{self.ctx.generation}:{self.n}".encode(),
                self.ctx.generation,
            )
            self.record("write_ok")
        except StaleGeneration as exc:
            self.record("write_rejected", str(exc))

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.write()

    def stop(self, reason: str) -> None:
        self.stopped.set()
        self.write()  # the final flush a stale owner would attempt
        self.record("actor_stop", reason)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # The engine's log lines arrive on the "pynenc_cpp.cluster" logger.
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s"
    )
    work_log, events_log = JsonLog(args.work_log), JsonLog(args.events_log)
    pid = os.getpid()

    def work(event: str, a: Activation, reason: str = "") -> None:
        work_log.write(
            {
                "event": event,
                "name": args.name,
                "node": a.node,
                "pid": pid,
                "mono_ms": _now_ms(),
                "epoch": a.epoch,
                "lease_until_mono_ms": a.lease_until_mono_ms,
                "reason": reason,
            }
        )

    def on_event(e: MemberEvent) -> None:
        events_log.write(
            {
                "kind": e.kind,
                "member": e.member.id,
                "address": e.member.address,
                "state": e.member.state,
                "mono_ms": e.at_monotonic * 1000.0,
                "name": args.name,
            }
        )

    config = ClusterConfig(
        host=args.host,
        port=args.port,
        seeds=tuple(s for s in args.seeds.split(",") if s),
        quorum=args.quorum,
        secret=args.secret,
        cluster_name=args.cluster_name,
        heartbeat_ms=args.heartbeat_ms,
        suspect_timeout_ms=args.suspect_ms,
        stabilize_ms=args.stabilize_ms,
        state_dir=args.state_dir,
        activation_log=args.activation_log,
        metadata={"name": args.name},
        node_class=args.node_class,
        generation_source=args.generation_source,
    )
    stop_requested = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.set())
    signal.signal(signal.SIGINT, lambda *_: stop_requested.set())
    try:
        handle = run_cluster(
            lambda a: work("work_start", a), lambda a, r: work("work_stop", a, r), config
        )
    except Exception as exc:  # reported to the parent, which asserts on it
        print(f"FAILED {type(exc).__name__}: {exc}", flush=True)
        return 2
    handle.subscribe(on_event)
    if args.writer_type:
        store = FencedStore(args.fenced_store, args.cluster_name)
        interval = args.write_interval_ms / 1000.0
        handle.register_actor_type(
            args.writer_type, lambda ctx: Writer(ctx, args.name, store, work_log, interval)
        )
    if args.submit_singleton:
        label, _, anchor = args.submit_singleton.partition("=")
        kind, _, value = anchor.partition(":")
        spec = SingletonSpec(label, args.writer_type, anchor=SingletonAnchor(kind, value))  # type: ignore[arg-type]

        def submit() -> None:
            while not stop_requested.is_set():
                try:
                    handle.start_singleton(spec, timeout=2.0)
                    return
                except Exception:  # no leader yet: retry
                    time.sleep(0.1)

        threading.Thread(target=submit, name="submit", daemon=True).start()
    status = handle.status()
    print(
        "READY " + json.dumps({"address": status.address, "node": status.node_id, "pid": pid}),
        flush=True,
    )

    def write_status() -> None:
        if not args.status_file:
            return
        s = handle.status()
        doc = {
            "name": args.name,
            "pid": pid,
            "mono_ms": _now_ms(),
            "node": s.node_id,
            "address": s.address,
            "state": s.state,
            "leader": s.leader,
            "epoch": s.epoch,
            "has_quorum": s.has_quorum,
            "stopped": handle.stopped,
            "hosted": [
                {
                    "label": h.label,
                    "term": h.generation.term,
                    "seq": h.generation.seq,
                    "phase": h.phase,
                }
                for h in s.hosted
            ],
            "transport": s.transport,
            "members": [
                {"id": m.id, "address": m.address, "state": m.state, "incarnation": m.incarnation}
                for m in handle.members()
            ],
        }
        tmp = args.status_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, args.status_file)

    while not stop_requested.wait(0.05):
        write_status()
    handle.stop()
    write_status()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
