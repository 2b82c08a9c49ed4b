"""A submit with less Python: the shortcuts ``CppNativeOrchestrator`` takes on the way
from ``task(...)`` to its one engine call (``docs/native.md``, "What stays in Python").

Each stands in for pynenc 0.4.0 code and gives what that code gives, and each is taken
only while the pynenc function it stands in for is pynenc's own (captured at import and
compared at every call: a patched one is called instead), and only while the ``submit``
shortcut is active (``pynenc_cpp._shortcuts``; the caller passes ``shortcut``: False runs
pynenc's own code):

* ``new_invocation_id``: ``generate_invocation_id`` (``str(uuid.uuid4())``), made by the
  engine from the kernel's random bytes, in the same form;
* ``compute_args_id``: ``Call.args_id`` (``pynenc.call.compute_args_id``), the same
  SHA-256 text, computed by the engine;
* ``record_of``: the engine's record of an invocation, read off the invocation and its
  call as pynenc's ``to_dto`` methods read them, without building the two DTOs;
* ``keep_signature``: the task function's ``inspect.Signature`` kept in its
  ``__signature__`` (a callable, which ``inspect.signature`` calls), so that pynenc's
  ``Arguments.from_call`` does not rebuild it from the function at every call: ~16 us
  of a submit. Only for a plain function that has no ``__signature__`` or
  ``__wrapped__`` of its own; one whose code or defaults are replaced gets its
  signature rebuilt at its next call, so every call binds as pynenc's own would.

``new_invocation`` builds a new invocation as pynenc's ``from_parent`` does (both
modes use it when an id is fixed for it: ``_trigger_runs``).
"""

from __future__ import annotations

import inspect
import logging
import types
import weakref
from typing import TYPE_CHECKING, Any

from pynenc import call as pynenc_call
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation import dist_invocation
from pynenc.invocation.dist_invocation import (
    DistributedInvocation,
    TaskInvocation,
    WorkflowInvocation,
)
from pynenc.workflow.workflow_identity import WorkflowIdentity

from pynenc_cpp import _core, _shortcuts
from pynenc_cpp._trigger_runs import take_fixed_id

if TYPE_CHECKING:
    from pynenc.call import Call
    from pynenc.types import Params, Result
from pynenc_cpp.state_backend import _invocation_record, _record_fields

#: pynenc's own functions, captured at import (``_run.py`` does the same for the run).
_PYNENC_GENERATE_ID = dist_invocation.generate_invocation_id
_PYNENC_COMPUTE_ARGS_ID = pynenc_call.compute_args_id
_PYNENC_ARGS_ID = pynenc_call.Call.args_id
_PYNENC_CALL_TO_DTO = pynenc_call.Call.to_dto
_PYNENC_INV_TO_DTO = dist_invocation.DistributedInvocation.to_dto


def new_invocation_id(shortcut: bool = True) -> str:
    """``dist_invocation.generate_invocation_id()``, by the engine while it is pynenc's."""
    generate = dist_invocation.generate_invocation_id
    if not shortcut or generate is not _PYNENC_GENERATE_ID:
        patched: str = generate()
        return patched
    return _core.new_invocation_id()


def compute_args_id(call: Any, shortcut: bool = True) -> None:
    """Computes ``call.args_id`` (pynenc caches it in ``call._args_id``) by the engine, if
    not computed yet, while ``Call.args_id`` and ``compute_args_id`` are pynenc's own;
    else leaves it to pynenc's property, as does a text the engine cannot take (not a
    str, or a lone surrogate: pynenc's own function then raises what it raises)."""
    if (
        not shortcut
        or getattr(call, "_args_id", "") is not None
        or type(call).args_id is not _PYNENC_ARGS_ID
        or pynenc_call.compute_args_id is not _PYNENC_COMPUTE_ARGS_ID
    ):
        return
    serialized = call.serialized_arguments
    if type(serialized) is not dict:
        return
    try:
        call._args_id = _core.args_id(serialized)
    except (TypeError, UnicodeError):
        return


def record_of(invocation: Any, shortcut: bool = True) -> dict[str, str | None]:
    """``_invocation_record(invocation.to_dto(), invocation.call.to_dto())``: the same
    fields, read directly while both ``to_dto`` methods are pynenc's own."""
    call = invocation.call
    if (
        not shortcut
        or type(invocation).to_dto is not _PYNENC_INV_TO_DTO
        or type(call).to_dto is not _PYNENC_CALL_TO_DTO
    ):
        return _invocation_record(invocation.to_dto(), call.to_dto())
    return _record_fields(
        invocation.invocation_id,
        call.call_id,
        call.serialized_arguments,
        invocation.parent_invocation_id,
        invocation.parent_event_id,
        invocation.workflow,
    )


