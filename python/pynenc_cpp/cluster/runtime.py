"""``run_cluster``: run a start/stop pair on whichever node of the cluster is master.

The engine calls ``start``, ``stop`` and the event subscribers one at a time on
the node's own callback thread (never concurrently with each other), so they may
block without stalling the protocol; ``start`` should nevertheless return soon
(start a thread for long work), because the node can stop the work only after
``start`` returned. An exception raised by a callback is logged on the
``pynenc_cpp.cluster`` logger and otherwise ignored. The engine's own log lines
(refused handshakes, dropped frames, persistence errors, warnings) go to that
logger too, delivered on the callback thread.
"""

from __future__ import annotations

import atexit
import errno
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynenc_cpp import _core
from pynenc_cpp._storage import cluster_storage
from pynenc_cpp.cluster.config import MAX_TIMEOUT_MS, ClusterConfig
from pynenc_cpp.cluster.specs import (
    ActorSpec,
    AgentFamily,
    ClusterView,
    Generation,
    InstanceContext,
    Placement,
    SingletonSpec,
    SpecStatus,
)
from pynenc_cpp.errors import BackendError

if TYPE_CHECKING:
    from pynenc_cpp.metrics import MetricsServer

logger = logging.getLogger("pynenc_cpp.cluster")

Factory = Callable[[InstanceContext], object]
"""Builds an instance: ``factory(context) -> object`` whose optional methods are
``stop(reason)``, ``on_message(payload: bytes) -> bytes | None`` and
``on_generation(generation)``; raising fails the spawn (it is retried later)."""

# Engine log levels (cluster::LogLevel) -> logging levels.
_LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)


def _engine_log(level: int, line: str) -> None:
    logger.log(_LOG_LEVELS[level] if 0 <= level < len(_LOG_LEVELS) else logging.ERROR, "%s", line)


def _shared_storage(config: ClusterConfig) -> _core.Storage:
    """The storage the node takes its generation source from: the one this process's
    fenced stores and journals of the same cluster share (``cluster_storage``). Its
    errors read as the node's own would: "generation_source: ..." (``BadConfig`` for a
    bad URI or an unusable SQLite path)."""
    try:
        return cluster_storage(config.generation_source, config.cluster_name)
    except _core.EngineError as exc:
        raise type(exc)(f"generation_source: {exc}") from exc


