"""pynenc's atomic-service execution rows on the engine orchestrator (a part of
``CppOrchestrator``): the start claim (at most one RUNNING), the finish, the reads and
the retention purge, each one engine call."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pynenc.orchestrator.atomic_service import (
    AtomicServiceExecution,
    AtomicServiceExecutionStatus,
    AtomicServiceRun,
)

from pynenc_cpp._convert import from_us, opt_from_us, opt_to_us, seconds_to_us, to_us

if TYPE_CHECKING:
    from pynenc import Pynenc

    from pynenc_cpp import _core

_ExecutionTuple = tuple[str, str, int, "int | None", str, str]


def _execution(raw: _ExecutionTuple) -> AtomicServiceExecution:
    runner_id, run_id, start_us, end_us, status, reason = raw
    return AtomicServiceExecution.from_raw(
        runner_id=runner_id,
        atomic_service_run_id=run_id,
        start_time=from_us(start_us),
        end_time=opt_from_us(end_us),
        status=AtomicServiceExecutionStatus(status),
        reason=reason,
    )


class AtomicServiceExecutions:
    """pynenc's ``BaseOrchestrator`` atomic-service members over ``self._engine`` (the
    engine orchestrator port)."""

    app: Pynenc
    _engine: _core.Orchestrator

    def record_atomic_service_execution_start(
        self,
        atomic_service_run: AtomicServiceRun,
        started_at: datetime | None,
        status: AtomicServiceExecutionStatus = AtomicServiceExecutionStatus.RUNNING,
        reason: str = "",
    ) -> bool:
        """Insert the execution row; for RUNNING, at most one may be active.

        Sets ``atomic_service_run.started_at`` to the stored start time. Rows that
        are not an accepted RUNNING claim trigger a retention purge, as in pynenc.
        """
        accepted, started_us = self._engine.record_atomic_service_start(
            atomic_service_run.runner_id,
            atomic_service_run.atomic_service_run_id,
            opt_to_us(started_at),
            str(status),
            reason,
        )
        atomic_service_run.started_at = from_us(started_us)
        if status != AtomicServiceExecutionStatus.RUNNING or not accepted:
            self.purge_atomic_service_executions()
        return accepted

    def finalize_atomic_service_execution(
        self,
        atomic_service_run: AtomicServiceRun,
        end_time: datetime,
        status: AtomicServiceExecutionStatus,
        reason: str = "",
    ) -> None:
        self._engine.finalize_atomic_service(
            atomic_service_run.runner_id,
            atomic_service_run.atomic_service_run_id,
            to_us(end_time),
            str(status),
            reason,
        )
        self.purge_atomic_service_executions()

    def get_active_atomic_service_executions(self) -> list[AtomicServiceExecution]:
        return [_execution(r) for r in self._engine.active_atomic_service_executions()]

    def get_atomic_service_executions_in_timerange(
        self,
        start_time: datetime,
        end_time: datetime,
        limit: int = 1000,
        *,
        runner_id: str | None = None,
        min_duration_seconds: float = 0.0,
    ) -> list[AtomicServiceExecution]:
        rows = self._engine.atomic_service_executions_in_range(
            to_us(start_time),
            to_us(end_time),
            limit,
            runner_id,
            seconds_to_us(min_duration_seconds) if min_duration_seconds > 0 else 0,
        )
        return [_execution(r) for r in rows]

    def purge_atomic_service_executions(self) -> int:
        """Trim finished rows by ``atomic_service_execution_retention_minutes`` and
        ``atomic_service_execution_max_records``; rows referenced by trigger-run
        history and RUNNING rows are kept."""
        retention_minutes = float(self.app.conf.atomic_service_execution_retention_minutes)
        max_records = int(self.app.conf.atomic_service_execution_max_records)
        protected = sorted(self.app.trigger.get_referenced_atomic_service_run_ids())
        return self._engine.purge_atomic_service_executions(
            seconds_to_us(retention_minutes * 60) if retention_minutes > 0 else 0,
            max(max_records, 0),
            protected,
        )
