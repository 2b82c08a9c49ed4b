"""A trigger run starts its task once, also when the runner firing it dies mid-way.

pynenc's trigger loop claims a trigger run (for 60 s), starts the triggered task
(``execute_task``), records the run, then clears the valid condition. A runner killed
after the start and before the record leaves the claim to expire and the condition
in place: the next loop to look claims the same run id (pynenc's ids follow from the
trigger and its valid condition) and starts the task a second time. The guarantees
suite saw ``fired 2 times`` for one order when a runner was SIGKILLed.

So the invocation a run starts has an id that follows from the run (``run_invocation_id``:
a UUID 5 of the app and the run id, in pynenc's UUID text form), and ``execute_task``
of a claimed run first looks for it:

* not stored: the run was never started; it is started with that id (this package's
  orchestrators take the id from ``fixed_invocation_id``, see ``take_fixed_id``);
* stored with no status (mixed mode: the runner died between pynenc's upsert of the
  invocation and its registration): it is registered and routed now;
* REGISTERED: it may not have been routed (mixed mode: the runner died between the
  registration and the route); it is routed again. A second delivery of an id is
  harmless: only one claim moves it to PENDING, the other finds it taken;
* any other status: it was routed and runs or ran; it is the run's invocation.

Only an invocation registered less than ``REUSE_WITHIN_SEC`` ago is taken for the
run's: some run ids come back (pynenc's ``ExceptionContext`` id names only the
exception's type), and once the earlier run's record is purged the run fires anew,
with a new id.

A task whose registration concurrency control reuses a REGISTERED invocation
(pynenc's ``route_call``) keeps pynenc's behaviour: the reused invocation is the run's.
Under an orchestrator that is not this package's, or while pynenc's route code
differs from the one this package follows (the ``native`` shortcut off,
``_shortcuts``), the id is not fixed and the window stays (``docs/reliability.md``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.exceptions import InvocationNotFoundError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus

if TYPE_CHECKING:
    from pynenc import Pynenc
    from pynenc.invocation.base_invocation import BaseInvocation

#: The namespace of the run invocation ids (fixed: the ids must not change across
#: releases, or a run fired by one release and found by another would start twice).
_NAMESPACE = uuid.UUID("5d1c7a52-3c1e-4d7b-9a0f-7f2b8e6c41a9")

#: How recent an invocation found under a run's id must be to be that run's (a firer
#: that died before recording the run made it at most a claim's expiry, pynenc's
#: 60 s, and a trigger thread's look, 10 s, before its next claimer looks for it).
REUSE_WITHIN_SEC = 600.0

#: The id the next new invocation of this context is to take (one-shot).
_fixed: ContextVar[list[str] | None] = ContextVar("pynenc_cpp_fixed_invocation_id", default=None)


def run_invocation_id(app_id: str, trigger_run_id: str) -> str:
    """The id of the invocation trigger run ``trigger_run_id`` of app ``app_id`` starts."""
    return str(uuid.uuid5(_NAMESPACE, f"{app_id}\x00{trigger_run_id}"))


@contextmanager
def fixed_invocation_id(invocation_id: str) -> Iterator[None]:
    """The first new invocation routed inside (on this thread or task) gets
    ``invocation_id`` (``take_fixed_id``)."""
    token = _fixed.set([invocation_id])
    try:
        yield
    finally:
        _fixed.reset(token)


def is_fixed() -> bool:
    """Whether an id is fixed for the next new invocation (``fixed_invocation_id``)."""
    return bool(_fixed.get())


def take_fixed_id() -> str | None:
    """The id a new invocation is to take (see ``fixed_invocation_id``), taken: the
    next one gets a new id. None: none is fixed (one context-variable read)."""
    held = _fixed.get()
    if not held:
        return None
    return held.pop()


def execute_run(
    app: Pynenc, trigger_run_id: str, execute: Callable[[], BaseInvocation]
) -> BaseInvocation:
    """The invocation claimed trigger run ``trigger_run_id`` starts: the one an earlier
    claimer of the run started less than ``REUSE_WITHIN_SEC`` ago (made whole, see
    the module's docs), or a new one made by ``execute`` (pynenc's ``execute_task``),
    with the run's id unless an older invocation holds it."""
    invocation_id = InvocationId(run_invocation_id(app.app_id, trigger_run_id))
    invocation = _stored(app, invocation_id)
    if invocation is None:
        with fixed_invocation_id(invocation_id):
            return execute()
    if not _started_recently(app, invocation_id):
        # An earlier firing of a run id that comes back (pynenc's ExceptionContext ids
        # name only the exception type), its record purged since: a firing of its own.
        return execute()
    _finish_start(app, invocation)
    app.logger.warning(
        f"trigger run {trigger_run_id} claimed again (its earlier claimer died before "
        f"recording it): it started invocation:{invocation_id} already, which is kept"
    )
    return invocation


def _stored(app: Pynenc, invocation_id: InvocationId) -> Any:
    """The stored invocation, or None (pynenc's state backends raise
    ``InvocationNotFoundError``, this package's a subclass that is also a ``KeyError``)."""
    try:
        return app.state_backend.get_invocation(invocation_id)
    except (KeyError, InvocationNotFoundError):
        return None


def _started_recently(app: Pynenc, invocation_id: InvocationId) -> bool:
    """Whether the invocation was registered less than ``REUSE_WITHIN_SEC`` ago (by its
    first history row, else its status record; one with neither was cut short before
    its registration: recent)."""
    try:
        history = app.state_backend.get_history(invocation_id)
    except (KeyError, InvocationNotFoundError):
        history = []
    at: datetime
    if history:
        at = min(h.status_record.timestamp for h in history)
    else:
        try:
            at = app.orchestrator.get_invocation_status_record(invocation_id).timestamp
        except (KeyError, InvocationNotFoundError):
            return True
    age: float = (datetime.now(UTC) - at).total_seconds()
    return age < REUSE_WITHIN_SEC


def _finish_start(app: Pynenc, invocation: Any) -> None:
    """What the earlier claimer may have left undone of starting ``invocation``: its
    registration and route, and the index of its arguments for concurrency control.
    (Not redone in mixed mode: pynenc's history row and trigger report of the
    registration, which a firer killed between them and the route leaves out.)"""
    orchestrator = app.orchestrator
    try:
        status = orchestrator.get_invocation_status(invocation.invocation_id)
    except (KeyError, InvocationNotFoundError):  # stored, never registered
        orchestrator.register_new_invocations([invocation])
        status = None
    if status == InvocationStatus.REGISTERED:  # registered, maybe never routed
        orchestrator.route_invocations([invocation])
    conf = invocation.call.task.conf
    if (
        conf.registration_concurrency != ConcurrencyControlType.DISABLED
        or conf.running_concurrency != ConcurrencyControlType.DISABLED
    ):
        orchestrator.index_arguments_for_concurrency_control(invocation)
