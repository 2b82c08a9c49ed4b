"""The rustvello peers of bench/peers.py: one no-op task on a standalone rustvello
``App`` (the Rust engine that pynenc-rustvello wraps, through its own Python API, no
pynenc), on Redis (``PEERS_REDIS_URL``) or on SQLite (``PEERS_RUSTVELLO_SQLITE``: the
path rustvello derives its file from; ``PEERS_RUSTVELLO_SYNCHRONOUS``: SQLite's
``synchronous``, rustvello's default FULL); the app id is ``PEERS_QUEUE``.

One worker process (``python -m rustvello.worker peer_systems.rustvello_app:app
--workers 2``: 2 worker slots in one process). The client submits with ``noop(i)``
and waits with ``invocation.result(timeout=..., poll_interval=...)``, which polls the
invocation's status. rustvello polls on both sides (the runner's ``--idle-sleep-ms``
and the result's ``poll_interval``, 50 ms each by default): bench/peers.py sets both,
and the worker's ``--loglevel`` (it logs every invocation at its default level).
"""

from __future__ import annotations

import os

from rustvello import App

URL = os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("PEERS_QUEUE", "peers")
#: Non-empty: rustvello's SQLite backend in this file instead of Redis.
SQLITE = os.environ.get("PEERS_RUSTVELLO_SQLITE", "")
#: SQLite's synchronous pragma (rustvello's default is FULL).
SYNCHRONOUS = os.environ.get("PEERS_RUSTVELLO_SYNCHRONOUS", "FULL")

app = (
    App(QUEUE, backend="sqlite", db_path=SQLITE, sqlite_synchronous=SYNCHRONOUS)
    if SQLITE
    else App(QUEUE, backend="redis", redis_url=URL)
)


@app.task
def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
