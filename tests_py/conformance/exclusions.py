"""pynenc conformance tests that pynenc-cpp does not run, each with its reason.

Keep in sync with docs/conformance.md (tests_py/test_conformance_doc.py checks it).
Keys are pynenc test function names (without parameter ids).
"""

from __future__ import annotations

EXCLUDED: dict[str, str] = {}
