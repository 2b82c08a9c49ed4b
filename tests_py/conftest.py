"""Shared fixtures for pynenc-cpp's own Python tests."""

from __future__ import annotations

import uuid

import pytest
from pynenc import Pynenc, PynencBuilder


@pytest.fixture
def cpp_mem_app() -> Pynenc:
    """A fresh cpp_mem() app with a unique app id."""
    return PynencBuilder().app_id(f"cpp-test-{uuid.uuid4().hex[:8]}").cpp_mem().build()
