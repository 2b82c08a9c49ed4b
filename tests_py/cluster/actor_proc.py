"""An actor-system node in its own process, for the actor failover tests and benchmark.

Every node spawns the event-sourced singleton ``counter`` (journal: ``--journal``, an
SQLite file) and, with ``--clients K``, runs K client tasks that each send ``--count``
increments confirmed by ``ask`` (timeout ``--ask-timeout`` s), one after the other,
``--interval-ms`` apart. Appends, as one JSON line each (one write(2), SIGKILL-safe), to
``--log``: ``{"event": "confirmed", "client", "k", "value", "mono_ms"}``,
``{"event": "timeout", "client", "k"}`` and, once every client is done, ``{"event":
"final", "value"}`` (the counter read with GetCount). Prints ``READY {"address", "node"}``
once started. SIGTERM shuts the system down gracefully (its singleton is handed over).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

from pynenc_cpp.cluster.actors import (
    ActorContext,
    ActorRef,
    AskTimeout,
    Behavior,
    Behaviors,
    ClusteredActorSystem,
    SqliteJournal,
)


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
    def on_event(state: int, _e: Incremented) -> int:
        return state + 1

    async def on_command(ctx: ActorContext[Any], state: int, msg: Any) -> Behavior[Any]:
        match msg:
            case Increment(reply_to):
                reply_to.tell(state if ctx.duplicate else state + 1)
                return Behaviors.persisted([Incremented()])
            case GetCount(reply_to):
                reply_to.tell(state)
        return Behaviors.same()

    return Behaviors.event_sourced("counter", journal, 0, on_event, on_command, snapshot_every=50)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else -1

    def write(self, record: dict[str, Any]) -> None:
        if self.fd >= 0:
            os.write(self.fd, (json.dumps(record) + "\n").encode())


async def main(args: argparse.Namespace) -> int:
    log = Log(args.log)
    journal = SqliteJournal(args.journal, args.cluster_name)
    system = ClusteredActorSystem(
        name=args.cluster_name,
        host="127.0.0.1",
        port=args.port,
        node_id=args.name,
        seed_nodes=[s for s in args.seeds.split(",") if s],
        quorum=args.quorum,
        heartbeat_ms=args.heartbeat_ms,
        suspect_timeout_ms=args.suspect_ms,
        stabilize_ms=args.stabilize_ms,
        generation_source=args.generation_source,
        activation_log=args.activation_log,
    )
    await system.start()
    ref = system.spawn(Behaviors.singleton(lambda: counter(journal)), "counter")
    print("READY " + json.dumps({"address": system.address, "node": system.node_id}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def client(c: int) -> None:
        for k in range(1, args.count + 1):
            try:
                value = await system.ask(ref, lambda r: Increment(r), timeout=args.ask_timeout)
                log.write(
                    {
                        "event": "confirmed",
                        "client": c,
                        "k": k,
                        "value": value,
                        "mono_ms": _now_ms(),
                        "node": args.name,
                    }
                )
            except AskTimeout:
                log.write(
                    {
                        "event": "timeout",
                        "client": c,
                        "k": k,
                        "mono_ms": _now_ms(),
                        "node": args.name,
                    }
                )
            await asyncio.sleep(args.interval_ms / 1000.0)

    if args.clients:
        await asyncio.gather(*(client(c) for c in range(args.clients)))
        value = await system.ask(ref, lambda r: GetCount(r), timeout=args.ask_timeout)
        log.write({"event": "final", "value": value, "node": args.name, "mono_ms": _now_ms()})
    await stop.wait()
    await system.shutdown()
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--name", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seeds", default="")
    p.add_argument("--quorum", type=int, default=2)
    p.add_argument("--cluster-name", default="actors-faults")
    p.add_argument("--heartbeat-ms", type=int, default=100)
    p.add_argument("--suspect-ms", type=int, default=300)
    p.add_argument("--stabilize-ms", type=int, default=100)
    p.add_argument("--generation-source", required=True)
    p.add_argument("--journal", required=True)
    p.add_argument("--activation-log", default="")
    p.add_argument("--log", default="")
    p.add_argument("--clients", type=int, default=0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--interval-ms", type=int, default=5)
    p.add_argument("--ask-timeout", type=float, default=10.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse(sys.argv[1:]))))
