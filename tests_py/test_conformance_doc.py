"""Every conformance exclusion is documented in docs/conformance.md, and vice versa."""

from __future__ import annotations

import re
from pathlib import Path

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
