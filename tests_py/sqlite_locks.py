"""Whether a process holds an SQLite file's write lock, seen from outside it."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def sqlite_write_locked(path: Path, wait_sec: float = 0.0) -> bool:
    """True if another connection holds the write lock of the SQLite file ``path``:
    a ``BEGIN IMMEDIATE`` that waits at most ``wait_sec`` (0: not at all) fails.
    The file must exist (connecting would create it)."""
    con = sqlite3.connect(path, timeout=wait_sec, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return True
    finally:
        con.close()
