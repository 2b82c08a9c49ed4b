"""
One app's storage and the ports over it.
"""

from __future__ import annotations

import pynenc_cpp._core.broker
import pynenc_cpp._core.client_data_store
import pynenc_cpp._core.lifecycle
import pynenc_cpp._core.orchestrator
import pynenc_cpp._core.state_backend
import pynenc_cpp._core.trigger

__all__: list[str] = ["Storage"]

class Storage:
    """
    One app's storage (thread-safe): the Redis connection pool, the SQLite database or
    the process memory of one (URI, app id), and the ports and Lifecycles over it. Each
    port accessor returns the same object on every call; two Storages share nothing
    but what their server or file holds.
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the storage named by `uri` for `app_id` (on redis:// a new connection
        pool, checked with PING; on sqlite:// the file, created if missing). Raises
        BadConfig for an unusable URI or app id, BackendConnectionError for an unreachable server.
        """
    def broker(self) -> pynenc_cpp._core.broker.Broker:
        """
        This storage's broker (the same object on every call).
        """
    def client_data_store(self) -> pynenc_cpp._core.client_data_store.ClientDataStore:
        """
        This storage's client-data store (the same object on every call).
        """
    def lifecycle(
        self, with_trigger: bool, status_context: str, result_context: str, exception_context: str
    ) -> pynenc_cpp._core.lifecycle.Lifecycle:
        """
        A new Lifecycle over this storage's orchestrator, state backend, broker and, if
        `with_trigger`, trigger store (without it every watched flag is True). The
        *_context names are the context types trigger conditions are registered under.
        """
    def orchestrator(self) -> pynenc_cpp._core.orchestrator.Orchestrator:
        """
        This storage's orchestrator (the same object on every call).
        """
    def state_backend(self) -> pynenc_cpp._core.state_backend.StateBackend:
        """
        This storage's state backend (the same object on every call).
        """
    def trigger_store(self) -> pynenc_cpp._core.trigger.TriggerStore:
        """
        This storage's trigger store (the same object on every call).
        """
    @property
    def app_id(self) -> str:
        """
        The app id.
        """
    @property
    def kind(self) -> str:
        """
        'memory', 'sqlite' or 'redis'.
        """
    @property
    def uri(self) -> str:
        """
        The URI, its password redacted.
        """
