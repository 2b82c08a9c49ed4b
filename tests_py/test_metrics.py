"""Prometheus metrics (docs/metrics.md): scraped over HTTP from a running CppRunner
and a cluster node, and parsed with prometheus_client's own parser.

Engine counters are per process, and this process runs other tests: every check on
a counter compares two scrapes around the work it caused.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import _core
from pynenc_cpp.cluster import ActorSpec, ClusterConfig, SingletonSpec, run_cluster
from pynenc_cpp.metrics import register_app, set_engine_metrics_enabled
from tests_py import runner_tasks as rt
from tests_py.cluster.harness import wait_for
from tests_py.test_cpp_runner import FAST, running
from tests_py.test_cpp_runner import build_app as build_runner_app

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# pynenc's recovery crons would add their own invocations to the counted window.
NO_CRON = {
    "recover_pending_invocations_cron": "0 0 1 1 *",
    "recover_running_invocations_cron": "0 0 1 1 *",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        return parse(r.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} not scraped; have {sorted(k[0] for k in samples)}"
    return samples[key]


def build_app(backend: str, tmp_path: Path, request: pytest.FixtureRequest, port: int) -> Pynenc:
    config = {"cpp_runner_metrics_port": port, **NO_CRON}
    return build_runner_app(backend, tmp_path, request, config=config, workers=2)


@pytest.mark.parametrize("backend", ["mem", "sqlite", "redis"])
def test_cpp_runner_serves_engine_and_app_metrics(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    port = free_port()
    app = build_app(backend, tmp_path, request, port)
    n = 20
    with running(app):
        before = scrape(port)
        invocations = [rt.add(i, i) for i in range(n)]
        assert [inv.result for inv in invocations] == [2 * i for i in range(n)]
        failing = rt.boom()
        with pytest.raises(ValueError):
            _ = failing.result
        after = scrape(port)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Beside ours, the runner may run pynenc's own core tasks (its recovery crons
    # fire at start-up when the minute matches): every invocation of this new app
    # that is not ours is one of them, and each may fall inside the window.
    app_id = app.app_id
    stored = sum(
        value(after, "pynenc_cpp_invocations", app_id=app_id, status=s)
        for s in _core.status_names()
    )
    extra = stored - (n + 1)
    assert 0 <= extra <= 2, extra

    def about(got: float, want: int) -> bool:
        return want <= got <= want + extra

    assert about(delta("pynenc_cpp_invocations_submitted_total"), n + 1)
    assert about(delta("pynenc_cpp_invocations_finished_total"), n)
    assert delta("pynenc_cpp_invocations_failed_total") == 1
    assert about(delta("pynenc_cpp_invocation_status_changes_total", status="running"), n + 1)
    assert about(delta("pynenc_cpp_task_run_seconds_count"), n + 1)
    assert about(delta("pynenc_cpp_queue_wait_seconds_count"), n + 1)
    assert delta("pynenc_cpp_task_run_seconds_bucket", le="+Inf") == delta(
        "pynenc_cpp_task_run_seconds_count"
    )
    assert delta("pynenc_cpp_task_run_seconds_sum") >= 0
    # Buckets are cumulative and end at the count.
    buckets = sorted(
        (float(dict(k[1])["le"]), v)
        for k, v in after.items()
        if k[0] == "pynenc_cpp_task_run_seconds_bucket"
    )
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert buckets[-1][1] == value(after, "pynenc_cpp_task_run_seconds_count")

    # Storage gauges of this app, read at scrape time.
    assert value(after, "pynenc_cpp_storage_up", app_id=app_id) == 1
    assert value(after, "pynenc_cpp_invocations", app_id=app_id, status="success") == n + extra
    assert value(after, "pynenc_cpp_invocations", app_id=app_id, status="failed") == 1
    assert value(after, "pynenc_cpp_invocations", app_id=app_id, status="pending") == 0
    assert value(after, "pynenc_cpp_queue_depth", app_id=app_id, queue="default") == 0
    assert value(after, "pynenc_cpp_runners_alive", app_id=app_id) >= 1
    assert value(after, "pynenc_cpp_oldest_waiting_seconds", app_id=app_id) == 0
    if backend == "redis":
        assert value(after, "pynenc_cpp_redis_connections_opened_total") >= 1
    # The server is gone with the runner.
    with pytest.raises(OSError):
        scrape(port)


def test_queued_work_shows_in_the_gauges_and_errors_are_counted(tmp_path: Path) -> None:
    app = (
        PynencBuilder()
        .app_id(f"metrics-q-{uuid.uuid4().hex[:8]}")
        .cpp_sqlite(path=tmp_path / "q.db")
        .custom_config(**FAST)
        .build()
    )
    rt.use(app)
    registry = CollectorRegistry(auto_describe=False)
    register_app(app, registry)
    for i in range(3):
        rt.add(i, 1)  # no runner: they stay queued
    from prometheus_client import generate_latest

    other = PynencBuilder().app_id(f"metrics-o-{uuid.uuid4().hex[:8]}").cpp_mem().build()
    register_app(other, registry)  # a second app shares the families of the first
    register_app(app, registry)  # and registering one again changes nothing
    samples = parse(generate_latest(registry).decode())
    app_id = app.app_id
    assert value(samples, "pynenc_cpp_queue_depth", app_id=app_id, queue="default") == 3
    assert value(samples, "pynenc_cpp_oldest_waiting_seconds", app_id=app_id) > 0
    assert value(samples, "pynenc_cpp_invocations", app_id=app_id, status="registered") == 3
    assert value(samples, "pynenc_cpp_queue_depth", app_id=other.app_id, queue="default") == 0
    text = generate_latest(registry).decode()
    assert text.count("# TYPE pynenc_cpp_queue_depth gauge") == 1

    # A storage that cannot be read: storage_up 0 (the scrape still answers), and
    # the backend errors that reached Python are counted, by cause.
    unreachable = (
        PynencBuilder()
        .app_id(app.app_id)
        .cpp_redis(f"redis://127.0.0.1:{free_port()}/0?connect_timeout_ms=100")
        .custom_config(**FAST)
        .build()
    )
    before = _core.engine_metrics()
    reg2 = CollectorRegistry(auto_describe=False)
    register_app(unreachable, reg2)
    samples = parse(generate_latest(reg2).decode())
    assert value(samples, "pynenc_cpp_storage_up", app_id=app_id) == 0
    after = _core.engine_metrics()
    assert after["backend_errors"] > before["backend_errors"]
    assert after["backend_errors_connection"] > before["backend_errors_connection"]


#: Takes the write lock of the SQLite file argv[1], says "locked", commits at a line.
HOLD_WRITE_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


def test_sqlite_lock_contention_is_counted(tmp_path: Path) -> None:
    app = PynencBuilder().app_id(f"metrics-busy-{uuid.uuid4().hex[:8]}")
    app = app.cpp_sqlite(path=tmp_path / "busy.db").custom_config(**FAST).build()
    rt.use(app)
    rt.add(0, 0)  # the schema exists before the lock is taken
    registry = CollectorRegistry(auto_describe=False)
    register_app(app, registry)
    from prometheus_client import generate_latest

    before = parse(generate_latest(registry).decode())
    # Another process holds the file's write lock. (Not this one: the engine links its
    # own SQLite, and POSIX locks of one process do not exclude each other across two
    # copies of the library: docs/backends/sqlite.md.)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(tmp_path / "busy.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        submitted = threading.Thread(target=rt.add, args=(1, 2))
        submitted.start()
        time.sleep(0.15)
        holder.communicate("\n", timeout=10)  # COMMIT, and the holder exits
        submitted.join(10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert not submitted.is_alive()
    after = parse(generate_latest(registry).decode())
    waits = "pynenc_cpp_sqlite_busy_waits_total"
    slept = "pynenc_cpp_sqlite_busy_wait_seconds_total"
    assert value(after, waits) >= value(before, waits) + 2
    # It slept about as long as the lock was held (in pauses of at most 1 ms).
    assert value(after, slept) - value(before, slept) >= 0.05


def test_engine_counting_can_be_turned_off(cpp_mem_app: Pynenc) -> None:
    rt.use(cpp_mem_app)
    set_engine_metrics_enabled(False)
    try:
        before = _core.engine_metrics()
        assert before["enabled"] is False
        rt.add(1, 2)
        assert _core.engine_metrics()["entered"] == before["entered"]
    finally:
        set_engine_metrics_enabled(True)
    before = _core.engine_metrics()["entered"]["registered"]
    rt.add(1, 2)
    assert _core.engine_metrics()["entered"]["registered"] == before + 1


def test_a_taken_metrics_port_fails_the_runner_start_clearly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = (
            PynencBuilder()
            .app_id(f"metrics-taken-{uuid.uuid4().hex[:8]}")
            .cpp_sqlite(path=tmp_path / "t.db")
            .cpp_runner(workers=1)
            .custom_config(cpp_runner_metrics_port=port, **FAST, **NO_CRON)
            .build()
        )
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            app.runner.on_start()
        assert app.runner._engine is None  # nothing started


def test_metrics_are_off_by_default() -> None:
    app = PynencBuilder().app_id("metrics-off").cpp_mem().cpp_runner(workers=1).build()
    assert int(app.runner.conf.cpp_runner_metrics_port) == 0


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[tuple[Any, int]]:
    port = free_port()
    cfg = ClusterConfig(
        host="127.0.0.1",
        heartbeat_ms=100,
        suspect_timeout_ms=300,
        stabilize_ms=100,
        generation_source=f"sqlite://{tmp_path}/gen.db",
        metrics_port=port,
    )
    handle = run_cluster(config=cfg)
    try:
        yield handle, port
    finally:
        handle.stop()


class _Counter:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def on_message(self, payload: bytes) -> bytes:
        return payload


def test_cluster_node_serves_cluster_metrics(cluster_node: tuple[Any, int]) -> None:
    handle, port = cluster_node
    node = handle.node_id
    wait_for(lambda: handle.status().leader == node, 30, what="the node elects itself")
    handle.register_actor_type("svc", _Counter)
    handle.start_singleton(SingletonSpec("the-one", "svc"), timeout=10)
    handle.submit(ActorSpec("plain", "svc"), timeout=10)
    handle.wait_running("the-one")
    handle.wait_running("plain")
    wait_for(
        lambda: any(h.phase == "active" for h in handle.status().hosted if h.label == "the-one"),
        30,
        what="the singleton is active here",
    )
    samples = scrape(port)
    assert value(samples, "pynenc_cpp_cluster_members", node=node, state="alive") == 1
    assert value(samples, "pynenc_cpp_cluster_leader", node=node, leader=node) == 1
    assert value(samples, "pynenc_cpp_cluster_is_leader", node=node) == 1
    assert value(samples, "pynenc_cpp_cluster_has_quorum", node=node) == 1
    epoch = str(handle.status().epoch)
    assert value(samples, "pynenc_cpp_cluster_epoch_info", node=node, epoch=epoch) == 1
    assert value(samples, "pynenc_cpp_cluster_specs", node=node, state="running") == 2
    assert value(samples, "pynenc_cpp_cluster_specs", node=node, state="unplaced") == 0
    assert (
        value(
            samples,
            "pynenc_cpp_cluster_hosted_instances",
            node=node,
            kind="singleton",
            phase="active",
        )
        == 1
    )
    generation = next(h.generation for h in handle.status().hosted if h.label == "the-one")
    assert (
        value(samples, "pynenc_cpp_cluster_singleton_generation", node=node, label="the-one")
        == generation.packed
    )
    for counter in ("frames_sent", "frames_received", "handshakes_rejected", "records_rejected"):
        assert value(samples, f"pynenc_cpp_cluster_transport_{counter}_total", node=node) >= 0
    # The engine's own counters come with it.
    assert ("pynenc_cpp_invocations_submitted_total", frozenset()) in samples
    handle.stop()
    with pytest.raises(OSError):
        scrape(port)


def test_a_bad_metrics_port_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="metrics_port"):
        ClusterConfig(metrics_port=70000)
