"""Cron slots by pynenc's rules (``pynenc.trigger.conditions.cron``).

``latest_slot``: the slot a cron condition is judged at by ``CppTrigger``'s
``check_time_based_triggers``. ``next_cron_time``: when a runner's trigger wake
(``_trigger_wake``) next has cron work.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from croniter import croniter
from pynenc.trigger.conditions import CronCondition, CronContext


def latest_slot(cron_expression: str, now: datetime) -> datetime:
    """The latest slot of ``cron_expression`` at or before ``now``."""
    if croniter.match(cron_expression, now) and now.second == 0 and now.microsecond == 0:
        return now
    slot: datetime = croniter(cron_expression, now).get_prev(datetime)
    return slot


#: How many slots ahead ``next_cron_time`` looks for one pynenc's rules accept.
_LOOKAHEAD_SLOTS = 8


def next_cron_time(
    conditions: list[Any],
    now: datetime,
    last_execution: Callable[[str], datetime | None],
) -> datetime | None:
    """When the loop next has cron work: the earliest time at or after ``now`` at which
    ``CppTrigger.check_time_based_triggers`` would fire one of the cron conditions
    among ``conditions``, given each one's ``last_execution``: ``now`` when the
    condition's latest slot is within its ``check_window_seconds`` and not run yet,
    else its first later slot that pynenc's rules (``CronCondition._is_satisfied_by``,
    judged at the slot, as the check judges it) accept."""
    times = []
    for c in conditions:
        if not isinstance(c, CronCondition):
            continue
        last = last_execution(c.condition_id)
        slot = latest_slot(c.cron_expression, now)
        if (now - slot).total_seconds() > c.check_window_seconds:
            slot = croniter(c.cron_expression, now).get_next(datetime)
        for _ in range(_LOOKAHEAD_SLOTS):
            if c.is_satisfied_by(CronContext(timestamp=slot, last_execution=last)):
                break
            slot = croniter(c.cron_expression, slot).get_next(datetime)
        times.append(max(slot, now))
    return min(times, default=None)
