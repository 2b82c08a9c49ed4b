"""
Backend reports (pynenc-cpp doctor).
"""

from __future__ import annotations

__all__: list[str] = ["describe_backend"]

def describe_backend(uri: str, app_id: str = "pynenc") -> dict:
    """
    What the backend `uri` names says about itself: {'backend': 'memory' | 'sqlite' |
    'redis', 'facts': [(name, value), ...], 'errors': [...], 'warnings': [...]}: an
    error for each setting that loses acknowledged work on an ordinary event (a
    restart, an eviction), a warning for advice (a loss only if the machine crashes).
    Never creates an SQLite file; raises
    BadConfig for a bad URI or a missing file, BackendError when unreachable.
    """