class ClusterAddressInUse(BackendError, OSError):
    """The listen address is already in use (``errno`` is ``EADDRINUSE``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.EADDRINUSE
        self.strerror = message


def timeout_ms(timeout: float) -> int:
    """``timeout`` seconds as engine milliseconds: finite, > 0 and at most a day
    (``MAX_TIMEOUT_MS``), else ``ValueError`` naming the limit (a larger or infinite
    value would overflow the engine's deadline arithmetic)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"timeout must be a number of seconds, got {timeout!r}")
    if not timeout > 0:  # also NaN
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    if timeout * 1000 > MAX_TIMEOUT_MS:  # also inf
        raise ValueError(
            f"timeout must be at most {MAX_TIMEOUT_MS // 1000} seconds (one day), got {timeout!r}"
        )
    return max(1, int(timeout * 1000))


@dataclass(frozen=True)
class Member:
    """One member as this node sees it."""

    id: str
    address: str
    incarnation: int
    state: str  # "alive" | "suspect" | "dead" | "left"
    node_class: str
    metadata: Mapping[str, str]
    started_at_ms: int  # wall-clock ms at which its process started (join order)

    @classmethod
    def _from_core(cls, m: _core.ClusterMember) -> Member:
        return cls(
            m.id, m.address, m.incarnation, m.state, m.node_class, dict(m.metadata), m.started_at_ms
        )


@dataclass(frozen=True)
class MemberEvent:
    """A membership change: ``kind`` is joined, suspected, alive_again, dead or left."""

    kind: str
    member: Member
    at_monotonic: float = field(default=0.0, compare=False)
    """``time.monotonic()`` when Python received it."""


@dataclass(frozen=True)
class Activation:
    """What ``start`` and ``stop`` receive."""

    node: str
    epoch: int
    lease_until_mono_ms: int  # CLOCK_MONOTONIC ms (time.monotonic() * 1000); 0 standalone
    standalone: bool

    @classmethod
    def _from_core(cls, a: _core.ClusterActivation) -> Activation:
        return cls(a.node, a.epoch, a.lease_until_mono_ms, a.standalone)


@dataclass(frozen=True)
class HostedInstance:
    """An instance this node hosts."""

    label: str
    kind: str  # "actor" | "singleton" | "agent"
    generation: Generation
    phase: str  # "acquiring" | "starting" | "active" | "stopping"


@dataclass(frozen=True)
class NodeStatus:
    """A snapshot of this node's view of the cluster."""

    node_id: str
    address: str  # "" in standalone mode
    incarnation: int
    epoch: int
    leader: str | None
    has_quorum: bool
    state: str  # supervisor state: "standby" | "activating" | "master" | "stopping"
    lease_until_mono_ms: int
    standalone: bool
    # Transport counters (all 0 in standalone mode); see docs/cluster/transport.md.
    transport: dict[str, int] = field(default_factory=dict)
    hosted: tuple[HostedInstance, ...] = ()
    """Instances on this node, any phase (acquiring, starting, active, stopping)."""

    @property
    def is_master(self) -> bool:
        """True while this node runs the work."""
        return self.state == "master"

    @classmethod
    def _from_core(cls, s: _core.ClusterNodeStatus) -> NodeStatus:
        return cls(
            s.id,
            s.address,
            s.incarnation,
            s.epoch,
            s.leader,
            s.has_quorum,
            s.state,
            s.lease_until_mono_ms,
            s.standalone,
            dict(s.transport),
            tuple(HostedInstance(h.label, h.kind, h.generation, h.phase) for h in s.hosted),
        )


_CLOSED = object()


class EventStream:
    """A thread-safe iterator over membership events (from ``ClusterHandle.events``).

    Iteration blocks until the next event and ends when the stream is closed
    (``close()`` or the handle stopped). ``get(timeout)`` returns ``None`` on timeout.
    Events beyond ``maxsize`` unread ones are dropped (counted in ``dropped``).
    """

    def __init__(self, maxsize: int, detach: Callable[[], None]) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize)
        self._detach = detach
        self._closed = False
        self.dropped = 0

    def _put(self, event: MemberEvent) -> None:
        try:
            self._q.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def get(self, timeout: float | None = None) -> MemberEvent | None:
        """The next event; ``None`` on timeout or once closed and drained."""
        try:
            item = self._q.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _CLOSED:
            self._q.put_nowait(_CLOSED)  # keep later readers unblocked
            return None
        event: MemberEvent = item
        return event

    def close(self) -> None:
        """Stops receiving events; iteration ends after the ones already queued."""
        if self._closed:
            return
        self._closed = True
        self._detach()
        while True:
            try:
                self._q.put_nowait(_CLOSED)
                return
            except queue.Full:
                try:
                    self._q.get_nowait()
                except queue.Empty:
                    pass

    def __iter__(self) -> Iterator[MemberEvent]:
        while True:
            item = self.get()
            if item is None:
                return
            yield item


