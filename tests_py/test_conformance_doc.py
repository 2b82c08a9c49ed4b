"""Every conformance exclusion is documented in docs/conformance.md, and vice versa."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests_py.conformance.exclusions import EXCLUDED

DOC = Path(__file__).resolve().parents[1] / "docs" / "conformance.md"


def documented_exclusions() -> set[str]:
    text = DOC.read_text()
    section = text.split("## Exclusions", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Za-z0-9_]+)` \|", section, flags=re.M))


def test_exclusions_match_the_doc() -> None:
    assert documented_exclusions() == set(EXCLUDED)


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
