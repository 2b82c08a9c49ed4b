"""Exceptions raised by pynenc-cpp, and their translation to pynenc's own types.

The engine raises the classes defined in ``_core`` (re-exported here), but for a
missing invocation, key or record it raises ``InvocationNotFound`` defined here: a
subclass of ``_core.InvocationNotFound`` that is also pynenc's
``InvocationNotFoundError`` and a ``KeyError``, registered with the bindings' one
translator at import, so every read path on every backend (mixed and native)
raises this one class. ``BadConfig`` and
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

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Concatenate

from pynenc.exceptions import (
    InvocationNotFoundError,
    InvocationStatusOwnershipError,
    InvocationStatusTransitionError,
)
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp import _core
from pynenc_cpp._convert import status_from_value
from pynenc_cpp._core import BackendConnectionError as BackendConnectionError
from pynenc_cpp._core import BackendError as BackendError
from pynenc_cpp._core import BadConfig as BadConfig
from pynenc_cpp._core import BufferFull as BufferFull
from pynenc_cpp._core import Conflict as Conflict
from pynenc_cpp._core import EngineError as EngineError
from pynenc_cpp._core import IllegalTransition as IllegalTransition
from pynenc_cpp._core import InvalidArgument as InvalidArgument
from pynenc_cpp._core import OwnershipViolation as OwnershipViolation
from pynenc_cpp._core import StaleGeneration as StaleGeneration
from pynenc_cpp._core import Timeout as Timeout
from pynenc_cpp._core import Unavailable as Unavailable


class InvocationNotFound(_core.InvocationNotFound, InvocationNotFoundError):
    """An invocation, key or record named by the caller does not exist.

    Raised by the engine on every backend (the bindings' translator makes this
    class, registered below); catch it as pynenc's ``InvocationNotFoundError``, as
    ``KeyError`` or as ``_core.InvocationNotFound``. ``str()`` is the engine's
    message; ``invocation_id`` is the id the caller asked for when the read path
    knows it (the adapters fill it in), else ``""``.
    """

    def __init__(self, message: str = "", invocation_id: str = "") -> None:
        Exception.__init__(self, message)
        self.message = message
        self.invocation_id = invocation_id

    def __str__(self) -> str:
        return self.message

    def _to_json_dict(self) -> dict[str, Any]:
        return {"message": self.message, "invocation_id": self.invocation_id}

    @classmethod
    def _from_json_dict(cls, json_dict: dict[str, Any]) -> InvocationNotFound:
        return cls(json_dict.get("message", ""), json_dict.get("invocation_id", ""))

    def __reduce__(self) -> tuple[type[InvocationNotFound], tuple[str, str]]:
        return (type(self), (self.message, self.invocation_id))


_core._register_not_found_class(InvocationNotFound)


def names_invocation[S, Id: str, **P, R](
    method: Callable[Concatenate[S, Id, P], R],
) -> Callable[Concatenate[S, Id, P], R]:
    """A read path's method whose ``InvocationNotFound`` carries the id it was asked
    for (``invocation_id``; the engine's message names it too)."""

    @functools.wraps(method)
    def read(self: S, invocation_id: Id, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, invocation_id, *args, **kwargs)
        except InvocationNotFound as exc:
            exc.invocation_id = invocation_id
            raise

    return read


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
