"""One engine storage per app object and URI.

A ``_core.Storage`` owns what the app's pynenc-cpp components share on one backend:
the Redis connection pool, the SQLite database (its connections and wake board), or
the process memory. Every adapter of an app takes its engine port from the storage
its app and URI name (``storage_for``), so the five components of one app and the
native Lifecycle work on the same objects, and nothing is shared between apps but
what the server or the file holds. The storage lives as long as its app object (and
the ports taken from it): apps are held weakly here.
"""

from __future__ import annotations

import os
import threading
import weakref
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
    key = (uri, app.app_id)
    with _lock:
        per_app = _storages.get(app)
        if per_app is None:
            per_app = _storages[app] = {}
        storage = per_app.get(key)
        if storage is None:
            storage = per_app[key] = _core.Storage(uri, app.app_id)
    return storage


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at the fork: the child's copy
    # would stay locked. The storages themselves drop the parent's connections.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
