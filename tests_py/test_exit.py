"""A process whose daemon threads are inside engine calls at exit exits cleanly.

CPython 3.12 ends a thread that takes the GIL back after finalization started
with pthread_exit. A Python daemon thread inside an engine call (the GIL
released, e.g. a broker retrieve or a result wait left running by a runner
thread) takes the GIL back when the call returns; with pybind11's
``gil_scoped_release`` that happened in a noexcept destructor, so the forced
unwinding called std::terminate and the process aborted after its work was done
("terminate called without an active exception"; CI's pytest process once did).
Every binding now releases the GIL through ``GilRelease``, whose destructor lets
that unwinding pass.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os
    import sys
    import threading
    import time

    from pynenc_cpp import _core

    broker = _core.Broker(sys.argv[1], "exit-test")
    started = threading.Event()

    def waiter():
        started.set()
        broker.retrieve("q", 0.3)  # returns while the interpreter finalizes

    class SlowAtTeardown:
        # Collected during finalization; its sleep releases the GIL, so the
        # waiter comes back from the engine while the interpreter finalizes.
        def __del__(self, _sleep=time.sleep, _write=os.write):
            _write(1, b"teardown\\n")
            _sleep(1.0)

    keep = SlowAtTeardown()
    keep.cycle = keep
    del keep
    import gc
    gc.disable()  # the cycle is left to the collection at finalization
    threading.Thread(target=waiter, daemon=True).start()
    started.wait()
    """
)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_exit_with_a_daemon_thread_inside_an_engine_call_is_clean(backend, tmp_path) -> None:
    uri = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'exit.db'}"
    for i in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT, uri], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, (
            f"run {i}: exit code {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
        assert "teardown" in proc.stdout  # the finalization window was really opened
        assert "terminate called" not in proc.stderr
