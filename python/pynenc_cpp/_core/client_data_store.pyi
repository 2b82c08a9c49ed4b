"""
Client data stores.
"""

from __future__ import annotations

__all__: list[str] = ["ClientDataStore"]

class ClientDataStore:
    """
    Key -> serialized value store for large task data (thread-safe).
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the store named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def purge(self) -> None:
        """
        Removes every key.
        """
    def retrieve(self, key: str) -> str:
        """
        The value under `key`; raises InvocationNotFound (a KeyError) if none.
        """
    def store(self, key: str, value: str) -> None:
        """
        Stores `value` under `key`, replacing any old value.
        """
