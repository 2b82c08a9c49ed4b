"""``ClusteredActorSystem``: asyncio actors on a pynenc-cpp cluster.

The C++ node carries membership, placement and routing; behaviours run on the
asyncio loop that entered the system (``async with``). The node hands over what
its instances must do through an inbox whose eventfd the loop watches
(``add_reader``): no thread of the node ever takes the GIL on the message path.
See docs/cluster/actors.md for the delivery guarantees.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import itertools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

from pynenc_cpp import _core
from pynenc_cpp.cluster.actors.behaviors import (
    Behavior,
    EventSourced,
    Persisted,
    Receive,
    Same,
    Setup,
    Singleton,
    Stopped,
)
from pynenc_cpp.cluster.actors.serialization import PickleSerializer, Serializer
from pynenc_cpp.cluster.config import ClusterConfig
from pynenc_cpp.cluster.runtime import ClusterHandle, run_cluster, timeout_ms
from pynenc_cpp.cluster.specs import Generation, SingletonAnchor, SingletonSpec

logger = logging.getLogger("pynenc_cpp.cluster.actors")

M = TypeVar("M")

# Inbox item kinds (cluster/actors.h) and label-message outcomes.
_START, _STOP, _LABEL, _PATH, _REGRANT = range(5)
_PROCESSED, _DUPLICATE, _NOT_HERE, _REJECTED = range(4)

# The system that is deserializing (or running a behaviour): refs unpickled
# there bind to it. Messages a command of an event-sourced actor sends are held
# (with the task running the command: tasks it starts send at once) until its
# events are in the journal.
_current_system: contextvars.ContextVar[ClusteredActorSystem | None] = contextvars.ContextVar(
    "pynenc_cpp_actor_system", default=None
)
# (ref, message, its bytes from _encode: serialized once, when the command tells it)
_Held = list[tuple["ActorRef[Any]", Any, bytes | None]]
_deferred: contextvars.ContextVar[tuple[asyncio.Task[Any], _Held] | None] = contextvars.ContextVar(
    "pynenc_cpp_actor_deferred", default=None
)

# A singleton behaviour that stopped or failed to start is built again after this
# back-off (doubling up to the maximum while it keeps failing).
_RESTART_FIRST_S = 0.1
_RESTART_MAX_S = 30.0


def _held_here() -> _Held | None:
    """The messages held by the event-sourced command running in this very task, if any."""
    d = _deferred.get()
    if d is None:
        return None
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop (another thread)
        return None
    return d[1] if task is d[0] else None


class AskTimeout(TimeoutError):
    """No reply within the ask's timeout."""


class MessageTooLarge(ValueError):
    """A message that would not fit in one frame (``max_frame_bytes``): raised at
    ``tell``/``ask`` (and by a reply's ``tell``), never dropped silently."""


class ActorRef[M]:
    """Where messages of type ``M`` go: an actor on some node, or a singleton by name.

    Refs are picklable (send them in messages: ``reply_to``); a ref unpickled by a
    system is bound to it. ``tell`` never blocks; see ``ClusteredActorSystem.tell``.
    """

    __slots__ = ("_system", "address", "path", "label")

    def __init__(
        self, system: ClusteredActorSystem | None, address: str, path: str, label: str | None
    ) -> None:
        self._system = system
        self.address = address
        self.path = path
        self.label = label

    def tell(self, msg: M) -> None:
        if self._system is None:
            raise RuntimeError(f"{self!r} is not bound to an actor system (unpickled outside one)")
        self._system.tell(self, msg)

    def _key(self) -> tuple[str, str, str | None]:
        return (self.address, self.path, self.label)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.label is not None:
            return f"ActorRef(singleton {self.label!r})"
        return f"ActorRef({self.path!r} on {self.address})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_ref, (self.address, self.path, self.label))


def _rebuild_ref(address: str, path: str, label: str | None) -> ActorRef[Any]:
    return ActorRef(_current_system.get(), address, path, label)


