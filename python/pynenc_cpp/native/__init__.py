"""Native mode: orchestrators whose hot path is one engine call per step.

``CppMemNativeOrchestrator``, ``CppSqliteNativeOrchestrator`` and
``CppRedisNativeOrchestrator`` are the mixed-mode orchestrators
(``pynenc_cpp.orchestrator``) with pynenc's ``BaseOrchestrator`` hot-path
methods overridden by the engine's composite operations (``_core.Lifecycle``):

=================================== ==========================================
pynenc method                        one engine call
=================================== ==========================================
register_new_invocations             upsert + register + history + route
set_invocation_status                transition + waiters + auto-purge + history
get_additional_invocations_to_run    per id: status check + lookup + PENDING + history
set_invocation_result / _exception   store + SUCCESS / FAILED (as above)
set_invocation_retry                 RETRY + history + retries + 1 + route
reroute_invocations                  per id: REROUTED + history + route
claim_for_run (CppRunner)            status check + lookup + PENDING + RUNNING + history
get_invocation_status_record         status record + (SUCCESS) result, kept for get_result
=================================== ==========================================

``claim_for_run(..., start=True)`` (what ``CppRunner`` asks) also makes the first
storage step of pynenc's ``DistributedInvocation.run``, the move to RUNNING, in the
claim's own engine call, for a task that runs freely (the only kind the claim moves
by itself), while the run-time concurrency check is pynenc's own (which always
authorizes such a task). ``run`` still calls ``set_invocation_status(RUNNING)``; on
the same thread, for that invocation, the call then does only what is left of it:
the log line and the trigger report. ``CppRunner`` runs what it claimed with
``run_invocation``, pynenc's ``run`` step for step with less Python between the
steps.

Every side effect of pynenc's implementation is kept: the same history rows,
waiter release, auto-purge marks, routing, log lines, and trigger reporting.
Trigger reporting stays pynenc's Python code; the composite tells whether a
trigger condition of the right context type watches the task, and the report is
skipped only when none does (pynenc's report would then evaluate nothing).

The native path is taken when the app's state backend and broker (and, for the
cheap trigger check, its trigger) are pynenc-cpp components of the same backend;
otherwise, or with ``cpp_native=False`` in the config, every method falls back
to ``BaseOrchestrator``'s own code (mixed mode). That choice is made in one place,
``pynenc_cpp._native_step.native_step``: each step is written for the native case
and gets the lifecycle as an argument; without one, the method of the same name
further down the MRO runs, pynenc's own or, where pynenc has none, ``MixedSteps``'
(``mixed``).

The package, one module per step: ``base`` (the plumbing every step shares),
``submit``, ``reads``, ``changes``, ``recover``, ``mixed`` (the fallbacks pynenc has
no method for), and ``orchestrator`` (the class made of them, and its backends). The
claim and run steps are ``pynenc_cpp._pick`` and ``pynenc_cpp._run``.
"""

from pynenc_cpp.native.orchestrator import (
    CppMemNativeOrchestrator,
    CppNativeOrchestrator,
    CppRedisNativeOrchestrator,
    CppSqliteNativeOrchestrator,
)

__all__ = [
    "CppMemNativeOrchestrator",
    "CppNativeOrchestrator",
    "CppRedisNativeOrchestrator",
    "CppSqliteNativeOrchestrator",
]
