"""A SQLite file written by an older pynenc-cpp, opened through pynenc's API."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp import BadConfig


def _app(path: Path) -> Pynenc:
    return PynencBuilder().app_id("schema-test").cpp_sqlite(path=path).build()


_DIR = Path(tempfile.mkdtemp(prefix="pynenc-cpp-schema-"))
app = _app(_DIR / "old.db")  # pynenc resolves a task by its module-level name


@app.task
def add(x: int, y: int) -> int:
    return x + y


@pytest.fixture(scope="module", autouse=True)
def _remove_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_DIR, ignore_errors=True)


def _state_version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT version FROM pynenc_cpp_schema WHERE component = 'state_backend'"
        ).fetchone()
    return int(row[0])


def _as_version_one(path: Path) -> None:
    """The state backend's tables as schema version 1 left them."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE INDEX state_history_by_invocation ON state_history "
            "(app_id, invocation_id, timestamp_us)"
        )
        db.execute("UPDATE pynenc_cpp_schema SET version = 1 WHERE component = 'state_backend'")


def test_a_version_one_file_is_migrated_and_its_invocations_read_back() -> None:
    path = _DIR / "old.db"
    invocation = add(2, 3)
    app.orchestrator.set_invocation_status(
        invocation.invocation_id, InvocationStatus.PENDING, app.runner.runner_context
    )
    inv_id = invocation.invocation_id
    assert _state_version(path) == 2
    _as_version_one(path)

    reopened = _app(path)
    stored = reopened.state_backend.get_invocation(inv_id)
    assert stored.arguments.kwargs == {"x": 2, "y": 3}
    statuses = [h.status_record.status for h in reopened.state_backend.get_history(inv_id)]
    assert statuses == [InvocationStatus.REGISTERED, InvocationStatus.PENDING]
    assert _state_version(path) == 2
    with sqlite3.connect(path) as db:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "state_history_by_invocation" not in names


def test_a_file_from_a_newer_pynenc_cpp_is_refused_with_its_versions(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    assert _app(path).state_backend is not None  # its engine creates the schema
    with sqlite3.connect(path) as db:
        db.execute("UPDATE pynenc_cpp_schema SET version = 7 WHERE component = 'state_backend'")
    with pytest.raises(BadConfig, match=r"version 7 .*knows version 2 .*newer pynenc-cpp"):
        _ = _app(path).state_backend
