"""CppMemBroker through a cpp_mem app, and the engine broker directly."""

from __future__ import annotations

import threading
import time

import pytest
from pynenc import Pynenc
from pynenc.identifiers.invocation_id import InvocationId

from pynenc_cpp import CppMemBroker, _core


def test_app_uses_native_broker(cpp_mem_app: Pynenc) -> None:
    assert isinstance(cpp_mem_app.broker, CppMemBroker)


def test_route_retrieve_priority_and_count(cpp_mem_app: Pynenc) -> None:
    broker = cpp_mem_app.broker
    queue = broker.conf.queues[0]
    broker.route_invocations([InvocationId("a"), InvocationId("b")], queue, 0.0)
    broker.route_invocation(InvocationId("urgent"), queue, 5.0)
    assert broker.count_invocations() == 3
    got = [broker.retrieve_invocation() for _ in range(4)]
    assert got == ["urgent", "a", "b", None]
    assert broker.count_invocations() == 0


def test_purge(cpp_mem_app: Pynenc) -> None:
    broker = cpp_mem_app.broker
    broker.route_invocation(InvocationId("x"), broker.conf.queues[0], 0.0)
    broker.purge()
    assert broker.count_invocations() == 0
    assert broker.retrieve_invocation() is None


def test_queues_are_independent(cpp_mem_app: Pynenc) -> None:
    """pynenc allows unconfigured queues (with a warning); each is its own FIFO."""
    broker = cpp_mem_app.broker
    broker.route_invocation(InvocationId("in-other"), "other", 0.0)
    assert broker.retrieve_invocation() is None
    assert broker.count_invocations(["other"]) == 1
    assert broker.retrieve_invocation("other") == "in-other"


def test_blocking_retrieve_wakes_on_route_without_holding_the_gil(cpp_mem_app: Pynenc) -> None:
    broker = cpp_mem_app.broker
    queue = broker.conf.queues[0]
    result: list[InvocationId | None] = []
    waiter = threading.Thread(
        target=lambda: result.append(broker.retrieve_invocation_blocking(10.0))
    )
    start = time.monotonic()
    waiter.start()
    # The waiter blocks in C++ with the GIL released: this thread keeps running Python.
    spins = 0
    while time.monotonic() - start < 0.1:
        spins += 1
    assert spins > 1000
    broker.route_invocation(InvocationId("wake"), queue, 0.0)
    waiter.join(5.0)
    assert not waiter.is_alive()
    assert result == ["wake"]
    assert time.monotonic() - start < 5.0


def test_engine_broker_interrupt_and_bad_timeout() -> None:
    broker = _core.Broker()
    out: list[str | None] = []
    t = threading.Thread(target=lambda: out.append(broker.retrieve("q", 30.0)))
    t.start()
    time.sleep(0.05)
    broker.interrupt()
    t.join(5.0)
    assert out == [None]
    with pytest.raises(ValueError, match="timeout_seconds"):
        broker.retrieve("q", -1.0)
    with pytest.raises(TypeError):
        broker.route([1, 2], "q", 0.0)  # ids must be str
