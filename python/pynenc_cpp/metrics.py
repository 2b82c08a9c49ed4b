"""Prometheus metrics of pynenc-cpp: the task engine, an app's storage, a cluster node.

Three collectors for ``prometheus_client`` (``pip install pynenc-cpp[metrics]``):

* :class:`EngineCollector`: this process's engine counters and histograms (status
  changes applied, task run time, queue wait, backend errors, Redis connections),
  counted in C++ with one relaxed atomic add per event and read at scrape time;
* :class:`AppCollector`: gauges read from an app's storage at scrape time (queue
  depths, invocations by status, runners alive, oldest waiting invocation);
* :class:`ClusterCollector`: a cluster node's view (members by state, leader, epoch,
  lease, transport counters, hosted instances, specs placed and unplaced).

``CppRunner`` serves the first two on ``cpp_runner_metrics_port`` and a cluster node
the first and the third on ``ClusterConfig.metrics_port`` (both off by default).
To add them to a registry you already expose instead, call :func:`register_engine`,
:func:`register_app` or :func:`register_cluster` with it. Every metric is listed in
``docs/metrics.md``.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pynenc_cpp import _core

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry
    from pynenc import Pynenc

    from pynenc_cpp.cluster.runtime import ClusterHandle

logger = logging.getLogger(__name__)

__all__ = [
    "AppCollector",
    "ClusterCollector",
    "EngineCollector",
    "MetricsServer",
    "engine_metrics_enabled",
    "register_app",
    "register_cluster",
    "register_engine",
    "serve",
    "set_engine_metrics_enabled",
]

_PREFIX = "pynenc_cpp_"


def _prometheus() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core  # noqa: F401  (the *MetricFamily classes)
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "pynenc_cpp metrics need prometheus_client: pip install 'pynenc-cpp[metrics]'"
        ) from exc
    return prometheus_client


def set_engine_metrics_enabled(enabled: bool) -> None:
    """Turns the engine's counting on or off for this process (on by default)."""
    _core.set_engine_metrics_enabled(bool(enabled))


def engine_metrics_enabled() -> bool:
    return bool(_core.engine_metrics()["enabled"])


def _histogram(core_metric: Any, name: str, doc: str, h: dict[str, Any]) -> Any:
    buckets: list[tuple[str, float]] = []
    cumulative = 0
    for bound_us, n in zip(h["bounds_us"], h["buckets"], strict=False):
        cumulative += n
        buckets.append((repr(bound_us / 1e6), float(cumulative)))
    buckets.append(("+Inf", float(h["count"])))
    return core_metric.HistogramMetricFamily(
        name, doc, buckets=buckets, sum_value=h["sum_us"] / 1e6
    )


class EngineCollector:
    """This process's task-engine metrics (``pynenc_cpp._core.engine_metrics``)."""

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        core = _prometheus().core
        m = _core.engine_metrics()
        entered: dict[str, int] = m["entered"]
        by_status = core.CounterMetricFamily(
            _PREFIX + "invocation_status_changes",
            "Status changes applied by this process, by the status entered "
            "(registrations count as 'registered').",
            labels=["status"],
        )
        for status, n in entered.items():
            by_status.add_metric([status], n)
        yield by_status
        for name, doc, statuses in (
            ("invocations_submitted", "Invocations registered (submitted).", ["registered"]),
            ("invocations_finished", "Invocations that ended SUCCESS.", ["success"]),
            ("invocations_failed", "Invocations that ended FAILED.", ["failed"]),
            ("invocations_retried", "Invocations set to RETRY.", ["retry"]),
            (
                "invocations_recovered",
                "Invocations taken back from a dead runner (PENDING_RECOVERY or RUNNING_RECOVERY).",
                ["pending_recovery", "running_recovery"],
            ),
        ):
            yield core.CounterMetricFamily(
                _PREFIX + name, doc, value=sum(entered.get(s, 0) for s in statuses)
            )
        errors = core.CounterMetricFamily(
            _PREFIX + "backend_errors",
            "Backend failures that reached a caller, by cause ('connection': a lost or "
            "refused connection).",
            labels=["cause"],
        )
        errors.add_metric(["connection"], m["backend_errors_connection"])
        errors.add_metric(["other"], m["backend_errors"] - m["backend_errors_connection"])
        yield errors
        for name, doc, count in (
            (
                "redis_connections_opened",
                "Redis connections opened (a reconnect counts one here and one lost).",
                m["redis_connections_opened"],
            ),
            (
                "redis_connections_lost",
                "Pooled Redis connections dropped as broken.",
                m["redis_connections_lost"],
            ),
            (
                "sqlite_busy_waits",
                "Pauses of an SQLite connection that found the file locked by another writer.",
                m["sqlite_busy_waits"],
            ),
            (
                "sqlite_busy_wait_seconds",
                "Time SQLite connections paused for a lock held by another writer.",
                m["sqlite_busy_wait_us"] / 1e6,
            ),
        ):
            yield core.CounterMetricFamily(_PREFIX + name, doc, value=count)
        yield _histogram(
            core,
            _PREFIX + "queue_wait_seconds",
            "Time from routed (registered, rerouted, retry) to claimed (PENDING).",
            m["queue_wait"],
        )
        yield _histogram(
            core,
            _PREFIX + "task_run_seconds",
            "Time from RUNNING to SUCCESS, FAILED or RETRY.",
            m["run_time"],
        )


