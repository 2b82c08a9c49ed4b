"""Running a claimed invocation with less Python: ``RunsInvocations``, the part of
``CppNativeOrchestrator`` (``pynenc_cpp.native``) that ``CppRunner`` calls to run what
it claimed, and the checks that say when its shortcuts are safe.

Each shortcut here stands in for a pynenc function, and is taken only while that
function is pynenc's own: the originals are captured at import (``_PYNENC_*``), and
an invocation class, orchestrator or pynenc whose function differs (a subclass, a
patch, a wrapper installed before import) is run by pynenc's own code.
"""

from __future__ import annotations

import inspect
import os
from abc import abstractmethod
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pynenc import context, exceptions
from pynenc.call import LazyCall
from pynenc.conf.config_task import ConcurrencyControlType
from pynenc.invocation.dist_invocation import DistributedInvocation
from pynenc.invocation.status import InvocationStatus
from pynenc.orchestrator.base_orchestrator import BaseOrchestrator
from pynenc.util.asyncio_helper import run_task_sync
from pynenc.workflow.workflow_exceptions import WorkflowPauseError

if TYPE_CHECKING:
    from pynenc.runner.runner_context import RunnerContext

    from pynenc_cpp import _core

#: pynenc's own ``DistributedInvocation.run`` (pynenc 0.4.0), which
#: ``CppNativeOrchestrator.run_invocation`` follows step by step; an invocation whose
#: class runs otherwise (or a patched ``run``) is run by its own ``run``.
_PYNENC_RUN = DistributedInvocation.run
#: pynenc's run-time concurrency check and its core, which return True at once for a
#: task that runs freely (``run_invocation`` asks any other, or a patched, check).
_PYNENC_AUTHORIZE = BaseOrchestrator.is_authorize_to_run_by_concurrency_control
_PYNENC_AUTHORIZE_CORE = BaseOrchestrator._is_authorize_by_concurrency_control
#: The factories ``_invocation`` stands in for (a patched one is used instead).
_PYNENC_INV_FROM_DTO = DistributedInvocation.from_dto.__func__
_PYNENC_CALL_FROM_DTO = LazyCall.from_dto.__func__


def _defined_in_pynenc(*functions: Any) -> bool:
    """Whether each function's code is pynenc's own (not a wrapper installed before
    this module was imported: ``functools.wraps`` copies names, not the code)."""
    root = os.path.dirname(os.path.abspath(context.__file__)) + os.sep
    return all(
        os.path.abspath(getattr(getattr(f, "__code__", None), "co_filename", "")).startswith(root)
        for f in functions
    )


#: The shortcuts below are taken only when the originals captured above are pynenc's.
_PYNENCS_OWN = _defined_in_pynenc(
    _PYNENC_RUN,
    _PYNENC_AUTHORIZE,
    _PYNENC_AUTHORIZE_CORE,
    _PYNENC_INV_FROM_DTO,
    _PYNENC_CALL_FROM_DTO,
)


