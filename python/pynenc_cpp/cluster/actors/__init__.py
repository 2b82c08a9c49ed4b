"""Python actors on the cluster (casty's API): ``ClusteredActorSystem``, ``Behaviors``,
singletons, ask/tell across nodes, event-sourced singletons. See docs/cluster/actors.md."""

from pynenc_cpp.cluster.actors.behaviors import Behavior, Behaviors
from pynenc_cpp.cluster.actors.journal import (
    InMemoryJournal,
    Journal,
    JournalEntry,
    JournalSnapshot,
    RedisJournal,
    SqliteJournal,
)
from pynenc_cpp.cluster.actors.serialization import (
    JsonSerializer,
    PickleSerializer,
    Serializer,
)
from pynenc_cpp.cluster.actors.system import (
    ActorContext,
    ActorRef,
    AskTimeout,
    ClusteredActorSystem,
    MessageTooLarge,
)
from pynenc_cpp.errors import BufferFull

__all__ = [
    "ActorContext",
    "ActorRef",
    "AskTimeout",
    "Behavior",
    "Behaviors",
    "BufferFull",
    "ClusteredActorSystem",
    "InMemoryJournal",
    "Journal",
    "JournalEntry",
    "JournalSnapshot",
    "JsonSerializer",
    "MessageTooLarge",
    "PickleSerializer",
    "RedisJournal",
    "Serializer",
    "SqliteJournal",
]
