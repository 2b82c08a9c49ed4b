"""The guarantees suite's checker: pynenc's promises read off what a run left behind.

Every task body of the suite (``tests_py/runner_tasks.py``: ``keyed_order``,
``restock``, ``flaky``) appends ``<start|end> <tag> <key> <pgid> <monotonic ns>``
to an ``O_APPEND`` ledger, so what ran, where and when is known outside the engine.
The functions here take those lines and the store's status histories and return
every violation they find (an empty list: none). Each is tested on a ledger or
history built to violate it (``test_guarantees_checker.py``).

* ``running_overlaps``: two bodies of one controlled key that overlap in time;
* ``registration_overlaps``: two invocations of one registration-controlled key
  REGISTERED at the same instant;
* ``invalid_paths``: a status history that is not a path of pynenc's state
  machine, or a change of a status that requires ownership made by another owner;
* ``retries_exceeded``: more RETRY changes than ``max_retries``, or more bodies
  than one plus them that no disruption explains;
* ``trigger_violations``: an event that fired its trigger other than once, or later
  than a bound (the status trigger of ``tests_py/trigger_tasks.py``);
* ``cron_violations``: a cron slot run other than once, or later than a bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pynenc.exceptions import InvocationStatusError
from pynenc.invocation.status import (
    InvocationStatus,
    InvocationStatusRecord,
    get_status_definition,
    validate_transition,
)


@dataclass(frozen=True)
class Stamp:
    """One ledger line."""

    kind: str  # "start" or "end"
    tag: str
    key: str
    pgid: int
    ns: int  # CLOCK_MONOTONIC, nanoseconds


@dataclass(frozen=True)
class Execution:
    """One body: its start line and the end line its process wrote (None: it never
    ended, its process was killed or is still running)."""

    tag: str
    key: str
    pgid: int
    start_ns: int
    end_ns: int | None


@dataclass(frozen=True)
class Change:
    """One row of a status history: the status, its owner, who made it (runner
    context id) and when (the status record's time, in seconds)."""

    status: InvocationStatus
    owner: str | None
    actor: str
    at: float


def parse(path: Path) -> list[Stamp]:
    """The ledger's complete lines, in file order."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        kind, tag, key, pgid, ns = line.split()
        out.append(Stamp(kind, tag, key, int(pgid), int(ns)))
    return out


def executions(stamps: Iterable[Stamp]) -> list[Execution]:
    """Each start paired with the next end of the same tag in the same process group."""
    open_: dict[tuple[str, int], list[Stamp]] = defaultdict(list)
    done: list[Execution] = []
    for s in stamps:
        if s.kind == "start":
            open_[(s.tag, s.pgid)].append(s)
        elif open_[(s.tag, s.pgid)]:
            first = open_[(s.tag, s.pgid)].pop(0)
            done.append(Execution(s.tag, s.key, s.pgid, first.ns, s.ns))
    for starts in open_.values():
        done += [Execution(s.tag, s.key, s.pgid, s.ns, None) for s in starts]
    return sorted(done, key=lambda e: e.start_ns)


def running_overlaps(
    stamps: Iterable[Stamp], killed_ns: Mapping[int, int] | None = None
) -> list[tuple[Execution, Execution]]:
    """Pairs of executions of one key whose bodies overlap in time.

    A body with no end line ended when its process group was SIGKILLed
    (``killed_ns``: pgid -> monotonic ns of the kill); with no kill it is taken as
    still running, so it overlaps every later start of its key."""
    killed_ns = killed_ns or {}
    by_key: dict[str, list[tuple[int, int, Execution]]] = defaultdict(list)
    for e in executions(stamps):
        end = e.end_ns if e.end_ns is not None else killed_ns.get(e.pgid, 2**63)
        by_key[e.key].append((e.start_ns, end, e))
    found = []
    for spans in by_key.values():
        spans.sort(key=lambda s: s[0])
        for i, (_start, end, e) in enumerate(spans):
            for start2, _end2, e2 in spans[i + 1 :]:
                if start2 >= end:
                    break
                found.append((e, e2))
    return found


def registered_spans(
    history: Sequence[Change],
) -> list[tuple[float, float]]:
    """The times an invocation was REGISTERED: from each REGISTERED row to the next
    row (the last one open: +inf)."""
    spans = []
    for i, row in enumerate(history):
        if row.status == InvocationStatus.REGISTERED:
            until = history[i + 1].at if i + 1 < len(history) else float("inf")
            spans.append((row.at, until))
    return spans


def registration_overlaps(
    histories: Mapping[str, Sequence[Change]], key_of: Mapping[str, str], slack: float = 0.0
) -> list[tuple[str, str]]:
    """Pairs of invocations of one key (``key_of``: invocation id -> controlled key)
    that were REGISTERED at the same instant (pynenc's registration concurrency:
    a call made while one is REGISTERED reuses it), by more than ``slack`` seconds.

    The times are the status records'. On SQLite a record is stamped inside the
    write lock, so the stamps follow the order the changes were made (slack 0); on
    Redis it is stamped by the client before its script runs, so two changes made
    one after the other may carry stamps in the other order, by as long as a script
    waits in the server's queue."""
    by_key: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for iid, history in histories.items():
        if iid in key_of:
            by_key[key_of[iid]] += [(a, b, iid) for a, b in registered_spans(history)]
    found = []
    for spans in by_key.values():
        spans.sort()
        for i, (_start, end, iid) in enumerate(spans):
            for start2, _end2, iid2 in spans[i + 1 :]:
                if start2 >= end - slack:
                    break
                if iid2 != iid:
                    found.append((iid, iid2))
    return found


#: How ``invalid_paths`` names a gap that one missing row explains: a change made
#: without its history row (pynenc's own order writes the row in a second call, so
#: a process killed between the two leaves one), told apart from an illegal change.
MISSING = "missing row"


def _one_step_between(
    before: InvocationStatus | None, after: InvocationStatus
) -> InvocationStatus | None:
    """A status ``s`` with ``before -> s -> after`` legal, if any."""
    for s in InvocationStatus:
        try:
            validate_transition(before, s)
            validate_transition(s, after)
        except InvocationStatusError:
            continue
        return s
    return None


def invalid_paths(histories: Mapping[str, Sequence[Change]]) -> list[tuple[str, int, str]]:
    """(invocation id, row index, why) for each row that pynenc's state machine does
    not allow after the one before it (the first row must be REGISTERED), and for each
    change of a status that requires ownership (PENDING, RUNNING, PAUSED) made by
    another runner than its owner, unless the new status overrides ownership
    (the recovery statuses). A gap one status would fill is reported as a
    ``MISSING`` row, not as an illegal change."""
    found = []
    for iid, history in histories.items():
        previous: Change | None = None
        for i, row in enumerate(history):
            before = previous.status if previous else None
            try:
                validate_transition(before, row.status)
            except InvocationStatusError as exc:
                between = _one_step_between(before, row.status)
                if between is not None:
                    found.append(
                        (iid, i, f"{MISSING} ({between.value}) between {before} and {row.status}")
                    )
                else:
                    found.append((iid, i, f"illegal transition: {exc}"))
            if previous is not None:
                required = get_status_definition(previous.status).requires_ownership
                overrides = get_status_definition(row.status).overrides_ownership
                if required and not overrides and row.actor != previous.owner:
                    found.append(
                        (
                            iid,
                            i,
                            f"{previous.status.value} owned by {previous.owner} changed to "
                            f"{row.status.value} by {row.actor}",
                        )
                    )
            previous = row
    return found


def retries_exceeded(
    histories: Mapping[str, Sequence[Change]],
    bodies: Mapping[str, int],
    max_retries: int,
    explained: Mapping[str, int] | None = None,
) -> list[tuple[str, str]]:
    """(invocation id, why) for each invocation retried more than ``max_retries``
    times (RETRY rows), or whose body ran (``bodies``: invocation id -> starts) more
    than once per allowed attempt, beyond the re-runs ``explained`` (invocation id ->
    executions a disrupted runner held)."""
    explained = explained or {}
    found = []
    for iid, history in histories.items():
        retries = sum(1 for row in history if row.status == InvocationStatus.RETRY)
        if retries > max_retries:
            found.append((iid, f"{retries} retries > max_retries {max_retries}"))
        runs = bodies.get(iid, 0)
        if runs > 1 + retries + explained.get(iid, 0):
            found.append((iid, f"{runs} bodies for {retries} retries"))
    return found


def changes(rows: Iterable[object]) -> list[Change]:
    """A store's history rows (pynenc's ``InvocationHistory``) as ``Change`` rows, in
    the order of their status records' times."""
    out = []
    for row in rows:
        record: InvocationStatusRecord = row.status_record  # type: ignore[attr-defined]
        out.append(
            Change(
                record.status,
                record.runner_id,
                row.runner_context_id,  # type: ignore[attr-defined]
                record.timestamp.timestamp(),
            )
        )
    out.sort(key=lambda c: c.at)
    return out


def trigger_violations(
    events: Mapping[str, int],
    fired: Mapping[str, int],
    fired_ns: Mapping[str, int],
    bound_sec: float | None,
) -> list[tuple[str, str]]:
    """(event tag, what is wrong) for each event (tag -> when it happened, ns) whose
    trigger did not fire exactly once (``fired``: tag -> how many triggered
    invocations name it) or fired more than ``bound_sec`` after it (``fired_ns``: tag
    -> when the triggered task's body started; None: no bound), and for each
    triggered invocation that names no event."""
    out: list[tuple[str, str]] = []
    for tag, at_ns in sorted(events.items()):
        n = fired.get(tag, 0)
        if n != 1:
            out.append((tag, f"fired {n} times"))
        elif bound_sec is not None and tag in fired_ns:
            late = (fired_ns[tag] - at_ns) / 1e9
            if late > bound_sec:
                out.append((tag, f"fired {late:.3f} s after its event"))
        elif bound_sec is not None:
            out.append((tag, "its triggered task never started"))
    out.extend((tag, "fired for no event") for tag in sorted(set(fired) - set(events)))
    return out


def cron_violations(
    slots: Sequence[float], runs: Sequence[tuple[str, float]], bound_sec: float
) -> list[tuple[str, str]]:
    """(slot, what is wrong) for each watched cron slot (its start, epoch seconds) that
    was not run exactly once or whose run began more than ``bound_sec`` after it.
    ``runs``: (the slot a run names, ``YYYY-mm-ddTHH:MM`` UTC; its wall-clock start)."""
    from datetime import UTC, datetime

    out: list[tuple[str, str]] = []
    for slot in slots:
        name = datetime.fromtimestamp(slot, UTC).strftime("%Y-%m-%dT%H:%M")
        starts = [at for named, at in runs if named == name]
        if len(starts) != 1:
            out.append((name, f"run {len(starts)} times"))
        elif starts[0] - slot > bound_sec:
            out.append((name, f"run {starts[0] - slot:.3f} s after its slot"))
    return out
