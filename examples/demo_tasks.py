"""Tasks of the demo app. The app runs every component through pynenc-cpp, on
its embedded default backend: one SQLite file."""

from __future__ import annotations

import os
import tempfile

from pynenc import PynencBuilder

#: The demo's database; override with PYNENC_CPP_DEMO_DB.
DEMO_DB = os.environ.get(
    "PYNENC_CPP_DEMO_DB", os.path.join(tempfile.gettempdir(), "pynenc_cpp_demo.db")
)

app = (
    PynencBuilder()
    .app_id("pynenc_cpp_demo")
    .cpp_sqlite(path=DEMO_DB)
    .thread_runner()
    .logging_level("error")
    .build()
)


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def word_count(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts


@app.task
def fibonacci(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@app.task
def sum_of_squares(n: int) -> int:
    """Fans out one `square` sub-task per number and waits for their results."""
    return sum(square.parallelize([(i,) for i in range(1, n + 1)]).results)


@app.task
def square(x: int) -> int:
    return x * x