class ActorContext[M]:
    """What a behaviour gets with each message."""

    def __init__(self, cell: _Cell) -> None:
        self._cell = cell

    @property
    def self(self) -> ActorRef[M]:
        """This actor's own ref."""
        return self._cell.ref

    @property
    def system(self) -> ClusteredActorSystem:
        return self._cell.system

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def generation(self) -> Generation | None:
        """A singleton instance's generation (stamp fenced writes with it); None otherwise."""
        return self._cell.generation

    @property
    def duplicate(self) -> bool:
        """True while an event-sourced ``on_command`` handles a re-sent command whose
        events the journal already holds (the state already includes them; nothing
        is appended again): reply from the state as it is."""
        return self._cell.duplicate

    @property
    def log(self) -> logging.Logger:
        return logger.getChild(self._cell.name)


class _Stale(Exception):
    """The journal refused an append: this instance is not the owner any more."""


class _FencedAbove(Exception):
    """At start, the journal was fenced above this instance's generation."""

    def __init__(self, floor: int) -> None:
        super().__init__(f"journal fenced at {Generation.from_packed(floor)}")
        self.floor = floor


class _EventSourcedState:
    """An event-sourced actor's state between messages."""

    def __init__(self, spec: EventSourced[Any, Any, Any]) -> None:
        self.spec = spec
        self.state: Any = spec.initial_state
        self.seq = 0
        self.applied: OrderedDict[str, None] = OrderedDict()  # recent message ids
        self.since_snapshot = 0


_APPLIED_WINDOW = 100_000  # message ids remembered for de-duplication


