"""Trigger reports that outlive the process that owed them.

pynenc changes an invocation's status and then, in later steps, reports it to the
trigger (``report_tasks_status``, ``report_invocation_result`` or ``_failure``), which
records the valid conditions the trigger loop fires from. A process killed between
the change and the report leaves a final status that no trigger ever sees: the
triggered task never runs (the guarantees suite saw ``fired 0 times`` when a runner
was SIGKILLed mid-burst). Recovery does not help: it only looks at invocations left
RUNNING or PENDING.

So a change to a final status or to RETRY, of a task a trigger watches (a condition
is sourced from it), is noted in the trigger store before it is made
(``TriggerStore.note_pending_reports``), and the note is cleared once the reports are
made. A ``CppRunner``'s recovery sweep (``_recovery``) makes the reports of the notes
left behind: those of runners with no heartbeat (after ``_MIN_AGE_SEC``), and any
older than a dead-after time. It first checks that the change was made (the status
is, or was, the noted one); a change never made is only forgotten, once its runner
is dead.

Making a report twice is safe, as pynenc's ids make it: a status context's valid
condition id is its invocation's and status's, a trigger run's id is its trigger's
and valid condition's, and a recorded run is never claimed again
(``CppTrigger.claim_trigger_run``).

RUNNING and PENDING are not noted: a runner killed after them leaves the invocation to
recovery, which passes it through the same status again, and that report has the
same ids. Not covered (``docs/reliability.md``): the other statuses (REGISTERED by a
client, REROUTED, the recovery statuses), and a trigger registered by another
process in the last ``_WATCH_TTL_SEC`` for a task this one had found unwatched.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pynenc.invocation.status import InvocationStatus

if TYPE_CHECKING:
    from pynenc.invocation.dist_invocation import DistributedInvocation

    from pynenc_cpp.trigger import CppTrigger

F = TypeVar("F", bound=Callable[..., Any])

#: The statuses whose trigger reports are noted (see the module's docs).
NOTED: frozenset[InvocationStatus] = frozenset(
    {s for s in InvocationStatus if s.is_final()} | {InvocationStatus.RETRY}
)
#: How long a task's "watched by a trigger" answer is trusted in a process.
_WATCH_TTL_SEC = 10.0
#: A note of a runner with no heartbeat is replayed once it is this old (its
#: change may be under way in a process that has not heartbeated yet).
_MIN_AGE_SEC = 5.0


@dataclass(frozen=True)
class PendingReport:
    """One note: ``runner_id`` changes (or changed) ``invocation_id`` to ``status`` at
    ``noted_at`` (epoch seconds) and owes its trigger reports."""

    invocation_id: str
    status: InvocationStatus
    runner_id: str
    noted_at: float

    @property
    def note_id(self) -> str:
        return note_id(self.invocation_id, self.status)

    def to_json(self) -> str:
        return json.dumps(
            {
                "invocation_id": self.invocation_id,
                "status": self.status.value,
                "runner_id": self.runner_id,
                "noted_at": self.noted_at,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PendingReport:
        """Raises ``ValueError`` (or ``KeyError``/``TypeError``) for a malformed note."""
        raw = json.loads(text)
        return cls(
            invocation_id=str(raw["invocation_id"]),
            status=InvocationStatus(raw["status"]),
            runner_id=str(raw["runner_id"]),
            noted_at=float(raw["noted_at"]),
        )


def note_id(invocation_id: str, status: InvocationStatus) -> str:
    """The note's id: one per invocation and status."""
    return f"{invocation_id}:{InvocationStatus(status).value}"


