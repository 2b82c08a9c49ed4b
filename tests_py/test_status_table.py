"""The engine's status machine must equal pynenc's own, read from Python."""

from __future__ import annotations

import itertools

import pytest
from pynenc.exceptions import InvocationStatusOwnershipError, InvocationStatusTransitionError
from pynenc.invocation import status as pynenc_status
from pynenc.invocation.status import InvocationStatus, InvocationStatusRecord

from pynenc_cpp import _core
from pynenc_cpp.errors import IllegalTransition, OwnershipViolation, pynenc_status_errors

FLAGS = (
    "is_final",
    "available_for_run",
    "requires_ownership",
    "acquires_ownership",
    "releases_ownership",
    "overrides_ownership",
)


def test_same_statuses() -> None:
    assert _core.status_names() == [s.value for s in InvocationStatus]


def test_same_table() -> None:
    ours = _core.status_table()
    theirs = pynenc_status._CONFIG.definitions
    assert set(ours) == {None if k is None else k.value for k in theirs}
    for key, definition in theirs.items():
        row = ours[None if key is None else key.value]
        assert set(row["allowed_transitions"]) == {s.value for s in definition.allowed_transitions}
        for flag in FLAGS:
            assert row[flag] == getattr(definition, flag), (key, flag)


OWNERS = [None, "r1"]
ACTORS = [None, "", "r1", "r2"]
FROMS = [None, *InvocationStatus]


@pytest.mark.parametrize("current", FROMS, ids=lambda s: str(s))
def test_every_transition_matches_pynenc(current: InvocationStatus | None) -> None:
    """Every (from, to, owner, actor) case: same outcome, same owner, same error type."""
    for to, owner, actor in itertools.product(InvocationStatus, OWNERS, ACTORS):
        record = None if current is None else InvocationStatusRecord(current, owner)
        try:
            expected = pynenc_status.status_record_transition(record, to, actor)
            expected_error = None
        except (InvocationStatusTransitionError, InvocationStatusOwnershipError) as exc:
            expected, expected_error = None, type(exc)
        try:
            with pynenc_status_errors():
                got = _core.apply_transition(current, owner if current else None, to, actor)
            got_error = None
        except (InvocationStatusTransitionError, InvocationStatusOwnershipError) as exc:
            got, got_error = None, type(exc)
        case = (current, to, owner, actor)
        assert got_error == expected_error, case
        if expected is not None:
            assert got == (expected.status.value, expected.runner_id), case


def test_transition_error_fields() -> None:
    with pytest.raises(IllegalTransition) as info:
        _core.apply_transition("success", None, "running", "r1")
    assert info.value.from_status == "success"
    assert info.value.to_status == "running"
    assert info.value.allowed == []
    with pytest.raises(InvocationStatusTransitionError) as translated:
        with pynenc_status_errors():
            _core.apply_transition("registered", None, "success", None)
    assert translated.value.from_status == InvocationStatus.REGISTERED
    assert translated.value.to_status == InvocationStatus.SUCCESS
    assert InvocationStatus.PENDING in translated.value.allowed_statuses


def test_ownership_error_fields() -> None:
    with pytest.raises(OwnershipViolation) as info:
        _core.apply_transition("running", "owner", "success", "intruder")
    assert info.value.current_owner == "owner"
    assert info.value.attempted_owner == "intruder"
    assert "owner" in str(info.value)
    with pytest.raises(InvocationStatusOwnershipError) as translated:
        with pynenc_status_errors():
            _core.apply_transition("running", "owner", "success", "intruder")
    assert translated.value.current_owner == "owner"


def test_unknown_status_name_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="unknown invocation status 'bogus'"):
        _core.apply_transition("registered", None, "bogus", None)
