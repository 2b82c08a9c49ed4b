"""The shortcuts registry (``pynenc_cpp._shortcuts``): every recorded digest is the
installed pynenc's; a shortcut whose pynenc source changed, or that is switched off
(environment or ``cpp_shortcuts``), is not taken and pynenc's own code runs instead;
``pynenc-cpp doctor`` reports each one's state.

The conformance slice with every shortcut off runs in ``scripts/test.sh`` (and the
whole matrix in ``make conformance``), with ``PYNENC_CPP_SHORTCUTS=off``."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.client_data_store.base_client_data_store import BaseClientDataStore
from pynenc.invocation import dist_invocation
from pynenc.invocation.status import InvocationStatus
from pynenc.orchestrator.base_orchestrator import BaseOrchestrator
from pynenc.runner.base_runner import BaseRunner
from pynenc.runner.runner_context import RunnerContext
from pynenc.state_backend.base_state_backend import BaseStateBackend
from pynenc.trigger.base_trigger import BaseTrigger

from pynenc_cpp import _core, _shortcuts
from pynenc_cpp.native import base as native_base
from pynenc_cpp.runner import CppRunner
from tests_py.cpp_apps import build_cpp_app

ROOT = Path(__file__).resolve().parents[1]
RUNNER = RunnerContext(runner_cls="TestRunner", runner_id="runner-s", pid=1, hostname="h")

_task_app = Pynenc()


@_task_app.task
def add(x: int, y: int) -> int:
    return x + y


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test computes the digests and reads the environment afresh, and leaves
    nothing of its patches cached for the next."""
    monkeypatch.delenv(_shortcuts.ENV_VAR, raising=False)
    _shortcuts.forget()
    yield
    monkeypatch.undo()
    _shortcuts.forget()


def test_every_recorded_digest_is_the_installed_pynencs() -> None:
    """A pynenc release that changed a replaced function fails here: bring the shortcut
    in line with the new source (docs/shortcuts.md), then update its digest."""
    every = [*_shortcuts.SHORTCUTS.values(), *_shortcuts.TRACKED.values()]
    differ = [
        (s.name, q)
        for s in every
        for q, digest in s.replaces
        if _shortcuts.source_digest(q) != digest
    ]
    assert differ == []
    assert _shortcuts.changed() == {}
    assert _shortcuts.active_set() == frozenset(_shortcuts.SHORTCUTS)
    # Each name resolves to a function of pynenc's own package.
    for s in every:
        for q, _ in s.replaces:
            assert q.startswith("pynenc.") and callable(_shortcuts.resolve(q)), q


@pytest.mark.parametrize(
    "raw,off",
    [
        ("on", set()),
        ("", set()),
        (" ON ", set()),
        ("off", set(_shortcuts.SHORTCUTS)),
        ("-run", {"run"}),
        ("-run, -submit", {"run", "submit"}),
    ],
)
def test_accepted_values(raw: str, off: set[str]) -> None:
    assert _shortcuts.parse(raw) == off
    assert _shortcuts.problem(raw) is None


@pytest.mark.parametrize("raw", ["no", "run", "-nosuch", "-run,submit", "off,-run", 0, None])
def test_refused_values_name_the_setting_and_the_accepted_values(raw: object) -> None:
    with pytest.raises(_shortcuts.ShortcutsValueError):
        _shortcuts.parse(raw)
    message = _shortcuts.problem(raw)
    assert message is not None and message.startswith("cpp_shortcuts=")
    assert "'on', 'off'" in message and "submit" in message


def test_the_environment_and_the_setting_each_switch_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(_shortcuts.ENV_VAR, "-run")
    assert _shortcuts.state("run") == _shortcuts.OFF_SETTING
    assert _shortcuts.state("submit", "-submit") == _shortcuts.OFF_SETTING
    assert _shortcuts.active_set("-cron") == frozenset(_shortcuts.SHORTCUTS) - {"run", "cron"}
    monkeypatch.setenv(_shortcuts.ENV_VAR, "off")
    assert _shortcuts.active_set() == frozenset()
    assert not any(_shortcuts.active(n) for n in _shortcuts.SHORTCUTS)


def test_an_apps_cpp_shortcuts_setting_is_read(tmp_path: Path) -> None:
    app = (
        PynencBuilder()
        .app_id("shortcut-setting")
        .cpp_mem()
        .custom_config(cpp_shortcuts="-run,-gate")
        .build()
    )
    assert _shortcuts.of_app(app) == frozenset(_shortcuts.SHORTCUTS) - {"run", "gate"}
    other = PynencBuilder().app_id("shortcut-default").cpp_mem().build()
    assert _shortcuts.of_app(other) == frozenset(_shortcuts.SHORTCUTS)


