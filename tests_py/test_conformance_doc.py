"""Every conformance exclusion is documented in docs/conformance.md, and vice versa."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests_py.conformance.exclusions import EXCLUDED, TIMING_SENSITIVE

DOC = Path(__file__).resolve().parents[1] / "docs" / "conformance.md"


def documented(columns: int) -> set[str]:
    """Test names in the rows of the Exclusions section's tables with `columns` cells."""
    text = DOC.read_text()
    section = text.split("## Exclusions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {
        re.match(r"\| `([A-Za-z0-9_]+)`", row).group(1)  # type: ignore[union-attr]
        for row in rows
        if row.count(" | ") == columns - 1
    }


def test_exclusions_match_the_doc() -> None:
    assert documented(columns=3) == set(EXCLUDED)


def test_timing_sensitive_tests_match_the_doc() -> None:
    assert documented(columns=2) == set(TIMING_SENSITIVE)


def test_every_exclusion_has_a_reason() -> None:
    assert all(len(reason) > 20 for reason in EXCLUDED.values())


def test_an_excluded_test_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collection hook marks exactly the listed tests, whatever their parameters."""
    from tests_py.conformance import conftest

    class Item:
        def __init__(self, name: str) -> None:
            self.originalname, self.name, self.markers = name, f"{name}[cpp_mem]", []

        def add_marker(self, marker: pytest.MarkDecorator) -> None:
            self.markers.append(marker)

    reason = "an example reason long enough to be one"
    monkeypatch.setitem(conftest.EXCLUDED, "test_listed", reason)
    listed, other = Item("test_listed"), Item("test_other")
    conftest.pytest_collection_modifyitems(None, [listed, other])  # type: ignore[arg-type,list-item]
    assert [m.mark.name for m in listed.markers] == ["skip"]
    assert reason in listed.markers[0].mark.kwargs["reason"]
    assert other.markers == []
