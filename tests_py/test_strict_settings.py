"""Every ``cpp_*`` setting is checked whatever its source (``PynencBuilder``,
``[tool.pynenc]`` in pyproject.toml, a YAML file named by ``PYNENC__FILEPATH``, a
``PYNENC__CPP_*`` variable): a wrong value is a ``BadConfig`` naming the setting, its
source and what is accepted; an unknown ``cpp_*`` key is refused with the nearest
known name; a relative ``cpp_sqlite_path`` is made absolute where the app is
configured. In-process (cistell reads pyproject.toml from the working directory, so
each test works in its own ``tmp_path``); test_config_files.py runs processes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cistell import ConfigField
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import BadConfig, ConfigCppRunner
from pynenc_cpp._settings import RULES, known_settings
from pynenc_cpp.config import ConfigCpp

SQLITE_CLASSES = {
    "orchestrator_cls": "CppSqliteNativeOrchestrator",
    "broker_cls": "CppSqliteBroker",
    "state_backend_cls": "CppSqliteStateBackend",
    "trigger_cls": "CppSqliteTrigger",
    "client_data_store_cls": "CppSqliteClientDataStore",
    "runner_cls": "CppRunner",
}

#: (setting, a value it refuses, what the message says is accepted). Each is refused
#: from every source that can hold it (an environment variable holds only text).
BAD: list[tuple[str, object, str]] = [
    ("cpp_sqlite_path", 42, "expected a file path (a string)"),
    ("cpp_sqlite_synchronous", "sometimes", "expected one of normal, full"),
    ("cpp_sqlite_busy_timeout_ms", "soon", "expected a whole number from 0 to 3600000"),
    ("cpp_sqlite_busy_timeout_ms", -5, "expected a whole number from 0 to 3600000"),
    ("cpp_sqlite_wal_buffer", "sometimes", "expected true or false"),
    ("cpp_redis_url", "http://h:1/0", "expected redis://"),
    ("cpp_redis_url", "redis://h:1/0?connect_timeout_ms=abc", "expected milliseconds between 1"),
    ("cpp_redis_url", "redis://h:1/0?timeout=5", "unknown option 'timeout'; known: db"),
    ("cpp_native", "maybe", "expected true or false (also yes/no, on/off, 1/0)"),
    ("cpp_native", "", "expected true or false"),
    ("cpp_outage_budget_sec", "a minute", "expected seconds from 0 to 86400"),
    ("cpp_outage_budget_sec", -1, "expected seconds from 0 to 86400"),
    ("cpp_spin_wait_us", 20000, "expected whole microseconds from 0 to 10000"),
    ("cpp_shortcuts", "-nosuch", "'-nosuch' is not -name; expected"),
    ("cpp_runner_workers", "four", "expected a whole number >= 0"),
    ("cpp_runner_workers", -2, "expected a whole number >= 0"),
    ("cpp_runner_workers", 2.5, "expected a whole number >= 0"),
    # Digits str.isdigit() accepts and int() does not: refused, never a bare ValueError.
    ("cpp_runner_workers", "+-4", "expected a whole number >= 0"),
    ("cpp_sqlite_busy_timeout_ms", "\u00b2", "expected a whole number from 0 to 3600000"),
    ("cpp_runner_task_timeout_sec", "long", "expected seconds from 0 to 1e+09"),
    ("cpp_runner_heartbeat_interval_sec", -5, "expected seconds from 0 to 86400"),
    ("cpp_runner_retrieve_wait_sec", "soon", "expected seconds from 0 to 3600"),
    ("cpp_runner_stop_grace_sec", "forever", "expected seconds (< 0: as long as it takes)"),
    ("cpp_runner_metrics_port", 70000, "expected a whole number from 0 to 65535"),
    ("cpp_runner_metrics_addr", "", "expected an address"),
    ("cpp_runner_take_ahead", "maybe", "expected true or false"),
    ("cpp_runner_prefetch", 0, "expected a whole number from 1 to 1000"),
    ("cpp_redis_min_replicas", -1, "expected a whole number from 0 to 1000"),
    ("cpp_redis_min_replicas", "two", "expected a whole number from 0 to 1000"),
    ("cpp_runner_trigger_wake", "sometimes", "expected true or false"),
]
SOURCES = ["builder", "pyproject", "yaml", "env"]


def as_toml(values: dict[str, object]) -> str:
    return "[tool.pynenc]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def as_yaml(values: dict[str, object]) -> str:
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items())  # JSON is YAML


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No PYNENC__ setting from outside; the working directory is the test's own."""
    for key in list(os.environ):
        if key.startswith("PYNENC__"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    yield


def configure(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: dict[str, object]
) -> tuple[Callable[[], Any], str]:
    """(what makes the app check its settings, the source named in messages) for an
    SQLite app whose ``values`` come from ``source``."""
    base: dict[str, object] = {"app_id": "strict", **SQLITE_CLASSES}
    if "cpp_sqlite_path" not in values:
        base["cpp_sqlite_path"] = str(tmp_path / "app.db")
    if source == "builder":
        builder = PynencBuilder().app_id("strict").cpp_sqlite(path=tmp_path / "app.db")
        return builder.custom_config(**values).build, "from PynencBuilder / config_values"
    if source == "pyproject":
        (tmp_path / "pyproject.toml").write_text(as_toml({**base, **values}))
        return lambda: Pynenc().orchestrator, f"from [tool.pynenc] in {tmp_path / 'pyproject.toml'}"
    if source == "yaml":
        (tmp_path / "conf").mkdir(exist_ok=True)
        path = tmp_path / "conf" / "pynenc.yaml"
        path.write_text(as_yaml({**base, **values}))
        monkeypatch.setenv("PYNENC__FILEPATH", str(path))
        return lambda: Pynenc().orchestrator, f"from {path} (PYNENC__FILEPATH)"
    assert source == "env"
    for key, value in {**base, **values}.items():
        monkeypatch.setenv(f"PYNENC__{key.upper()}", str(value))
    (name,) = values
    return lambda: Pynenc().orchestrator, f"from env PYNENC__{name.upper()}"


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("name", "bad", "accepted"), BAD)
def test_a_wrong_value_is_refused_naming_setting_source_and_accepted_values(
    name: str,
    bad: object,
    accepted: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if source == "env" and name == "cpp_sqlite_path":
        pytest.skip("an environment variable holds text: '42' is a path there")
    check, where = configure(source, tmp_path, monkeypatch, {name: bad})
    with pytest.raises(BadConfig) as exc:
        check()
    shown = repr(str(bad)) if source == "env" else repr(bad)
    assert str(exc.value).startswith(f"{name}={shown} ({where}): "), str(exc.value)
    assert accepted in str(exc.value)
    assert not list(tmp_path.rglob("*.db"))  # refused before anything was opened


def test_every_declared_setting_has_a_rule_and_a_bad_value_in_this_table() -> None:
    assert set(RULES) <= set(known_settings())
    assert {name for name, _, _ in BAD} == set(RULES)


def test_cistell_no_longer_turns_false_text_into_true(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cistell casts an env value with the default's type: bool("false") is True. The
    checked value replaces it."""
    check, _ = configure("env", tmp_path, monkeypatch, {"cpp_runner_take_ahead": "false"})
    check()
    runner = Pynenc().runner
    assert runner.conf.cpp_runner_take_ahead is False  # type: ignore[attr-defined]
    assert runner.conf.cpp_runner_trigger_wake is True  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "native"), [("yes", True), ("ON", True), ("1", True), ("no", False), ("off", False)]
)
def test_flags_accept_the_documented_words(
    text: str, native: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYNENC__CPP_NATIVE", text)
    conf = ConfigCpp()
    assert conf.native_enabled is native
    assert conf.cpp_native == ("true" if native else "false")


@pytest.mark.parametrize("source", SOURCES)
def test_an_unknown_key_is_refused_with_the_nearest_known_name(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check, where = configure(source, tmp_path, monkeypatch, {"cpp_sqlite_synchronus": "full"})
    with pytest.raises(BadConfig) as exc:
        check()
    assert str(exc.value) == (
        f"unknown setting cpp_sqlite_synchronus ({where}): did you mean cpp_sqlite_synchronous?"
    )


def test_an_unknown_key_in_a_config_section_or_a_class_variable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.pynenc]\n[tool.pynenc.cpprunner]\ncpp_runner_wokers = 2\n"
    )
    with pytest.raises(BadConfig, match="cpp_runner_wokers .*did you mean cpp_runner_workers"):
        ConfigCppRunner()
    (tmp_path / "pyproject.toml").unlink()
    monkeypatch.setenv("PYNENC__CONFIGCPP__CPP_NATIV", "true")
    with pytest.raises(BadConfig, match=r"cpp_nativ \(from env PYNENC__CONFIGCPP__CPP_NATIV\)"):
        ConfigCpp()


def test_a_setting_declared_later_joins_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The known settings are the declared fields: a new one is neither unknown nor
    unchecked (its default's type gives its rule until it has a row in RULES)."""
    monkeypatch.setenv("PYNENC__CPP_NEW_KNOB", "7")
    with pytest.raises(BadConfig, match="unknown setting cpp_new_knob"):
        ConfigCpp()
    monkeypatch.setattr(ConfigCpp, "cpp_new_knob", ConfigField(3), raising=False)
    assert ConfigCpp().cpp_new_knob == 7  # type: ignore[attr-defined]
    monkeypatch.setenv("PYNENC__CPP_NEW_KNOB", "seven")
    with pytest.raises(BadConfig, match="cpp_new_knob='seven' .*expected a whole number"):
        ConfigCpp()


def test_good_values_from_a_file_reach_the_components_converted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "cpp_runner_workers": "3",
        "cpp_native": "no",
        "cpp_spin_wait_us": "250",
        "cpp_runner_take_ahead": "off",
    }
    check, _ = configure("yaml", tmp_path, monkeypatch, values)
    check()
    app = Pynenc()
    assert app.runner.conf.cpp_runner_workers == 3  # type: ignore[attr-defined]
    assert app.runner.conf.cpp_runner_take_ahead is False  # type: ignore[attr-defined]
    assert app.orchestrator.cpp_conf.native_enabled is False  # type: ignore[attr-defined]
    assert app.orchestrator.cpp_conf.cpp_spin_wait_us == 250  # type: ignore[attr-defined]


# ---------------------------------------------------------------- relative paths


def engine_file(app: Pynenc) -> str:
    uri: str = app.orchestrator.engine_uri  # type: ignore[attr-defined]
    return uri.removeprefix("sqlite://").split("?", 1)[0]


def test_a_relative_path_from_a_config_file_is_under_the_file_s_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check, _ = configure("yaml", tmp_path, monkeypatch, {"cpp_sqlite_path": "data/app.db"})
    (tmp_path / "conf" / "data").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert engine_file(Pynenc()) == str(tmp_path / "conf" / "data" / "app.db")


def test_a_relative_path_from_pyproject_is_under_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure("pyproject", tmp_path, monkeypatch, {"cpp_sqlite_path": "app.db"})
    assert engine_file(Pynenc()) == str(tmp_path / "app.db")


def test_a_relative_path_from_config_values_or_env_is_made_absolute_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rewritten where a process started from this one reads it again (the app's
    pickled config values; the inherited environment)."""
    values: dict[str, Any] = {"app_id": "rel", **SQLITE_CLASSES, "cpp_sqlite_path": "v.db"}
    app = Pynenc(config_values=values)
    assert engine_file(app) == str(tmp_path / "v.db")
    assert values["cpp_sqlite_path"] == str(tmp_path / "v.db")

    built = PynencBuilder().app_id("rel2").cpp_sqlite(path="b.db")
    assert built.build().config_values["cpp_sqlite_path"] == str(tmp_path / "b.db")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = PynencBuilder().app_id("rel3").cpp_sqlite(path="~/h.db").build()
    assert home.config_values["cpp_sqlite_path"] == str(tmp_path / "home" / "h.db")

    for key, value in SQLITE_CLASSES.items():
        monkeypatch.setenv(f"PYNENC__{key.upper()}", value)
    monkeypatch.setenv("PYNENC__CPP_SQLITE_PATH", "e.db")
    assert engine_file(Pynenc()) == str(tmp_path / "e.db")
    assert os.environ["PYNENC__CPP_SQLITE_PATH"] == str(tmp_path / "e.db")


def test_messages_never_show_a_redis_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check, _ = configure("env", tmp_path, monkeypatch, {"cpp_redis_url": "http://:s3cr3t@h:1/0"})
    with pytest.raises(BadConfig) as exc:
        check()
    assert "s3cr3t" not in str(exc.value)
    assert re.search(r"cpp_redis_url='http://:\*\*\*@h:1/0' \(from env", str(exc.value))


@pytest.mark.parametrize(
    "url", ["redis://h:6379/0&password=s3cr3t", "redis://h:6379/0?db=x&password=s3cr3t"]
)
def test_a_password_option_is_never_shown_wherever_it_stands(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``password=`` option misplaced in the path (the URL is then malformed, and its
    error quotes the database part) or in a query with another bad option."""
    check, _ = configure("env", tmp_path, monkeypatch, {"cpp_redis_url": url})
    with pytest.raises(BadConfig) as exc:
        check()
    assert "s3cr3t" not in str(exc.value) and "password=***" in str(exc.value)
