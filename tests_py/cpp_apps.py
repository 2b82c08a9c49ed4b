"""A pynenc-cpp app on one backend for a test: cpp_mem, cpp_sqlite (a file in the
test's temp dir) or cpp_redis (the session's private redis-server)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder

BACKENDS = ("mem", "sqlite", "redis")


def build_cpp_app(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    prefix: str,
    *,
    native: bool = True,
    then: Callable[[PynencBuilder], PynencBuilder] | None = None,
) -> Pynenc:
    """A new app (its own app id, starting with ``prefix``) on ``backend``, in
    native mode or (``native=False``) mixed mode; ``then`` adds to the builder
    (a runner, configuration) before it builds."""
    builder = PynencBuilder().app_id(f"{prefix}-{uuid.uuid4().hex[:8]}")
    if backend == "mem":
        builder = builder.cpp_mem(native=native)
    elif backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp_path / f"{prefix}.db", native=native)
    elif backend == "redis":
        builder = builder.cpp_redis(request.getfixturevalue("redis_url"), native=native)
    else:
        raise ValueError(f"backend {backend!r}: expected one of {BACKENDS}")
    return (then(builder) if then is not None else builder).build()
