"""Client data store adapter: pynenc's ``BaseClientDataStore`` on the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynenc.client_data_store.base_client_data_store import BaseClientDataStore

from pynenc_cpp import _core
from pynenc_cpp._component import CppComponentMixin, MemBackend, RedisBackend, SqliteBackend

if TYPE_CHECKING:
    from pynenc import Pynenc


class CppClientDataStore(CppComponentMixin, BaseClientDataStore):
    """Native key/value store for large arguments, results and exceptions.

    The backend is picked by the subclass: ``CppMemClientDataStore`` or
    ``CppSqliteClientDataStore``.
    """

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        self._engine = _core.ClientDataStore(self.engine_uri, app.app_id)

    def _store(self, key: str, value: str) -> None:
        self._engine.store(key, value)

    def _retrieve(self, key: str) -> str:
        # A missing key raises _core.InvocationNotFound, a KeyError as pynenc expects.
        return self._engine.retrieve(key)

    def _purge(self) -> None:
        self._engine.purge()


class CppMemClientDataStore(MemBackend, CppClientDataStore):
    """The native client data store on process-local memory (like pynenc's ``memory()``)."""


class CppSqliteClientDataStore(SqliteBackend, CppClientDataStore):
    """The native client data store on the app's SQLite file (``cpp_sqlite_path``)."""


class CppRedisClientDataStore(RedisBackend, CppClientDataStore):
    """The native client data store on the app's Redis server (``cpp_redis_url``)."""
