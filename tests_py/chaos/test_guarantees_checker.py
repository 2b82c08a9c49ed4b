"""The guarantees checker (``guarantees.py``) on ledgers and histories built to
violate each invariant, and on ones that keep it: each check must see the
violation, and only it."""

from __future__ import annotations

from pathlib import Path

from pynenc.invocation.status import InvocationStatus as S

from tests_py.chaos.guarantees import (
    MISSING,
    Change,
    Stamp,
    cron_violations,
    executions,
    invalid_paths,
    parse,
    registration_overlaps,
    retries_exceeded,
    running_overlaps,
    trigger_violations,
)

MS = 1_000_000


def body(tag: str, key: str, pgid: int, start_ms: int, end_ms: int | None) -> list[Stamp]:
    out = [Stamp("start", tag, key, pgid, start_ms * MS)]
    if end_ms is not None:
        out.append(Stamp("end", tag, key, pgid, end_ms * MS))
    return out


def test_the_ledger_is_parsed_and_bodies_paired(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.write_text("start a k 10 100\nstart a k 11 150\nend a k 10 200\n")
    stamps = parse(ledger)
    assert stamps[0] == Stamp("start", "a", "k", 10, 100)
    runs = executions(stamps)
    assert [(e.pgid, e.start_ns, e.end_ns) for e in runs] == [(10, 100, 200), (11, 150, None)]


def test_back_to_back_bodies_of_one_key_do_not_overlap() -> None:
    stamps = body("a", "k", 1, 0, 20) + body("b", "k", 2, 20, 40) + body("c", "j", 1, 5, 30)
    assert running_overlaps(stamps) == []


def test_two_bodies_of_one_key_that_overlap_are_found() -> None:
    stamps = body("a", "k", 1, 0, 20) + body("b", "k", 2, 19, 40) + body("c", "j", 1, 5, 30)
    found = running_overlaps(stamps)
    assert [(a.tag, b.tag) for a, b in found] == [("a", "b")]


def test_a_body_cut_by_a_kill_ends_at_the_kill_and_one_never_ended_runs_on() -> None:
    stamps = body("a", "k", 1, 0, None) + body("b", "k", 2, 50, 60)
    assert running_overlaps(stamps, killed_ns={1: 30 * MS}) == []
    assert running_overlaps(stamps, killed_ns={1: 55 * MS}) != []
    assert [(a.tag, b.tag) for a, b in running_overlaps(stamps)] == [("a", "b")]


def row(status: S, at: float, owner: str | None = None, actor: str = "r1") -> Change:
    return Change(status, owner, actor, at)


REG = row(S.REGISTERED, 0.0, None, "client")


def test_two_registered_at_once_on_one_key_are_found_and_a_handover_is_not() -> None:
    histories = {
        "i1": [REG, row(S.PENDING, 1.0, "r1")],
        "i2": [row(S.REGISTERED, 1.0, None, "client"), row(S.PENDING, 2.0, "r1")],
        "i3": [row(S.REGISTERED, 0.5, None, "client")],  # another key
    }
    keys = {"i1": "k", "i2": "k", "i3": "j"}
    assert registration_overlaps(histories, keys) == []
    histories["i2"] = [row(S.REGISTERED, 0.9, None, "client"), row(S.PENDING, 2.0, "r1")]
    assert registration_overlaps(histories, keys) == [("i1", "i2")]
    # Within the stamps' slack (Redis: stamped before the script runs): not counted.
    assert registration_overlaps(histories, keys, slack=0.2) == []
    assert registration_overlaps(histories, keys, slack=0.05) == [("i1", "i2")]


def test_a_valid_path_with_recovery_passes() -> None:
    history = [
        REG,
        row(S.PENDING, 1, "r1"),
        row(S.RUNNING, 2, "r1"),
        row(S.RUNNING_RECOVERY, 3, None, "r2"),  # overrides ownership
        row(S.REROUTED, 4, None, "r2"),
        row(S.PENDING, 5, "r2", "r2"),
        row(S.RUNNING, 6, "r2", "r2"),
        row(S.SUCCESS, 7, None, "r2"),
    ]
    assert invalid_paths({"i": history}) == []


def test_an_illegal_transition_is_found() -> None:
    history = [REG, row(S.RUNNING, 1, "r1")]  # REGISTERED -> RUNNING skips PENDING
    assert [(iid, i) for iid, i, _ in invalid_paths({"i": history})] == [("i", 1)]
    assert invalid_paths({"i": [row(S.PENDING, 0, "r1")]})  # must start REGISTERED


def test_a_change_by_another_runner_than_the_owner_is_found() -> None:
    history = [REG, row(S.PENDING, 1, "r1"), row(S.RUNNING, 2, "r1", actor="r2")]
    found = invalid_paths({"i": history})
    assert len(found) == 1 and "owned by r1" in found[0][2]


def test_retries_beyond_max_retries_are_found() -> None:
    ok = [REG, row(S.PENDING, 1, "r1"), row(S.RUNNING, 2, "r1"), row(S.RETRY, 3, None)]
    assert retries_exceeded({"i": ok}, {"i": 2}, max_retries=1) == []
    too_many = ok + [row(S.PENDING, 4, "r1"), row(S.RUNNING, 5, "r1"), row(S.RETRY, 6, None)]
    assert retries_exceeded({"i": too_many}, {"i": 3}, max_retries=1)
    # a body more than the attempts allow, unless a disrupted runner explains it
    assert retries_exceeded({"i": ok}, {"i": 3}, max_retries=1)
    assert retries_exceeded({"i": ok}, {"i": 3}, max_retries=1, explained={"i": 1}) == []


def test_a_gap_one_missing_row_explains_is_told_apart_from_an_illegal_change() -> None:
    # CONCURRENCY_CONTROLLED made without its row: REROUTED -> REROUTED in the history.
    history = [REG, row(S.CONCURRENCY_CONTROLLED, 1), row(S.REROUTED, 2), row(S.REROUTED, 3)]
    found = invalid_paths({"i": history})
    assert len(found) == 1 and found[0][2].startswith(MISSING), found
    # SUCCESS straight after REGISTERED: no single status fills that gap.
    found = invalid_paths({"i": [REG, row(S.SUCCESS, 1)]})
    assert len(found) == 1 and found[0][2].startswith("illegal transition"), found


def test_trigger_violations_sees_a_trigger_fired_twice_missed_late_or_for_nothing() -> None:
    events = {"a": 0, "b": 0, "c": 0, "d": 0}
    fired = {"a": 1, "b": 2, "d": 1, "x": 1}
    started = {"a": 50 * MS, "b": 60 * MS, "d": 12_000 * MS}
    assert trigger_violations(events, fired, started, bound_sec=10.0) == [
        ("b", "fired 2 times"),
        ("c", "fired 0 times"),
        ("d", "fired 12.000 s after its event"),
        ("x", "fired for no event"),
    ]
    # Without a bound, only the counts.
    assert trigger_violations({"a": 0, "d": 0}, {"a": 1, "d": 1}, {}, None) == []
    assert trigger_violations({"a": 0}, {"a": 1}, {}, 10.0) == [
        ("a", "its triggered task never started")
    ]


def test_cron_violations_sees_a_slot_run_twice_missed_or_late() -> None:
    minute = 1_796_547_840.0  # 2026-12-06T09:04:00Z
    slots = [minute, minute + 60, minute + 120, minute + 180]
    runs = [
        ("2026-12-06T09:04", minute + 0.01),
        ("2026-12-06T09:05", minute + 60.02),
        ("2026-12-06T09:05", minute + 61.0),
        ("2026-12-06T09:07", minute + 180 + 14.5),
    ]
    assert cron_violations(slots, runs, bound_sec=10.0) == [
        ("2026-12-06T09:05", "run 2 times"),
        ("2026-12-06T09:06", "run 0 times"),
        ("2026-12-06T09:07", "run 14.500 s after its slot"),
    ]
    assert cron_violations(slots[:1], runs[:1], bound_sec=10.0) == []
