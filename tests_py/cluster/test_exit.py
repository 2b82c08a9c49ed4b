"""A process that exits with cluster nodes still running exits cleanly.

At interpreter exit CPython 3.12 ends a thread that takes the GIL with
pthread_exit, and libcrypto frees its tables in exit(): a node left running
(never stopped, its Python object alive until finalization) used to crash the
process at exit in about one run out of four (SIGSEGV in SHA256 on the loop
thread, or ``terminate called without an active exception`` from a callback
thread). The module's exit hook now stops every node still running and then
closes the gate through which native threads enter Python.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import hashlib  # as pynenc does: libcrypto is initialised before the engine
    import time
    from pynenc_cpp import _core

    o = _core.ClusterOptions()
    o.cluster_name = "exit-test"
    o.host = "127.0.0.1"
    o.port = 0
    o.seeds = ["127.0.0.1:1"]  # unreachable: the node keeps probing and logging
    o.secret = "s" * 32
    o.heartbeat_ms = 5
    o.quorum = 1
    calls = []

    def on_log(level, line):
        calls.append(level)
        time.sleep(0.0005)  # releases the GIL inside the callback

    def on_event(event):
        time.sleep(0.0005)

    NODE = _core.ClusterNode.start(o, lambda a: None, lambda a, r: None, on_event, on_log)

    class SlowDel:
        # The main thread releases the GIL during finalization, as real
        # finalizers (file flushes, socket closes) do.
        def __del__(self):
            for _ in range(20):
                time.sleep(0.002)

    KEEP = [SlowDel() for _ in range(5)]
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    print("callbacks", len(calls) > 0, flush=True)
    """
)


def test_exit_with_a_running_node_is_clean() -> None:
    runs = 12
    for i in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, (
            f"run {i}: exit code {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
        assert "callbacks True" in proc.stdout
        assert "terminate called" not in proc.stderr
