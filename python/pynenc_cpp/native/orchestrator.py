"""``CppNativeOrchestrator``, one class of the steps of native mode (``submit``,
``reads``, ``changes``, ``recover``, over ``base``; the claim and run steps are
``pynenc_cpp._pick`` and ``pynenc_cpp._run``), and its three backends."""

from __future__ import annotations

from pynenc_cpp._component import MemBackend, RedisBackend, SqliteBackend
from pynenc_cpp.native.changes import ChangesStatus
from pynenc_cpp.native.reads import ReadsStatus
from pynenc_cpp.native.recover import Recovers
from pynenc_cpp.native.submit import Submits


class CppNativeOrchestrator(Submits, ReadsStatus, ChangesStatus, Recovers):
    """The orchestrator of native mode (backend picked by the subclass).

    Thread-safe like the mixed-mode orchestrator. See the package's docs for
    which pynenc methods become one engine call.
    """


class CppMemNativeOrchestrator(MemBackend, CppNativeOrchestrator):
    """Native mode on process-local memory."""


class CppSqliteNativeOrchestrator(SqliteBackend, CppNativeOrchestrator):
    """Native mode on the app's SQLite file: each composite is one transaction."""


class CppRedisNativeOrchestrator(RedisBackend, CppNativeOrchestrator):
    """Native mode on the app's Redis server."""

    _reads_ahead = True
