"""Broker adapter: pynenc's ``BaseBroker`` on the engine's broker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pynenc.broker.base_broker import BaseBroker
from pynenc.identifiers.invocation_id import InvocationId

from pynenc_cpp._component import CppComponentMixin, MemBackend, RedisBackend, SqliteBackend

if TYPE_CHECKING:
    from pynenc import Pynenc


class CppBroker(CppComponentMixin, BaseBroker):
    """Native broker: priority queues in C++, FIFO within a priority.

    Thread-safe (and process-safe on SQLite). The backend is picked by the
    subclass: ``CppMemBroker`` or ``CppSqliteBroker``.
    """

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        self._engine = self.storage.broker()

    def _route_invocation(
        self, invocation_id: InvocationId, queue_name: str, priority: float
    ) -> None:
        self._engine.route([invocation_id], queue_name, priority)

    def _route_invocations(
        self, invocation_ids: Sequence[InvocationId], queue_name: str, priority: float
    ) -> None:
        self._engine.route(list(invocation_ids), queue_name, priority)

    def retrieve_invocation(self, queue_name: str | None = None) -> InvocationId | None:
        queue = self.conf.queues[0] if queue_name is None else queue_name
        self._validate_queue_names((queue,))
        found = self._engine.retrieve(queue, 0.0)
        return None if found is None else InvocationId(found)

    def retrieve_invocation_blocking(
        self, timeout_seconds: float, queue_name: str | None = None
    ) -> InvocationId | None:
        """Like ``retrieve_invocation`` but waits up to ``timeout_seconds`` for work.

        The wait happens in C++ with the GIL released and wakes as soon as an
        invocation is routed (no polling).
        """
        queue = self.conf.queues[0] if queue_name is None else queue_name
        self._validate_queue_names((queue,))
        found = self._engine.retrieve(queue, timeout_seconds)
        return None if found is None else InvocationId(found)

    def count_invocations(self, queue_names: Sequence[str] | None = None) -> int:
        queues = self.conf.queues if queue_names is None else queue_names
        self._validate_queue_names(queues)
        return self._engine.count(list(queues))

    def purge(self) -> None:
        self._engine.purge()


class CppMemBroker(MemBackend, CppBroker):
    """The native broker on process-local memory (like pynenc's ``memory()``)."""


class CppSqliteBroker(SqliteBackend, CppBroker):
    """The native broker on the app's SQLite file (``cpp_sqlite_path``)."""


class CppRedisBroker(RedisBackend, CppBroker):
    """The native broker on the app's Redis server (``cpp_redis_url``)."""
