"""Client data store adapter: pynenc's ``BaseClientDataStore`` on the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynenc.client_data_store.base_client_data_store import BaseClientDataStore
from pynenc.serializer.constants import ReservedKeys
from pynenc.serializer.json_pickle_serializer import JsonPickleSerializer

from pynenc_cpp import _scalars, _shortcuts
from pynenc_cpp._component import CppComponentMixin, MemBackend, RedisBackend, SqliteBackend

if TYPE_CHECKING:
    from pynenc import Pynenc

#: pynenc's prefix of a reference key (``BaseClientDataStore.is_reference``).
_REFERENCE_PREFIX: str = ReservedKeys.CLIENT_DATA.value


class CppClientDataStore(CppComponentMixin, BaseClientDataStore):
    """Native key/value store for large arguments, results and exceptions.

    The backend is picked by the subclass: ``CppMemClientDataStore`` or
    ``CppSqliteClientDataStore``.
    """

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        self._engine = self.storage.client_data_store()

    def _scalar_text(self, obj: Any) -> str | None:
        """The serializer's text for a plain scalar, without the serializer (see
        ``_scalars``); None for other values or when the app's serializer is not
        exactly pynenc's ``JsonPickleSerializer``, or the ``scalars`` shortcut is off
        (``pynenc_cpp._shortcuts``)."""
        if not self._scalars_on():
            return None
        return _scalars.encode(obj)

    def _scalars_on(self) -> bool:
        """Whether plain scalars skip the serializer: the ``scalars`` shortcut is active
        and the app's serializer is exactly pynenc's ``JsonPickleSerializer``."""
        return type(self.app.serializer) is JsonPickleSerializer and "scalars" in (
            _shortcuts.of_app(self.app)
        )

    def serialize(self, obj: Any, disable_cache: bool = False) -> str:
        """pynenc's ``serialize`` (inline text, or a reference key for a value of
        at least ``min_size_to_cache`` characters), same text, same storage; a
        plain scalar's text is written without jsonpickle."""
        text = self._scalar_text(obj)
        if text is None:
            serialized: str = super().serialize(obj, disable_cache)
            return serialized
        # pynenc 0.4.0's BaseClientDataStore.serialize, with `text` for the serializer's.
        if self.conf.disable_client_data_store or disable_cache:
            return text
        if isinstance(obj, str) and self.is_reference(obj):
            return obj
        key: str = self._maybe_store(text)
        # A scalar's own text is never a reference key (see _scalars): only a stored one is.
        if key is not text and self.is_reference(key):
            self._cache_deserialized(key, obj)
        return key

    def is_reference(self, value: str) -> bool:
        """pynenc's ``is_reference``, its key prefix read once."""
        if "scalars" not in _shortcuts.of_app(self.app):
            return bool(super().is_reference(value))
        return value.startswith(_REFERENCE_PREFIX)

    def deserialize_arguments(self, serialized_args: dict[str, str]) -> dict[str, Any]:
        """pynenc's ``deserialize_arguments``; plain scalars read without the serializer,
        whose type is checked once per call rather than once per argument."""
        if not self._scalars_on():
            args: dict[str, Any] = super().deserialize_arguments(serialized_args)
            return args
        out: dict[str, Any] = {}
        for k, v in serialized_args.items():
            value = _scalars.decode(v)
            out[k] = self.resolve(v) if value is _scalars.MISS else value
        return out

    def resolve(self, data: str) -> Any:
        """pynenc's ``resolve``; a plain scalar's text is read without jsonpickle."""
        if self._scalars_on():
            value = _scalars.decode(data)
            if value is not _scalars.MISS:
                return value
        return super().resolve(data)

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
