"""The streaq peer of bench/peers.py: one no-op task on a streaq ``Worker`` (Redis
streams through coredis, anyio; ``PEERS_REDIS_URL``, queue ``PEERS_QUEUE``).

One worker process (``python -m streaq run peer_systems.streaq_app:worker``) with
``concurrency=2``, the benchmark's 2 worker slots; everything else at streaq's
defaults (prefetch 2 x concurrency, XREADGROUP BLOCK, so no queue polling) but the
task's ``silent=True``: streaq logs two INFO lines a task otherwise (as Celery runs at
``--loglevel WARNING`` and rustvello at ``warning``). The client enqueues inside
``async with worker:`` (``await noop.enqueue(i)``) and waits with
``await task.result(timeout=...)``: it subscribes to the task's channel, reads the
stored result or waits for its message, and unsubscribes. Leaving that subscription
takes coredis 6.9.0's unsubscription timeout, 0.1 s, on every call (coredis waits for
its push-message reader until then), so each ``result()`` costs at least 100 ms: a
floor under streaq's S2, and under its S1, which reads the results one after another.
"""

from __future__ import annotations

import os

from streaq import Worker

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")

worker = Worker(redis_url=URL, queue_name=QUEUE, concurrency=2)


@worker.task(name="peers.noop", silent=True)
async def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
