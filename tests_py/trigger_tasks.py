"""Tasks under pynenc triggers, served by runner processes
(``pynenc --app tests_py.trigger_tasks runner start``) in the guarantees suite's
trigger scenarios and in ``bench/triggers.py``.

* ``order_placed`` and ``send_receipt``: a status trigger. Each ``order_placed``
  that reaches SUCCESS starts one ``send_receipt`` with the same arguments.
* ``every_minute``: a ``* * * * *`` cron task. Its ledger is named by the
  environment variable ``PYNENC_CPP_CRON_LEDGER`` (a cron call has no arguments);
  without it the task does nothing.

Ledger lines (one ``O_APPEND`` write each): ``order <tag> <tag> <pgid> <ns>`` when
an order's body ends, ``receipt <tag> <tag> <pgid> <ns>`` when its receipt's body
starts (CLOCK_MONOTONIC ns, one clock for every process of the machine), and
``cron <slot> <wall ns> <pgid> <ns>`` for a cron run, ``<slot>`` being the minute
it ran in (``YYYY-mm-ddTHH:MM``, UTC) and ``<wall ns>`` the wall-clock time.

A process started with ``PYNENC_CPP_TEST_DIE_BEFORE_REPORT=<tag>`` SIGKILLs itself
when it is about to report the SUCCESS of the order tagged ``<tag>`` to the trigger:
after the status change is stored, before its valid condition is recorded (the
guarantees suite's fault at that point, ``_pending_reports``). One started with
``PYNENC_CPP_TEST_DIE_BEFORE_RUN_RECORD=<tag>`` SIGKILLs itself when it is about to
record the trigger run that order fired: after its receipt was started
(``_trigger_runs``).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from typing import Any

from pynenc import Pynenc
from pynenc.invocation.status import InvocationStatus
from pynenc.trigger.conditions import StatusContext
from pynenc.trigger.trigger_builder import TriggerBuilder

import pynenc_cpp  # noqa: F401  (registers the Cpp* classes for pynenc's name lookup)
from tests_py.runner_tasks import _stamp

app = Pynenc()

#: The environment variable naming the cron task's ledger.
CRON_LEDGER_ENV = "PYNENC_CPP_CRON_LEDGER"
#: The environment variable naming the order whose SUCCESS report kills this process.
DIE_BEFORE_REPORT_ENV = "PYNENC_CPP_TEST_DIE_BEFORE_REPORT"
#: The environment variable naming the order whose trigger run's record kills this process.
DIE_BEFORE_RUN_RECORD_ENV = "PYNENC_CPP_TEST_DIE_BEFORE_RUN_RECORD"


@app.task
def order_placed(path: str, tag: str) -> str:
    """The source task: its SUCCESS fires ``send_receipt``."""
    _stamp(path, "order", tag, tag)
    return tag


def receipt_arguments(context: StatusContext) -> dict[str, Any]:
    """The receipt's arguments: the order's own."""
    kwargs = context.arguments.kwargs
    return {"path": kwargs["path"], "tag": kwargs["tag"]}


@app.task(
    triggers=TriggerBuilder()
    .on_status(order_placed, InvocationStatus.SUCCESS)
    .with_args_from_status(receipt_arguments)
)
def send_receipt(path: str, tag: str) -> str:
    """Started by the trigger once per successful ``order_placed``."""
    _stamp(path, "receipt", tag, tag)
    return tag


@app.task
def payment_failed(tag: str) -> str:
    """The source task of an exception trigger: fails with ``ValueError(tag)``."""
    raise ValueError(tag)


@app.task(
    triggers=TriggerBuilder()
    .on_exception(payment_failed, "ValueError")
    .with_args_static({"note": "sorry"})
)
def send_apology(note: str) -> str:
    """Started by the trigger once per ``ValueError`` of ``payment_failed``."""
    return note


@app.task(triggers=TriggerBuilder().on_cron("* * * * *"))
def every_minute() -> str:
    """Started by the trigger once per minute (pynenc's ``enable_scheduler``)."""
    path = os.environ.get(CRON_LEDGER_ENV)
    now = datetime.now(UTC)
    if path:
        _stamp(path, "cron", now.strftime("%Y-%m-%dT%H:%M"), str(time.time_ns()))
    return now.isoformat()


TASKS = [order_placed, send_receipt, payment_failed, send_apology, every_minute]
#: The triggers pynenc deferred at decoration (a runner of ``app`` registers them
#: when it starts); ``use`` hands them to the target app's runners.
_TRIGGERS = dict(app._deferred_trigger_tasks)


def use(target: Pynenc, *, cron: bool = True) -> None:
    """Moves every task of this module and its triggers to `target`, as
    ``runner_tasks.use`` (`target`'s runner registers the triggers when it starts);
    without `cron`, ``every_minute``'s trigger stays behind."""
    for task in TASKS:
        task.app = target
        task._conf = None
        target._tasks[task.task_id] = task
    for task_id, triggers in _TRIGGERS.items():
        if cron or task_id != every_minute.task_id:
            target._deferred_trigger_tasks[task_id] = triggers


def _die_before_report(tag: str) -> None:
    """Every trigger of this process SIGKILLs the process when it is asked to report
    the SUCCESS of the order tagged `tag` (see the module's docs)."""
    from pynenc_cpp.trigger import CppTrigger

    report = CppTrigger.report_tasks_status

    def dying(self: CppTrigger, invocation_ids: Any, status: Any = None) -> None:
        if status == InvocationStatus.SUCCESS:
            for iid in invocation_ids:
                kwargs = self.app.state_backend.get_invocation(iid).call.arguments.kwargs
                if kwargs.get("tag") == tag:
                    os.kill(os.getpid(), signal.SIGKILL)
        report(self, invocation_ids, status)

    CppTrigger.report_tasks_status = dying  # type: ignore[method-assign]


def _die_before_run_record(tag: str) -> None:
    """Every trigger of this process SIGKILLs the process when it is about to record
    the trigger run that the order tagged `tag` fired (its receipt started)."""
    from pynenc_cpp.trigger import CppTrigger

    store = CppTrigger.store_trigger_run

    def dying(self: CppTrigger, run: Any) -> None:
        for iid in run.source_invocation_ids or []:
            kwargs = self.app.state_backend.get_invocation(iid).call.arguments.kwargs
            if kwargs.get("tag") == tag:
                os.kill(os.getpid(), signal.SIGKILL)
        store(self, run)

    CppTrigger.store_trigger_run = dying  # type: ignore[method-assign]


if os.environ.get(DIE_BEFORE_REPORT_ENV):
    _die_before_report(os.environ[DIE_BEFORE_REPORT_ENV])
if os.environ.get(DIE_BEFORE_RUN_RECORD_ENV):
    _die_before_run_record(os.environ[DIE_BEFORE_RUN_RECORD_ENV])
