"""Signals that end ``CppRunner.run``'s wait at once, so it need not wake to look.

``run`` blocks in ``RunnerEngine.wait`` with the GIL released; Python runs a signal
handler only when the main thread gets back to Python. Without help the wait must
come back every 100 ms to let it (ten wake-ups a second of an idle runner, each one
costing CPU time: 0.2-0.4 ms on a small VM). Here Python's C-level handler writes
to a wakeup fd (``signal.set_wakeup_fd``) and the engine watches that fd
(``RunnerEngine.watch_signals``): the wait ends as soon as a signal arrives, and
otherwise sleeps for its whole timeout.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any


def watch_signals(engine: Any) -> Callable[[], None] | None:
    """Makes a signal end ``engine.wait``'s slice at once; returns the function that
    undoes it, to call before ``run`` returns.

    None when this cannot be done, and ``engine.wait`` must keep short slices: off
    the main thread (Python runs no handler there anyway), when another wakeup fd is
    set already (asyncio's: it is left alone), or when the OS refuses a pipe or a
    thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    try:
        os.set_blocking(write_fd, False)  # set_wakeup_fd requires it
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (OSError, ValueError):
        os.close(read_fd)
        os.close(write_fd)
        return None
    if previous != -1:  # someone else's: theirs stays
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return None
    try:
        engine.watch_signals(read_fd)
    except Exception:
        signal.set_wakeup_fd(-1)
        os.close(read_fd)
        os.close(write_fd)
        return None

    def undo() -> None:
        signal.set_wakeup_fd(-1)  # no more writes to write_fd
        engine.unwatch_signals()  # before read_fd closes
        os.close(read_fd)
        os.close(write_fd)

    return undo
