"""An event-sourced singleton counter that survives the death of its node.

Three server nodes (child processes, node class ``server``) each spawn the
singleton ``counter``, anchored to the oldest server; its events go to an SQLite
journal, fenced by the instance's generation. This process joins as a client
node, sends increments confirmed by ``ask``, kills the node running the counter
with SIGKILL half-way, and keeps going: the successor replays the journal, the
increments in flight are re-sent to it (de-duplicated by message id), and the
final count equals the number of confirmed increments. Run:

    .venv/bin/python examples/actors_counter.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pynenc_cpp.cluster.actors import (
    ActorContext,
    ActorRef,
    Behavior,
    Behaviors,
    ClusteredActorSystem,
    SqliteJournal,
)

TIMING = {"heartbeat_ms": 100, "suspect_timeout_ms": 300, "stabilize_ms": 100}


@dataclass(frozen=True)
class Increment:
    reply_to: ActorRef[int]


@dataclass(frozen=True)
class GetCount:
    reply_to: ActorRef[int]


@dataclass(frozen=True)
class Incremented:
    pass


def counter(journal: SqliteJournal) -> Behavior[Any]:
    def on_event(state: int, _event: Incremented) -> int:
        return state + 1

    async def on_command(ctx: ActorContext[Any], state: int, msg: Any) -> Behavior[Any]:
        match msg:
            case Increment(reply_to):
                # Sent once the event is in the journal. A command re-sent after a
                # failover (ctx.duplicate) finds its event already counted in `state`.
                reply_to.tell(state if ctx.duplicate else state + 1)
                return Behaviors.persisted([Incremented()])
            case GetCount(reply_to):
                reply_to.tell(state)
        return Behaviors.same()

    return Behaviors.event_sourced("counter", journal, 0, on_event, on_command)


def singleton(journal: SqliteJournal) -> Behavior[Any]:
    async def setup(ctx: ActorContext[Any]) -> Behavior[Any]:
        print(f"[{ctx.system.node_id}] counter starts, generation {ctx.generation}", flush=True)
        return counter(journal)

    return Behaviors.singleton(lambda: Behaviors.setup(setup), anchor="class:server")


def system(
    root: Path, name: str, port: int, seeds: list[str], node_class: str
) -> ClusteredActorSystem:
    return ClusteredActorSystem(
        name="counter-demo",
        host="127.0.0.1",
        port=port,
        node_id=name,
        seed_nodes=seeds,
        quorum=2,
        node_class=node_class,
        generation_source=f"sqlite://{root}/generations.db",
        **TIMING,
    )


async def server(root: Path, name: str, port: int, seeds: list[str]) -> None:
    journal = SqliteJournal(str(root / "journal.db"))
    async with system(root, name, port, seeds, "server") as s:
        s.spawn(singleton(journal), "counter")
        print("READY", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def demo() -> None:
    root = Path(tempfile.mkdtemp(prefix="counter-demo-"))
    ports = [free_port() for _ in range(3)]
    seeds = [f"127.0.0.1:{p}" for p in ports]
    procs: dict[str, subprocess.Popen[str]] = {}
    for i, port in enumerate(ports):
        name = f"server-{i}"
        procs[name] = subprocess.Popen(
            [
                sys.executable,
                "-u",
                __file__,
                "--server",
                name,
                "--root",
                str(root),
                "--port",
                str(port),
                "--seeds",
                ",".join(seeds),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        out = procs[name].stdout
        assert out is not None and out.readline().strip() == "READY"
        threading.Thread(
            target=lambda out=out: [print(ln, end="", flush=True) for ln in out], daemon=True
        ).start()
        time.sleep(0.02)  # join order: server-0 is the oldest server
    try:
        async with system(root, "client", free_port(), seeds, "client") as me:
            ref = me.spawn(singleton(SqliteJournal(str(root / "journal.db"))), "counter")
            confirmed = 0
            for i in range(200):
                await me.ask(ref, lambda r: Increment(r), timeout=10)
                confirmed += 1
                if i == 100:
                    where = me.handle.lookup("counter")  # this node's copy of the directory
                    assert where is not None and where.node in procs, where
                    victim = procs[where.node]
                    t = time.monotonic()
                    victim.send_signal(signal.SIGKILL)
                    victim.wait()
                    print(
                        f"SIGKILL {where.node} (it ran the counter) after {confirmed} "
                        "confirmed increments",
                        flush=True,
                    )
                if i == 101:
                    print(
                        f"first increment after the kill confirmed in {time.monotonic() - t:.2f} s",
                        flush=True,
                    )
            count = await me.ask(ref, lambda r: GetCount(r), timeout=10)
            print(json.dumps({"confirmed": confirmed, "count": count}), flush=True)
            print("the counter survived" if count == confirmed else "MISMATCH", flush=True)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--server", default="")
    p.add_argument("--root", default="")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seeds", default="")
    args = p.parse_args()
    if args.server:
        asyncio.run(server(Path(args.root), args.server, args.port, args.seeds.split(",")))
    else:
        asyncio.run(demo())


if __name__ == "__main__":
    main()
