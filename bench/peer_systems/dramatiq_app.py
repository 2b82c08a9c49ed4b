"""The Dramatiq peer of bench/peers.py: one no-op actor on the Redis broker with the
Results middleware on a Redis result backend (``PEERS_REDIS_URL``, queue
``PEERS_QUEUE``), as Dramatiq's docs set up results; the client waits with
``message.get_result(block=True)`` (a blocking read on the result key)."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends.redis import RedisBackend

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")

backend = RedisBackend(url=URL)
broker = RedisBroker(url=URL)
broker.add_middleware(Results(backend=backend))
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE, store_results=True, max_retries=0)
def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
