"""pynenc conformance tests that pynenc-cpp does not run, each with its reason.

Keep in sync with docs/conformance.md (tests_py/test_conformance_doc.py checks it).
Keys are pynenc test function names (without parameter ids).
"""

from __future__ import annotations

EXCLUDED: dict[str, str] = {
    "test_status_transitions": (
        "builds its own module-level app on pynenc's own SQLite backend "
        "(PynencBuilder().sqlite(...)), so it tests pynenc, not the plugin; the same "
        "cross-process status integrity is covered by the combination suite on cpp_sqlite"
    ),
    "test_config_propagation_persistent_process": (
        "builds its own module-level app on pynenc's own SQLite backend and asserts "
        "pynenc's sqlite_db_path, so it tests pynenc, not the plugin; config propagation "
        "to child processes is covered by the combination suite on cpp_sqlite"
    ),
}
