"""Exceptions raised by pynenc-cpp, and their translation to pynenc's own types.

The engine raises the classes defined in ``_core`` (re-exported here).
``InvocationNotFound`` is also a ``KeyError``; ``BadConfig`` and
``InvalidArgument`` are also ``ValueError``; ``BackendError`` is also a
``RuntimeError``, and its subclass ``BackendConnectionError`` says the
connection to the server failed, so the call may succeed once the server is back
(``maybe_applied``: the command was sent, so it may have been applied). The cluster raises ``Conflict`` (a compare-and-set lost),
``StaleGeneration`` (a ``Conflict``: a fenced write or command from a stale
owner), ``Unavailable`` (also a ``ConnectionError``: no leader, no quorum) and
``Timeout`` (also a ``TimeoutError``). Status-machine violations are re-raised by the adapters as
pynenc's ``InvocationStatusTransitionError`` and ``InvocationStatusOwnershipError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pynenc.exceptions import (
    InvocationStatusOwnershipError,
    InvocationStatusTransitionError,
)
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp import _core
from pynenc_cpp._convert import status_from_value

EngineError = _core.EngineError
InvocationNotFound = _core.InvocationNotFound
IllegalTransition = _core.IllegalTransition
OwnershipViolation = _core.OwnershipViolation
BackendError = _core.BackendError
BackendConnectionError = _core.BackendConnectionError
BadConfig = _core.BadConfig
InvalidArgument = _core.InvalidArgument
Conflict = _core.Conflict
StaleGeneration = _core.StaleGeneration
Unavailable = _core.Unavailable
Timeout = _core.Timeout
BufferFull = _core.BufferFull


def _status(value: str | None) -> InvocationStatus | None:
    return None if value is None else status_from_value(value)


def to_pynenc_status_error(
    exc: IllegalTransition | OwnershipViolation,
) -> InvocationStatusTransitionError | InvocationStatusOwnershipError:
    """pynenc's own exception for an engine status-machine error, fields filled in."""
    if isinstance(exc, IllegalTransition):
        return InvocationStatusTransitionError(
            from_status=_status(exc.from_status),
            to_status=status_from_value(exc.to_status),
            allowed_statuses=frozenset(status_from_value(s) for s in exc.allowed),
        )
    return InvocationStatusOwnershipError(
        from_status=status_from_value(exc.from_status),
        to_status=status_from_value(exc.to_status),
        current_owner=exc.current_owner,
        attempted_owner=exc.attempted_owner,
        reason=exc.reason,
    )


@contextmanager
def pynenc_status_errors() -> Iterator[None]:
    """Re-raise the engine's status-machine errors as pynenc's exception types.

    Hot paths catch ``(IllegalTransition, OwnershipViolation)`` themselves and use
    ``to_pynenc_status_error``, which avoids the context manager's per-call cost.
    """
    try:
        yield
    except (IllegalTransition, OwnershipViolation) as exc:
        raise to_pynenc_status_error(exc) from exc
