"""Interrupting a CppRunner worker whose task timed out or was killed.

The worker thread gets an asynchronous ``WorkerInterrupted`` (CPython's
``PyThreadState_SetAsyncExc``), raised only while the thread runs task code:
never inside logging, threading, importlib, pynenc or pynenc-cpp, where it would
leave a lock held or a status change half done.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import sys
import threading
import time

import pynenc


class WorkerInterrupted(BaseException):
    """Raised asynchronously in a worker whose task timed out or was killed.

    A ``BaseException`` so that pynenc's ``except Exception`` handlers (and the
    task's own) do not overwrite the status already recorded for it.
    """


def _package_dir(module: object) -> str:
    """The directory of ``module`` + ``os.sep``; for a module with no file, a prefix
    no path has (never "/", which every frame would match)."""
    file = getattr(module, "__file__", None)
    return os.path.dirname(file) + os.sep if isinstance(file, str) else "\0no file"


# Code an asynchronous exception must never land in: it would leave a lock held
# (logging's handler lock, threading's) or a pynenc status change half done.
_UNSAFE_ANYWHERE = (
    _package_dir(logging),
    str(threading.__file__),
    str(queue.__file__),
    "<frozen importlib",
)
_UNSAFE_INNERMOST = tuple(_package_dir(m) for m in (pynenc, sys.modules["pynenc_cpp"]))


def safe_to_interrupt(thread_ident: int) -> bool | None:
    """Whether the thread is in task code now (None: the thread is gone).

    REQUIRES: the GIL (the answer holds until the caller releases it).
    """
    frame = sys._current_frames().get(thread_ident)
    if frame is None:
        return None
    if frame.f_code.co_filename.startswith(_UNSAFE_INNERMOST):
        return False
    while frame is not None:
        if frame.f_code.co_filename.startswith(_UNSAFE_ANYWHERE):
            return False
        frame = frame.f_back
    return True


def interrupt_thread(thread_ident: int, within_sec: float = 2.0) -> bool:
    """Raise ``WorkerInterrupted`` in the thread ``thread_ident`` as soon as it is in
    task code (never inside logging, threading or pynenc itself); gives up after
    ``within_sec`` (the thread then finishes its task on its own). Returns whether
    the exception was set."""
    if not thread_ident:
        return False
    deadline = time.monotonic() + within_sec
    while True:
        safe = safe_to_interrupt(thread_ident)
        if safe is None:
            return False
        if safe:
            done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread_ident), ctypes.py_object(WorkerInterrupted)
            )
            return bool(done)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)  # lets the thread move on
