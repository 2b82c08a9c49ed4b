"""The Huey peers of bench/peers.py: one no-op task on ``RedisHuey`` (``PEERS_REDIS_URL``),
or on ``SqliteHuey`` (one file, ``PEERS_HUEY_SQLITE``).

Run as Huey's docs recommend for throughput and low latency: the Redis storage with
``blocking=True`` (the consumer waits on BRPOP, no queue polling), thread workers
(``huey_consumer ... -w 2 -k thread``), and, in the ``notify_result`` row, results
announced on a per-task notification key that ``result.get(blocking=True)`` waits on
with BLPOP (without it, the client polls the result with Huey's backoff).
"""

from __future__ import annotations

import os

from huey import Huey, RedisHuey, SqliteHuey

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")
NOTIFY = os.environ.get("PEERS_HUEY_NOTIFY", "0") == "1"
#: Non-empty: Huey's SQLite storage in this file instead of Redis.
SQLITE = os.environ.get("PEERS_HUEY_SQLITE", "")

huey: Huey = (
    SqliteHuey(QUEUE, filename=SQLITE)
    if SQLITE
    else RedisHuey(QUEUE, url=URL, blocking=True, notify_result=NOTIFY)
)


@huey.task()
def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
