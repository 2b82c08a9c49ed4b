"""Client data store adapter: pynenc's ``BaseClientDataStore`` on the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynenc.client_data_store.base_client_data_store import BaseClientDataStore

from pynenc_cpp import _core
from pynenc_cpp._component import CppComponentMixin

if TYPE_CHECKING:
    from pynenc import Pynenc


class CppMemClientDataStore(CppComponentMixin, BaseClientDataStore):
    """In-memory native key/value store for large arguments, results and exceptions."""

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
