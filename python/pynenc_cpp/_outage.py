"""Riding out a storage outage: calls retried while the server is unreachable.

A ``BackendConnectionError`` says the connection to the server failed (refused,
reset, timed out, or the server still loading its data), so the same call may
succeed once the server is back, e.g. a Redis restarted by its supervisor.
Outcome stores (result, exception, retry), status changes and client reads retry
it with backoff for the app's ``cpp_outage_budget_sec`` before the error reaches
pynenc, so a short outage delays work instead of turning a finished task into a
failure.

A write sent on the connection that failed (``maybe_applied``) may or may not
have been applied, so it is not sent again before ``settled`` says whether the
stored state already is what the write wanted; if so the earlier attempt was
applied and the write counts as done (the caller completes what a multi-command
write may have missed). See docs/reliability.md.
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
    applied (the command was sent; ``maybe_applied`` on the error), the write is
    not sent again before ``settled()`` says whether the stored state already is
    its outcome (the lost attempt was applied; ``settled`` completes what a
    multi-command write may have missed). If so ``SETTLED`` is returned. It is
    asked again when the repeated write fails with ``IllegalTransition``,
    ``OwnershipViolation`` or ``InvocationNotFound`` (a lost attempt the server
    ran late): not settled, that error is raised. A ``BackendConnectionError``
    from ``settled`` itself is ridden out like one from ``call``.
    """
    try:  # the common case, kept cheap: every engine write of a task passes here
        return call()
    except BackendConnectionError as exc:
        first_error = exc
    # The loop below starts where that attempt left off: its first "attempt"
    # re-raises the error just caught, so it is handled exactly like a later one.
    pending: list[BackendConnectionError] = [first_error]

    def again() -> T:
        if pending:
            raise pending.pop()
        return call()

    return _ride_out_loop(again, budget_sec, what, settled, logger, sleep)


def _ride_out_loop[T](
    call: Callable[[], T],
    budget_sec: float,
    what: str,
    settled: Callable[[], bool] | None,
    logger: logging.Logger | None,
    sleep: Callable[[float], None],
) -> T | Settled:
    """``ride_out``'s retries, from the first attempt on (see ``ride_out``)."""
    log = logger or _logger
    if getattr(_local, "depth", 0):
        budget_sec = 0.0
    deadline: float | None = None
    delay = _FIRST_DELAY_SEC
    next_log = 0.0
    lost = False  # an attempt was sent on a connection that failed: it may have landed
    check = False  # ask `settled` before sending again
    refused: Exception | None = None  # the repeated write's own status-machine error
    while True:
        try:
            if check and settled is not None:
                if _ask(settled, what, log):
                    log.warning(f"{what}: applied before the connection was lost")
                    return SETTLED
                check = False
                if refused is not None:
                    break
            return call()
        except BackendConnectionError as exc:
            if getattr(exc, "maybe_applied", True):
                lost = check = True
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
        except (IllegalTransition, OwnershipViolation, InvocationNotFound) as exc:
            if not lost or settled is None:  # nothing was lost: the write's own error
                raise
            refused = exc
            check = True
    raise refused


def _ask(settled: Callable[[], bool], what: str, log: logging.Logger) -> bool:
    """``settled()``; an error other than a lost connection counts as not settled."""
    try:
        return settled()
    except BackendConnectionError:
        raise
    except Exception as exc:
        log.warning(f"{what}: stored state unreadable after a lost connection: {exc!r}")
        return False
