"""Type conversions between pynenc's Python values and the engine's plain values.

The engine keeps timestamps as integer microseconds since the Unix epoch (UTC)
and identifiers as strings (``TaskId.key``, ``CallId.key``, invocation ids).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from pynenc.identifiers.invocation_id import InvocationId
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


def opt_to_us(value: datetime | None) -> int | None:
    """``to_us`` that passes ``None`` through."""
    return None if value is None else to_us(value)


def opt_from_us(value: int | None) -> datetime | None:
    """``from_us`` that passes ``None`` through."""
    return None if value is None else from_us(value)


def seconds_to_us(seconds: float) -> int:
    """A duration in microseconds; a positive one never rounds down to 0 (= disabled)."""
    micros = round(seconds * 1_000_000)
    return max(micros, 1) if seconds > 0 else micros


def as_invocation_ids(raw: list[str]) -> list[InvocationId]:
    """The engine's id strings as pynenc ``InvocationId``s.

    ``InvocationId`` is a ``NewType`` of ``str``: the list already has the right
    runtime type, so this is a typing cast, not a per-element copy.
    """
    return cast("list[InvocationId]", raw)


def status_from_value(value: str) -> InvocationStatus:
    """pynenc's InvocationStatus for its string value (a dict lookup, not an Enum call)."""
    return _STATUS_BY_VALUE[value]


_STATUS_BY_VALUE: dict[str, InvocationStatus] = {s.value: s for s in InvocationStatus}
