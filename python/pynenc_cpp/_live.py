"""The invocation objects an app handed out, so a result wait can update them.

pynenc's ``invocation.result`` loops ``while not self.status.is_final()``, and an
invocation's ``status`` answers from its own cache for ``cached_status_time`` (0.1 s
by default) after its last read. ``CppRunner``'s wait blocks until the engine says
an invocation is final; the object the caller holds then still shows the cached
non-final status, and the loop would go on until the cache lapsed. So each app keeps,
weakly and by id, the invocation objects pynenc-cpp's components handed out (the
orchestrator's registrations: ``task(...)``, ``parallelize``; the state backend's
``get_invocation``), and the wait puts the final status it found in the cache of
each one held for that id (the orchestrator's ``_note_final``), as pynenc's own
status read would.

Every such object of an id is updated (the runner fetching an invocation by id
to run it does not hide the caller's). Apps and invocations are held weakly:
nothing here keeps either alive; the ids of objects gone are swept out as objects
are added.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pynenc import Pynenc
    from pynenc.invocation.dist_invocation import DistributedInvocation

#: Objects added between two sweeps of the ids whose objects are all gone.
_SWEEP_EVERY = 1024


class _Registry:
    """One app's invocation objects by id (weak references)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: dict[str, list[weakref.ref[DistributedInvocation]]] = {}
        self.added = 0

    def add(self, invocation: DistributedInvocation) -> None:
        with self.lock:
            refs = self.by_id.setdefault(invocation.invocation_id, [])
            if any(r() is invocation for r in refs):
                return
            refs[:] = [r for r in refs if r() is not None]
            refs.append(weakref.ref(invocation))
            self.added += 1
            if self.added >= _SWEEP_EVERY:
                self.added = 0
                for key in [k for k, rs in self.by_id.items() if all(r() is None for r in rs)]:
                    del self.by_id[key]

    def held(self, invocation_id: str) -> list[DistributedInvocation]:
        with self.lock:
            refs = self.by_id.get(invocation_id)
            if not refs:
                return []
            out = [inv for inv in (r() for r in refs) if inv is not None]
            if not out:
                del self.by_id[invocation_id]
            return out


_live: weakref.WeakKeyDictionary[Pynenc, _Registry] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _of(app: Pynenc) -> _Registry:
    registry = _live.get(app)
    if registry is None:
        with _lock:
            registry = _live.get(app)
            if registry is None:
                registry = _live[app] = _Registry()
    return registry


def remember(app: Pynenc, invocations: Iterable[DistributedInvocation]) -> None:
    """``app`` handed these invocation objects out."""
    registry = _of(app)
    for inv in invocations:
        registry.add(inv)


def held(app: Pynenc, invocation_id: str) -> list[DistributedInvocation]:
    """The invocation objects handed out for ``invocation_id`` that someone still holds."""
    registry = _live.get(app)
    return [] if registry is None else registry.held(invocation_id)
