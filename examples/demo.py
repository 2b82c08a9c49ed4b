"""pynenc-cpp demo: a pynenc app whose tasks run through the C++ engine.

Run it with `make demo`. A ThreadRunner executes the tasks in this process; the
broker, orchestrator, state backend, trigger store and client-data store are all
pynenc-cpp's native SQLite components, in one file (printed below).
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_tasks import DEMO_DB, add, app, fibonacci, sum_of_squares, word_count  # noqa: E402


def main() -> int:
    # The runner runs in a secondary thread here, where pynenc cannot install its
    # signal handlers; it says so with a UserWarning that is expected in a demo.
    warnings.filterwarnings("ignore", message="Running in a secondary thread")
    print(
        f"components: {type(app.broker).__name__}, {type(app.orchestrator).__name__}, "
        f"{type(app.state_backend).__name__}, {type(app.trigger).__name__}, "
        f"{type(app.client_data_store).__name__}"
    )
    print(f"database: {DEMO_DB}")
    app.purge()  # start from an empty app (other apps in the file are untouched)
    runner = threading.Thread(target=app.runner.run, daemon=True)
    runner.start()
    try:
        started = time.perf_counter()
        checks = [
            ("add(2, 3)", add(2, 3), 5),
            ("fibonacci(30)", fibonacci(30), 832040),
            (
                "word_count('the cat and the hat')",
                word_count("the cat and the hat"),
                {"the": 2, "cat": 1, "and": 1, "hat": 1},
            ),
            ("sum_of_squares(10)", sum_of_squares(10), 385),
        ]
        ok = True
        for label, invocation, expected in checks:
            result = invocation.result
            status = app.orchestrator.get_invocation_status(invocation.invocation_id)
            mark = "ok" if result == expected else f"WRONG (expected {expected!r})"
            ok &= result == expected
            print(f"{label:<40} = {result!r:<40} [{status.value}] {mark}")
        print(f"done in {time.perf_counter() - started:.2f}s")
        return 0 if ok else 1
    finally:
        app.runner.stop_runner_loop()
        runner.join(timeout=5)


if __name__ == "__main__":
    sys.exit(main())
