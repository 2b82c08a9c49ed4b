"""Tasks used by the benchmarks; each benchmark rebinds ``noop.app`` to its app."""

from __future__ import annotations

from pynenc import PynencBuilder

app = PynencBuilder().app_id("bench-tasks").memory().logging_level("error").build()


@app.task
def noop(i: int) -> int:
    return i