class ClusterHandle:
    """A running node. ``stop()`` is graceful and idempotent; also a context manager."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self._node: _core.ClusterNode | None = None
        self._storage: _core.Storage | None = None  # the generation source's (run_cluster)
        self._subs: dict[int, Callable[[MemberEvent], None]] = {}
        self._subs_lock = threading.Lock()
        self._next_sub = 0
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._callback_thread: int | None = None
        self._streams: weakref.WeakSet[EventStream] = weakref.WeakSet()
        self._metrics_server: MetricsServer | None = None

    # -- engine callbacks (node's callback thread) ------------------------------------
    def _enter_callback(self) -> None:
        self._callback_thread = threading.get_ident()

    def _dispatch(self, core_event: _core.ClusterMemberEvent) -> None:
        self._enter_callback()
        event = MemberEvent(core_event.kind, Member._from_core(core_event.member), time.monotonic())
        with self._subs_lock:
            subs = list(self._subs.values())
        for cb in subs:
            try:
                cb(event)
            except Exception:
                logger.exception("cluster event subscriber %r failed on %s", cb, event.kind)

    # -- public API ---------------------------------------------------------------------
    def subscribe(self, callback: Callable[[MemberEvent], None]) -> Callable[[], None]:
        """Calls ``callback(event)`` for every later membership event; returns unsubscribe."""
        with self._subs_lock:
            key = self._next_sub
            self._next_sub += 1
            self._subs[key] = callback

        def unsubscribe() -> None:
            with self._subs_lock:
                self._subs.pop(key, None)

        return unsubscribe

    def events(self, maxsize: int = 10_000) -> EventStream:
        """A new ``EventStream`` of later membership events (closed by ``stop()``)."""
        holder: list[Callable[[], None]] = []
        stream = EventStream(maxsize, lambda: holder[0]())
        holder.append(self.subscribe(stream._put))
        self._streams.add(stream)
        return stream

    def status(self) -> NodeStatus:
        """This node's status (also valid after ``stop()``: the last state)."""
        return NodeStatus._from_core(self._core().status())

    def members(self) -> list[Member]:
        """Every known member, self included, dead and left ones too, sorted by id."""
        return [Member._from_core(m) for m in self._core().members()]

    # -- the coordinator layer (docs/cluster/coordinator.md) ---------------------------
    def _timeout_ms(self, timeout: float | None) -> int:
        if timeout is None:
            return self.config.request_timeout_ms
        return timeout_ms(timeout)

    def register_actor_type(self, actor_type: str, factory: Factory) -> None:
        """Offers ``actor_type`` on this node: the Coordinator may place instances here.

        ``factory`` runs on the node's callback thread; see ``Factory``.
        """
        self._core().register_actor_type(actor_type, factory)

    def unregister_actor_type(self, actor_type: str) -> None:
        """Stops offering ``actor_type`` (running instances stay until moved)."""
        self._core().unregister_actor_type(actor_type)

    def register_agent_family(self, family: AgentFamily, factory: Factory) -> None:
        """Declares an agent family; ``factory`` builds its agents (``context.label`` is the URI)."""
        self._core().register_agent_family(family._to_core(), factory)

    def submit(self, spec: ActorSpec, timeout: float | None = None) -> None:
        """Submits an actor spec to the leader (from any node); returns once it is stored.

        Raises ``Conflict`` (the label is used by another spec), ``InvalidArgument``,
        ``Unavailable`` (no leader), ``Timeout`` or ``BackendError`` (generation source).
        Submitting the same spec again is a no-op.
        """
        self._core().submit_actor(spec._to_core(), self._timeout_ms(timeout))

    def start_singleton(self, spec: SingletonSpec, timeout: float | None = None) -> None:
        """Submits a singleton spec to the leader; returns once it is stored (see ``submit``)."""
        self._core().submit_singleton(spec._to_core(), self._timeout_ms(timeout))

    def remove(self, label: str, timeout: float | None = None) -> None:
        """Removes a spec; its instance stops. Raises ``KeyError`` (InvocationNotFound) if unknown."""
        self._core().remove_spec(label, self._timeout_ms(timeout))

    def cluster_view(self, timeout: float | None = None) -> ClusterView:
        """The leader's view: nodes, their class, metadata, actor types and what runs there."""
        return ClusterView._from_core(self._core().query_view(self._timeout_ms(timeout)))

    def spec_statuses(self, timeout: float | None = None) -> list[SpecStatus]:
        """Every managed label's status (running, pending, waiting_for_return, unplaced)."""
        return [
            SpecStatus._from_core(s) for s in self._core().query_statuses(self._timeout_ms(timeout))
        ]

    def spec_status(self, label: str, timeout: float | None = None) -> SpecStatus:
        """One label's status; ``KeyError`` if the leader manages no such label."""
        for s in self.spec_statuses(timeout):
            if s.label == label:
                return s
        raise KeyError(label)

    def wait_running(self, label: str, timeout: float = 30.0, interval: float = 0.05) -> SpecStatus:
        """Polls the leader until ``label`` runs; ``TimeoutError`` naming its last status."""
        deadline = time.monotonic() + timeout
        last: object = "unknown to the leader"
        while True:
            try:
                status = self.spec_status(label, timeout=max(0.1, min(2.0, timeout)))
                if status.state == "running":
                    return status
                last = f"{status.state}: {status.reason}"
            except (KeyError, _core.Unavailable, _core.Timeout) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{label!r} not running after {timeout:.1f} s ({last})")
            time.sleep(interval)

    def lookup(self, label: str) -> Placement | None:
        """Where ``label`` runs per this node's copy of the leader's directory."""
        p = self._core().lookup(label)
        return None if p is None else Placement._from_core(p)

    def directory(self) -> list[Placement]:
        """This node's copy of the leader's directory."""
        return [Placement._from_core(p) for p in self._core().directory()]

    def ask(self, label: str, payload: bytes, timeout: float | None = None) -> bytes:
        """Sends ``payload`` to the running instance of ``label`` and returns its answer.

        Raises ``Unavailable`` (not running, or not where the directory says), ``Timeout``,
        or the instance's error (``BackendError`` naming the raised exception).
        """
        return self._core().ask(label, payload, self._timeout_ms(timeout))

    def tell(self, label: str, payload: bytes) -> None:
        """Fire and forget; raises ``Unavailable`` at once if no instance runs per the directory."""
        self._core().tell(label, payload)

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self.status().node_id

    @property
    def address(self) -> str:
        """``host:port`` this node listens on ('' standalone)."""
        return self.status().address

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was called."""
        return self._stopped

    def stop(self) -> None:
        """Graceful: stops the work if running (waits for ``stop``), sends Leaving, closes.

        Idempotent. Called from inside a callback (the callback thread), it starts
        the shutdown on another thread and returns at once.
        """
        if threading.get_ident() == self._callback_thread:
            threading.Thread(target=self.stop, name="pynenc-cluster-stop", daemon=True).start()
            return
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                if self._node is not None:
                    self._node.stop()
            finally:
                _live.discard(self)
                if self._metrics_server is not None:
                    self._metrics_server.close()
                    self._metrics_server = None
                for s in list(self._streams):
                    s.close()

    def __enter__(self) -> ClusterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"<ClusterHandle {state} {self.config.host or 'standalone'}>"

    def _core(self) -> _core.ClusterNode:
        assert self._node is not None
        return self._node


_live: weakref.WeakSet[ClusterHandle] = weakref.WeakSet()


def _no_work(*_: object) -> None:
    """The work of a node that only hosts coordinator-managed instances."""


@atexit.register
def _stop_all() -> None:
    for handle in list(_live):
        try:
            handle.stop()
        except Exception:  # pragma: no cover - best effort at exit
            logger.exception("stopping %r at exit failed", handle)


def run_cluster(
    start: Callable[[Activation], object] | None = None,
    stop: Callable[[Activation, str], object] | None = None,
    config: ClusterConfig | None = None,
) -> ClusterHandle:
    """Joins (or forms) the cluster and runs ``start``/``stop`` when this node gains/loses mastership.

    ``config`` None reads ``ClusterConfig.from_env()``. In standalone mode
    (no host, no seeds) ``start`` is called at once and ``stop`` by ``handle.stop()``.
    ``stop(activation, reason)`` gets a reason such as ``"lease expired"``,
    ``"not elected"``, ``"lost quorum"`` or ``"shutdown"``. Both may be None (a node
    that only hosts actors placed by the Coordinator; see ``ClusterHandle.submit``).

    Raises ``ValueError`` (``BadConfig`` from the engine: a bad option, an
    unwritable state dir), ``SecretFileError`` (a ``ValueError``: no secret and an
    unusable secret file),
    ``ClusterAddressInUse`` (an ``OSError`` and a ``BackendError``) when the port is
    taken, ``BackendError`` for other startup failures. Nothing runs after an error.
    """
    if config is None:
        config = ClusterConfig.from_env()
    start = start if start is not None else _no_work
    stop = stop if stop is not None else _no_work
    if not callable(start) or not callable(stop):
        raise TypeError("start and stop must be callable or None")
    handle = ClusterHandle(config)

    def on_start(a: _core.ClusterActivation) -> None:
        handle._enter_callback()
        activation = Activation._from_core(a)
        try:
            start(activation)
        except Exception:
            logger.exception("cluster start callback failed (epoch %d)", activation.epoch)

    def on_stop(a: _core.ClusterActivation, reason: str) -> None:
        handle._enter_callback()
        activation = Activation._from_core(a)
        try:
            stop(activation, reason)
        except Exception:
            logger.exception("cluster stop callback failed (%s)", reason)

    options = config.to_options()
    if not config.standalone:
        # The handle keeps the Python object: ``cluster_storage`` holds storages weakly,
        # and the node's C++ reference alone would not keep it found.
        handle._storage = options.storage = _shared_storage(config)
    try:
        handle._node = _core.ClusterNode.start(
            options, on_start, on_stop, handle._dispatch, _engine_log
        )
    except BackendError as exc:
        if "in use" in str(exc).lower():
            raise ClusterAddressInUse(str(exc)) from exc
        raise
    _live.add(handle)
    if config.metrics_port:
        from pynenc_cpp.metrics import serve

        try:
            server: MetricsServer | None = serve(
                config.metrics_port, config.metrics_addr, cluster=handle
            )
        except BaseException:
            handle.stop()
            raise
        with handle._stop_lock:
            if not handle._stopped:  # a start callback may have stopped it already
                handle._metrics_server, server = server, None
        if server is not None:
            server.close()
    return handle
