"""The activation-log analysis the fault tests rely on detects what it must."""

from __future__ import annotations

from tests_py.cluster.harness import held_intervals, overlaps, work_intervals


def lease(t: float, until: float) -> dict:
    return {"event": "lease", "mono_ms": t, "lease_until_mono_ms": until}


def ev(kind: str, t: float) -> dict:
    return {"event": kind, "mono_ms": t, "lease_until_mono_ms": 0}


def test_disjoint_leases_pass_and_overlapping_ones_are_reported() -> None:
    a = [lease(0, 300), lease(100, 400)]
    b_ok = [lease(400, 700)]
    b_bad = [lease(350, 650)]
    assert overlaps({"a": held_intervals(a), "b": held_intervals(b_ok)}) == []
    found = overlaps({"a": held_intervals(a), "b": held_intervals(b_bad)})
    assert len(found) == 1 and "a [100.0, 400.0] overlaps b [350.0, 650.0]" in found[0]


def test_work_right_ends_at_the_earlier_of_stop_and_lease_end() -> None:
    # Stopped (SIGSTOP) while master: the stop record comes late, the right ended with the lease.
    recs = [
        lease(0, 300),
        ev("start", 200),
        lease(250, 550),
        ev("lease_expired", 5000),
        ev("stop", 5001),
    ]
    assert work_intervals(recs) == [(200.0, 550.0)]
    # A normal stop before the lease end.
    assert work_intervals([lease(0, 300), ev("start", 10), ev("stop", 100)]) == [(10.0, 100.0)]
    # SIGKILLed master: no stop record, the right lasts until its last lease end.
    assert work_intervals([lease(0, 300), ev("start", 10), lease(100, 400)]) == [(10.0, 400.0)]


def test_a_start_inside_another_nodes_right_is_an_overlap() -> None:
    old = [lease(0, 300), ev("start", 10), lease(100, 400)]
    early = [lease(350, 650), ev("start", 360)]
    assert overlaps({"old": work_intervals(old), "new": work_intervals(early)}) != []
    late = [lease(400, 700), ev("start", 410)]
    assert overlaps({"old": work_intervals(old), "new": work_intervals(late)}) == []


def test_a_release_ends_the_lease_early() -> None:
    a = [lease(0, 300), ev("start", 10), ev("stop", 50), ev("release", 51)]
    assert held_intervals(a) == [(0.0, 51.0)]
    b = [lease(60, 360), ev("start", 60)]
    assert overlaps({"a": held_intervals(a), "b": held_intervals(b)}) == []
    b_early = [lease(40, 340)]
    assert overlaps({"a": held_intervals(a), "b": held_intervals(b_early)}) != []
