"""Wrong configuration gives a clear Python exception naming the problem."""

from __future__ import annotations

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc_cpp import BadConfig, _core


def test_unknown_scheme_names_the_uri() -> None:
    app = (
        PynencBuilder().app_id("bad-uri").cpp_mem().custom_config(cpp_backend_uri="ftp://x").build()
    )
    with pytest.raises(BadConfig, match="ftp://x"):
        _ = app.broker


def test_backend_not_built_in_is_reported() -> None:
    app = (
        PynencBuilder()
        .app_id("not-built")
        .cpp_mem()
        .custom_config(cpp_backend_uri="redis://127.0.0.1:1/0")
        .build()
    )
    with pytest.raises(BadConfig, match="redis:// is not built"):
        _ = app.client_data_store


def test_wrong_type_is_rejected_at_build() -> None:
    with pytest.raises(ValueError, match="cpp_backend_uri must be a str"):
        PynencBuilder().app_id("bad-type").cpp_mem().custom_config(cpp_backend_uri=42).build()


def test_bad_config_is_a_value_error() -> None:
    assert issubclass(BadConfig, ValueError)
    with pytest.raises(ValueError, match="no scheme"):
        _core.Broker("just-a-path")
    with pytest.raises(ValueError, match="app_id must not be empty"):
        _core.ClientDataStore("memory://", "")


def test_constructor_argument_types_are_checked() -> None:
    with pytest.raises(TypeError):
        _core.Broker(123)  # type: ignore[arg-type]


def test_app_builds_with_cpp_mem(cpp_mem_app: Pynenc) -> None:
    assert cpp_mem_app.conf.app_id.startswith("cpp-test-")
