"""Journals of event-sourced actors: a fenced, append-only log per entity.

An append names the sequence number the writer expects the log to be at and the
writer's generation; it is refused if the log moved on (``Conflict``) or if a
higher generation already wrote to or fenced the log (``StaleGeneration``). A
singleton instance fences the log with its generation before it replays it, so
an instance left over from before a failover can no longer append.

``InMemoryJournal`` (one process), ``SqliteJournal`` (processes of one machine),
``RedisJournal`` (many machines); all three are the C++ ``Journal`` port
(docs/cluster/actors.md, "Journals").
"""

from __future__ import annotations

from dataclasses import dataclass

from pynenc_cpp import _core
from pynenc_cpp._storage import cluster_storage


@dataclass(frozen=True)
class JournalEntry:
    seq: int
    generation: int  # packed generation of its writer
    payload: bytes


@dataclass(frozen=True)
class JournalSnapshot:
    seq: int
    generation: int
    state: bytes


class Journal:
    """A fenced event log (thread-safe; calls block briefly on I/O)."""

    def __init__(self, uri: str, namespace: str = "pynenc-cpp") -> None:
        self.uri = uri
        # The process's storage of this URI and namespace, shared with fenced stores.
        self._storage = cluster_storage(uri, namespace)
        self._j = _core.Journal(self._storage)

    def append(self, entity: str, expected_seq: int, generation: int, events: list[bytes]) -> int:
        """Appends ``events`` after ``expected_seq``; returns the new last sequence number."""
        return self._j.append(entity, expected_seq, generation, events)

    def fence(self, entity: str, generation: int) -> int:
        """Refuses later writes below ``generation``; returns the last sequence number."""
        return self._j.fence(entity, generation)

    def read(self, entity: str, after_seq: int = 0, limit: int = 0) -> list[JournalEntry]:
        return [JournalEntry(*e) for e in self._j.read(entity, after_seq, limit)]

    def last_seq(self, entity: str) -> int:
        return self._j.last_seq(entity)

    def fence_of(self, entity: str) -> int:
        """The entity's fence: the highest packed generation that wrote or fenced it (0: none)."""
        return self._j.fence_of(entity)

    def save_snapshot(self, entity: str, seq: int, generation: int, state: bytes) -> None:
        self._j.save_snapshot(entity, seq, generation, state)

    def load_snapshot(self, entity: str) -> JournalSnapshot | None:
        s = self._j.load_snapshot(entity)
        return None if s is None else JournalSnapshot(*s)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.uri}>"


class InMemoryJournal(Journal):
    """This process's memory (tests; nodes in one process share it if they share the object)."""

    def __init__(self, namespace: str = "pynenc-cpp") -> None:
        super().__init__("memory://", namespace)


class SqliteJournal(Journal):
    """An SQLite file: every process of the machine sees the same log."""

    def __init__(self, path: str, namespace: str = "pynenc-cpp") -> None:
        super().__init__(f"sqlite://{path}", namespace)


class RedisJournal(Journal):
    """A Redis server (``redis://host:port/db``); writes are one Lua script each."""

    def __init__(self, url: str, namespace: str = "pynenc-cpp") -> None:
        if not url.startswith("redis://"):
            raise ValueError(f"url must be redis://host:port/db, got {url!r}")
        super().__init__(url, namespace)