class _PerRegistry:
    """A collector shared by every target (app, node) added to one registry: they
    share its metric families, labelled per target. ``describe`` is empty, so
    registering reads nothing (no storage query, no cluster request)."""

    def __init__(self, *targets: Any) -> None:
        self.targets: list[Any] = list(targets)

    def add(self, target: Any) -> None:
        if all(t is not target for t in self.targets):
            self.targets.append(target)

    def describe(self) -> list[Any]:
        return []


class AppCollector(_PerRegistry):
    """Gauges read from the storage of each app added (a few queries per app and scrape).

    One per registry: the apps share its metric families (``app_id`` labels them).
    """

    @property
    def apps(self) -> list[Pynenc]:
        return self.targets

    def collect(self) -> Iterator[Any]:
        from pynenc_cpp.cli import collect_info

        core = _prometheus().core
        up = core.GaugeMetricFamily(
            _PREFIX + "storage_up",
            "1 when the last scrape could read the app's storage, else 0.",
            labels=["app_id"],
        )
        depth = core.GaugeMetricFamily(
            _PREFIX + "queue_depth", "Invocations queued, per queue.", labels=["app_id", "queue"]
        )
        invocations = core.GaugeMetricFamily(
            _PREFIX + "invocations",
            "Invocations stored, by current status.",
            labels=["app_id", "status"],
        )
        runners = core.GaugeMetricFamily(
            _PREFIX + "runners_alive",
            "Runners whose heartbeat is recent (pynenc's runner_considered_dead_after).",
            labels=["app_id"],
        )
        oldest = core.GaugeMetricFamily(
            _PREFIX + "oldest_waiting_seconds",
            "Age of the oldest invocation waiting for a runner (0: none waiting).",
            labels=["app_id"],
        )
        for app in list(self.apps):
            app_id = app.app_id
            try:
                info = collect_info(app)
            except Exception:
                logger.warning(
                    "metrics: reading the storage of app %r failed", app_id, exc_info=True
                )
                up.add_metric([app_id], 0)
                continue
            up.add_metric([app_id], 1)
            for queue, n in info["queues"].items():
                depth.add_metric([app_id, queue], n)
            for status in _core.status_names():
                invocations.add_metric(
                    [app_id, status], info["invocations_by_status"].get(status, 0)
                )
            runners.add_metric([app_id], len(info["runners_alive"]))
            waiting = info["oldest_waiting"]
            oldest.add_metric([app_id], waiting["age_sec"] if waiting else 0.0)
        yield from (up, depth, invocations, runners, oldest)


