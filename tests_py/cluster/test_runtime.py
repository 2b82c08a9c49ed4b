"""run_cluster in this process: standalone mode, three nodes on loopback, startup failures."""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pynenc_cpp import BackendError, BadConfig, _core
from pynenc_cpp.cluster import (
    Activation,
    ClusterAddressInUse,
    ClusterConfig,
    ClusterHandle,
    MemberEvent,
    run_cluster,
)
from tests_py.cluster.harness import wait_for

# Fast timings for loopback; generous waits for a loaded 2-core machine.
FAST = {"heartbeat_ms": 100, "suspect_timeout_ms": 300, "stabilize_ms": 100}
WAIT = 30.0


class Recorder:
    """Start/stop/event callbacks that record what they saw and on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Any]] = []
        self.threads: set[int] = set()

    def start(self, a: Activation) -> None:
        with self.lock:
            self.calls.append(("start", a))
            self.threads.add(threading.get_ident())

    def stop(self, a: Activation, reason: str) -> None:
        with self.lock:
            self.calls.append(("stop", (a, reason)))
            self.threads.add(threading.get_ident())

    def event(self, e: MemberEvent) -> None:
        with self.lock:
            self.calls.append(("event", e))

    def of(self, kind: str) -> list[Any]:
        with self.lock:
            return [x for k, x in self.calls if k == kind]

    def running(self) -> bool:
        with self.lock:
            work = [k for k, _ in self.calls if k in ("start", "stop")]
        return bool(work) and work[-1] == "start"


@pytest.fixture
def handles() -> Iterator[list[ClusterHandle]]:
    """Handles to stop at the end of the test, whatever happens."""
    hs: list[ClusterHandle] = []
    yield hs
    for h in hs:
        h.stop()


# -- standalone ----------------------------------------------------------------------------


def test_standalone_starts_at_once_and_stops_on_handle_stop() -> None:
    rec = Recorder()
    handle = run_cluster(rec.start, rec.stop, ClusterConfig())
    try:
        (activation,) = wait_for(lambda: rec.of("start"), WAIT, what="start")
        assert activation.standalone
        assert activation.lease_until_mono_ms == 0
        assert threading.get_ident() not in rec.threads  # on the node's callback thread
        status = handle.status()
        assert status.standalone and status.address == ""
        assert status.node_id == activation.node
        assert status.transport and set(status.transport.values()) == {0}  # no sockets
        assert rec.of("stop") == []
    finally:
        handle.stop()
    ((a, reason),) = rec.of("stop")
    assert a.node == activation.node and reason == "shutdown"
    handle.stop()  # idempotent: no second stop callback
    assert len(rec.of("stop")) == 1
    assert handle.stopped


def test_standalone_from_env_and_context_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(__import__("os").environ):
        if k.startswith("PYNENC_CPP_CLUSTER_"):
            monkeypatch.delenv(k)
    rec = Recorder()
    with run_cluster(rec.start, rec.stop) as handle:  # config None -> from_env(): standalone
        assert handle.config.standalone
        wait_for(lambda: rec.of("start"), WAIT, what="start")
    assert len(rec.of("stop")) == 1


def test_callback_exceptions_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def bad_start(a: Activation) -> None:
        raise RuntimeError("boom in start")

    stopped = threading.Event()

    def bad_stop(a: Activation, reason: str) -> None:
        stopped.set()
        raise RuntimeError("boom in stop")

    with caplog.at_level(logging.ERROR, logger="pynenc_cpp.cluster"):
        handle = run_cluster(bad_start, bad_stop, ClusterConfig())
        wait_for(lambda: "boom in start" in caplog.text, WAIT, what="start failure logged")
        handle.stop()
    assert stopped.is_set()
    assert "cluster start callback failed" in caplog.text
    assert "boom in stop" in caplog.text


def test_stop_from_inside_a_callback_does_not_deadlock() -> None:
    holder: list[ClusterHandle] = []
    ready = threading.Event()
    stopped = threading.Event()

    def start(a: Activation) -> None:
        ready.wait(WAIT)
        holder[0].stop()  # on the callback thread: returns at once, stops on another thread

    handle = run_cluster(start, lambda a, r: stopped.set(), ClusterConfig())
    holder.append(handle)
    ready.set()
    assert stopped.wait(WAIT)
    wait_for(lambda: handle.stopped, WAIT, what="stopped")
    handle.stop()


def test_event_stream_ends_when_the_handle_stops() -> None:
    handle = run_cluster(lambda a: None, lambda a, r: None, ClusterConfig())
    stream = handle.events()
    unsubscribe = handle.subscribe(lambda e: None)
    assert stream.get(timeout=0.05) is None  # standalone: no membership events
    done = threading.Event()
    seen: list[MemberEvent] = []

    def consume() -> None:
        seen.extend(stream)  # blocks until the stream closes
        done.set()

    threading.Thread(target=consume, daemon=True).start()
    handle.stop()
    assert done.wait(WAIT) and seen == []
    unsubscribe()
    unsubscribe()  # idempotent


def test_non_callable_callbacks_are_rejected() -> None:
    with pytest.raises(TypeError):
        run_cluster(42, lambda a, r: None, ClusterConfig())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        run_cluster(lambda a: None, "stop", ClusterConfig())  # type: ignore[arg-type]


def test_work_callbacks_are_optional() -> None:
    # A node that only hosts coordinator-managed actors has no work of its own.
    with run_cluster(config=ClusterConfig()) as handle:
        assert handle.status().is_master


# -- three nodes in one process --------------------------------------------------------------


def _node(recs: list[Recorder], handles: list[ClusterHandle], seeds: list[str]) -> ClusterHandle:
    rec = Recorder()
    config = ClusterConfig(host="127.0.0.1", port=0, seeds=seeds, quorum=2, **FAST)
    h = run_cluster(rec.start, rec.stop, config)
    h.subscribe(rec.event)
    recs.append(rec)
    handles.append(h)
    return h


def test_three_nodes_elect_exactly_one_master_and_fail_over_on_stop(
    handles: list[ClusterHandle],
) -> None:
    recs: list[Recorder] = []
    first = _node(recs, handles, [])
    stream = first.events()
    seeds = [first.address]
    for _ in range(2):
        seeds.append(_node(recs, handles, list(seeds)).address)
    ids = {h.node_id for h in handles}
    assert len(ids) == 3

    def all_joined() -> bool:
        return all({m.id for m in h.members() if m.state == "alive"} == ids for h in handles)

    wait_for(all_joined, WAIT, what="every node sees all three alive")
    master_idx = wait_for(
        lambda: [i for i, r in enumerate(recs) if r.running()] or None, WAIT, what="a master"
    )
    assert len(master_idx) == 1
    m = master_idx[0]
    assert handles[m].status().is_master
    leaders = {h.status().leader for h in handles}
    assert leaders == {handles[m].node_id}
    for h in handles:  # authenticated links carry the protocol, nothing was refused
        t = h.status().transport
        assert t["connections_established"] >= 2 and t["frames_received"] > 0, t
        assert t["frames_sent"] > 0 and t["handshakes_rejected"] == 0, t

    # Membership events reached the first node's subscribers and its event stream.
    joined = {e.member.id for e in recs[0].of("event") if e.kind == "joined"}
    assert joined >= ids - {first.node_id}
    got = wait_for(lambda: stream.get(timeout=1.0), WAIT, what="a streamed event")
    assert got.kind == "joined" and got.at_monotonic > 0

    # Graceful stop of the master: the others see it leave and one of them takes over.
    handles[m].stop()
    ((_, reason),) = recs[m].of("stop")
    assert reason == "shutdown"
    others = [i for i in range(3) if i != m]
    for i in others:
        wait_for(
            lambda i=i: any(
                e.kind == "left" and e.member.id == handles[m].node_id for e in recs[i].of("event")
            ),
            WAIT,
            what="left event",
        )
    new = wait_for(
        lambda: [i for i in others if recs[i].running()] or None, WAIT, what="a new master"
    )
    assert len(new) == 1
    assert not recs[m].running()


# -- startup failures ------------------------------------------------------------------------


def test_port_in_use_raises_an_oserror() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        started = threading.Event()
        with pytest.raises(ClusterAddressInUse) as info:
            run_cluster(
                lambda a: started.set(),
                lambda a, r: None,
                ClusterConfig(host="127.0.0.1", port=port),
            )
    assert isinstance(info.value, OSError) and isinstance(info.value, BackendError)
    assert info.value.errno == errno.EADDRINUSE
    assert str(port) in str(info.value)
    assert not started.is_set()


def test_unwritable_state_dir_raises_bad_config(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")  # works as root too, unlike chmod
    state_dir = blocker / "sub"
    started = threading.Event()
    with pytest.raises(BadConfig, match="state dir") as info:
        run_cluster(
            lambda a: started.set(),
            lambda a, r: None,
            ClusterConfig(host="127.0.0.1", state_dir=str(state_dir)),
        )
    assert isinstance(info.value, ValueError)
    assert str(state_dir) in str(info.value)
    assert not started.is_set()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "0.0.0.0"])
def test_an_empty_secret_is_refused_by_the_engine_on_every_host(host: str) -> None:
    options = ClusterConfig(host="127.0.0.1", secret="k").to_options()
    options.host = host
    options.secret = ""  # bypasses ClusterConfig (which reads the secret file): no empty key
    with pytest.raises(BadConfig, match="secret"):
        _core.ClusterNode.start(options, lambda a: None, lambda a, r: None)


def test_engine_validates_options_again() -> None:
    options = ClusterConfig(host="127.0.0.1").to_options()
    options.heartbeat_ms = 0
    with pytest.raises(BadConfig, match="heartbeat_ms"):
        _core.ClusterNode.start(options, lambda a: None, lambda a, r: None)
    with pytest.raises(ValueError, match="election"):
        options.election = "bogus"


# -- engine log lines ------------------------------------------------------------------------


def test_engine_log_lines_reach_the_python_logger(
    handles: list[ClusterHandle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pynenc_cpp.cluster")
    rec = Recorder()
    h = run_cluster(
        rec.start, rec.stop, ClusterConfig(host="127.0.0.1", port=0, secret="s3cret", **FAST)
    )
    handles.append(h)
    host, port = h.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(b"\x00\x00\x00\x07\x09garbage")  # a frame of an unknown version
        raw.settimeout(5)
        try:
            assert raw.recv(64) == b""  # the node closed the connection
        except ConnectionResetError:
            pass

    def warned() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "pynenc_cpp.cluster"
            and r.levelno == logging.WARNING
            and "refused connection" in r.getMessage()
        ]

    (first, *_) = wait_for(warned, WAIT, what="a warning from the engine")
    assert first.threadName != threading.current_thread().name  # the node's callback thread
    assert (
        h.status().transport["frames_malformed"] + h.status().transport["handshakes_rejected"] >= 1
    )
