"""The ArdiQ peer of bench/peers.py: one no-op task on an ``Ardiq`` app (a Rust core,
PyO3 + tokio, over Redis streams; ``PEERS_REDIS_URL``, queue ``PEERS_QUEUE``).

One worker process (``python -m ardiq run peer_systems.ardiq_app:app --quiet``) with
``concurrency=2``, the benchmark's 2 worker slots; everything else at ArdiQ's
defaults (prefetch 2 x concurrency, stream read block 500 ms, results kept 5 min).
The client enqueues with ``await noop.enqueue(i)`` and waits with
``await job.result(timeout=...)``, the core's own result wait.
"""

from __future__ import annotations

import os

from ardiq import Ardiq

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")

app = Ardiq(redis_url=URL, queue_name=QUEUE, concurrency=2)


@app.task(name="peers.noop")
async def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