class ClusterCollector(_PerRegistry):
    """The view of each cluster node added: membership, election, lease, transport,
    instances, specs (one per registry; ``node`` labels the samples).

    ``spec_timeout`` bounds the one request to the leader that lists the specs;
    without a leader the spec gauges are left out of that scrape.
    """

    def __init__(self, *handles: ClusterHandle, spec_timeout: float = 1.0) -> None:
        super().__init__(*handles)
        self.spec_timeout = spec_timeout

    @property
    def handles(self) -> list[ClusterHandle]:
        return self.targets

    def collect(self) -> Iterator[Any]:
        core = _prometheus().core
        families: dict[str, Any] = {}

        def family(kind: str, name: str, doc: str, labels: list[str]) -> Any:
            if name not in families:
                cls = core.CounterMetricFamily if kind == "counter" else core.GaugeMetricFamily
                families[name] = cls(_PREFIX + name, doc, labels=labels)
            return families[name]

        for handle in list(self.handles):
            if handle.stopped:
                continue
            self._collect_one(handle, family)
        yield from families.values()

    def _collect_one(self, handle: ClusterHandle, family: Any) -> None:
        s = handle.status()
        node = s.node_id
        counts = {"alive": 0, "suspect": 0, "dead": 0, "left": 0}
        for m in handle.members():
            counts[m.state] = counts.get(m.state, 0) + 1
        members = family(
            "gauge", "cluster_members", "Members this node knows, by state.", ["node", "state"]
        )
        for state, n in counts.items():
            members.add_metric([node, state], n)
        leader = family(
            "gauge",
            "cluster_leader",
            "1 for the node this node sees as elected (no sample: no leader).",
            ["node", "leader"],
        )
        if s.leader:
            leader.add_metric([node, s.leader], 1)
        for name, doc, value in (
            ("cluster_is_leader", "1 while this node is the elected one.", s.leader == node),
            ("cluster_has_quorum", "1 while live members reach quorum.", s.has_quorum),
            ("cluster_incarnation", "This node's SWIM incarnation.", s.incarnation),
            (
                "cluster_is_master",
                "1 while this node holds the lease and runs the work.",
                s.is_master,
            ),
        ):
            family("gauge", name, doc, ["node"]).add_metric([node], float(value))
        family(
            "gauge",
            "cluster_epoch_info",
            "1, labelled with the agreed epoch of this node's view (a hash of the membership: "
            "nodes that agree show the same value).",
            ["node", "epoch"],
        ).add_metric([node, str(s.epoch)], 1)
        remaining = 0.0
        if s.lease_until_mono_ms:
            remaining = max(s.lease_until_mono_ms / 1000.0 - time.monotonic(), 0.0)
        family(
            "gauge",
            "cluster_lease_remaining_seconds",
            "Time left on this node's lease (0: it holds none).",
            ["node"],
        ).add_metric([node], remaining)
        for key, value in sorted(s.transport.items()):
            family(
                "counter",
                f"cluster_transport_{key}",
                f"Transport counter {key} (docs/cluster/transport.md).",
                ["node"],
            ).add_metric([node], value)
        hosted = family(
            "gauge",
            "cluster_hosted_instances",
            "Instances hosted by this node, by kind and phase.",
            ["node", "kind", "phase"],
        )
        generation = family(
            "gauge",
            "cluster_singleton_generation",
            "Packed generation of each singleton this node hosts.",
            ["node", "label"],
        )
        by_kind: dict[tuple[str, str], int] = {}
        for h in s.hosted:
            by_kind[(h.kind, h.phase)] = by_kind.get((h.kind, h.phase), 0) + 1
            if h.kind == "singleton":
                generation.add_metric([node, h.label], float(_packed(h.generation)))
        for (kind, phase), n in sorted(by_kind.items()):
            hosted.add_metric([node, kind, phase], n)
        if s.standalone or not s.leader:
            return
        try:
            statuses = handle.spec_statuses(timeout=self.spec_timeout)
        except Exception:
            logger.debug("metrics: spec statuses unavailable", exc_info=True)
            return
        specs = family(
            "gauge",
            "cluster_specs",
            "Managed specs (leader's view), by state: pending, running, "
            "waiting_for_return, unplaced.",
            ["node", "state"],
        )
        spec_counts = {"pending": 0, "running": 0, "waiting_for_return": 0, "unplaced": 0}
        for st in statuses:
            spec_counts[st.state] = spec_counts.get(st.state, 0) + 1
        for state, n in spec_counts.items():
            specs.add_metric([node, state], n)


def _packed(generation: Any) -> int:
    packed = getattr(generation, "packed", generation)
    return int(packed)


def _registry(registry: CollectorRegistry | None) -> CollectorRegistry:
    return registry if registry is not None else _prometheus().REGISTRY


# Our collectors in each registry: one of each kind (they share metric names).
_collectors: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
_collectors_lock = threading.Lock()


def _collector(registry: CollectorRegistry | None, kind: str, make: Any) -> Any:
    reg = _registry(registry)
    with _collectors_lock:
        ours = _collectors.setdefault(reg, {})
        if kind not in ours:
            ours[kind] = make()
            reg.register(ours[kind])
        return ours[kind]


def register_engine(registry: CollectorRegistry | None = None) -> EngineCollector:
    """The engine collector of ``registry`` (default: prometheus_client's global one),
    added on first use (it is process-wide: one per registry)."""
    collector: EngineCollector = _collector(registry, "engine", EngineCollector)
    return collector


def register_app(app: Pynenc, registry: CollectorRegistry | None = None) -> AppCollector:
    """Adds ``app``'s storage gauges (and the engine collector) to ``registry``."""
    register_engine(registry)
    collector: AppCollector = _collector(registry, "app", AppCollector)
    collector.add(app)
    return collector


def register_cluster(
    handle: ClusterHandle, registry: CollectorRegistry | None = None
) -> ClusterCollector:
    """Adds a cluster node's view (and the engine collector) to ``registry``."""
    register_engine(registry)
    collector: ClusterCollector = _collector(registry, "cluster", ClusterCollector)
    collector.add(handle)
    return collector


class MetricsServer:
    """An HTTP server answering ``GET /metrics`` from its own registry."""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str) -> None:
        prometheus_client = _prometheus()
        self.registry = registry
        try:
            self._server, self._thread = prometheus_client.start_http_server(
                port, addr=addr, registry=registry
            )
        except OSError as exc:
            raise OSError(
                exc.errno, f"pynenc_cpp metrics: cannot listen on {addr}:{port}: {exc.strerror}"
            ) from exc

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(
    port: int,
    addr: str = "127.0.0.1",
    app: Pynenc | None = None,
    cluster: ClusterHandle | None = None,
) -> MetricsServer:
    """Serves the engine collector, plus ``app``'s and ``cluster``'s if given, on
    ``http://addr:port/metrics`` (port 0: any free port; see ``MetricsServer.port``)."""
    registry = _prometheus().CollectorRegistry(auto_describe=False)
    register_engine(registry)
    if app is not None:
        register_app(app, registry)
    if cluster is not None:
        register_cluster(cluster, registry)
    return MetricsServer(registry, port, addr)
