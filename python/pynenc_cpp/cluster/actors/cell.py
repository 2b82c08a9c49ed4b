"""One running actor: ``_Cell`` (its mailbox and the task that handles it), the
``ActorContext`` its behaviour gets, a singleton's rebuild after a back-off, and event
sourcing: recovery from the journal (snapshot, then events), fencing by generation
(``_Stale``, ``_FencedAbove``) and the replies a command holds until its events are in.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynenc_cpp import _core
from pynenc_cpp.cluster.actors.behaviors import (
    Behavior,
    EventSourced,
    Persisted,
    Receive,
    Same,
    Setup,
    Stopped,
)
from pynenc_cpp.cluster.actors.refs import ActorRef, _current_system, _deferred, _Held
from pynenc_cpp.cluster.specs import Generation

if TYPE_CHECKING:
    from pynenc_cpp.cluster.actors.system import ClusteredActorSystem

logger = logging.getLogger("pynenc_cpp.cluster.actors")

# Label-message outcomes (cluster/actors.h).
_PROCESSED, _DUPLICATE, _NOT_HERE, _REJECTED = range(4)

# A singleton behaviour that stopped or failed to start is built again after this
# back-off (doubling up to the maximum while it keeps failing).
_RESTART_FIRST_S = 0.1
_RESTART_MAX_S = 30.0


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
