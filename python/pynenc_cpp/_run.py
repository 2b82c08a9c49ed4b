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
import logging
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

from pynenc_cpp import _core, _pending_reports, _shortcuts
from pynenc_cpp._concurrency import ConcurrencyGate

if TYPE_CHECKING:
    from pynenc.runner.runner_context import RunnerContext

#: A task's result left to store by ``run_invocation_to_finish`` (invocation_id,
#: serialized, task_key, release_waiters, runner_id, state, logs), the engine's own
#: struct, which ``CppRunner``'s engine reads (see that method). ``state`` is opaque
#: to the caller but for its first item, the invocation.
PendingFinish = _core.PendingFinish
#: A ``PendingFinish``'s ``state``: (invocation, runner context, the lifecycle the run
#: was made with, the task's result, the result serialized, the pending-report note
#: or None). A plain tuple: it is made once per task on the runner's hot path.
FinishState = tuple[DistributedInvocation, "RunnerContext", _core.Lifecycle, Any, str, str | None]

#: pynenc's own ``DistributedInvocation.run`` (pynenc 0.4.0), which
#: ``CppNativeOrchestrator.run_invocation`` follows step by step; an invocation whose
#: class runs otherwise (or a patched ``run``) is run by its own ``run``.
_PYNENC_RUN = DistributedInvocation.run
#: pynenc's run-time concurrency check and its core, which return True at once for a
#: task that runs freely (``run_invocation`` asks any other, or a patched, check).
_PYNENC_AUTHORIZE = BaseOrchestrator.is_authorize_to_run_by_concurrency_control
_PYNENC_AUTHORIZE_CORE = BaseOrchestrator._is_authorize_by_concurrency_control
#: The gated check (``pynenc_cpp._concurrency``) that stands in for pynenc's in this
#: package's orchestrators: True at once for a task that runs freely, as pynenc's.
_GATED_AUTHORIZE = ConcurrencyGate.is_authorize_to_run_by_concurrency_control
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

    @abstractmethod
    def _task_runs_freely(self, task_key: str) -> None:
        """The task has running concurrency control disabled: told to every lifecycle
        this orchestrator made (its claims then start such a task by themselves)."""

    @cached_property
    def _coroutine_memo(self) -> dict[Callable[..., Any], bool]:
        """Task function -> whether it is a coroutine function (``run_invocation``)."""
        return {}

    def _claims_may_start(self) -> bool:
        """Whether a claim may also make the run's RUNNING step (``start``): only while
        the run-time concurrency check is this package's gated one over pynenc's own
        core (``ConcurrencyGate``), which always authorizes a task that runs freely
        (the only kind a claim starts). An overridden or patched check may refuse, and
        pynenc's ``run`` then reroutes the PENDING invocation."""
        cls, own = type(self), self.__dict__
        return (
            _PYNENCS_OWN
            and cls.is_authorize_to_run_by_concurrency_control is _GATED_AUTHORIZE
            and cls._is_authorize_by_concurrency_control is _PYNENC_AUTHORIZE_CORE
            and "is_authorize_to_run_by_concurrency_control" not in own
            and "_is_authorize_by_concurrency_control" not in own
        )

    @abstractmethod
    def _finish_deferrable(self) -> bool:
        """Whether a run may leave storing its result to its caller
        (``run_invocation_to_finish``): only while ``set_invocation_result`` is this
        class's own (not overridden, patched or wrapped)."""

    @abstractmethod
    def _result_stored(self, state: FinishState, outcome: object) -> None:
        """What ``set_invocation_result`` does after its engine call, given that call's
        ``outcome`` (``finish_success``'s tuple, or the engine error it raised): the
        outage retries, the status errors, the after-change steps, the trigger report."""

    def _native_run(self, invocation: DistributedInvocation) -> _core.Lifecycle | None:
        """The lifecycle to run ``invocation`` with this class's steps, or None when it
        is to be run by its own ``run`` (see ``run_invocation``), as it is while the ``run``
        shortcut is off (``pynenc_cpp._shortcuts``)."""
        if (
            not _PYNENCS_OWN
            or type(invocation).run is not _PYNENC_RUN
            or "run" in vars(invocation)
            or "run" not in _shortcuts.of_app(self.app)
        ):
            return None
        return self._lifecycle()

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
        pending = self.run_invocation_to_finish(invocation, runner_ctx)
        if pending is not None:
            self.finish_pending(pending)

    def run_invocation_to_finish(
        self, invocation: DistributedInvocation, runner_ctx: RunnerContext
    ) -> PendingFinish | None:
        """``run_invocation`` up to its last storage step, which it may leave to the
        caller: ``CppRunner``'s engine stores a task's result after this returns,
        without the GIL, so the Python of a task that succeeds is only its steps
        around the task's call (``docs/runner.md``).

        Returns None when the run is over (its outcome stored, or an error raised
        as ``run_invocation`` raises it). Otherwise the task returned and its result
        is serialized but not stored: the caller must complete the returned
        ``PendingFinish`` at once, on this thread, either with ``finish_pending`` or
        as ``CppRunner``'s engine does: ``Lifecycle.finish_success(invocation_id,
        serialized, runner_id, runner_id, task_key, release_waiters)``, then
        ``complete_finish(state, outcome)`` with the error it raised, or with the
        tuple it returned if either of its flags says a trigger watches the status
        or the result, or if ``logs`` is true (the app's logger writes the INFO line
        of the status change). ``complete_finish`` makes the rest of
        ``set_invocation_result`` (outage retries, status errors, trigger reports,
        the log line) and raises what ``run_invocation`` would.

        The result is stored here, as ``run_invocation`` stores it, when
        ``set_invocation_result`` is not this class's own (a subclass's, a patch).
        """
        lifecycle = self._native_run(invocation)
        if lifecycle is None:
            invocation.run(runner_ctx)
            return None
        app = self.app
        context.set_runner_args(None)
        context.set_current_app(app)
        context.set_runner_context(app.app_id, runner_ctx)
        return self._guarded(
            invocation, runner_ctx, self._run_steps, lifecycle, invocation, runner_ctx
        )

    def finish_pending(self, pending: PendingFinish) -> None:
        """Completes ``pending`` here, as ``CppRunner``'s engine does (see
        ``run_invocation_to_finish``); raises what ``run_invocation`` would."""
        state = pending.state
        lifecycle: _core.Lifecycle = state[2]  # the one the run was made with
        runner_id = pending.runner_id
        outcome: object
        try:
            outcome = lifecycle.finish_success(
                pending.invocation_id,
                pending.serialized,
                runner_id,
                runner_id,
                pending.task_key,
                pending.release_waiters,
            )
        except _core.EngineError as exc:
            outcome = exc
        if pending.logs or isinstance(outcome, BaseException) or outcome[1] or outcome[2]:
            self.complete_finish(state, outcome)

    def complete_finish(self, state: FinishState, outcome: object) -> None:
        """What is left of a ``PendingFinish`` whose ``state`` this is, after its store
        gave ``outcome`` (``finish_success``'s tuple, or the ``EngineError`` it raised):
        pynenc's ``set_invocation_result`` from its storage step on, in the run's
        context and ``except`` clauses (see ``run_invocation_to_finish``)."""
        invocation, runner_ctx, _lifecycle, _result, _serialized, note = state
        self._guarded(invocation, runner_ctx, self._result_stored, state, outcome)
        notes = _pending_reports.of_trigger(self.app.trigger)
        if note is not None and notes is not None and not isinstance(outcome, BaseException):
            notes.end(note)

    def _guarded[T](
        self,
        invocation: DistributedInvocation,
        runner_ctx: RunnerContext,
        step: Callable[..., T],
        *args: Any,
    ) -> T | None:
        """``step(*args)`` in the invocation's context, its errors handled as pynenc's
        ``run`` handles what its steps raise (logged, stored, retried, raised)."""
        app = self.app
        app_id = app.app_id
        invocation_id = invocation.invocation_id
        task = invocation.task
        previous = context.swap_dist_invocation_context(app_id, invocation)
        try:
            return step(*args)
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
        return None

    def _run_steps(
        self,
        lifecycle: _core.Lifecycle,
        invocation: DistributedInvocation,
        runner_ctx: RunnerContext,
    ) -> PendingFinish | None:
        """The body of pynenc's ``run`` (in ``_guarded``), its result's storage left to
        the caller where ``_finish_deferrable`` allows."""
        invocation_id = invocation.invocation_id
        task = invocation.task
        invocation._deterministic_runtime = None
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
        app = self.app
        if not self._finish_deferrable():
            self.set_invocation_result(invocation, result, runner_ctx)
            return None
        serialized = app.client_data_store.serialize(result)
        # The change the engine makes next, noted if a trigger watches the task (its
        # reports follow in complete_finish, which clears the note): _pending_reports.
        notes = _pending_reports.of_trigger(app.trigger)
        note = None
        if notes is not None:
            note = notes.begin(
                invocation_id,
                InvocationStatus.SUCCESS,
                runner_ctx.runner_id,
                task.task_id.key,
                nests=False,
            )
        return PendingFinish(
            invocation_id,
            serialized,
            task.task_id.key,
            bool(self.conf.blocking_control),
            runner_ctx.runner_id,
            (invocation, runner_ctx, lifecycle, result, serialized, note),
            # A note is cleared by complete_finish: the engine always calls it back.
            note is not None or app.logger.isEnabledFor(logging.INFO),
        )

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