def _no_signature() -> None:
    """What a ``_KeptSignature`` unpickles to (see its ``__reduce__``)."""
    return None


class _KeptSignature:
    """A task function's ``__signature__``: ``inspect.signature`` calls it (as Python 3.12
    and 3.13 call a callable ``__signature__``) and gets the function's Signature,
    rebuilt when the function's code or defaults were replaced since it was made."""

    __slots__ = ("_func", "_made")

    def __init__(self, func: types.FunctionType) -> None:
        self._func = weakref.ref(func)  # no cycle through the function's own __dict__
        self._made: tuple[Any, Any, Any, inspect.Signature] | None = None

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """A copy of the function's ``__dict__`` pickled by value (cloudpickle) gets no
        kept signature: ``__signature__`` None, which ``inspect.signature`` passes over."""
        return (_no_signature, ())

    def __call__(self) -> inspect.Signature:
        func = self._func()
        if func is None:  # only reachable through a copy of a dead function's __dict__
            raise TypeError("the function of this signature is gone")
        code, defaults, kwdefaults = func.__code__, func.__defaults__, func.__kwdefaults__
        made = self._made
        if made is not None and made[0] is code and made[1] is defaults and made[2] is kwdefaults:
            return made[3]
        # Built as inspect builds it, without this object in the way: a thread that
        # calls inspect.signature(func) meanwhile builds it too (the same Signature).
        func.__dict__.pop("__signature__", None)
        try:
            signature = inspect.signature(func)
        finally:
            func.__signature__ = self  # type: ignore[attr-defined]
        self._made = (code, defaults, kwdefaults, signature)
        return signature


def keep_signature(func: Any, shortcut: bool = True) -> None:
    """Gives ``func`` a ``__signature__`` that keeps its Signature (``_KeptSignature``)
    for pynenc's next ``Arguments.from_call``; nothing for a function that is not a plain
    one, or has a ``__signature__`` or ``__wrapped__`` of its own."""
    if not shortcut or type(func) is not types.FunctionType:
        return
    own = func.__dict__
    if "__signature__" in own or "__wrapped__" in own:
        return
    func.__signature__ = _KeptSignature(func)  # type: ignore[attr-defined]


def new_invocation(
    call: Call[Params, Result],
    parent_invocation: DistributedInvocation | None,
    parent_event_id: str | None,
    *,
    stored: bool = True,
) -> DistributedInvocation[Params, Result]:
    """``DistributedInvocation.from_parent``, with the id fixed for it if one is
    (``_trigger_runs.take_fixed_id``), and (``stored``, native mode) without its
    constructor's upsert.

    Same class (workflow root or task), ids, workflow identity and log lines as
    pynenc 0.4.0's ``WorkflowInvocation.from_parent`` /
    ``TaskInvocation.from_parent``. ``stored``: marked stored because the caller's
    register composite upserts it (in the same engine call as its registration);
    False: the constructor upserts it, as pynenc's does.
    """
    fixed = take_fixed_id()
    invocation_id = InvocationId(
        fixed if fixed is not None else new_invocation_id("submit" in _shortcuts.of_app(call.app))
    )
    parent_workflow = parent_invocation.workflow if parent_invocation else None
    parent_invocation_id = parent_invocation.invocation_id if parent_invocation else None
    logger = call.app.logger
    cls: type[DistributedInvocation]
    if call.task.is_workflow_root_task:
        cls = WorkflowInvocation
        if parent_workflow is None:
            workflow = WorkflowIdentity.new_workflow(
                invocation_id=invocation_id, task_id=call.task.task_id
            )
            logger.info(f"Creating a new workflow:{workflow.workflow_id}")
        else:
            workflow = WorkflowIdentity.new_subworkflow(
                invocation_id=invocation_id,
                task_id=call.task.task_id,
                parent_workflow_id=parent_workflow.workflow_id,
            )
            logger.info(
                f"Creating a new sub-workflow:{workflow.workflow_id} "
                f"from parent-workflow:{parent_workflow.workflow_id}"
            )
    else:
        cls = TaskInvocation
        workflow = parent_workflow
        if logger.isEnabledFor(logging.DEBUG):
            if workflow is None:
                logger.debug(f"Creating standalone task invocation:{invocation_id}")
            else:
                logger.debug(
                    f"Inheriting workflow from parent-workflow:{workflow.workflow_id} "
                    f"for new-invocation:{invocation_id}"
                )
    return cls(
        call=call,
        invocation_id=invocation_id,
        parent_invocation_id=parent_invocation_id,
        workflow=workflow,
        stored_in_backend=stored,
        parent_event_id=parent_event_id,
    )
