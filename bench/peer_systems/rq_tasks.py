"""The RQ peer of bench/peers.py: the task function workers import by name."""

from __future__ import annotations


def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i
