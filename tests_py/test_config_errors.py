"""Wrong configuration gives a clear Python exception naming the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import BadConfig, _core


def sqlite_app(path: Path | str, **kwargs: object) -> Pynenc:
    return PynencBuilder().app_id("cfg-test").cpp_sqlite(path=path, **kwargs).build()


def test_sqlite_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BadConfig, match="is a directory"):
        _ = sqlite_app(tmp_path).broker


def test_sqlite_path_that_is_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite" * 200)
    with pytest.raises(BadConfig, match="not a valid SQLite database"):
        _ = sqlite_app(junk).broker
    assert junk.read_bytes() == b"definitely not sqlite" * 200  # nothing was overwritten


def test_sqlite_path_in_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(BadConfig, match="no-such-dir"):
        _ = sqlite_app(tmp_path / "no-such-dir" / "x.db").client_data_store


def test_sqlite_component_without_a_path() -> None:
    app = (
        PynencBuilder()
        .app_id("cfg-no-path")
        .memory()
        .custom_config(broker_cls="CppSqliteBroker")
        .build()
    )
    with pytest.raises(BadConfig, match="cpp_sqlite_path is not set"):
        _ = app.broker


def test_builder_arguments_are_checked() -> None:
    """A wrong Python type is a TypeError; a wrong value a BadConfig naming setting and argument."""
    with pytest.raises(
        BadConfig,
        match=r"cpp_sqlite_synchronous='sometimes' \(from cpp_sqlite\(synchronous=\.\.\.\)\): expected one of normal, full",
    ):
        PynencBuilder().cpp_sqlite(path="x.db", synchronous="sometimes")
    with pytest.raises(TypeError, match="busy_timeout_ms must be an int, got str"):
        PynencBuilder().cpp_sqlite(path="x.db", busy_timeout_ms="5")  # type: ignore[arg-type]
    with pytest.raises(BadConfig, match="cpp_sqlite_busy_timeout_ms=-1 .*from 0 to 3600000"):
        PynencBuilder().cpp_sqlite(path="x.db", busy_timeout_ms=-1)
    with pytest.raises(BadConfig, match=r"cpp_sqlite_path=42 \(from cpp_sqlite\(path=\.\.\.\)\)"):
        PynencBuilder().cpp_sqlite(path=42)  # type: ignore[arg-type]
    with pytest.raises(BadConfig, match=r"cpp_runner_workers=-1 \(from cpp_runner\(workers"):
        PynencBuilder().cpp_runner(workers=-1)
    with pytest.raises(TypeError, match="native must be a bool, got str"):
        PynencBuilder().cpp_redis(native="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="task_timeout_sec must be a number, got str"):
        PynencBuilder().cpp_runner(task_timeout_sec="1")  # type: ignore[arg-type]


def test_config_values_are_checked_at_build(tmp_path: Path) -> None:
    base = PynencBuilder().app_id("cfg").cpp_sqlite(path=tmp_path / "a.db")
    with pytest.raises(BadConfig, match="cpp_sqlite_synchronous='off'"):
        base.custom_config(cpp_sqlite_synchronous="off").build()
    with pytest.raises(BadConfig, match="cpp_sqlite_path=42 .*expected a file path"):
        PynencBuilder().app_id("cfg").cpp_sqlite(path="a.db").custom_config(
            cpp_sqlite_path=42
        ).build()


def test_engine_uri_errors_are_value_errors() -> None:
    assert issubclass(BadConfig, ValueError)
    with pytest.raises(ValueError, match="no scheme"):
        _core.Broker("just-a-path")
    with pytest.raises(ValueError, match="app_id must not be empty"):
        _core.ClientDataStore("memory://", "")
    with pytest.raises(BadConfig, match="redis URI port '99999'"):
        _core.Orchestrator("redis://127.0.0.1:99999/0", "a")
    with pytest.raises(BadConfig, match="unknown sqlite option 'colour'"):
        _core.Broker("sqlite:///tmp/x.db?colour=red", "a")


def test_constructor_argument_types_are_checked() -> None:
    with pytest.raises(TypeError):
        _core.Broker(123)  # type: ignore[arg-type]


def test_app_builds_with_cpp_mem(cpp_mem_app: Pynenc) -> None:
    assert cpp_mem_app.conf.app_id.startswith("cpp-test-")
    assert type(cpp_mem_app.broker).__name__ == "CppMemBroker"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("rediss://:s3cr3t@h:6379/0", "rediss://:***@h:6379/0"),
        ("redis://user:s3cr3t@h/1?password=s3cr3t", "redis://user:***@h/1?password=***"),
        ("redis://s3cr3t@h", "redis://***@h"),
        (
            "redis://h:6379/0?io_timeout_ms=5&password=s3cr3t",
            "redis://h:6379/0?io_timeout_ms=5&password=***",
        ),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("redis://:pa/s3cr3t@h:6379/0", "redis://:***@h:6379/0"),
        ("redis://:pa?s3cr3t@h", "redis://:***@h"),
        ("redis://h:1/0?password=a@s3cr3t", "redis://h:1/0?password=***"),
        ("sqlite:///tmp/a@b.db", "sqlite:///tmp/a@b.db"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    from pynenc_cpp._redact import redact_url

    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "rediss://:s3cr3t@h:6379/0",
        "redis://u:s3cr3t@h:x/0",
        "redis://:s3cr3t@/0",
        "redis://:pa/s3cr3t@h:6379/0",
        "redis://:pa?s3cr3t@h",
    ],
)
def test_errors_never_show_a_redis_password(url: str) -> None:
    with pytest.raises(ValueError) as exc:  # BadConfig is a ValueError too
        PynencBuilder().app_id("cfg-test").cpp_redis(url=url).build().orchestrator.purge()
    assert "s3cr3t" not in str(exc.value)


def test_wal_buffer_is_checked_and_reaches_the_engine_uri(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="wal_buffer must be a bool"):
        PynencBuilder().cpp_sqlite(path="x.db", wal_buffer="no")  # type: ignore[arg-type]
    with pytest.raises(BadConfig, match="cpp_sqlite_wal_buffer='sometimes'"):
        PynencBuilder().app_id("cfg").cpp_sqlite(path=tmp_path / "a.db").custom_config(
            cpp_sqlite_wal_buffer="sometimes"
        ).build()
    on = sqlite_app(tmp_path / "on.db")
    off = sqlite_app(tmp_path / "off.db", wal_buffer=False)
    assert "&wal_buffer" not in on.broker.engine_uri  # type: ignore[attr-defined]
    assert off.broker.engine_uri.endswith("&wal_buffer=off")  # type: ignore[attr-defined]
    for app in (on, off):  # both open the file and keep what they write
        app.client_data_store._engine.store("k", "v")  # type: ignore[attr-defined]
        assert app.client_data_store._engine.retrieve("k") == "v"  # type: ignore[attr-defined]
