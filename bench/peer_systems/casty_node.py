"""One casty node of bench/actors.py, in its own process: bench/actor_node.py's CLI and behaviour.

``--role server``: a member of a casty cluster on ``127.0.0.1:<port>`` that hosts the virtual
actor ``echo`` under one fixed key wherever casty's ring places it; every ``Echo(payload)``
is answered with ``(--name of the process that answered, payload)``. ``--role client``: a
``casty.Client``, which sends to the cluster without joining the membership or hosting keys
(a member cannot opt out of hosting: every member hosts every type and takes part of the
ring, so a member client would change the placement and could own the key itself).
``--mode latency`` sends ``--asks`` sequential asks (after ``--warmup``) and writes their
round trips (µs) to ``--out`` as JSON; ``--mode stream`` asks one after another
(``--interval-ms`` apart, timeout ``--timeout`` s; a timeout or ``Unavailable`` is skipped)
until SIGTERM and appends one JSON line per reply to ``--out`` (one ``os.write``, O_APPEND):
``{"node": <who answered>, "mono_ms": <when it arrived>}``.
Prints ``READY <address>`` once started; SIGTERM is an orderly shutdown, in which casty
hands the keys of the node to the nodes that replicate them.

Who answered is the ``--name`` of the process whose activation ran the body (a module
global set at start), so the failover and handover numbers of bench/actors.py are real.

Differences from pynenc-cpp that bench/actors.py's numbers carry:

* casty places the key by consistent hashing (over address and incarnation), not on the
  oldest member: a restarted node can take the key back. A server that joins an existing
  cluster therefore prints READY only once the cluster has settled: every seed is an alive
  member, the key answers an ask from this node, and no membership, handoff or activation
  event has happened for ``SETTLE`` (0.5 s, the client's ask timeout: an ask lost while the
  key moved, as casty's at-most-once delivery allows, has timed out and been retried by
  then). Without it, the move back after a restart can still stall the stream when the
  next trial starts, and bench/actors.py then signals a node that no longer owns the key
  and counts the end of that move as a failover. This only delays READY; every number is
  still measured from the signal to the first reply from another node.
* SIGKILL failover is bounded below by the client's ask timeout (bench/actors.py's 0.5 s,
  the same for pynenc-cpp). The members see the node suspect within about a heartbeat of
  the kill (its TCP connections close) and dead ``dead_after`` later, and the new owner
  activates the key some 380-500 ms after the kill (see the servers' stderr). But the ask
  the client sends in between is dropped (it goes to the next replica, which still routes
  to the suspect owner; delivery is at most once), so the first reply from the new owner
  usually comes when that ask has timed out and the next one goes through: ~510 ms, or
  ~350 ms when the ask happens to land after the takeover. The number is what a client of
  casty sees, not the takeover time alone.
* ``--quorum``, ``--heartbeat-ms``, ``--suspect-ms``, ``--stabilize-ms`` and
  ``--generation-source`` are accepted and ignored; the timings are the constants below.

casty settings (casty 0.30.2 defaults in brackets):

* ``heartbeat`` 100 ms [1 s]: pynenc-cpp's ``heartbeat_ms``.
* ``suspect_after`` 200 ms [5 s]: silence after which a neighbour is suspect; it must be
  above ``heartbeat``. Two periods is the shortest that does not suspect a node for one late
  heartbeat (pynenc-cpp suspects after one failed probe, itself followed by indirect ones).
  In this bench a SIGKILL closes the node's connections, which casty notices at once, so
  ``suspect_after`` hardly matters here; it is what a silent (hung, partitioned) node meets.
* ``dead_after`` 300 ms [5 s]: time as suspect before dead, as pynenc-cpp's ``suspect_ms``
  (Suspect -> Dead). casty moves a key off its owner only once the owner is dead (the owner
  is the first of the key's replicas that is alive or suspect), so a SIGKILL failover is
  at least this long.
* ``remove_after`` left at 1 min: when a dead member leaves the ring. It does not delay
  failover (the owner skips dead replicas), and a restarted node replaces its dead
  incarnation at once.
* replicas 3 (the default, written out; capped by the cluster size, so all three servers
  of the failover test), write level ``"majority"`` (the default; echo writes no state).
  The key needs more than one replica to fail over: with ``replicas=1`` its only replica is
  the dead node and asks fail until ``remove_after`` drops it from the ring.
* the client's ``sync_every`` 100 ms [5 s]: how often it fetches the member table it routes
  by, one heartbeat, so its view is never much behind the members'. (It does not change
  the failover numbers measurably: the client marks a node dead itself when its
  connection closes.)
* the client's ``ask_timeout`` 30 s [10 s], as actor_node.py's latency asks; the stream's
  asks are cut at ``--timeout``. Everything else is left at its default.
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
from datetime import timedelta
from pathlib import Path

from casty import (
    ActivationEnded,
    ActivationStarted,
    ActorSystem,
    Askable,
    Client,
    Cluster,
    Context,
    Event,
    HandoffEnded,
    HandoffStarted,
    MemberChanged,
    Unavailable,
    actor,
)

KEY = "echo"
HEARTBEAT = timedelta(milliseconds=100)
SUSPECT_AFTER = timedelta(milliseconds=200)
DEAD_AFTER = timedelta(milliseconds=300)
CLIENT_SYNC = timedelta(milliseconds=100)
ASK_TIMEOUT = timedelta(seconds=30)  # latency mode, as actor_node.py; the stream uses --timeout
SETTLE = 0.5  # s without cluster events before a joining server prints READY
node_name = ""  # --name of this process, set in main(): what echo answers with


@dataclass(frozen=True)
class Echo(Askable[tuple[str, bytes]]):
    payload: bytes


@actor(initial=0, replicas=3, write="majority")
async def echo(ctx: Context[int, Echo]) -> None:
    async for msg in ctx.inbox:
        msg.reply_to.tell((node_name, msg.payload))


class Events:
    """Observer: writes the cluster's events to stderr and remembers when the last one came."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def __call__(self, event: Event, /) -> None:
        if isinstance(
            event,
            MemberChanged | HandoffStarted | HandoffEnded | ActivationStarted | ActivationEnded,
        ):
            self.last = time.monotonic()
        print(f"{time.monotonic() * 1000:.0f} {node_name}: {event}", file=sys.stderr, flush=True)


