"""The native recovery of dead runners' invocations, for ``CppRunner``.

It runs on every heartbeat tick (at most 5 s apart by default), once this runner's own
heartbeats have been steady for a whole dead-after time (``_steady_heartbeats``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pynenc.exceptions import InvocationStatusError
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp import _pending_reports

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pynenc.identifiers.invocation_id import InvocationId
    from pynenc.runner.runner_context import RunnerContext


class DeadRunnerRecovery:
    """``CppRunner``'s recovery of the invocations of dead runners (a mixin).

    Called on the engine's timer thread only (not thread-safe).
    """

    app: Any
    logger: logging.Logger
    runner_id: str
    runner_context: RunnerContext
    _last_heartbeat_ok: float | None
    _heartbeats_steady_since: float | None

    if TYPE_CHECKING:

        def _intervals(self) -> tuple[float, float]:
            """(heartbeat, management) intervals in seconds (``CppRunner``'s)."""
            ...

    def _steady_heartbeats(self, now: float | None = None) -> bool:
        """Whether this runner may declare others dead: its own heartbeats have been
        stored, with no gap of half a dead-after time or more, for a whole dead-after
        time. A gap means this process or the storage stalled (a frozen process
        holding SQLite's write lock stalls every writer; a SIGSTOPped runner wakes to
        heartbeats that look stale only because nobody could write them): every
        runner gets one dead-after time to be heard again before anyone is recovered
        as dead. A runner that just started has seen no stall and may recover at
        once."""
        now = time.monotonic() if now is None else now
        dead_after = float(self.app.conf.runner_considered_dead_after_minutes) * 60.0
        stall = max(dead_after / 2.0, 3.0 * self._intervals()[0])
        last, self._last_heartbeat_ok = self._last_heartbeat_ok, now
        if last is None or self._heartbeats_steady_since is None:
            self._heartbeats_steady_since = now - dead_after  # a fresh start: no stall seen
        elif now - last >= stall:
            self._heartbeats_steady_since = now
            self.logger.warning(
                f"CppRunner:{self.runner_id} its own heartbeats stalled for {now - last:.1f} s: "
                f"declaring no runner dead for the next {dead_after:g} s"
            )
        return now - self._heartbeats_steady_since >= dead_after

    def _recover_dead_runners(self) -> None:
        """Native recovery, on every heartbeat tick (at most 5 s apart by default): the
        RUNNING and PENDING invocations of runners with no heartbeat for
        ``runner_considered_dead_after_minutes``, and any PENDING one past its
        allowed time (``max_pending_seconds``), move to RUNNING_RECOVERY /
        PENDING_RECOVERY and are routed again, as pynenc's recovery core tasks do
        (those stay as a backstop on their cron). Several runners may look at once:
        each transition is a compare-and-set, so exactly one of them recovers a
        given invocation and only that one routes it again."""
        orchestrator = self.app.orchestrator
        ctx = self.runner_context
        finds: list[tuple[Callable[[], Iterable[InvocationId]], InvocationStatus]] = [
            (orchestrator.get_running_invocations_for_recovery, InvocationStatus.RUNNING_RECOVERY),
        ]
        of_dead = getattr(orchestrator, "get_pending_invocations_of_dead_runners", None)
        if of_dead is not None:  # an engine orchestrator: a dead runner's claims at once
            finds.append((of_dead, InvocationStatus.PENDING_RECOVERY))
        finds.append(
            (orchestrator.get_pending_invocations_for_recovery, InvocationStatus.PENDING_RECOVERY)
        )
        fence = getattr(orchestrator, "fenced_on_owner", None)
        for find, status in finds:
            recovered = 0
            found = list(find())
            # RUNNING_RECOVERY overrides ownership: each one is fenced on the owner found
            # dead now (after the query, so a runner that recovered and started it again
            # since is seen), and changes only while that owner still holds it.
            live = (
                {r.runner_id for r in orchestrator.get_active_runners()}
                if fence is not None and status == InvocationStatus.RUNNING_RECOVERY and found
                else set()
            )
            for invocation_id in found:
                try:
                    if fence is None or status != InvocationStatus.RUNNING_RECOVERY:
                        orchestrator.set_invocation_status(invocation_id, status, ctx)
                    else:
                        record = orchestrator.get_invocation_status_record(invocation_id)
                        owner = record.runner_id
                        if record.status != InvocationStatus.RUNNING or owner in live:
                            continue  # moved on since the query, or its owner is alive
                        with fence(owner):
                            orchestrator.set_invocation_status(invocation_id, status, ctx)
                except (InvocationStatusError, KeyError):
                    continue  # another runner recovered it first, or it is gone
                # Routed at once, one by one: a failure leaves only this one to the
                # retry below (and to pynenc's cron), never a batch in *_RECOVERY.
                for attempt in range(3):
                    try:
                        orchestrator.reroute_invocations({invocation_id}, ctx)
                        break
                    except Exception:
                        if attempt == 2:
                            self.logger.exception(
                                f"CppRunner:{self.runner_id} could not route recovered "
                                f"invocation:{invocation_id} again"
                            )
                        time.sleep(0.1)
                recovered += 1
            if recovered:
                self.logger.warning(
                    f"CppRunner:{self.runner_id} recovered {recovered} invocation(s) "
                    f"({status.value}) of dead runners or stuck pending"
                )
        self._reroute_stuck_deferrals()
        self._make_pending_reports()

    def _make_pending_reports(self) -> None:
        """Makes the trigger reports that runners killed after a status change still
        owed (``pynenc_cpp._pending_reports``): without them a trigger on that status
        would never fire. Making one twice is safe, so several runners may look."""
        notes = _pending_reports.of_trigger(self.app.trigger)
        if notes is None:  # not a CppTrigger
            return
        orchestrator = self.app.orchestrator
        dead_after = float(self.app.conf.runner_considered_dead_after_minutes) * 60.0
        made = notes.replay(
            lambda: {r.runner_id for r in orchestrator.get_active_runners()}, dead_after
        )
        if made:
            self.logger.warning(
                f"CppRunner:{self.runner_id} made the trigger reports of {made} status "
                "change(s) whose runner died before making them"
            )

    def _reroute_stuck_deferrals(self) -> None:
        """Reroutes the CONCURRENCY_CONTROLLED invocations left so for longer than
        ``max_pending_seconds``: pynenc defers an invocation (running concurrency
        control) and reroutes it in two calls, so a runner killed between them leaves
        it CONCURRENCY_CONTROLLED, a status no recovery of pynenc's looks at, and it
        would never run. (This package's native claims make both in one step on
        SQLite; mixed mode, Redis and pynenc's own runners make two.) The reroute is a
        compare-and-set: a runner that reroutes it meanwhile wins, and this one skips it."""
        orchestrator = self.app.orchestrator
        limit = float(self.app.conf.max_pending_seconds)
        deferred = orchestrator.get_invocation_ids_paginated(
            statuses=[InvocationStatus.CONCURRENCY_CONTROLLED], limit=1000
        )
        now = time.time()
        rerouted = 0
        for invocation_id in deferred:
            try:
                record = orchestrator.get_invocation_status_record(invocation_id)
                if (
                    record.status != InvocationStatus.CONCURRENCY_CONTROLLED
                    or now - record.timestamp.timestamp() < limit
                ):
                    continue
                orchestrator.reroute_invocations({invocation_id}, self.runner_context)
            except (InvocationStatusError, KeyError):
                continue  # another runner rerouted it first, or it is gone
            rerouted += 1
        if rerouted:
            self.logger.warning(
                f"CppRunner:{self.runner_id} rerouted {rerouted} invocation(s) left "
                f"concurrency_controlled for over {limit:g} s (their runner died before "
                "rerouting them)"
            )
