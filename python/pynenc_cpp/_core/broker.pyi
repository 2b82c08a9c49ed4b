"""
Brokers and their retrieval.
"""

from __future__ import annotations

import collections.abc
import typing

__all__: list[str] = ["Broker"]

class Broker:
    """
    Queues of invocation ids by name and priority (thread-safe).
    Higher priority first; FIFO within one priority.
    """
    def __init__(self, uri: str = "memory://", app_id: str = "pynenc") -> None:
        """
        Opens the broker named by `uri` for `app_id`. Raises BadConfig for an unusable URI.
        """
    def count(self, queues: collections.abc.Sequence[str]) -> int:
        """
        Number of ids waiting in `queues`, summed.
        """
    def interrupt(self) -> None:
        """
        Wakes every retrieve() currently waiting; each returns None.
        """
    def purge(self) -> None:
        """
        Drops every queued id.
        """
    def retrieve(
        self, queue: str, timeout_seconds: typing.SupportsFloat | typing.SupportsIndex = 0.0
    ) -> str | None:
        """
        Pops the next id of `queue`, waiting up to `timeout_seconds` (GIL released) for one.
        Returns None if nothing arrived in time or interrupt() was called.
        """
    def route(
        self,
        invocation_ids: collections.abc.Sequence[str],
        queue: str,
        priority: typing.SupportsFloat | typing.SupportsIndex = 0.0,
    ) -> None:
        """
        Appends the ids, in order, to `queue` at `priority`; wakes waiting retrievers.
        """
