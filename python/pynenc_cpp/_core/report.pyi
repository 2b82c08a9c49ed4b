"""
Backend reports (pynenc-cpp doctor).
"""

from __future__ import annotations

__all__: list[str] = ["describe_backend"]

def describe_backend(uri: str, app_id: str = "pynenc") -> dict:
    """
    What the backend `uri` names says about itself: {'backend': 'memory' | 'sqlite' |
    'redis', 'facts': [(name, value), ...], 'warnings': [...]} where each warning is a
    setting that can lose acknowledged work. Never creates an SQLite file; raises
    BadConfig for a bad URI or a missing file, BackendError when unreachable.
    """
