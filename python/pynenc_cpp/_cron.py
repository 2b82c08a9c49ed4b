"""Cron slots by pynenc's rules (``pynenc.trigger.conditions.cron``).

``latest_slot``: the slot a cron condition is judged at by ``CppTrigger``'s
``check_time_based_triggers``. ``next_cron_time``: when a runner's trigger wake
(``_trigger_wake``) next has cron work.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from croniter import croniter
from pynenc.trigger.conditions import CronCondition, CronContext


def latest_slot(cron_expression: str, now: datetime) -> datetime:
    """The latest slot of ``cron_expression`` at or before ``now``."""
    if croniter.match(cron_expression, now) and now.second == 0 and now.microsecond == 0:
        return now
    slot: datetime = croniter(cron_expression, now).get_prev(datetime)
    return slot


def next_cron_time(
    conditions: list[Any],
    now: datetime,
    last_execution: Callable[[str], datetime | None],
) -> datetime | None:
    """When the loop next has cron work: the earliest time at or after ``now`` at which
    one of the cron conditions among ``conditions`` is satisfied by pynenc's rules
    (``CronCondition._is_satisfied_by``), given each one's ``last_execution``.

    Mostly a condition's next slot; but pynenc stores the time a slot was fired,
    not the slot, and refuses a run within ``min_interval_seconds`` (50 by default)
    of it: a slot fired late (at a runner's start, within ``check_window_seconds``)
    makes the next slot wait until that interval passed, and then it is due."""
    times = []
    for c in conditions:
        if not isinstance(c, CronCondition):
            continue
        last = last_execution(c.condition_id)
        if c.is_satisfied_by(CronContext(timestamp=now, last_execution=last)):
            return now
        due: datetime = croniter(c.cron_expression, now).get_next(datetime)
        if last is not None:
            due = max(due, last + timedelta(seconds=c.min_interval_seconds))
            if not c.is_satisfied_by(CronContext(timestamp=due, last_execution=last)):
                due = croniter(c.cron_expression, due).get_next(datetime)
        times.append(due)
    return min(times, default=None)
