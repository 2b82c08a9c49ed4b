"""Shared fixtures for pynenc-cpp's own Python tests."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder

from tests_py.redis_server import RedisServer


def pytest_configure(config: pytest.Config) -> None:
    # Cluster nodes started with no secret read the per-user secret file; the tests
    # (and every child process they start) share one in a private directory instead
    # of creating ~/.config/pynenc-cpp/cluster-secret on the machine.
    if not os.environ.get("PYNENC_CPP_CLUSTER_SECRET_FILE"):
        path = Path(tempfile.mkdtemp(prefix="pynenc-cpp-secret-")) / "cluster-secret"
        os.environ["PYNENC_CPP_CLUSTER_SECRET_FILE"] = str(path)


@pytest.fixture
def cpp_mem_app() -> Pynenc:
    """A fresh cpp_mem() app with a unique app id."""
    return PynencBuilder().app_id(f"cpp-test-{uuid.uuid4().hex[:8]}").cpp_mem().build()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server shared by the session; tests isolate by app id."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server.url
    server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server for one test (append-only file on), to stop and restart."""
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.stop()
