"""Child processes of the test process that do not outlive it.

Runners, clients and redis-servers are started in sessions of their own (so a
test can signal a whole group), which also means nothing kills them when the
test process itself dies (a CI timeout, a SIGKILLed pytest). Each is started
with ``preexec_fn=orphan_guard()``: Linux sends it SIGKILL when the test
process's thread that started it exits. As the signal is tied to that thread,
only a child started on the main thread gets it: one started from a short-lived
thread (a ``threading.Timer`` restarting a server) would die with the thread.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
# Looked up here, in the parent: the child of a multithreaded process must not
# dlopen (another thread may have held the loader's lock at fork time).
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """A ``preexec_fn``: the child gets SIGKILL when its parent dies (Linux only;
    a no-op elsewhere)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def orphan_guard() -> Callable[[], None] | None:
    """The ``preexec_fn`` for a child of this thread: ``die_with_parent`` on the
    main thread, None elsewhere (see the module docstring)."""
    return die_with_parent if threading.current_thread() is threading.main_thread() else None
