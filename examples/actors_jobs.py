"""casty's cluster-singleton example on pynenc-cpp: two nodes, one job coordinator.

Both nodes spawn ``Behaviors.singleton(job_coordinator)`` under the same name; one
instance runs (on the elected leader) and both refs reach it. Run:

    .venv/bin/python examples/actors_jobs.py

It prints ``2 jobs pending``.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from pynenc_cpp.cluster.actors import (
    ActorContext,
    ActorRef,
    Behavior,
    Behaviors,
    ClusteredActorSystem,
)


@dataclass(frozen=True)
class ProcessJob:
    job_id: str


@dataclass(frozen=True)
class GetStatus:
    reply_to: ActorRef[str]


type CoordinatorMsg = ProcessJob | GetStatus


def job_coordinator() -> Behavior[CoordinatorMsg]:
    def active(pending: tuple[str, ...] = ()) -> Behavior[CoordinatorMsg]:
        async def receive(
            ctx: ActorContext[CoordinatorMsg], msg: CoordinatorMsg
        ) -> Behavior[CoordinatorMsg]:
            match msg:
                case ProcessJob(job_id):
                    return active((*pending, job_id))
                case GetStatus(reply_to):
                    reply_to.tell(f"{len(pending)} jobs pending")
            return Behaviors.same()

        return Behaviors.receive(receive)

    return active()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main() -> None:
    p1, p2 = free_port(), free_port()
    timing = {"heartbeat_ms": 100, "suspect_timeout_ms": 300, "stabilize_ms": 100}
    async with (
        ClusteredActorSystem(
            name="cluster",
            host="127.0.0.1",
            port=p1,
            node_id="node-1",
            seed_nodes=[("127.0.0.1", p2)],
            **timing,
        ) as node1,
        ClusteredActorSystem(
            name="cluster",
            host="127.0.0.1",
            port=p2,
            node_id="node-2",
            seed_nodes=[("127.0.0.1", p1)],
            **timing,
        ) as node2,
    ):
        ref1 = node1.spawn(Behaviors.singleton(job_coordinator), "coordinator")
        ref2 = node2.spawn(Behaviors.singleton(job_coordinator), "coordinator")
        await asyncio.sleep(0.5)

        # Send from either node: both messages reach the single instance (they wait in
        # a bounded buffer until it runs, then arrive in order).
        ref1.tell(ProcessJob("job-1"))
        ref2.tell(ProcessJob("job-2"))

        # Each node's messages arrive in order, but the two nodes' messages race: ask
        # through node-2 first (answered after job-2), then through node-1 (after job-1).
        await node2.ask(ref2, lambda r: GetStatus(reply_to=r), timeout=5.0)
        status = await node1.ask(ref1, lambda r: GetStatus(reply_to=r), timeout=5.0)
        print(status)  # 2 jobs pending


if __name__ == "__main__":
    asyncio.run(main())
