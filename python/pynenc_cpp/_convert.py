"""Type conversions between pynenc's Python values and the engine's plain values.

The engine keeps timestamps as integer microseconds since the Unix epoch (UTC)
and identifiers as strings (``TaskId.key``, ``CallId.key``, invocation ids).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pynenc.invocation.status import InvocationStatus

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(value: datetime) -> int:
    """A datetime as integer microseconds since the epoch; naive values are taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    """Inverse of ``to_us``: an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=value)


def status_from_value(value: str) -> InvocationStatus:
    """pynenc's InvocationStatus for its string value (a dict lookup, not an Enum call)."""
    return _STATUS_BY_VALUE[value]


_STATUS_BY_VALUE: dict[str, InvocationStatus] = {s.value: s for s in InvocationStatus}
