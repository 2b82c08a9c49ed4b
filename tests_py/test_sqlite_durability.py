"""SQLite backends under real faults: a writer SIGKILLed mid-stream, several
processes writing one file, and a file reopened by a new process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pynenc_cpp import _core

WRITER = textwrap.dedent(
    """
    import sys
    from pynenc_cpp import _core
    uri, app = sys.argv[1], sys.argv[2]
    store = _core.ClientDataStore(uri, app)
    broker = _core.Broker(uri, app)
    i = 0
    while True:
        store.store(f"key-{i}", "value-" + str(i) * 50)
        broker.route([f"inv-{i}"], "q", float(i % 3))
        print(i, flush=True)  # reported only after both commits returned
        i += 1
    """
)


def test_sigkill_mid_stream_loses_no_reported_commit(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    uri = f"sqlite://{db}"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, uri, "crash-app"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    reported: list[int] = []
    deadline = time.monotonic() + 60
    while len(reported) < 300 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        reported.append(int(line))
    child.send_signal(signal.SIGKILL)
    # Read the rest through the same text stream: communicate(timeout=...) reads
    # the pipe's file descriptor directly and would drop the lines readline()
    # has already buffered (reports that then look like unreported commits).
    rest = child.stdout.read()
    child.wait(timeout=30)
    reported += [int(x) for x in rest.split()]
    assert child.returncode == -signal.SIGKILL
    assert len(reported) >= 300, "the writer did not get going"

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    store = _core.ClientDataStore(uri, "crash-app")
    broker = _core.Broker(uri, "crash-app")
    for i in reported:
        assert store.retrieve(f"key-{i}") == "value-" + str(i) * 50
    # Every reported route is queued; one unreported write may have committed too.
    assert broker.count(["q"]) in (len(reported), len(reported) + 1)


def test_processes_writing_one_file_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    uri = f"sqlite://{db}?busy_timeout_ms=10000"
    script = textwrap.dedent(
        """
        import sys
        from pynenc_cpp import _core
        broker = _core.Broker(sys.argv[1], "shared")
        for i in range(200):
            broker.route([f"{sys.argv[2]}-{i}"], "q", 0.0)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, uri, f"p{n}"]) for n in range(4)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    broker = _core.Broker(uri, "shared")
    assert broker.count(["q"]) == 800
    seen = set()
    while (inv := broker.retrieve("q")) is not None:
        seen.add(inv)
    assert len(seen) == 800


def test_data_written_by_one_process_is_read_by_the_next(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path / 'reopen.db'}"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pynenc_cpp import _core; "
            "_core.ClientDataStore(sys.argv[1], 'a').store('k', 'persisted')",
            uri,
        ],
        check=True,
        env={**os.environ},
    )
    assert _core.ClientDataStore(uri, "a").retrieve("k") == "persisted"
