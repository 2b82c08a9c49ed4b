"""The taskiq peer of bench/peers.py: one no-op task on taskiq-redis's stream broker
(``RedisStreamBroker``: consumer groups with acknowledgement, XREADGROUP BLOCK, so no
queue polling) with ``RedisAsyncResultBackend`` (``PEERS_REDIS_URL``, stream
``PEERS_QUEUE``). taskiq has no result notification: ``wait_result`` polls the result
key every ``check_interval`` (bench/peers.py passes ``PEERS_TASKIQ_POLL``, 0.01 s)."""

from __future__ import annotations

import os

from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")

broker = RedisStreamBroker(url=URL, queue_name=QUEUE).with_result_backend(
    RedisAsyncResultBackend(redis_url=URL)
)


@broker.task(task_name="peers.noop")
async def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
