"""Exceptions raised by pynenc-cpp, and their translation to pynenc's own types.

The engine raises the classes defined in ``_core`` (re-exported here).
``InvocationNotFound`` is also a ``KeyError``; ``BadConfig`` and
``InvalidArgument`` are also ``ValueError``; ``BackendError`` is also a
``RuntimeError``. Status-machine violations are re-raised by the adapters as
pynenc's ``InvocationStatusTransitionError`` and ``InvocationStatusOwnershipError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from pynenc.exceptions import (
    InvocationStatusOwnershipError,
    InvocationStatusTransitionError,
)
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp import _core

EngineError = _core.EngineError
InvocationNotFound = _core.InvocationNotFound
IllegalTransition = _core.IllegalTransition
OwnershipViolation = _core.OwnershipViolation
BackendError = _core.BackendError
BadConfig = _core.BadConfig
InvalidArgument = _core.InvalidArgument

T = TypeVar("T")


def _status(value: str | None) -> InvocationStatus | None:
    return None if value is None else InvocationStatus(value)


@contextmanager
def pynenc_status_errors() -> Iterator[None]:
    """Re-raise the engine's status-machine errors as pynenc's exception types."""
    try:
        yield
    except IllegalTransition as exc:
        raise InvocationStatusTransitionError(
            from_status=_status(exc.from_status),
            to_status=InvocationStatus(exc.to_status),
            allowed_statuses=frozenset(InvocationStatus(s) for s in exc.allowed),
        ) from exc
    except OwnershipViolation as exc:
        raise InvocationStatusOwnershipError(
            from_status=InvocationStatus(exc.from_status),
            to_status=InvocationStatus(exc.to_status),
            current_owner=exc.current_owner,
            attempted_owner=exc.attempted_owner,
            reason=exc.reason,
        ) from exc


def translate_status_errors(fn: Callable[[], T]) -> T:
    """Call ``fn`` and translate status-machine errors (see ``pynenc_status_errors``)."""
    with pynenc_status_errors():
        return fn()
