"""One node of bench/actors.py, in its own process.

``--role server``: spawns the singleton ``echo`` (anchored to the oldest node of class
``server``), which answers every ``(reply_to, payload)`` with ``(its node name, payload)``.
``--role client``: never hosts it; ``--mode latency`` sends ``--asks`` sequential asks and
writes their round trips (µs) to ``--out`` as JSON; ``--mode stream`` asks without pause
(timeout ``--timeout`` s) until SIGTERM and appends one JSON line per reply to ``--out``:
``{"node": <who answered>, "mono_ms": <when it arrived>}``.
Prints ``READY <address>`` once started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from pynenc_cpp.cluster.actors import (
    ActorContext,
    AskTimeout,
    Behavior,
    Behaviors,
    ClusteredActorSystem,
)


def echo(name: str) -> Behavior[Any]:
    def receive(ctx: ActorContext[Any], msg: Any) -> Behavior[Any]:
        reply_to, payload = msg
        reply_to.tell((name, payload))
        return Behaviors.same()

    return Behaviors.receive(receive)


async def main(a: argparse.Namespace) -> None:
    system = ClusteredActorSystem(
        name="actors-bench",
        host="127.0.0.1",
        port=a.port,
        node_id=a.name,
        seed_nodes=[s for s in a.seeds.split(",") if s],
        quorum=a.quorum,
        node_class=a.role,
        heartbeat_ms=a.heartbeat_ms,
        suspect_timeout_ms=a.suspect_ms,
        stabilize_ms=a.stabilize_ms,
        generation_source=a.generation_source,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with system:
        if a.role == "server":
            ref = system.spawn(
                Behaviors.singleton(lambda: echo(a.name), anchor="class:server"), "echo"
            )
        else:
            ref = system.singleton_ref("echo")
        print(f"READY {system.address}", flush=True)
        if a.role == "client" and a.mode == "latency":
            for _ in range(a.warmup):
                await system.ask(ref, lambda r: (r, b"w"), timeout=30)
            rtts = []
            for _ in range(a.asks):
                t = time.perf_counter_ns()
                await system.ask(ref, lambda r: (r, b"x"), timeout=30)
                rtts.append((time.perf_counter_ns() - t) / 1000.0)
            Path(a.out).write_text(json.dumps({"rtts_us": rtts}))
        elif a.role == "client" and a.mode == "stream":
            fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            while not stop.is_set():
                try:
                    node, _ = await system.ask(ref, lambda r: (r, b"s"), timeout=a.timeout)
                    line = json.dumps({"node": node, "mono_ms": time.monotonic() * 1000.0})
                    os.write(fd, (line + "\n").encode())
                except AskTimeout:
                    pass
                await asyncio.sleep(a.interval_ms / 1000.0)
        await stop.wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--role", choices=("server", "client"), required=True)
    p.add_argument("--mode", choices=("latency", "stream"), default="stream")
    p.add_argument("--name", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seeds", default="")
    p.add_argument("--quorum", type=int, default=2)
    p.add_argument("--heartbeat-ms", type=int, default=100)
    p.add_argument("--suspect-ms", type=int, default=300)
    p.add_argument("--stabilize-ms", type=int, default=100)
    p.add_argument("--generation-source", required=True)
    p.add_argument("--out", default="")
    p.add_argument("--asks", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--interval-ms", type=float, default=2.0)
    asyncio.run(main(p.parse_args()))
