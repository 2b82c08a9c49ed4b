"""Behaviours: what an actor does with its next message.

A behaviour is a value; handling a message returns the behaviour for the next
one (``Behaviors.same()`` keeps it, ``Behaviors.stopped()`` ends the actor). The
constructors mirror casty's ``Behaviors``:

* ``receive(fn)``: ``async fn(ctx, msg) -> Behavior``;
* ``setup(fn)``: ``fn(ctx) -> Behavior`` (sync or async), run when the actor starts;
* ``same()``, ``stopped()``;
* ``singleton(factory)``: spawned with the same name on every node, one instance
  runs on the cluster (docs/cluster/actors.md);
* ``event_sourced(entity_id, journal, initial_state, on_event, on_command)`` with
  ``persisted(events)``: state rebuilt from a fenced journal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pynenc_cpp.cluster.actors.cell import ActorContext
    from pynenc_cpp.cluster.actors.journal import Journal

M = TypeVar("M")
S = TypeVar("S")
E = TypeVar("E")


class Behavior[M]:
    """Base class of every behaviour value."""


@dataclass(frozen=True)
class Receive[M](Behavior[M]):
    handler: Callable[[ActorContext[M], M], Awaitable[Behavior[M] | None] | Behavior[M] | None]


@dataclass(frozen=True)
class Setup[M](Behavior[M]):
    factory: Callable[[ActorContext[M]], Awaitable[Behavior[M]] | Behavior[M]]


@dataclass(frozen=True)
class Same(Behavior[Any]):
    pass


@dataclass(frozen=True)
class Stopped(Behavior[Any]):
    pass


@dataclass(frozen=True)
class Singleton[M](Behavior[M]):
    factory: Callable[[], Behavior[M]]
    anchor: str = "leader"  # "leader" | "class:<c>" | "node:<id>"
    drain_timeout_s: float = 5.0


@dataclass(frozen=True)
class EventSourced[M, S, E](Behavior[M]):
    entity_id: str
    journal: Journal
    initial_state: S
    on_event: Callable[[S, E], S]
    on_command: Callable[
        [ActorContext[M], S, M], Awaitable[Behavior[M] | None] | Behavior[M] | None
    ]
    snapshot_every: int = 0  # 0: never; N: a snapshot every N entries


@dataclass(frozen=True)
class Persisted[E](Behavior[Any]):
    events: Sequence[E] = field(default_factory=tuple)


_SAME = Same()
_STOPPED = Stopped()


class Behaviors:
    """Constructors of behaviours (casty's names)."""

    @staticmethod
    def receive(
        handler: Callable[[ActorContext[M], M], Awaitable[Behavior[M] | None] | Behavior[M] | None],
    ) -> Behavior[M]:
        """``handler(ctx, msg)`` (sync or async) returns the next behaviour (None: the same)."""
        return Receive(handler)

    @staticmethod
    def setup(
        factory: Callable[[ActorContext[M]], Awaitable[Behavior[M]] | Behavior[M]],
    ) -> Behavior[M]:
        """``factory(ctx)`` runs when the actor starts and returns its first behaviour."""
        return Setup(factory)

    @staticmethod
    def same() -> Behavior[Any]:
        """Keep the current behaviour."""
        return _SAME

    @staticmethod
    def stopped() -> Behavior[Any]:
        """Stop the actor after this message."""
        return _STOPPED

    @staticmethod
    def singleton(
        factory: Callable[[], Behavior[M]], *, anchor: str = "leader", drain_timeout_s: float = 5.0
    ) -> Behavior[M]:
        """One instance in the cluster, built by ``factory()`` on its owner node.

        ``anchor``: ``"leader"`` (the elected leader), ``"class:<node class>"`` (the
        oldest node of that class) or ``"node:<node id>"``. Spawn it with the same
        name on every node; each spawn returns a ref that reaches the one instance.
        A behaviour that stops (``Behaviors.stopped()``) or fails to start is built
        again by ``factory()`` on the same node after a back-off (0.1 s doubling to
        30 s); messages wait for it. ``drain_timeout_s`` (at most a day) bounds how
        long a stopping instance may take to finish its current message.
        """
        if anchor != "leader" and not anchor.startswith(("class:", "node:")):
            raise ValueError(f"anchor must be 'leader', 'class:<c>' or 'node:<id>', got {anchor!r}")
        if not 0 < drain_timeout_s <= 86_400:
            raise ValueError(
                f"drain_timeout_s must be > 0 and <= 86400 (a day), got {drain_timeout_s!r}"
            )
        return Singleton(factory, anchor, drain_timeout_s)

    @staticmethod
    def event_sourced(
        entity_id: str,
        journal: Journal,
        initial_state: S,
        on_event: Callable[[S, E], S],
        on_command: Callable[
            [ActorContext[M], S, M], Awaitable[Behavior[M] | None] | Behavior[M] | None
        ],
        *,
        snapshot_every: int = 0,
    ) -> Behavior[M]:
        """State rebuilt from ``journal`` (snapshot, then events) when the actor starts.

        ``on_command(ctx, state, msg)`` returns ``Behaviors.persisted(events)`` to append
        events (then applied with ``on_event``) or ``Behaviors.same()``. Messages the
        command sends with ``tell`` (replies) leave only once its events are in the
        journal (an ``ask`` it makes is sent at once). ``ctx.duplicate`` is True while it
        handles a re-sent command whose events the journal already holds. Inside a
        singleton the journal is fenced with the instance's generation: a stale instance
        can neither append nor reply.
        """
        if not entity_id:
            raise ValueError("entity_id must not be empty")
        if snapshot_every < 0:
            raise ValueError(f"snapshot_every must be >= 0, got {snapshot_every}")
        return EventSourced(entity_id, journal, initial_state, on_event, on_command, snapshot_every)

    @staticmethod
    def persisted(events: Sequence[E]) -> Behavior[Any]:
        """From ``on_command``: append ``events`` to the journal, then apply them."""
        return Persisted(tuple(events))
