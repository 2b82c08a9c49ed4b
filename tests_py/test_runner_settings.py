"""RunnerEngine's arguments (``_core.RunnerSettings``, ``RunnerSource``,
``RunnerCallbacks``): each is checked when it is made, and a bad value is named."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pynenc import Pynenc

from pynenc_cpp import _core


def _settings(**changes: Any) -> _core.RunnerSettings:
    args: dict[str, Any] = {
        "workers": 2,
        "task_timeout_sec": 0.0,
        "heartbeat_interval_sec": 1.0,
        "management_interval_sec": 1.0,
    }
    args.update(changes)
    return _core.RunnerSettings(**args)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"workers": 0}, "workers must be >= 1, got 0"),
        ({"prefetch": 0}, r"prefetch must be in \[1, 1000\], got 0"),
        ({"prefetch": 1001}, r"prefetch must be in \[1, 1000\], got 1001"),
        ({"task_timeout_sec": -1.0}, "task_timeout_sec must be a number of seconds >= 0"),
        ({"heartbeat_interval_sec": float("nan")}, "heartbeat_interval_sec must be"),
        ({"retrieve_wait_sec": 1e12}, "retrieve_wait_sec must be"),
        ({"idle_backoff_sec": -0.5}, "idle_backoff_sec must be"),
    ],
)
def test_bad_settings_are_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _settings(**changes)


def test_good_settings_are_taken() -> None:
    _settings(prefetch=1000, take_ahead=False, task_timeout_sec=30.0)


def test_a_source_needs_a_broker_or_a_poll() -> None:
    with pytest.raises(ValueError, match="either an engine broker or fallback_next"):
        _core.RunnerSource()
    _core.RunnerSource(fallback_next=lambda: None)


def test_a_source_checks_its_broker_and_lifecycle(cpp_mem_app: Pynenc) -> None:
    storage = cpp_mem_app.broker.storage  # type: ignore[attr-defined]
    broker = storage.broker()
    with pytest.raises(ValueError, match="queues must not be empty"):
        _core.RunnerSource(broker, [])
    with pytest.raises(TypeError, match="broker must be an engine Broker .*, got object"):
        _core.RunnerSource(object(), ["q"])
    with pytest.raises(ValueError, match="a lifecycle needs its engine broker"):
        _core.RunnerSource(lifecycle=object(), fallback_next=lambda: None)
    with pytest.raises(TypeError, match="lifecycle must be an engine Lifecycle .*, got object"):
        _core.RunnerSource(broker, ["q"], lifecycle=object())
    _core.RunnerSource(broker, ["q"])


def test_callbacks_need_execute_and_a_lifecycle_needs_its_taken_pair(
    cpp_mem_app: Pynenc,
) -> None:
    with pytest.raises(TypeError, match="execute must be callable"):
        _core.RunnerCallbacks(None)
    with pytest.raises(TypeError, match="execute must be callable"):
        _core.RunnerCallbacks(42)
    storage = cpp_mem_app.broker.storage  # type: ignore[attr-defined]
    lifecycle = storage.lifecycle(False, "StatusContext", "ResultContext", "ExceptionContext")
    source = _core.RunnerSource(storage.broker(), ["q"], lifecycle=lifecycle, runner_id="r1")
    with pytest.raises(TypeError, match="execute_taken must be callable"):
        _core.RunnerEngine(_settings(), source, _core.RunnerCallbacks(lambda *a: None))
    with pytest.raises(TypeError, match="finished_taken must be callable"):
        _core.RunnerEngine(
            _settings(),
            source,
            _core.RunnerCallbacks(lambda *a: None, execute_taken=lambda *a: None),
        )


def test_an_engine_polls_python_and_runs_what_it_gets() -> None:
    pending = ["a", "b"]
    ran: list[str] = []
    source = _core.RunnerSource(fallback_next=lambda: pending.pop(0) if pending else None)
    engine = _core.RunnerEngine(
        _settings(workers=1, idle_backoff_sec=0.001),
        source,
        _core.RunnerCallbacks(lambda invocation_id, claimed: ran.append(invocation_id)),
    )
    engine.start()
    try:
        deadline = time.monotonic() + 10
        while len(ran) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        engine.stop()
        assert engine.wait(10)
    assert ran == ["a", "b"]


def test_a_wrapper_that_forwards_to_an_engine_object_is_taken(cpp_mem_app: Pynenc) -> None:
    # pybind11 reads the engine object through the wrapper (its conduit method), as
    # tests that count a lifecycle's calls wrap it.
    class Forwarding:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    storage = cpp_mem_app.broker.storage  # type: ignore[attr-defined]
    lifecycle = storage.lifecycle(False, "StatusContext", "ResultContext", "ExceptionContext")
    _core.RunnerSource(Forwarding(storage.broker()), ["q"], lifecycle=Forwarding(lifecycle))


def test_a_pending_finish_carries_its_fields() -> None:
    state = (object(),)
    p = _core.PendingFinish("inv-1", '"r"', "mod.task", True, "runner-1", state, False)
    assert (p.invocation_id, p.serialized, p.task_key, p.release_waiters, p.runner_id) == (
        "inv-1",
        '"r"',
        "mod.task",
        True,
        "runner-1",
    )
    assert p.state is state
    assert p.logs is False
