"""One engine storage per app object and URI.

A ``_core.Storage`` owns what the app's pynenc-cpp components share on one backend:
the Redis connection pool, the SQLite database (its connections and wake board), or
the process memory. Every adapter of an app takes its engine port from the storage
its app and URI name (``storage_for``), so the five components of one app and the
native Lifecycle work on the same objects, and nothing is shared between apps but
what the server or the file holds. The storage lives as long as its app object (and
the ports taken from it): apps are held weakly here.

The cluster's ports (``FencedStore``, ``Journal``), which belong to no app, share one
storage per URI and cluster namespace in the process (``cluster_storage``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from pynenc_cpp import _core

if TYPE_CHECKING:
    from pynenc import Pynenc

_storages: weakref.WeakKeyDictionary[Pynenc, dict[tuple[str, str], _core.Storage]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def storage_for(app: Pynenc, uri: str) -> _core.Storage:
    """The storage of ``app`` on ``uri``: opened on the first call for this app object,
    URI and app id, the same object afterwards. Raises what ``_core.Storage`` raises
    (``BadConfig``, ``BackendConnectionError``); a failed open is tried again by the next call."""
    return _of_app(_storages, app, uri, lambda: _core.Storage(uri, app.app_id))


class Learned:
    """What every native ``Lifecycle`` made over one storage is told: the tasks known
    to run freely (running concurrency control disabled), whose claims then start
    them by themselves. Kept per storage, not per orchestrator: pynenc builds an
    app's components lazily and without a lock, so two threads asking first (a
    runner starting its engine, a client submitting) may each build an
    orchestrator, and the runner's engine may take with the lifecycle of one while
    the claims that learn which tasks run freely are made by the other (its takes
    then never started a task by themselves, and nothing was prefetched).
    Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Held weakly: a lifecycle lives as long as the orchestrator (or runner
        # engine) that uses it.
        self._lifecycles: weakref.WeakSet[_core.Lifecycle] = weakref.WeakSet()
        self._free_tasks: set[str] = set()

    def adopt(self, lifecycle: _core.Lifecycle) -> None:
        """A lifecycle made over the storage: told what is known, and what is learned."""
        with self._lock:
            for task_key in self._free_tasks:
                lifecycle.set_task_runs_freely(task_key)
            self._lifecycles.add(lifecycle)

    def after_fork(self) -> None:
        """In a forked child: a lock a parent's thread held at the fork is not left held."""
        self._lock = threading.Lock()

    def runs_freely(self, task_key: str) -> None:
        """The task runs freely: told to every lifecycle adopted, and to later ones."""
        with self._lock:
            if task_key in self._free_tasks:
                return
            self._free_tasks.add(task_key)
            for lifecycle in self._lifecycles:
                lifecycle.set_task_runs_freely(task_key)


_learned: weakref.WeakKeyDictionary[Pynenc, dict[tuple[str, str], Learned]] = (
    weakref.WeakKeyDictionary()
)


def learned_for(app: Pynenc, uri: str) -> Learned:
    """What the native lifecycles over ``app``'s storage on ``uri`` share (one object
    per app object, URI and app id, as ``storage_for``)."""
    return _of_app(_learned, app, uri, Learned)


def _of_app[T](
    table: weakref.WeakKeyDictionary[Pynenc, dict[tuple[str, str], T]],
    app: Pynenc,
    uri: str,
    make: Callable[[], T],
) -> T:
    """``table``'s entry for ``app`` on ``uri`` (and its app id), made on first use."""
    key = (uri, app.app_id)
    with _lock:
        per_app = table.get(app)
        if per_app is None:
            per_app = table[app] = {}
        entry = per_app.get(key)
        if entry is None:
            entry = per_app[key] = make()
    return entry


_cluster_storages: weakref.WeakValueDictionary[tuple[str, str], _core.Storage] = (
    weakref.WeakValueDictionary()
)


def cluster_storage(uri: str, namespace: str) -> _core.Storage:
    """The storage the cluster's ports of this process share on ``uri`` for the cluster
    ``namespace`` (the storage's app id): a journal and the fenced stores of one
    cluster take one Redis pool or SQLite database, not one each (on ``memory://``
    each port is still a world of its own). Held weakly: it lives as long as an object
    that keeps it (each port's Python wrapper does). Raises what ``_core.Storage``
    raises (``BadConfig``, ``BackendConnectionError``)."""
    key = (uri, namespace)
    with _lock:
        storage = _cluster_storages.get(key)
        if storage is None:
            storage = _core.Storage(uri, namespace)
            _cluster_storages[key] = storage
    return storage


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at the fork: the child's copy
    # would stay locked. The storages themselves drop the parent's connections.
    global _lock
    _lock = threading.Lock()
    for per_app in list(_learned.values()):
        for learned in per_app.values():
            learned.after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
