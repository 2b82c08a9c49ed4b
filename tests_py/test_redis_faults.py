"""Redis backends under real faults: an unreachable server, and a server
restarted (append-only) under a running client."""

from __future__ import annotations

import time
import uuid

import pytest
from pynenc import PynencBuilder

from pynenc_cpp import BackendError, _core
from tests_py.redis_server import RedisServer, free_port


def test_closed_port_is_a_clear_error_within_the_timeout() -> None:
    port = free_port()  # nothing listens there
    url = f"redis://127.0.0.1:{port}/0?connect_timeout_ms=300"
    app = PynencBuilder().app_id("closed-port").cpp_redis(url).build()
    start = time.monotonic()
    with pytest.raises(
        BackendError, match=rf"cannot reach redis at 127\.0\.0\.1:{port}: .*refused"
    ):
        _ = app.broker
    assert time.monotonic() - start < 3


def test_restart_under_a_running_client_loses_no_acknowledged_invocation(
    redis_server: RedisServer,
) -> None:
    app_id = f"restart-{uuid.uuid4().hex[:6]}"
    broker = _core.Broker(redis_server.url, app_id)
    acknowledged: list[str] = []
    for i in range(50):
        broker.route([f"before-{i}"], "q", 0.0)
        acknowledged.append(f"before-{i}")

    redis_server.stop()
    outcomes = []
    for i in range(5):  # server down: each call raises a clear connection error
        with pytest.raises(BackendError, match=str(redis_server.port)):
            broker.route([f"during-{i}"], "q", 0.0)
        outcomes.append("error")
    redis_server.start()  # same port, same append-only file

    for i in range(50):  # each call succeeds after reconnecting
        broker.route([f"after-{i}"], "q", 0.0)
        acknowledged.append(f"after-{i}")

    popped = set()
    while (inv := broker.retrieve("q", 0.0)) is not None:
        popped.add(inv)
    assert set(acknowledged) <= popped
    assert outcomes == ["error"] * 5