def _change_digest(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Makes the registry believe pynenc's source of ``name``'s first function changed."""
    shortcut = _shortcuts.SHORTCUTS[name]
    (first, _), *rest = shortcut.replaces
    changed = dataclasses.replace(shortcut, replaces=((first, "0" * 64), *rest))
    monkeypatch.setitem(_shortcuts.SHORTCUTS, name, changed)
    _shortcuts.forget()


def test_a_changed_claim_makes_cpp_runner_refuse_to_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The tracked copy ``claim`` has no pynenc function to fall back to: a CppRunner on
    a pynenc whose claim body changed refuses to start, naming the function, rather
    than claim with pynenc 0.4.0's code."""
    tracked = _shortcuts.TRACKED["claim"]
    ((qualified, _),) = tracked.replaces
    changed = dataclasses.replace(tracked, replaces=((qualified, "0" * 64),))
    monkeypatch.setitem(_shortcuts.TRACKED, "claim", changed)
    _shortcuts.forget()
    app = PynencBuilder().app_id("claim-changed").cpp_sqlite(path=tmp_path / "c.db").build()
    assert isinstance(app.runner, CppRunner)
    with pytest.raises(_shortcuts.PynencChanged, match="get_additional_invocations_to_run"):
        app.runner._on_start()
    rows = {name: state for name, state, _ in _shortcuts.report()}
    assert rows["claim"] == "tracked copy, pynenc changed (no fallback)"


def test_a_changed_digest_turns_the_shortcut_off_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _change_digest(monkeypatch, "submit")
    with caplog.at_level(logging.WARNING, logger="pynenc_cpp.shortcuts"):
        assert not _shortcuts.active("submit")
        assert _shortcuts.state("submit") == _shortcuts.OFF_CHANGED
        assert _shortcuts.active("run")
        assert "submit" not in _shortcuts.active_set()
    warnings = [r for r in caplog.records if r.name == "pynenc_cpp.shortcuts"]
    assert len(warnings) == 1
    assert (
        "submit (pynenc.invocation.dist_invocation:generate_invocation_id)" in warnings[0].message
    )
    rows = {name: state for name, state, _ in _shortcuts.report()}
    assert rows["submit"] == _shortcuts.OFF_CHANGED and rows["run"] == _shortcuts.ACTIVE
    assert rows["claim"] == "tracked copy, same as pynenc's"


# --------------------------------------------------------------- the fallbacks
#
# Each scenario takes a fresh app (``make(native)``) and returns whether pynenc's own
# code ran, seen by a spy on pynenc's function (or, where pynenc's function is what the
# shortcut compares itself with, on the shortcut's engine call not being made).


def _spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[Any]:
    calls: list[Any] = []
    original = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def _claimed(app: Pynenc) -> Any:
    add.app = app
    inv = add(1, 2)
    claimed = app.orchestrator.claim_for_run(app.broker.retrieve_invocation(), RUNNER, start=True)
    assert claimed is not None and claimed.invocation_id == inv.invocation_id
    return claimed


def _run(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    calls = _spy(mp, dist_invocation, "run_task_sync")  # what pynenc's run calls
    claimed = _claimed(app)
    app.orchestrator.run_invocation(claimed, RUNNER)
    assert claimed.result == 3
    return bool(calls)


def _submit(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    engine_ids = _spy(mp, _core, "new_invocation_id")
    add.app = app
    inv = add(2, 2)
    assert app.state_backend.get_invocation(inv.invocation_id).invocation_id == inv.invocation_id
    return not engine_ids


def _from_dto(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    dtos = _spy(mp, native_base, "_dtos")  # the DTOs pynenc's from_dto methods take
    _claimed(app)
    return bool(dtos)


def _native(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    calls = _spy(mp, BaseOrchestrator, "register_new_invocations")
    add.app = app
    add(3, 3)
    return bool(calls)


def _gate(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(False)
    calls = _spy(mp, BaseOrchestrator, "is_authorize_to_run_by_concurrency_control")
    add.app = app
    assert app.orchestrator.is_authorize_to_run_by_concurrency_control(add(4, 4))
    return bool(calls)


def _result_wait(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    calls = _spy(mp, BaseRunner, "waiting_for_results")
    claimed = _claimed(app)
    app.orchestrator.run_invocation(claimed, RUNNER)
    CppRunner(app).waiting_for_results(None, [claimed.invocation_id])
    return bool(calls)


def _cron(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    calls = _spy(mp, BaseTrigger, "check_time_based_triggers")
    app.trigger.check_time_based_triggers(atomic_service_run=None)
    return bool(calls)


def _scalars(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(True)
    calls = _spy(mp, BaseClientDataStore, "resolve")
    assert app.client_data_store.resolve(app.client_data_store.serialize(42)) == 42
    return bool(calls)


def _history(mp: pytest.MonkeyPatch, make: Callable[[bool], Pynenc]) -> bool:
    app = make(False)  # mixed mode: pynenc's set_invocation_status adds the history row
    calls = _spy(mp, BaseStateBackend, "add_history")
    add.app = app
    inv = add(5, 5)
    app.orchestrator.set_invocation_status(inv.invocation_id, InvocationStatus.PENDING, RUNNER)
    history = app.state_backend.get_history(inv.invocation_id)
    assert [h.status_record.status for h in history][-1] == InvocationStatus.PENDING
    return bool(calls)


SCENARIOS: dict[str, Callable[[pytest.MonkeyPatch, Callable[[bool], Pynenc]], bool]] = {
    "run": _run,
    "submit": _submit,
    "from_dto": _from_dto,
    "native": _native,
    "gate": _gate,
    "result_wait": _result_wait,
    "cron": _cron,
    "scalars": _scalars,
    "history": _history,
}


def test_every_shortcut_has_a_fallback_scenario() -> None:
    assert set(SCENARIOS) == set(_shortcuts.SHORTCUTS)


@pytest.mark.parametrize("how", ["digest changed", "switched off"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_an_inactive_shortcut_runs_pynencs_own_code(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    how: str,
) -> None:
    """Active: pynenc's function is not called (the shortcut is taken). Its digest
    changed, or switched off by ``PYNENC_CPP_SHORTCUTS=-name``: pynenc's function runs,
    and the outcome is the same."""
    apps: list[Pynenc] = []

    def make(native: bool) -> Pynenc:
        app = build_cpp_app("sqlite", request, tmp_path, f"sc{len(apps)}", native=native)
        apps.append(app)
        _shortcuts.of_app(app)  # the digests, computed before a spy replaces a function
        return app

    try:
        assert SCENARIOS[name](monkeypatch, make) is False, "the shortcut was not taken"
        monkeypatch.undo()
        if how == "digest changed":
            _change_digest(monkeypatch, name)
        else:
            monkeypatch.setenv(_shortcuts.ENV_VAR, f"-{name}")
            _shortcuts.forget()
        assert not _shortcuts.active(name)
        assert SCENARIOS[name](monkeypatch, make) is True, "pynenc's own code did not run"
    finally:
        for app in apps:
            app.purge()


def test_doctor_lists_each_shortcut_and_its_state(tmp_path: Path) -> None:
    """``doctor`` on an app that switches ``run`` off by its setting (the environment's
    ``PYNENC__CPP_SHORTCUTS``), in JSON and as text."""
    from tests_py import runner_tasks as rt
    from tests_py.test_cli import cli, sqlite_app
    from tests_py.test_cpp_runner import runner_env

    app = sqlite_app(tmp_path / "doctor.db")
    rt.add(1, 2)  # the engine opened the file
    env = runner_env(app, "sqlite", {"PYNENC__CPP_SHORTCUTS": "-run"})
    env.pop(_shortcuts.ENV_VAR, None)
    out = cli(env, "doctor", "--json")
    assert out.returncode in (0, 1), out.stdout + out.stderr
    rows = {row["name"]: row["state"] for row in json.loads(out.stdout)["shortcuts"]}
    expected = dict.fromkeys(_shortcuts.SHORTCUTS, _shortcuts.ACTIVE)
    expected["run"] = _shortcuts.OFF_SETTING
    expected["claim"] = "tracked copy, same as pynenc's"
    assert rows == expected
    text = cli(env, "doctor")
    assert "shortcuts (docs/shortcuts.md):" in text.stdout
    assert any(
        line.split() == ["run", "off", "(disabled", "by", "setting)"]
        for line in text.stdout.splitlines()
    ), text.stdout
    env[_shortcuts.ENV_VAR] = "off"
    rows = {
        row["name"]: row["state"]
        for row in json.loads(cli(env, "doctor", "--json").stdout)["shortcuts"]
    }
    assert {rows[n] for n in _shortcuts.SHORTCUTS} == {_shortcuts.OFF_SETTING}


def test_a_process_with_shortcuts_off_runs_a_task_through_pynencs_code(tmp_path: Path) -> None:
    """``PYNENC_CPP_SHORTCUTS=off`` in a fresh process: nothing is active, and a task
    submitted and run there (claim, pynenc's ``run``) gives its result."""
    script = (
        "from pynenc import PynencBuilder\n"
        "from pynenc.runner.runner_context import RunnerContext\n"
        "from pynenc_cpp import _shortcuts\n"
        f"app = PynencBuilder().app_id('off').cpp_sqlite(path={str(tmp_path / 'off.db')!r}).build()\n"
        "assert _shortcuts.of_app(app) == frozenset(), _shortcuts.of_app(app)\n"
        "assert app.orchestrator._lifecycle() is None\n"
        "@app.task\n"
        "def mul(x: int, y: int) -> int:\n"
        "    return x * y\n"
        "inv = mul(6, 7)\n"
        "ctx = RunnerContext(runner_cls='T', runner_id='r', pid=1, hostname='h')\n"
        "claimed = app.orchestrator.claim_for_run(app.broker.retrieve_invocation(), ctx, start=True)\n"
        "app.orchestrator.run_invocation(claimed, ctx)\n"
        "print(inv.result)\n"
    )
    (tmp_path / "off_app.py").write_text(script)
    env = {**os.environ, _shortcuts.ENV_VAR: "off"}
    out = subprocess.run(
        [sys.executable, "-c", "import off_app"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split() == ["42"]
