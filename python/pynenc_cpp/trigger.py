"""Trigger adapter: pynenc's ``BaseTrigger`` on the engine's trigger store.

Serialization follows pynenc's ``SQLiteTrigger``: conditions, valid conditions,
events and trigger runs travel as their ``to_json`` strings; trigger definitions
as their columns (``trigger_id``, ``task_id.key``, condition ids, ``logic.value``,
``argument_provider_json``). Timestamps are integer microseconds (``_convert``).
Beside the engine's store the adapter keeps per-thread notes of pynenc's trigger loop
(the run it claimed last, the runs another runner held) and the pending-report notes
(``_pending_reports``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pynenc.identifiers.task_id import TaskId
from pynenc.models.trigger_definition_dto import TriggerDefinitionDTO
from pynenc.trigger.base_trigger import BaseTrigger
from pynenc.trigger.conditions import (
    CompositeLogic,
    ConditionContext,
    CronCondition,
    TriggerCondition,
    ValidCondition,
)
from pynenc.trigger.monitoring import (
    EventMarker,
    EventMarkerPage,
    EventRecord,
    TriggerRunRecord,
)

from pynenc_cpp import _shortcuts
from pynenc_cpp._component import CppComponentMixin, MemBackend, RedisBackend, SqliteBackend
from pynenc_cpp._convert import from_us, opt_from_us, opt_to_us, to_us
from pynenc_cpp._cron import latest_slot
from pynenc_cpp._pending_reports import PendingReports
from pynenc_cpp._trigger_runs import execute_run

if TYPE_CHECKING:
    from pynenc import Pynenc
    from pynenc.invocation.base_invocation import BaseInvocation
    from pynenc.orchestrator.atomic_service import AtomicServiceRun
    from pynenc.trigger.types import ConditionId

_TriggerTuple = tuple[str, str, list[str], str, str | None]
#: pynenc's trigger-run claim (its loop's ``claim_trigger_run`` default).
_CLAIM_SEC = 60.0


def _context_type_name(context_type: type[ConditionContext]) -> str:
    """The key the engine filters source-task conditions on."""
    return f"{context_type.__module__}.{context_type.__qualname__}"


def _unique(*groups: Iterable[str | None]) -> list[str]:
    """Non-empty ids of ``groups`` in order, without duplicates."""
    return list(dict.fromkeys(i for group in groups for i in group if i))


def _to_dto(row: _TriggerTuple) -> TriggerDefinitionDTO:
    trigger_id, task_id_key, condition_ids, logic, provider_json = row
    return TriggerDefinitionDTO(
        trigger_id=trigger_id,
        task_id=TaskId.from_key(task_id_key),
        condition_ids=list(condition_ids),
        logic=CompositeLogic(logic),
        argument_provider_json=provider_json,
    )


class CppTrigger(CppComponentMixin, BaseTrigger):
    """Native trigger store: conditions, triggers, claims, events, runs in C++.

    Thread-safe. ``claim_trigger_run`` and ``store_last_cron_execution`` are atomic
    in the engine: among racing callers exactly one wins.
    """

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        self._engine = self.storage.trigger_store()
        # Per thread, of pynenc's trigger loop: `runs`, the trigger runs whose claim
        # this thread's loop iteration was refused while another runner held it
        # unrecorded (clear_valid_conditions); `claimed`, (run id, monotonic time) of
        # the claim this thread made last, for the execute_task that follows it;
        # `conditions`, the valid conditions its iteration read (_fires_anew).
        self._in_flight = threading.local()
        # Status changes noted before they are made, until their reports are made.
        self.pending_reports = PendingReports(self)

    # ------------------------------------------------------------------ #
    # Conditions and trigger definitions
    # ------------------------------------------------------------------ #

    def _register_condition(self, condition: TriggerCondition) -> None:
        self._engine.register_condition(
            condition.condition_id,
            condition.to_json(self.app),
            _context_type_name(condition.context_type),
        )
        self.pending_reports.forget()

    def get_condition(self, condition_id: str) -> TriggerCondition | None:
        json_str = self._retried(
            lambda: self._engine.get_condition(condition_id), "trigger condition read"
        )
        return None if json_str is None else TriggerCondition.from_json(json_str, self.app)

    def _get_all_conditions(self) -> list[TriggerCondition]:
        rows = self._retried(self._engine.all_conditions, "trigger conditions read")
        return [TriggerCondition.from_json(j, self.app) for j in rows]

    def _register_source_task_condition(self, task_id: TaskId, condition_id: ConditionId) -> None:
        self._engine.register_source_task_condition(task_id.key, condition_id)
        self.pending_reports.forget()

    def get_conditions_sourced_from_task(
        self, task_id: TaskId, context_type: type[ConditionContext] | None = None
    ) -> list[TriggerCondition]:
        # Read on every status change and result pynenc reports (mixed mode): an
        # outage here must not turn the invocation into a failure.
        name = None if context_type is None else _context_type_name(context_type)
        rows = self._retried(
            lambda: self._engine.conditions_sourced_from_task(task_id.key, name),
            f"trigger conditions of task {task_id.key}",
        )
        if rows or name is None:
            self.pending_reports.saw(task_id.key, bool(rows))
        return [TriggerCondition.from_json(j, self.app) for j in rows]

    def register_trigger(self, trigger: TriggerDefinitionDTO) -> None:
        self._engine.register_trigger(
            trigger.trigger_id,
            trigger.task_id.key,
            list(trigger.condition_ids),
            trigger.logic.value,
            trigger.argument_provider_json,
        )

    def _get_trigger(self, trigger_id: str) -> TriggerDefinitionDTO | None:
        row = self._retried(lambda: self._engine.get_trigger(trigger_id), "trigger read")
        return None if row is None else _to_dto(row)

    def get_triggers_for_condition(self, condition_id: str) -> list[TriggerDefinitionDTO]:
        rows = self._retried(
            lambda: self._engine.triggers_for_condition(condition_id), "triggers read"
        )
        return [_to_dto(row) for row in rows]

    def clean_task_trigger_definitions(self, task_id: TaskId) -> None:
        self._engine.clean_task_triggers(task_id.key)

    # ------------------------------------------------------------------ #
    # Valid conditions
    # ------------------------------------------------------------------ #

    def record_valid_condition(self, valid_condition: ValidCondition) -> None:
        self.record_valid_conditions([valid_condition])

    def record_valid_conditions(self, valid_conditions: list[ValidCondition]) -> None:
        self._engine.record_valid_conditions(
            [(vc.valid_condition_id, vc.to_json(self.app)) for vc in valid_conditions]
        )

    def get_valid_conditions(self) -> dict[str, ValidCondition]:
        conditions = {
            vc_id: ValidCondition.from_json(json_str, self.app)
            for vc_id, json_str in self._engine.valid_conditions()
        }
        # What this thread's loop iteration fires from (claim_trigger_run's look at a
        # recorded run).
        self._in_flight.conditions = conditions
        return conditions

    def clear_valid_conditions(self, conditions: Iterable[ValidCondition]) -> None:
        """pynenc's clear, keeping each condition whose trigger run this thread's loop
        iteration found claimed by another runner and not recorded yet.

        pynenc's loop clears every condition it looked at, also one whose run it could
        not claim because another runner held the claim: if that runner dies before it
        starts the task, the condition is gone and the trigger never fires (the
        guarantees suite saw that under SIGKILL). Kept, the condition is looked at again
        (a ``CppRunner``'s trigger thread does while conditions are left): by then the
        run is recorded (``claim_trigger_run`` refuses it, and the condition is cleared)
        or its claim expired and another runner fires it.
        """
        held: set[str] = getattr(self._in_flight, "runs", set())
        self._in_flight.runs = set()
        conditions = list(conditions)
        if held:
            conditions = [c for c in conditions if not (self._run_ids_of(c, held) & held)]
        self._engine.clear_valid_conditions([c.valid_condition_id for c in conditions])

    def _run_ids_of(self, valid_condition: ValidCondition, held: set[str]) -> set[str]:
        """The trigger-run ids pynenc gives ``valid_condition`` alone, per trigger of its
        condition (pynenc's own ``generate_trigger_run_ids``). An AND trigger's run id
        needs all of its conditions: for one, every ``held`` run is counted (its
        conditions are kept while any run is held: kept too long is only looked at
        again, cleared too soon is a firing lost)."""
        from pynenc.trigger.trigger_context import TriggerContext
        from pynenc.trigger.trigger_definitions import TriggerDefinition

        ids: set[str] = set()
        for dto in self.get_triggers_for_condition(valid_condition.condition.condition_id):
            trigger = TriggerDefinition.from_dto(dto, self.app)
            context = TriggerContext()
            context.add_valid_condition(valid_condition)
            try:
                ids.update(trigger.generate_trigger_run_ids(context))
            except ValueError:  # needs more conditions (AND)
                ids.update(held)
        return ids

    # ------------------------------------------------------------------ #
    # Cron state and trigger-run claims
    # ------------------------------------------------------------------ #

    def get_last_cron_execution(self, condition_id: ConditionId) -> datetime | None:
        value = self._engine.last_cron_execution(condition_id)
        return opt_from_us(value)

    def store_last_cron_execution(
        self,
        condition_id: ConditionId,
        execution_time: datetime,
        expected_last_execution: datetime | None = None,
    ) -> bool:
        """Compare-and-set of the last execution time.

        Stores ``execution_time`` only if the stored value equals
        ``expected_last_execution``; ``None`` means "never executed". This closes
        the first-execution race that pynenc's own backends leave open (they skip
        the check for ``None``), so two runners can never both claim a cron tick.
        """
        return self._engine.store_last_cron_execution(
            condition_id, to_us(execution_time), opt_to_us(expected_last_execution)
        )

    def check_time_based_triggers(
        self,
        current_time: datetime | None = None,
        *,
        atomic_service_run: AtomicServiceRun,
    ) -> None:
        """pynenc's, with each cron condition judged at its latest slot rather than
        at the time of the check.

        pynenc stores the time it judged a condition at as its last execution and
        refuses a run within ``min_interval_seconds`` (50 by default) of it: a slot
        fired late (a runner that starts mid-minute fires that minute's slot, which
        is within ``check_window_seconds``) makes the next slot wait until the
        interval has passed, and the one after that too. Judged at the slot, the
        stored time is the slot, and every later slot is due at its time. A slot
        older than the condition's ``check_window_seconds`` is left alone, as pynenc
        leaves it; ``enable_scheduler=False`` stops every cron condition. pynenc's own
        while the ``cron`` shortcut is off (``pynenc_cpp._shortcuts``).
        """
        if "cron" not in _shortcuts.of_app(self.app):
            super().check_time_based_triggers(current_time, atomic_service_run=atomic_service_run)
            return
        if not self.conf.enable_scheduler:
            return
        now = current_time or datetime.now(UTC)
        for condition in self._get_all_conditions():
            if not isinstance(condition, CronCondition):
                continue
            slot = latest_slot(condition.cron_expression, now)
            if (now - slot).total_seconds() > condition.check_window_seconds:
                continue
            context = self._should_trigger_cron_condition(condition, slot, atomic_service_run)
            if context is not None:
                self.record_valid_conditions([ValidCondition(condition, context)])

    def claim_trigger_run(self, trigger_run_id: str, expiration_seconds: int = 60) -> bool:
        """pynenc's claim, and never of a run already recorded for the event at hand
        (``_fires_anew``: a run id that comes back for another event is claimed as
        pynenc claims it).

        pynenc's loop claims a run, starts its task, records the run
        (``store_trigger_run``) and then clears the valid conditions it used. A
        runner that dies after the record and before the clear leaves the valid
        condition behind; once the claim expires, the next loop would claim the
        same run id and start the task again. A recorded run is not claimed again;
        a runner that dies between starting the task and recording the run leaves
        the invocation that the run's next claimer finds (``execute_task``,
        ``_trigger_runs``; ``docs/reliability.md``).
        """
        self._in_flight.claimed = None
        recorded = self._engine.get_trigger_run(trigger_run_id)
        if recorded is not None and not self._fires_anew(TriggerRunRecord.from_json(recorded)):
            return False
        if self._engine.claim_trigger_run(trigger_run_id, int(expiration_seconds)):
            # For the execute_task that follows on this thread (pynenc's loop); a run
            # fired anew starts an invocation of its own (_trigger_runs).
            if recorded is None:
                self._in_flight.claimed = (trigger_run_id, time.monotonic())
            return True
        # Held by another runner and not recorded: its condition must outlive this
        # iteration's clear (clear_valid_conditions).
        if not hasattr(self._in_flight, "runs"):
            self._in_flight.runs = set()
        self._in_flight.runs.add(trigger_run_id)
        return False

    def _fires_anew(self, record: TriggerRunRecord) -> bool:
        """Whether a recorded run's id comes back for another event: a valid condition
        this thread's loop read for the run has a source invocation the record does
        not name. pynenc's ``ExceptionContext`` id names only the exception's type,
        so every failure of that type of a watched task gives the same run id
        (status, result, event and cron ids name their invocation, event or slot:
        theirs never come back, and a leftover condition of a recorded run is not
        fired again)."""
        conditions: dict[str, ValidCondition] = getattr(self._in_flight, "conditions", {})
        named = set(record.source_invocation_ids) | {
            p.source_invocation_id for p in record.participants or [] if p.source_invocation_id
        }
        for vc_id in record.valid_condition_ids:
            vc = conditions.get(vc_id)
            source = getattr(vc.context, "invocation_id", None) if vc is not None else None
            if source is not None and str(source) not in named:
                return True
        return False

    def execute_task(
        self,
        task_id: TaskId,
        arguments: dict[str, Any] | None = None,
        *,
        parent_event_id: str | None = None,
    ) -> BaseInvocation:
        """pynenc's, for the run this thread's loop claimed just before (within the
        claim's 60 s: a claim whose loop step raised before its start is not taken
        for another call's): the invocation's id follows from the run, and one an
        earlier claimer of the run started (it died before recording the run) is the
        run's, not started again (``_trigger_runs``)."""
        claimed: tuple[str, float] | None = getattr(self._in_flight, "claimed", None)
        self._in_flight.claimed = None

        def execute() -> BaseInvocation:
            return super(CppTrigger, self).execute_task(
                task_id, arguments, parent_event_id=parent_event_id
            )

        if claimed is None or time.monotonic() - claimed[1] > _CLAIM_SEC:
            return execute()
        return execute_run(self.app, claimed[0], execute)

    def _purge(self) -> None:
        self._engine.purge()

    # ------------------------------------------------------------------ #
    # Events
    # ------------------------------------------------------------------ #

    def store_event(self, event: EventRecord) -> None:
        self._engine.store_event(
            event.event_id,
            event.event_code,
            to_us(event.timestamp),
            event.to_json(self.app),
            matched=bool(event.matched_condition_ids),
            emitted_by_invocation_id=event.emitted_by_invocation_id,
            emitted_by_task_id=event.emitted_by_task_id,
            emitted_by_runner_context_id=event.emitted_by_runner_context_id,
            triggered_invocation_ids=list(event.triggered_invocation_ids),
        )

    def _to_event(self, row: tuple[str, list[str]]) -> EventRecord:
        json_str, triggered = row
        record = EventRecord.from_json(json_str, self.app)
        record.triggered_invocation_ids = list(triggered)
        return record

    def get_event(self, event_id: str) -> EventRecord | None:
        row = self._engine.get_event(event_id)
        return None if row is None else self._to_event(row)

    def get_events(
        self,
        *,
        event_code: str | None = None,
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        matched: bool | None = None,
        triggered: bool | None = None,
        emitted_by_invocation_id: str | None = None,
        emitted_by_task_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[EventRecord]:
        rows = self._engine.get_events(
            event_code=event_code,
            start_us=opt_to_us(start_time),
            end_us=opt_to_us(end_time),
            matched=matched,
            triggered=triggered,
            emitted_by_invocation_id=emitted_by_invocation_id,
            emitted_by_task_id=emitted_by_task_id,
            limit=limit,
            offset=offset,
        )
        return [self._to_event(row) for row in rows]

    def count_events(
        self,
        *,
        event_code: str | None = None,
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        matched: bool | None = None,
        triggered: bool | None = None,
        emitted_by_invocation_id: str | None = None,
        emitted_by_task_id: str | None = None,
    ) -> int:
        return self._engine.count_events(
            event_code=event_code,
            start_us=opt_to_us(start_time),
            end_us=opt_to_us(end_time),
            matched=matched,
            triggered=triggered,
            emitted_by_invocation_id=emitted_by_invocation_id,
            emitted_by_task_id=emitted_by_task_id,
        )

    def get_event_markers_in_timerange(
        self,
        start_time: datetime,
        end_time: datetime,
        *,
        event_code: str | None = None,
        state: str = "all",
        limit: int = 1000,
        offset: int = 0,
    ) -> EventMarkerPage:
        markers, total, truncated = self._engine.event_markers(
            to_us(start_time),
            to_us(end_time),
            event_code=event_code,
            state=state,
            limit=limit,
            offset=offset,
        )
        return EventMarkerPage(
            markers=[
                EventMarker(
                    event_id=event_id,
                    event_code=code,
                    timestamp=from_us(ts),
                    matched=is_matched,
                    triggered=is_triggered,
                    emitted_by_invocation_id=by_invocation,
                    emitted_by_runner_context_id=by_context,
                )
                for event_id, code, ts, is_matched, is_triggered, by_invocation, by_context in markers
            ],
            total=total,
            truncated=truncated,
        )

    def list_event_codes(self) -> list[str]:
        return list(self._engine.event_codes())

    def link_trigger_run_to_events(
        self, event_ids: list[str], invocation_id: str, *, trigger_run_id: str
    ) -> None:
        self._engine.link_trigger_run_to_events(
            list(event_ids), str(invocation_id), trigger_run_id=trigger_run_id
        )

    def get_invocations_triggered_by_event(self, event_id: str) -> list[str]:
        return list(self._engine.invocations_triggered_by_event(event_id))

    # ------------------------------------------------------------------ #
    # Trigger runs
    # ------------------------------------------------------------------ #

    def store_trigger_run(self, run: TriggerRunRecord) -> None:
        participants = run.participants or []
        self._engine.store_trigger_run(
            run.trigger_run_id,
            run.trigger_id,
            run.task_id_key,
            run.logic_value,
            claimed_at_us=opt_to_us(run.claimed_at),
            executed_at_us=opt_to_us(run.executed_at),
            triggered_invocation_id=run.triggered_invocation_id,
            atomic_service_run_id=run.atomic_service_run_id,
            json=run.to_json(),
            event_ids=_unique(run.event_ids, (p.event_id for p in participants)),
            source_invocation_ids=_unique(
                run.source_invocation_ids, (p.source_invocation_id for p in participants)
            ),
            valid_condition_ids=_unique(
                run.valid_condition_ids, (p.valid_condition_id for p in participants)
            ),
        )

    def get_trigger_run(self, trigger_run_id: str) -> TriggerRunRecord | None:
        json_str = self._engine.get_trigger_run(trigger_run_id)
        return None if json_str is None else TriggerRunRecord.from_json(json_str)

    def get_trigger_runs_for_event(self, event_id: str) -> list[TriggerRunRecord]:
        return [TriggerRunRecord.from_json(j) for j in self._engine.runs_for_event(event_id)]

    def get_trigger_runs_for_invocation(self, invocation_id: str) -> list[TriggerRunRecord]:
        return [
            TriggerRunRecord.from_json(j) for j in self._engine.runs_for_invocation(invocation_id)
        ]

    def get_trigger_runs_sourced_by_invocation(self, invocation_id: str) -> list[TriggerRunRecord]:
        return [
            TriggerRunRecord.from_json(j)
            for j in self._engine.runs_sourced_by_invocation(invocation_id)
        ]

    def get_trigger_runs_for_valid_condition(
        self, valid_condition_id: str
    ) -> list[TriggerRunRecord]:
        return [
            TriggerRunRecord.from_json(j)
            for j in self._engine.runs_for_valid_condition(valid_condition_id)
        ]

    def get_trigger_runs_in_timerange(
        self,
        start_time: datetime,
        end_time: datetime,
        *,
        event_code: str | None = None,
        task_id_key: str | None = None,
        limit: int | None = None,
    ) -> list[TriggerRunRecord]:
        rows = self._engine.runs_in_time_range(
            to_us(start_time),
            to_us(end_time),
            event_code=event_code,
            task_id_key=task_id_key,
            limit=limit,
        )
        return [TriggerRunRecord.from_json(j) for j in rows]

    def get_referenced_atomic_service_run_ids(self) -> set[str]:
        return set(self._engine.referenced_atomic_service_run_ids())

    # ------------------------------------------------------------------ #
    # Retention
    # ------------------------------------------------------------------ #

    def _age_purge_events(self, threshold: datetime) -> list[str]:
        return list(self._engine.age_purge_events(to_us(threshold)))

    def _age_purge_trigger_runs(self, threshold: datetime) -> int:
        return self._engine.age_purge_trigger_runs(to_us(threshold))

    def _cap_purge_events(self) -> list[str]:
        return list(self._engine.cap_purge_events(int(self.conf.event_max_records)))

    def _cap_purge_trigger_runs(self) -> int:
        return self._engine.cap_purge_trigger_runs(int(self.conf.trigger_run_max_records))

    def _cascade_delete_runs_for_events(self, event_ids: list[str]) -> int:
        return self._engine.cascade_delete_runs_for_events(list(event_ids))


__all__ = ["CppMemTrigger"]


class CppMemTrigger(MemBackend, CppTrigger):
    """The native trigger store on process-local memory (like pynenc's ``memory()``)."""


class CppSqliteTrigger(SqliteBackend, CppTrigger):
    """The native trigger store on the app's SQLite file (``cpp_sqlite_path``)."""


class CppRedisTrigger(RedisBackend, CppTrigger):
    """The native trigger store on the app's Redis server (``cpp_redis_url``)."""
