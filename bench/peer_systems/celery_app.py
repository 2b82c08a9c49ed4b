"""The Celery peer of bench/peers.py: one no-op task, Redis broker and result
backend (``PEERS_REDIS_URL``), queue ``PEERS_QUEUE``."""

from __future__ import annotations

import os

from celery import Celery

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")

app = Celery("peers", broker=URL, backend=URL)
app.conf.update(
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    result_expires=3600,
)


@app.task(name="peers.noop")
def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
