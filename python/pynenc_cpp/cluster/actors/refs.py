"""Actor refs: ``ActorRef`` (where messages go; picklable, and rebuilt bound to the
system that unpickles it), the errors of ``tell``/``ask`` (``AskTimeout``,
``MessageTooLarge``), and the context variables behind them: the system that is
running (``_current_system``) and the messages an event-sourced command holds until
its events are in the journal (``_deferred``, ``_held_here``).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pynenc_cpp.cluster.actors.system import ClusteredActorSystem

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


# Pickles of refs (messages, journals) name the rebuilder where it was first defined:
# pynenc_cpp.cluster.actors.system, which re-exports it.
_rebuild_ref.__module__ = "pynenc_cpp.cluster.actors.system"
