"""Reading finished invocations ahead of a client that reads them one by one.

A client that submits many tasks and then reads each one's result (``[h.result for h
in handles]``) makes one status read per invocation, one round trip each on Redis.
``ReadAhead`` keeps, per thread, the ids this thread submitted whose status it has
not read as final yet; when the thread reads a status, the engine's
``read_final_ahead`` also reads, in the same round trip and only when that status
is final, up to ``limit`` of those ids, and keeps the ones already final (with a
SUCCESS result up to the read's size limit) for the thread's own next reads.

Only final records are kept, and a final status never changes: what is served is
what a read would return, unless the invocation was purged since (a purge in this
process moves the state backend's prefetch generation, and every kept record is
dropped after ``_PREFETCH_TTL_SEC``, as the results read with their status are).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

#: Ids read ahead in one read (each costs the server a status read).
READ_AHEAD_IDS = 16
#: An id read ahead this many times while not final is no longer read ahead.
_MAX_TRIES = 3
#: Per thread: the most ids kept as submitted (the oldest half is dropped past
#: twice that), and the most records kept.
_MAX_SUBMITTED = 4096
_MAX_KEPT = 2 * READ_AHEAD_IDS


class _Thread:
    __slots__ = ("base", "ids", "kept", "position", "tries")

    def __init__(self) -> None:
        # The ids this thread submitted, in order; ids[i] was the (base + i)-th.
        self.ids: list[str] = []
        self.base = 0
        # id -> its submission number, for the ids whose final status this thread
        # has not read yet (nor read ahead, nor given up on).
        self.position: dict[str, int] = {}
        # id -> times it was read ahead while not final.
        self.tries: dict[str, int] = {}
        # id -> (raw status record, serialized result | None, prefetch generation
        # before the read, monotonic time of the read).
        self.kept: dict[str, tuple[Any, str | None, int, float]] = {}

    def forget(self, invocation_id: str) -> None:
        self.position.pop(invocation_id, None)
        if self.tries:
            self.tries.pop(invocation_id, None)


class ReadAhead:
    """The read-ahead state of one orchestrator, per thread (see the module)."""

    def __init__(self, ttl_sec: float, limit: int = READ_AHEAD_IDS) -> None:
        self._local = threading.local()
        self._ttl_sec = ttl_sec
        self.limit = limit

    def _thread(self) -> _Thread:
        state: _Thread | None = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = _Thread()
        return state

    def submitted(self, invocation_ids: Iterable[str]) -> None:
        """This thread registered these invocations (it may read their status later)."""
        state = self._thread()
        ids, position = state.ids, state.position
        for invocation_id in invocation_ids:
            position[invocation_id] = state.base + len(ids)
            ids.append(invocation_id)
        if len(ids) > 2 * _MAX_SUBMITTED:
            for number, invocation_id in enumerate(ids[:_MAX_SUBMITTED], state.base):
                if position.get(invocation_id) == number:
                    state.forget(invocation_id)
            del ids[:_MAX_SUBMITTED]
            state.base += _MAX_SUBMITTED

    def read_now(self, invocation_id: str) -> None:
        """This thread read the final status of ``invocation_id`` otherwise (with a
        wait): not to be read ahead."""
        self._thread().forget(invocation_id)

    def take(self, invocation_id: str, generation: int) -> tuple[Any, str | None, int] | None:
        """(raw status record, serialized result | None, its generation) read ahead for
        this thread, served once; None when none is kept, or it is stale (purged
        since: ``generation`` is the current prefetch generation; or older than the
        time to live)."""
        state = self._thread()
        hit = state.kept.pop(invocation_id, None) if state.kept else None
        if hit is None:
            return None
        raw, result, read_generation, at = hit
        if read_generation != generation or time.monotonic() - at > self._ttl_sec:
            return None
        return raw, result, read_generation

    def pending(self, invocation_id: str) -> bool:
        """Whether this thread submitted ``invocation_id`` and has not read its final
        status yet (its next status read is likely followed by a wait for it)."""
        return invocation_id in self._thread().position

    def candidates(self, invocation_id: str) -> list[str]:
        """The ids to read ahead with this thread's status read of ``invocation_id``
        (which is then no longer one): up to ``limit`` of those this thread submitted
        after it and has not read yet; none for an id this thread did not submit."""
        state = self._thread()
        number = state.position.get(invocation_id)
        if number is None:
            return []
        state.forget(invocation_id)
        ids, position = state.ids, state.position
        out: list[str] = []
        start = number + 1 - state.base
        for candidate in ids[start : start + 4 * self.limit]:
            if candidate in position:
                out.append(candidate)
                if len(out) == self.limit:
                    break
        return out

    def read(
        self,
        candidates: list[str],
        first_final: bool,
        more: list[tuple[str, Any, str | None]],
        generation: int,
    ) -> None:
        """Keeps what a read with ``candidates`` found final (``more``): read only
        when the status asked for was final (``first_final``)."""
        if not first_final or not candidates:
            return
        state = self._thread()
        kept, tries = state.kept, state.tries
        now = time.monotonic()
        if kept:  # what a purge or time made stale is never served: not kept either
            for invocation_id, (_, _, read_generation, at) in list(kept.items()):
                if read_generation != generation or now - at > self._ttl_sec:
                    del kept[invocation_id]
        found = set()
        for invocation_id, raw, result in more:
            found.add(invocation_id)
            state.forget(invocation_id)
            if len(kept) >= _MAX_KEPT:
                del kept[next(iter(kept))]
            kept[invocation_id] = (raw, result, generation, now)
        for invocation_id in candidates:
            if invocation_id in found:
                continue
            count = tries.get(invocation_id, 0) + 1
            if count >= _MAX_TRIES:
                state.forget(invocation_id)
            else:
                tries[invocation_id] = count