class RunsInvocations(BaseOrchestrator):
    """``run_invocation`` and ``_claims_may_start`` for an orchestrator whose
    ``_lifecycle()`` gives its composite operations (None in mixed mode)."""

    @abstractmethod
    def _lifecycle(self) -> _core.Lifecycle | None:
        """The composite operations over the app's components, or None (mixed mode)."""

    @cached_property
    def _coroutine_memo(self) -> dict[Callable[..., Any], bool]:
        """Task function -> whether it is a coroutine function (``run_invocation``)."""
        return {}

    def _claims_may_start(self) -> bool:
        """Whether a claim may also make the run's RUNNING step (``start``): only while
        the run-time concurrency check is pynenc's own, which always authorizes a task
        that runs freely (the only kind a claim starts). An overridden or patched
        check may refuse, and pynenc's ``run`` then reroutes the PENDING invocation."""
        return (
            _PYNENCS_OWN
            and getattr(self.is_authorize_to_run_by_concurrency_control, "__func__", None)
            is _PYNENC_AUTHORIZE
            and getattr(self._is_authorize_by_concurrency_control, "__func__", None)
            is _PYNENC_AUTHORIZE_CORE
        )

    def run_invocation(self, invocation: DistributedInvocation, runner_ctx: RunnerContext) -> None:
        """``invocation.run(runner_ctx)`` on the thread that claimed it, with less Python.

        The steps, their order, the status changes, log lines, trigger reports and
        errors raised are those of pynenc's ``DistributedInvocation.run``; what is
        left out is only repeated work: pynenc's concurrency-control check for a
        task that runs freely (it returns True at once for it; an overridden or
        patched check is always called), the asyncio check of the task function
        (made once per function), and the lookups of the app's components between
        the steps. Every step goes through this orchestrator's own methods, as in
        ``run`` (a wrapped or patched ``set_invocation_result`` is called). A claim
        that moved the invocation to RUNNING already (``claim_for_run(start=True)``)
        makes the RUNNING step only its log line and trigger report, as in ``run``.

        An invocation whose ``run`` is not pynenc's own (its class's, a patched
        ``DistributedInvocation.run``, its own attribute), a pynenc whose functions
        were wrapped before this module was imported, and mixed mode run
        ``invocation.run``.
        """
        if (
            not _PYNENCS_OWN
            or type(invocation).run is not _PYNENC_RUN
            or "run" in vars(invocation)
            or self._lifecycle() is None
        ):
            invocation.run(runner_ctx)
            return
        app = self.app
        app_id = app.app_id
        invocation_id = invocation.invocation_id
        task = invocation.task
        invocation._deterministic_runtime = None
        context.set_runner_args(None)
        context.set_current_app(app)
        context.set_runner_context(app_id, runner_ctx)
        previous = context.swap_dist_invocation_context(app_id, invocation)
        try:
            if (
                not self._claims_may_start()
                or task.conf.running_concurrency != ConcurrencyControlType.DISABLED
            ) and not self.is_authorize_to_run_by_concurrency_control(invocation):
                self.reroute_invocations({invocation_id}, runner_ctx)
            self.set_invocation_status(invocation_id, InvocationStatus.RUNNING, runner_ctx)
            invocation._register_workflow_run()
            func = task.func
            kwargs = invocation.call.arguments.kwargs
            # pynenc calls run_task_sync(func, **kwargs): an argument named `func`
            # then collides with it (a TypeError), which this keeps.
            if "func" in kwargs or self._is_coroutine_function(func):
                result = run_task_sync(func, **kwargs)
            else:
                result = func(**kwargs)
            self.set_invocation_result(invocation, result, runner_ctx)
        except WorkflowPauseError as ex:
            task.logger.warning(
                f"invocation:{invocation_id} Workflow pause requested but not implemented yet: "
                f"{ex.reason}"
            )
        except task.retriable_exceptions as ex:
            if invocation.num_retries >= task.conf.max_retries:
                app.logger.exception(f"invocation:{invocation_id} MAX-RETRY")
                self.set_invocation_exception(invocation, ex, runner_ctx)
                raise ex
            self.set_invocation_retry(invocation, ex, runner_ctx)
            task.logger.warning(f"invocation:{invocation_id} WILL-RETRY exception:{ex}")
        except exceptions.InvocationStatusTransitionError as ex:
            task.logger.warning(
                f"invocation:{invocation_id} status transition conflict (another runner took "
                f"ownership): {ex}"
            )
        except exceptions.InvocationStatusOwnershipError as ex:
            task.logger.warning(
                f"invocation:{invocation_id} lost ownership to another runner: {ex}"
            )
        except Exception as ex:
            app.logger.exception(f"invocation:{invocation_id} EXCEPTION")
            self.set_invocation_exception(invocation, ex, runner_ctx)
            raise ex
        finally:
            context.swap_dist_invocation_context(app_id, previous)

    def _is_coroutine_function(self, func: Callable[..., Any]) -> bool:
        """``inspect.iscoroutinefunction(func)`` (what ``run_task_sync`` asks), kept per
        function object (a bounded memo: a task's function is replaced seldom)."""
        memo = self._coroutine_memo
        try:
            known = memo.get(func)
        except TypeError:  # an unhashable callable: asked every time
            return inspect.iscoroutinefunction(func)
        if known is None:
            known = inspect.iscoroutinefunction(func)
            if len(memo) >= 1024:
                memo.clear()
            memo[func] = known
        return known
