"""``native_step``: where a native orchestrator chooses, per call, between its engine's
composite operations and mixed mode's code.

A step of native mode (``native/``, ``_pick.py``) is written for one case only: it
receives the app's lifecycle (``_core.Lifecycle``, the composite operations) after
``self``. Without one (``cpp_native=False``, the ``native`` shortcut off, or components
that are not one pynenc-cpp backend's: ``NativeBase._lifecycle``), the same method of
the next class in the MRO runs instead: pynenc's ``BaseOrchestrator`` code over the
native components (``CppOrchestrator``), or ``MixedSteps`` for the steps pynenc has no
method for. That choice is made here and nowhere else.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, Protocol

if TYPE_CHECKING:
    from pynenc_cpp import _core


class HasLifecycle(Protocol):
    def _lifecycle(self) -> _core.Lifecycle | None:
        """The app's composite operations, or None (mixed mode)."""


def native_step[S: HasLifecycle, **P, R](
    step: Callable[Concatenate[S, _core.Lifecycle, P], R],
) -> Callable[Concatenate[S, P], R]:
    """``step``, called with ``self``'s lifecycle; without one, the method of the same
    name of the class after the one that defines ``step`` (in ``type(self)``'s MRO).

    Other decorators may wrap the result (``functools.wraps``: the class that defines
    the step is found through ``__wrapped__``). A generator step stays a generator:
    its lifecycle is read when it is called, not when it is first iterated."""
    name = step.__name__
    owner: type | None = None

    @functools.wraps(step)
    def dispatch(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        lifecycle = self._lifecycle()
        if lifecycle is not None:
            return step(self, lifecycle, *args, **kwargs)
        nonlocal owner
        if owner is None:
            owner = _defining_class(type(self), name, dispatch)
        mixed: Callable[P, R] = getattr(super(owner, self), name)
        return mixed(*args, **kwargs)

    # What callers pass: the step's signature without its lifecycle.
    signature = inspect.signature(step)
    first, _lifecycle, *rest = signature.parameters.values()
    setattr(dispatch, "__signature__", signature.replace(parameters=[first, *rest]))  # noqa: B010
    return dispatch


def _defining_class(cls: type, name: str, function: Callable[..., Any]) -> type:
    """The class of ``cls``'s MRO whose attribute ``name`` is ``function``, or wraps it."""
    for klass in cls.__mro__:
        attribute = vars(klass).get(name)
        while attribute is not None:
            if attribute is function:
                return klass
            attribute = getattr(attribute, "__wrapped__", None)
    raise TypeError(f"{cls.__qualname__}.{name} is not a native step of its MRO")