class PendingReports:
    """The pending-report notes of one app's ``CppTrigger``. Thread-safe."""

    def __init__(self, trigger: CppTrigger) -> None:
        self._trigger = trigger
        self._engine = trigger._engine
        self._lock = threading.Lock()
        self._watched: dict[str, tuple[bool, float]] = {}  # task key -> (answer, until)
        self._active = threading.local()  # the note this thread's change is under

    # ---- whether a task is watched ----------------------------------------

    def watches(self, task_key: str) -> bool:
        """Whether a trigger condition is sourced from the task (its status, result or
        exception is watched); the answer is kept ``_WATCH_TTL_SEC``."""
        known = self._watched.get(task_key)  # one dict read: atomic under the GIL
        if known is not None and known[1] > time.monotonic():
            return known[0]
        rows = self._trigger._retried(
            lambda: self._engine.conditions_sourced_from_task(task_key, None),
            f"trigger conditions of task {task_key}",
        )
        self.saw(task_key, bool(rows))
        return bool(rows)

    def saw(self, task_key: str, watched: bool) -> None:
        """A lookup made anyway found the task watched (or, asked for every context
        type, not watched)."""
        with self._lock:
            self._watched[task_key] = (watched, time.monotonic() + _WATCH_TTL_SEC)

    def forget(self) -> None:
        """A condition was registered here: every answer is looked up again."""
        with self._lock:
            self._watched.clear()

    # ---- noting a change ----------------------------------------------------

    def active(self) -> str | None:
        """The note this thread's change is under (None: none)."""
        active: str | None = getattr(self._active, "note_id", None)
        return active

    @contextmanager
    def noted(
        self,
        invocation_id: str,
        status: InvocationStatus,
        runner_id: str | None,
        task_key: Callable[[], str | None],
    ) -> Iterator[None]:
        """The change to ``status`` made inside, with its reports, under a note: kept if
        the body raises (the sweep then checks whether the change was made), cleared
        once it returns. A change inside another one's note on this thread (pynenc's
        ``set_invocation_result`` calls ``set_invocation_status``) adds none."""
        nid = self.begin(invocation_id, status, runner_id, task_key)
        if nid is None:
            yield
            return
        try:
            yield
        except BaseException:
            self._active.note_id = None
            raise
        self.end(nid)

    def begin(
        self,
        invocation_id: str,
        status: InvocationStatus,
        runner_id: str | None,
        task_key: str | Callable[[], str | None],
        *,
        nests: bool = True,
    ) -> str | None:
        """Notes the change (see ``noted``) and returns the note's id for ``end``; None
        when nothing is noted. ``nests=False``: the note does not become this thread's
        active one (the change is made by the engine after this returns, and
        ``complete_finish`` ends it; a thread that never gets there is not left
        unable to note its next change)."""
        if status not in NOTED:
            return None
        key = task_key if isinstance(task_key, str) else task_key()
        if key is None or not self.watches(key) or self.active() is not None:
            return None
        note = PendingReport(
            str(invocation_id), InvocationStatus(status), runner_id or "", time.time()
        )
        self._trigger._retried(
            lambda: self._engine.note_pending_reports([(note.note_id, note.to_json())]),
            f"pending trigger report of invocation:{invocation_id}",
        )
        if nests:
            self._active.note_id = note.note_id
        return note.note_id

    def end(self, nid: str) -> None:
        """The reports of note ``nid`` are made: the note is cleared (if that fails the
        sweep makes them again, which is safe)."""
        if self.active() == nid:
            self._active.note_id = None
        try:
            self._engine.clear_pending_reports([nid])
        except Exception:
            self._trigger.app.logger.warning(
                f"could not clear the pending trigger report {nid}; a runner's recovery "
                "sweep will make its reports again (safe: they are idempotent)",
                exc_info=True,
            )

    # ---- the sweep ------------------------------------------------------------

    def replay(self, live_runners: Callable[[], set[str]], dead_after_sec: float) -> int:
        """Makes the reports of the notes whose runner died before making them (see the
        module's docs); returns how many were made. ``live_runners``: the ids of the
        runners with a recent heartbeat (asked only when there are notes)."""
        app = self._trigger.app
        notes = self._engine.pending_reports()
        if not notes:
            return 0
        live = live_runners()
        now = time.time()
        done: list[str] = []
        made = 0
        for nid, text in notes:
            try:
                note = PendingReport.from_json(text)
            except (ValueError, KeyError, TypeError):
                app.logger.warning(f"malformed pending trigger report {nid!r} dropped: {text!r}")
                done.append(nid)
                continue
            age = now - note.noted_at
            alive = note.runner_id in live
            if age < _MIN_AGE_SEC or (alive and age < dead_after_sec):
                continue  # its runner may be making them now
            applied = self._applied(note)
            if applied is None:  # the invocation is gone (purged)
                done.append(nid)
                continue
            if not applied:
                if not alive:
                    done.append(nid)  # never made, and its runner is gone
                continue
            self._report(note)
            made += 1
            done.append(nid)
        if done:
            self._engine.clear_pending_reports(done)
        return made

    def _applied(self, note: PendingReport) -> bool | None:
        """Whether the noted change was made (None: the invocation is not known)."""
        app = self._trigger.app
        try:
            record = app.orchestrator.get_invocation_status_record(note.invocation_id)
        except KeyError:
            return None
        if record.status == note.status:
            return True
        history = app.state_backend.get_history(note.invocation_id)
        return any(h.status_record.status == note.status for h in history)

    def _report(self, note: PendingReport) -> None:
        """The reports pynenc makes after the change (``set_invocation_status``, then
        ``set_invocation_result`` or ``_exception``'s)."""
        from pynenc.identifiers.invocation_id import InvocationId
        from pynenc.trigger.conditions import ExceptionContext, ResultContext

        trigger = self._trigger
        app = trigger.app
        invocation_id = InvocationId(note.invocation_id)
        trigger.report_tasks_status([invocation_id], note.status)
        if note.status not in (InvocationStatus.SUCCESS, InvocationStatus.FAILED):
            return
        invocation = app.state_backend.get_invocation(invocation_id)
        task_id = invocation.call.task.task_id
        if note.status == InvocationStatus.SUCCESS:
            if trigger.get_conditions_sourced_from_task(task_id, ResultContext):
                result: Any = app.state_backend.get_result(invocation_id)
                trigger.report_invocation_result(invocation, result)
        elif trigger.get_conditions_sourced_from_task(task_id, ExceptionContext):
            exception = app.state_backend.get_exception(invocation_id)
            trigger.report_invocation_failure(invocation, exception)