class _Cell:
    """One running actor: a mailbox and the task that handles it.

    A singleton instance's cell has a ``factory``: a behaviour that stops or fails to
    start is built again after a back-off, and its queued messages wait for it.
    """

    def __init__(
        self,
        system: ClusteredActorSystem,
        name: str,
        ref: ActorRef[Any],
        behavior: Behavior[Any] | None,
        generation: Generation | None = None,
        *,
        factory: Callable[[], Behavior[Any]] | None = None,
        drain_s: float = 5.0,
    ) -> None:
        self.system = system
        self.name = name
        self.ref = ref
        self.generation = generation
        self.factory = factory
        self.drain_s = drain_s
        self.queue: asyncio.Queue[tuple[Any, str | None, int | None]] = asyncio.Queue()
        self.stopping = False
        self.busy = False  # handling a message
        self.duplicate = False  # see ActorContext.duplicate
        self.ctx: ActorContext[Any] = ActorContext(self)
        # A context of its own: nothing of the spawning task's context leaks in.
        self.task = asyncio.get_running_loop().create_task(
            self._run(behavior), name=f"actor {name}", context=contextvars.Context()
        )

    def enqueue(self, msg: Any, msg_id: str | None = None, token: int | None = None) -> None:
        self.queue.put_nowait((msg, msg_id, token))

    async def stop(self) -> None:
        """Lets the message being handled finish (up to ``drain_s``); the ones still
        queued are answered "not here" (their senders give them to the next owner)."""
        if not self.stopping:
            self.stopping = True
            if self.busy and not self.task.done():
                await asyncio.wait({self.task}, timeout=self.drain_s)
            self.task.cancel()
        await asyncio.wait({self.task})  # the caller's own cancellation still propagates
        self._reject_queued()

    def _reject_queued(self) -> None:
        while not self.queue.empty():
            _, _, token = self.queue.get_nowait()
            if token is not None:
                self.system._ack(token, _NOT_HERE)

    async def _run(self, behavior: Behavior[Any] | None) -> None:
        current: list[int | None] = [None]  # the token of the message being handled
        delay = _RESTART_FIRST_S
        try:
            while True:
                outcome = await self._life(behavior, current)
                if outcome in ("stale", "stop") or self.factory is None or self.stopping:
                    return
                wait = _RESTART_FIRST_S if outcome == "stopped" else delay
                delay = _RESTART_FIRST_S if outcome == "stopped" else min(2 * delay, _RESTART_MAX_S)
                logger.warning(
                    "singleton %s %s; its factory builds it again in %.1f s",
                    self.name,
                    "stopped" if outcome == "stopped" else "failed to start",
                    wait,
                )
                await asyncio.sleep(wait)
                behavior = None  # built by the factory
        except asyncio.CancelledError:
            # Cancelled while handling a message: it was not (fully) handled.
            if current[0] is not None:
                self.system._ack(current[0], _NOT_HERE)
            raise
        finally:
            self.stopping = True
            self._reject_queued()
            self.system._cell_ended(self)

    async def _life(self, behavior: Behavior[Any] | None, current: list[int | None]) -> str:
        """Runs one behaviour until it stops ("stopped"), fails to start ("failed"), finds
        this instance stale ("stale") or the cell is stopping ("stop")."""
        try:
            if behavior is None:
                assert self.factory is not None
                behavior = self.factory()
            behavior, es = await self._start(behavior)
        except _FencedAbove as fenced:
            floor = Generation.from_packed(fenced.floor)
            logger.warning(
                "%s: the journal is fenced at %s, above this instance's generation %s; "
                "asking for a newer term",
                self.name,
                floor,
                self.generation,
            )
            if self.ref.label is not None:
                self.system._cluster()._core().raise_generation_floor(self.ref.label, floor)
            return "stale"
        except (_Stale, _core.StaleGeneration):
            logger.error("%s: the journal is fenced by a newer generation; stale", self.name)
            return "stale"
        except Exception:
            logger.exception("actor %s failed to start", self.name)
            return "failed"
        while not self.stopping:
            msg, msg_id, token = await self.queue.get()
            current[0] = token
            self.busy = True
            try:
                behavior = await self._handle(behavior, es, msg, msg_id)
            except _Stale:
                self.system._ack(token, _NOT_HERE)
                current[0] = None
                logger.error("%s: the journal refused an append; this instance is stale", self.name)
                return "stale"
            except Exception:
                logger.exception("actor %s failed on %r", self.name, type(msg).__name__)
            finally:
                self.busy = False
            self.system._ack(token, _PROCESSED)  # handled (an exception is logged, not retried)
            current[0] = None
            if isinstance(behavior, Stopped):
                return "stopped"
        return "stop"

    async def _start(
        self, behavior: Behavior[Any]
    ) -> tuple[Behavior[Any], _EventSourcedState | None]:
        token = _current_system.set(self.system)
        try:
            while isinstance(behavior, Setup):
                behavior = await _maybe_await(behavior.factory(self.ctx))
            if isinstance(behavior, EventSourced):
                return behavior, await self._recover(behavior)
            return behavior, None
        finally:
            _current_system.reset(token)

    async def _recover(self, spec: EventSourced[Any, Any, Any]) -> _EventSourcedState:
        es = _EventSourcedState(spec)
        ser = self.system.serializer
        gen = self.generation.packed if self.generation else 0
        if gen:
            try:
                spec.journal.fence(spec.entity_id, gen)  # a predecessor can no longer append
            except _core.StaleGeneration:
                # Fenced above us: a successor ran, or the generation source forgot the
                # label's terms (memory:// after a full restart). Either way this
                # instance cannot write; the leader is told to claim a term above it.
                raise _FencedAbove(spec.journal.fence_of(spec.entity_id)) from None
        snap = spec.journal.load_snapshot(spec.entity_id)
        if snap is not None:
            state, applied = ser.loads(snap.state)
            es.state, es.seq = state, snap.seq
            es.applied.update((i, None) for i in applied)
        for entry in spec.journal.read(spec.entity_id, es.seq):
            msg_id, events = ser.loads(entry.payload)
            for ev in events:
                es.state = spec.on_event(es.state, ev)
            if msg_id is not None:
                es.applied[msg_id] = None
            es.seq = entry.seq
        while len(es.applied) > _APPLIED_WINDOW:
            es.applied.popitem(last=False)
        return es

    async def _handle(
        self, behavior: Behavior[Any], es: _EventSourcedState | None, msg: Any, msg_id: str | None
    ) -> Behavior[Any]:
        token = _current_system.set(self.system)
        try:
            if es is not None:
                return await self._command(behavior, es, msg, msg_id)
            if isinstance(behavior, Receive):
                nxt = await _maybe_await(behavior.handler(self.ctx, msg))
            else:
                raise TypeError(f"actor {self.name} has no message handler ({behavior!r})")
            while isinstance(nxt, Setup):
                nxt = await _maybe_await(nxt.factory(self.ctx))
            return behavior if nxt is None or isinstance(nxt, Same) else nxt
        finally:
            _current_system.reset(token)

    async def _command(
        self, behavior: Behavior[Any], es: _EventSourcedState, msg: Any, msg_id: str | None
    ) -> Behavior[Any]:
        spec = es.spec
        held: _Held = []
        duplicate = msg_id is not None and msg_id in es.applied
        dtoken = _deferred.set((asyncio.current_task(), held))  # type: ignore[arg-type]
        self.duplicate = duplicate
        try:
            result = await _maybe_await(spec.on_command(self.ctx, es.state, msg))
        finally:
            _deferred.reset(dtoken)
            self.duplicate = False
        if isinstance(result, Persisted) and result.events and not duplicate:
            payload = self.system.serializer.dumps((msg_id, list(result.events)))
            gen = self.generation.packed if self.generation else 0
            try:
                es.seq = spec.journal.append(spec.entity_id, es.seq, gen, [payload])
            except (_core.StaleGeneration, _core.Conflict) as exc:
                raise _Stale(str(exc)) from exc
            for ev in result.events:
                es.state = spec.on_event(es.state, ev)
            if msg_id is not None:
                es.applied[msg_id] = None
                if len(es.applied) > _APPLIED_WINDOW:
                    es.applied.popitem(last=False)
            es.since_snapshot += 1
            if spec.snapshot_every and es.since_snapshot >= spec.snapshot_every:
                try:
                    state = self.system.serializer.dumps((es.state, list(es.applied)))
                except Exception:
                    # The events are in the journal (replay still works): skip the
                    # snapshot, keep the replies, try again after as many commands.
                    es.since_snapshot = 0
                    logger.exception(
                        "%s: the state could not be serialized for a snapshot; skipped",
                        self.name,
                    )
                else:
                    try:
                        spec.journal.save_snapshot(spec.entity_id, es.seq, gen, state)
                        es.since_snapshot = 0
                    except (_core.StaleGeneration, _core.Conflict) as exc:
                        raise _Stale(str(exc)) from exc
        # Replies leave once the events are in the journal (a duplicate's were before).
        for ref, out, data in held:
            try:
                self.system._transmit(ref, out, data)
            except Exception as exc:  # e.g. BufferFull: the events are in; say so, go on
                logger.error(
                    "%s: a message to %r after the append was not sent: %r", self.name, ref, exc
                )
        return behavior if isinstance(result, (Same, Persisted)) or result is None else result


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class ClusteredActorSystem:
    """Actors on a cluster, as an async context manager.

    ``name`` is the cluster name; ``seed_nodes`` are ``(host, port)`` pairs or
    ``"host:port"`` strings; ``node_id`` names this node (a restarted process with the
    same id is the same node). ``config`` gives every other cluster option
    (``ClusterConfig``; its host, port, seeds, node id and cluster name are taken
    from the arguments). ``buffer_size`` (default: the config's ``actor_buffer_limit``,
    1000) bounds the messages this node has sent a singleton and not yet had
    acknowledged, in flight or waiting for an owner; beyond it ``tell`` raises
    ``BufferFull`` (``overflow="raise"``) or drops the message, counts it in ``stats()``
    and logs it (``overflow="drop"``).
    """

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        node_id: str = "",
        seed_nodes: Iterable[tuple[str, int] | str] = (),
        *,
        secret: str = "",
        config: ClusterConfig | None = None,
        serializer: Serializer | None = None,
        buffer_size: int | None = None,
        overflow: str = "raise",
        **cluster_options: Any,
    ) -> None:
        if overflow not in ("raise", "drop"):
            raise ValueError(f"overflow must be 'raise' or 'drop', got {overflow!r}")
        seeds = tuple(s if isinstance(s, str) else f"{s[0]}:{s[1]}" for s in seed_nodes)
        base = config or ClusterConfig()
        if buffer_size is not None:
            cluster_options["actor_buffer_limit"] = buffer_size
        self.config = replace(
            base,
            cluster_name=name,
            host=host,
            port=port,
            node_id=node_id,
            seeds=seeds,
            secret=secret or base.secret,
            **cluster_options,
        )
        self.serializer: Serializer = serializer or PickleSerializer()
        self.overflow = overflow
        self._handle: ClusterHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._cells: dict[str, _Cell] = {}  # local actors by path
        self._instances: dict[str, _Cell] = {}  # singleton instances by label
        self._factories: dict[str, Singleton[Any]] = {}
        self._temps: dict[str, asyncio.Future[Any]] = {}
        self._counter = itertools.count(1)
        self._msg_prefix = f"{os.getpid():x}.{time.monotonic_ns():x}."
        self._tasks: set[asyncio.Task[Any]] = set()  # instance stops
        self._submits: set[asyncio.Task[Any]] = set()  # singleton specs to the leader
        self._dropped = 0
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------
    async def __aenter__(self) -> ClusteredActorSystem:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        """Joins the cluster and starts watching the node's inbox."""
        if self._handle is not None:
            raise RuntimeError("the system is already started")
        self._loop = asyncio.get_running_loop()
        self._handle = run_cluster(config=self.config)
        self._fd = self._handle._core().inbox_fd()
        self._loop.add_reader(self._fd, self._pump)

    async def shutdown(self) -> None:
        """Stops the local actors, hands this node's singletons over, leaves the cluster."""
        if self._closed or self._handle is None:
            self._closed = True
            return
        self._closed = True
        for cell in list(self._cells.values()):
            await cell.stop()
        for task in list(self._submits):
            task.cancel()
        await self._flush_outboxes()
        loop = asyncio.get_running_loop()
        # The node stops (and hands over) singleton instances through the inbox while
        # this loop keeps running; so stop() runs on another thread.
        await loop.run_in_executor(None, self._handle.stop)
        self._pump()
        for cell in list(self._instances.values()):
            await cell.stop()
        # Instance stops still reporting (their cells are stopped: they end at once).
        await asyncio.gather(*self._tasks, return_exceptions=True)
        loop.remove_reader(self._fd)
        for fut in self._temps.values():
            if not fut.done():
                fut.set_exception(AskTimeout("the actor system shut down"))

    async def _flush_outboxes(self) -> None:
        """Before leaving: waits (up to ``leave_timeout_ms``) until the singletons
        acknowledged what this node sent them; what is left is logged, never dropped
        silently."""
        core = self._cluster()._core()
        deadline = time.monotonic() + self.config.leave_timeout_ms / 1000
        while True:
            left = {label: n for label, n in core.mail_stats()["buffered"].items() if n}
            if not left or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.02)
        if left:
            logger.warning(
                "shutdown: %d message(s) to singleton(s) %s not acknowledged within %d ms "
                "(leave_timeout_ms) are discarded",
                sum(left.values()),
                ", ".join(sorted(left)),
                self.config.leave_timeout_ms,
            )

    @property
    def address(self) -> str:
        return self._cluster().address

    @property
    def node_id(self) -> str:
        return self._cluster().node_id

    @property
    def handle(self) -> ClusterHandle:
        """The cluster node under the system (status, members, cluster view...)."""
        return self._cluster()

    def stats(self) -> dict[str, Any]:
        """Message counters: the node's (``buffered`` per singleton, ``label_overflowed``,
        ``label_resent``...) and ``dropped`` (messages dropped by ``overflow="drop"``)."""
        s = dict(self._cluster()._core().mail_stats())
        s["dropped"] = self._dropped
        return s

    # -- spawning and messaging ---------------------------------------------------------------
    def spawn(self, behavior: Behavior[M], name: str) -> ActorRef[M]:
        """Starts an actor named ``name`` on this node, or (``Behaviors.singleton``) joins the
        cluster's singleton ``name``: spawn it with the same name on every node that may run
        it; every such spawn returns a ref to the one instance."""
        self._cluster()
        if not name or "/" in name:
            raise ValueError(f"name must be non-empty without '/', got {name!r}")
        if isinstance(behavior, Singleton):
            return self._spawn_singleton(behavior, name)
        path = f"user/{name}"
        if path in self._cells:
            raise ValueError(f"an actor named {name!r} already runs on this node")
        ref: ActorRef[M] = ActorRef(self, self.address, path, None)
        self._cells[path] = _Cell(self, name, ref, behavior)
        return ref

    def singleton_ref(self, name: str) -> ActorRef[Any]:
        """A ref to the cluster's singleton ``name`` without spawning it here (a node that
        only talks to it: the owner is chosen among the nodes that spawned it)."""
        if not name:
            raise ValueError("name must not be empty")
        return ActorRef(self, "", "", name)

    def _spawn_singleton(self, behavior: Singleton[M], name: str) -> ActorRef[M]:
        if name in self._factories:
            raise ValueError(f"singleton {name!r} is already spawned on this node")
        self._factories[name] = behavior
        actor_type = f"singleton:{name}"
        stop_ms = int(behavior.drain_timeout_s * 1000) + 1000
        self._cluster()._core().register_inbox_actor_type(actor_type, stop_ms)
        kind, _, value = behavior.anchor.partition(":")
        spec = SingletonSpec(
            name,
            actor_type,
            anchor=SingletonAnchor(kind, value),  # type: ignore[arg-type]
            drain_timeout_s=behavior.drain_timeout_s,
        )
        task = asyncio.get_running_loop().create_task(self._submit(spec))
        self._submits.add(task)
        task.add_done_callback(self._submits.discard)
        return ActorRef(self, "", "", name)

    async def _submit(self, spec: SingletonSpec) -> None:
        """Stores the singleton's spec with the leader (every spawning node does; the same spec
        again is a no-op), retrying while there is no leader yet."""
        loop = asyncio.get_running_loop()
        delay = 0.05
        while not self._closed:
            try:
                await loop.run_in_executor(None, self._cluster().start_singleton, spec, 2.0)
                return
            except (_core.Unavailable, _core.Timeout):
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
            except _core.BackendError as exc:  # the leader's generation source failed
                logger.warning("singleton %r: %s; submitting again", spec.label, exc)
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
            except _core.Conflict as exc:
                logger.error(
                    "singleton %r: %s (spawned with another behaviour elsewhere?)", spec.label, exc
                )
                return
            except Exception:
                logger.exception("singleton %r: its spec could not be submitted", spec.label)
                return

    def tell(self, ref: ActorRef[Any], msg: Any) -> None:
        """Sends ``msg`` to ``ref``. To a singleton: serialized now (an unpicklable message
        raises here), then delivered at least once, in order, across failovers, buffered
        while no owner runs it. To an actor on another node: at most once. To a local actor:
        queued at once. Inside an event-sourced command: held until its events are in
        the journal (serialized now all the same, so an unpicklable message raises here)."""
        held = _held_here()
        if held is not None:
            held.append((ref, msg, self._encode(ref, msg)))
            return
        self._send(ref, msg)

    def _send(self, ref: ActorRef[Any], msg: Any) -> None:
        self._transmit(ref, msg, self._encode(ref, msg))

    def _encode(self, ref: ActorRef[Any], msg: Any) -> bytes | None:
        """What goes on the wire for ``msg`` to ``ref`` (None: a local actor, no bytes).
        Raises here if ``msg`` cannot be serialized, and ``MessageTooLarge`` (a
        ``ValueError``) if it would not fit in one frame (``max_frame_bytes``)."""
        if ref.label is not None:
            payload = self.serializer.dumps((self._msg_prefix + str(next(self._counter)), msg))
            return self._fits(payload, ref.label)
        if ref.address == self.address:
            return None
        return self._fits(self.serializer.dumps(msg), ref.path)

    def _fits(self, payload: bytes, name: str) -> bytes:
        limit = self.config.max_frame_bytes - len(name.encode()) - 64
        if len(payload) > limit:
            raise MessageTooLarge(
                f"message to {name!r} is {len(payload)} bytes serialized, over the limit of "
                f"{limit} bytes (max_frame_bytes={self.config.max_frame_bytes} less the "
                "frame's header); raise max_frame_bytes on every node or send less"
            )
        return payload

    def _transmit(self, ref: ActorRef[Any], msg: Any, payload: bytes | None) -> None:
        if payload is None:
            self._deliver_local(ref.path, msg)
            return
        if ref.label is not None:
            try:
                self._cluster()._core().send_to_label(ref.label, payload)
            except _core.BufferFull:
                if self.overflow == "raise":
                    raise
                self._dropped += 1
                logger.warning(
                    "dropped a message to %r: its buffer is full (%d dropped so far)",
                    ref.label,
                    self._dropped,
                )
            return
        self._cluster()._core().send_to_path(ref.address, ref.path, payload)

    async def ask(
        self, ref: ActorRef[Any], make: Callable[[ActorRef[Any]], Any], timeout: float = 5.0
    ) -> Any:
        """Sends ``make(reply_to)`` to ``ref`` and returns the first message sent to
        ``reply_to``; raises ``AskTimeout`` (a ``TimeoutError``) after ``timeout`` s. The
        request leaves at once, also from inside an event-sourced command."""
        timeout_ms(timeout)  # finite, > 0, at most a day: ValueError otherwise
        loop = asyncio.get_running_loop()
        path = f"temp/{next(self._counter)}"
        fut: asyncio.Future[Any] = loop.create_future()
        self._temps[path] = fut
        try:
            self._send(ref, make(ActorRef(self, self.address, path, None)))
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AskTimeout(f"no reply from {ref!r} within {timeout} s") from None
        finally:
            self._temps.pop(path, None)

    # -- the node's inbox -----------------------------------------------------------------------
    def _pump(self) -> None:
        if self._handle is None:
            return
        core = self._handle._core()
        while True:
            items = core.drain_inbox(1024)
            if not items:
                return
            for kind, label, gen, _kind_name, _type, payload, token in items:
                try:
                    if kind == _LABEL:
                        self._deliver_label(label, gen, payload, token)
                    elif kind == _PATH:
                        self._deliver_path(label, payload)
                    elif kind == _START:
                        self._start_instance(label, gen)
                    elif kind == _STOP:
                        self._spawn_task(self._stop_instance(label, gen))
                    elif kind == _REGRANT:
                        cell = self._instances.get(label)
                        if cell is not None:
                            cell.generation = gen
                except Exception:
                    logger.exception("inbox item for %r", label)

    def _spawn_task(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_instance(self, label: str, gen: Generation) -> None:
        spec = self._factories.get(label)
        if spec is None:  # not spawned here (cannot happen: the type is registered by spawn)
            logger.error("no singleton %r spawned on this node", label)
            return
        old = self._instances.pop(label, None)
        if old is not None:  # a stop not yet finished: never two cells for one label
            self._spawn_task(old.stop())
        ref: ActorRef[Any] = ActorRef(self, "", "", label)
        self._instances[label] = _Cell(
            self, label, ref, None, gen, factory=spec.factory, drain_s=spec.drain_timeout_s
        )

    async def _stop_instance(self, label: str, gen: Generation) -> None:
        cell = self._instances.get(label)
        try:
            # Not a newer instance that started after this stop was given up on.
            if cell is not None and cell.generation is not None and cell.generation <= gen:
                await cell.stop()
                if self._instances.get(label) is cell:
                    del self._instances[label]
        finally:
            self._cluster()._core().instance_stopped(label, gen)

    def _deliver_label(self, label: str, gen: Generation, payload: bytes, token: int) -> None:
        cell = self._instances.get(label)
        if cell is None or cell.stopping:
            self._ack(token, _NOT_HERE)
            return
        reset = _current_system.set(self)
        try:
            msg_id, msg = self.serializer.loads(payload)
        except Exception:
            logger.exception("undecodable message for %r (dropped)", label)
            self._ack(token, _REJECTED)
            return
        finally:
            _current_system.reset(reset)
        cell.enqueue(msg, msg_id, token)

    def _deliver_path(self, path: str, payload: bytes) -> None:
        if path not in self._temps and path not in self._cells:
            # Nothing is decoded for a path with no actor behind it.
            logger.debug("message to %r dropped: no such actor", path)
            return
        reset = _current_system.set(self)
        try:
            msg = self.serializer.loads(payload)
        except Exception:
            logger.exception("undecodable message for %r (dropped)", path)
            return
        finally:
            _current_system.reset(reset)
        self._deliver_local(path, msg)

    def _deliver_local(self, path: str, msg: Any) -> None:
        fut = self._temps.get(path)
        if fut is not None:
            if not fut.done():
                fut.set_result(msg)
            return
        cell = self._cells.get(path)
        if cell is not None and not cell.stopping:
            cell.enqueue(msg)
        else:
            logger.debug("message to %s dropped: no such actor", path)

    def _ack(self, token: int | None, outcome: int) -> None:
        if token is not None and self._handle is not None:
            self._handle._core().ack_label(token, outcome)

    def _cell_ended(self, cell: _Cell) -> None:
        if self._cells.get(cell.ref.path) is cell and cell.ref.label is None:
            del self._cells[cell.ref.path]

    def _cluster(self) -> ClusterHandle:
        if self._handle is None:
            raise RuntimeError("the actor system is not started (use 'async with')")
        return self._handle
