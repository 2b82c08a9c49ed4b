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


_Ref = weakref.ref


class Registry:
    """One app's invocation objects by id (weak references).

    An id maps to one weak reference (the common case: one object per id) or to a
    list of them (several objects of one id: a caller's and a fetched one)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: dict[str, _Ref[DistributedInvocation] | list[_Ref[DistributedInvocation]]] = {}
        self.added = 0

    def add(self, invocations: Iterable[DistributedInvocation]) -> None:
        by_id = self.by_id
        with self.lock:
            for invocation in invocations:
                key = invocation.invocation_id
                refs = by_id.get(key)
                if refs is None:
                    by_id[key] = _Ref(invocation)
                else:
                    listed = refs if isinstance(refs, list) else [refs]
                    if any(r() is invocation for r in listed):
                        continue
                    listed = [r for r in listed if r() is not None]
                    listed.append(_Ref(invocation))
                    by_id[key] = listed[0] if len(listed) == 1 else listed
                self.added += 1
                if self.added >= _SWEEP_EVERY:
                    self.added = 0
                    self._sweep()

    def _sweep(self) -> None:
        """Drops the ids whose objects are all gone (the lock held)."""
        by_id = self.by_id
        gone = [
            key
            for key, refs in by_id.items()
            if (all(r() is None for r in refs) if isinstance(refs, list) else refs() is None)
        ]
        for key in gone:
            del by_id[key]

    def held(self, invocation_id: str) -> list[DistributedInvocation]:
        with self.lock:
            refs = self.by_id.get(invocation_id)
            if refs is None:
                return []
            listed = refs if isinstance(refs, list) else [refs]
            out = [inv for inv in (r() for r in listed) if inv is not None]
            if not out:
                del self.by_id[invocation_id]
            return out


_live: weakref.WeakKeyDictionary[Pynenc, Registry] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def registry(app: Pynenc) -> Registry:
    """``app``'s registry, made on first use (a component keeps it: the lookup here
    makes a weak reference to ``app`` each time)."""
    found = _live.get(app)
    if found is None:
        with _lock:
            found = _live.get(app)
            if found is None:
                found = _live[app] = Registry()
    return found


def remember(app: Pynenc, invocations: Iterable[DistributedInvocation]) -> None:
    """``app`` handed these invocation objects out."""
    registry(app).add(invocations)


def held(app: Pynenc, invocation_id: str) -> list[DistributedInvocation]:
    """The invocation objects handed out for ``invocation_id`` that someone still holds."""
    found = _live.get(app)
    return [] if found is None else found.held(invocation_id)
