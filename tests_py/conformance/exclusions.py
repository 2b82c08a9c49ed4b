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


#: pynenc tests whose assertions compare wall-clock times of separate task runs
#: (e.g. "a task sleeping 0 s finishes before one sleeping 0.5 s", where each run
#: includes spawning a process). On a loaded 2-core machine the control itself can
#: fail; these are rerun up to RERUNS times. A failure on every run still fails.
TIMING_SENSITIVE: dict[str, str] = {
    "test_task_running_concurrency": (
        "its control compares the wall time of a 0 s and a 0.5 s task, each started "
        "through a ProcessRunner that spawns a process per invocation"
    ),
    "test_batch_parallelization_overhead": (
        "asserts that a batch of tasks with a 10 MB argument starts within 1.5x of the "
        "same batch without the client-data cache, comparing two wall-clock minimums of "
        "separate runs"
    ),
    "test_client_data_effect_on_task_start": (
        "compares the start latency of tasks with a 10 MB argument with and without the "
        "client-data cache, as wall-clock times of separate runs"
    ),
}
RERUNS = 2