def notes_reports(kind: Literal["status", "result", "exception"]) -> Callable[[F], F]:
    """For an orchestrator's ``set_invocation_status`` (``kind="status"``),
    ``set_invocation_result`` or ``set_invocation_exception``: the change and its
    reports made under a note, when the app's trigger keeps them (``CppTrigger``)."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def noting(self: Any, first: Any, second: Any, runner_ctx: Any) -> Any:
            if kind == "status":
                if second not in NOTED:  # the hot path (RUNNING): one set lookup
                    return method(self, first, second, runner_ctx)
                status = InvocationStatus(second)
                invocation_id = first
                task_key: Callable[[], str | None] = functools.partial(
                    _task_key_of, self.app, invocation_id
                )
            else:
                status = InvocationStatus.SUCCESS if kind == "result" else InvocationStatus.FAILED
                invocation_id = first.invocation_id
                task_key = functools.partial(_task_key_from, first)
            notes = of_trigger(self.app.trigger)
            if notes is None:
                return method(self, first, second, runner_ctx)
            with notes.noted(invocation_id, status, runner_ctx.runner_id, task_key):
                return method(self, first, second, runner_ctx)

        return noting  # type: ignore[return-value]

    return wrap


def of_trigger(trigger: object) -> PendingReports | None:
    """The notes ``trigger`` keeps (None: it is not a ``CppTrigger``)."""
    notes = getattr(trigger, "pending_reports", None)
    return notes if isinstance(notes, PendingReports) else None


def _task_key_from(invocation: DistributedInvocation) -> str:
    key: str = invocation.task.task_id.key
    return key


def _task_key_of(app: Any, invocation_id: str) -> str | None:
    """The task of ``invocation_id``: from an invocation object this process holds,
    else read (None: not stored)."""
    from pynenc_cpp import _live

    for invocation in _live.held(app, invocation_id):
        return _task_key_from(invocation)
    try:
        return _task_key_from(app.state_backend.get_invocation(invocation_id))
    except KeyError:
        return None
