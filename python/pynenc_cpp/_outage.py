"""Riding out a storage outage: calls retried while the server is unreachable.

A ``BackendConnectionError`` says the connection to the server failed (refused,
reset, timed out, or the server still loading its data), so the same call may
succeed once the server is back, e.g. a Redis restarted by its supervisor.
Outcome stores (result, exception, retry), status changes and client reads retry
it with backoff for the app's ``cpp_outage_budget_sec`` before the error reaches
pynenc, so a short outage delays work instead of turning a finished task into a
failure.

A write sent on the connection that failed (``maybe_applied``) may or may not
have been applied. When its retry fails with a status-machine error,
``settled`` says whether the stored state is already what the write wanted, in
which case the earlier attempt was applied and the write counts as done (the
caller completes what a multi-command write may have missed). See
docs/reliability.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pynenc_cpp.errors import (
    BackendConnectionError,
    IllegalTransition,
    InvocationNotFound,
    OwnershipViolation,
)

_FIRST_DELAY_SEC = 0.05
_MAX_DELAY_SEC = 2.0
_LOG_EVERY_SEC = 10.0

_logger = logging.getLogger("pynenc_cpp.outage")


class Settled:
    """Returned by ``ride_out`` in place of the call's value when a retried write
    was found already applied (see ``settled``)."""


SETTLED = Settled()

_local = threading.local()


@contextmanager
def no_ride_out() -> Iterator[None]:
    """Within it, on this thread, ``ride_out`` never retries: for paths that must
    stay quick whatever the storage does (an immediate stop, a task timeout)."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def ride_out[T](
    call: Callable[[], T],
    *,
    budget_sec: float,
    what: str,
    settled: Callable[[], bool] | None = None,
    logger: logging.Logger | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T | Settled:
    """``call()``, retried on ``BackendConnectionError`` with exponential backoff
    (50 ms doubling to 2 s) until ``budget_sec`` has passed since the first
    failure; then the last error is raised. ``budget_sec <= 0`` never retries.

    ``settled``, for a write: after a connection error that may have been
    applied (the command was sent; ``maybe_applied`` on the error), a retry that
    fails with ``IllegalTransition``, ``OwnershipViolation`` or ``InvocationNotFound``
    asks it whether the stored state already is the write's outcome (the lost
    attempt was applied); if so ``SETTLED`` is returned, else the error is raised.
    """
    log = logger or _logger
    if getattr(_local, "depth", 0):
        budget_sec = 0.0
    deadline: float | None = None
    maybe_applied = False
    delay = _FIRST_DELAY_SEC
    next_log = 0.0
    while True:
        try:
            return call()
        except BackendConnectionError as exc:
            maybe_applied = maybe_applied or bool(getattr(exc, "maybe_applied", True))
            now = time.monotonic()
            if deadline is None:
                deadline = now + budget_sec
            if now + delay > deadline:
                if budget_sec > 0:
                    log.error(f"{what}: storage still unreachable after {budget_sec:g} s: {exc}")
                raise
            if now >= next_log:
                left = deadline - now
                log.warning(f"{what}: storage unreachable, retrying for {left:.0f} s more: {exc}")
                next_log = now + _LOG_EVERY_SEC
            sleep(delay)
            delay = min(delay * 2, _MAX_DELAY_SEC)
        except (IllegalTransition, OwnershipViolation, InvocationNotFound):
            if maybe_applied and settled is not None:
                try:
                    done = settled()
                except Exception:  # the state cannot be read: report the write's own error
                    done = False
                if done:
                    log.warning(f"{what}: applied before the connection was lost")
                    return SETTLED
            raise