async def settle(system: ActorSystem, seeds: tuple[str, ...], events: Events) -> None:
    """Wait until the seeds are alive members, the key answers and the cluster has been quiet."""
    async with asyncio.timeout(60):
        await _settle(system, seeds, events)


async def _settle(system: ActorSystem, seeds: tuple[str, ...], events: Events) -> None:
    while not set(seeds) <= {m.node.address for m in system.members if m.status == "alive"}:
        await asyncio.sleep(0.01)
    ref = system.ref(echo, KEY)
    while True:
        try:
            async with asyncio.timeout(1.0):
                await ref.ask(Echo(b"r"))
            break
        except (TimeoutError, Unavailable):
            await asyncio.sleep(0.01)
    while seeds and time.monotonic() - events.last < SETTLE:
        await asyncio.sleep(0.02)


async def serve(a: argparse.Namespace, seeds: tuple[str, ...], stop: asyncio.Event) -> None:
    events = Events()
    cluster = Cluster(
        bind=f"127.0.0.1:{a.port}",
        seeds=seeds,
        heartbeat=HEARTBEAT,
        suspect_after=SUSPECT_AFTER,
        dead_after=DEAD_AFTER,
    )
    async with ActorSystem(cluster=cluster, observer=events) as system:
        await settle(system, seeds, events)
        print(f"READY {system.node.address}", flush=True)
        await stop.wait()


async def ask(a: argparse.Namespace, seeds: tuple[str, ...], stop: asyncio.Event) -> None:
    client = Client(seeds=seeds, sync_every=CLIENT_SYNC, ask_timeout=ASK_TIMEOUT, observer=Events())
    async with client:
        ref = client.ref(echo, KEY)
        print(f"READY client {client.node.incarnation}", flush=True)
        if a.mode == "latency":
            for _ in range(a.warmup):
                await ref.ask(Echo(b"w"))
            rtts = []
            for _ in range(a.asks):
                t = time.perf_counter_ns()
                await ref.ask(Echo(b"x"))
                rtts.append((time.perf_counter_ns() - t) / 1000.0)
            Path(a.out).write_text(json.dumps({"rtts_us": rtts}))
        else:
            fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            while not stop.is_set():
                try:
                    async with asyncio.timeout(a.timeout):
                        node, _ = await ref.ask(Echo(b"s"))
                    line = json.dumps({"node": node, "mono_ms": time.monotonic() * 1000.0})
                    os.write(fd, (line + "\n").encode())
                except (TimeoutError, Unavailable):
                    pass
                await asyncio.sleep(a.interval_ms / 1000.0)
        await stop.wait()


async def main(a: argparse.Namespace) -> None:
    global node_name
    node_name = a.name
    me = f"127.0.0.1:{a.port}"
    seeds = tuple(s for s in a.seeds.split(",") if s and s != me)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await (serve if a.role == "server" else ask)(a, seeds, stop)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--role", choices=("server", "client"), required=True)
    p.add_argument("--mode", choices=("latency", "stream"), default="stream")
    p.add_argument("--name", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seeds", default="")
    p.add_argument("--out", default="")
    p.add_argument("--asks", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--interval-ms", type=float, default=2.0)
    for ignored in ("--quorum", "--heartbeat-ms", "--suspect-ms", "--stabilize-ms"):
        p.add_argument(ignored, type=int, help="accepted for bench/actors.py, ignored")
    p.add_argument("--generation-source", help="accepted for bench/actors.py, ignored")
    asyncio.run(main(p.parse_args()))
