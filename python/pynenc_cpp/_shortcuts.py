"""The shortcuts: places where pynenc-cpp runs its own code instead of one of
pynenc's own (concrete, not abstract) functions, and when each is taken.

Each shortcut was written against the source of the pynenc functions it replaces, in
the pynenc release named by ``WRITTEN_AGAINST``; the sha256 of that source
(``inspect.getsource``) is recorded here. ``active(name)`` is True only while

* every recorded digest matches the installed pynenc (a pynenc release that changed
  one of those functions makes the shortcut fall back to pynenc's own code: the
  change is run, never skipped; logged once per process as a WARNING), and
* the shortcut is not switched off, by the environment variable
  ``PYNENC_CPP_SHORTCUTS`` or by the app's ``cpp_shortcuts`` setting.

Both take the same values (``parse``): ``on`` (the default), ``off`` (every shortcut
off), or a comma list of names each prefixed by ``-`` (those off, e.g.
``-run,-submit``). A shortcut is off when either says so.

Each choice point asks ``active`` (through ``active_set``, once per component) and,
when the answer is no, calls pynenc's function (``super()``) instead. ``TRACKED`` lists
copies of pynenc code that have no pynenc function to fall back to; their digests are
checked by the tests and reported by ``pynenc-cpp doctor``, not switched.

Thread-safe: the digests are computed once per process, under a lock.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("pynenc_cpp.shortcuts")

#: The environment variable that switches shortcuts off (see ``parse``).
ENV_VAR = "PYNENC_CPP_SHORTCUTS"
#: The pynenc release whose sources the digests below are of.
WRITTEN_AGAINST = "0.4.0"


@dataclass(frozen=True)
class Shortcut:
    """One shortcut: its ``name``, the pynenc functions it replaces (``module:Qual.name``)
    with the sha256 of each one's source, where it is taken and why it is faster."""

    name: str
    replaces: tuple[tuple[str, str], ...]
    where: str
    why: str


_BO = "pynenc.orchestrator.base_orchestrator:BaseOrchestrator."
_DI = "pynenc.invocation.dist_invocation:"

SHORTCUTS: dict[str, Shortcut] = {
    s.name: s
    for s in (
        Shortcut(
            "run",
            (
                (
                    _DI + "DistributedInvocation.run",
                    "f17fa9a0dbbadd35863392025d97ded18aa26ff2f78cb819aeef3cabcbbf84c7",
                ),
            ),
            "CppNativeOrchestrator.run_invocation (_run.py)",
            "pynenc's run step for step, without its repeated lookups; the result is stored by the engine without the GIL",
        ),
        Shortcut(
            "submit",
            (
                (
                    _DI + "generate_invocation_id",
                    "42e4db1f610498d94a8bb8915589f5825e98ee6db251d08600b2894dc25e4796",
                ),
                (
                    "pynenc.call:compute_args_id",
                    "576bf23d83659ca3588e529f978333ee9810720a3837193661de49f20072b7d6",
                ),
                (
                    "pynenc.call:Call.args_id",
                    "9d3d0b4d37acab79afcf7b514836d2a762cea06caa87f303ee4a01f62ebd9997",
                ),
                (
                    "pynenc.call:Call.to_dto",
                    "ea28c7bb09b402f60f02a0acd4c9699b356d6373db52d2910ecdb11eee600fc4",
                ),
                (
                    _DI + "DistributedInvocation.to_dto",
                    "20f513a532e6095088543c68b92cd56b8161a3ef11abcc88d4403a45753da70a",
                ),
                (
                    "pynenc.arguments:Arguments.from_call",
                    "1356e273d240190878c087e40bf8a45db8c71d9ac69591ec973e116af6b60b76",
                ),
            ),
            "_submit.py, called by the native orchestrator's submit path",
            "ids and the arguments' digest made by the engine; no DTOs built; the task's signature kept",
        ),
        Shortcut(
            "from_dto",
            (
                (
                    _DI + "DistributedInvocation.from_dto",
                    "63f9ff0f0fbdbe69d37995b9690f231c1dc2a2a190c73a6c625af970b8b025c5",
                ),
                (
                    "pynenc.call:LazyCall.from_dto",
                    "1f03ab5aa2eb01242779a20dc2bf528b68a305e4068d34be71869ef94e013909",
                ),
            ),
            "CppNativeOrchestrator._invocation (native/base.py)",
            "a claimed invocation built from its record without the two DTOs in between",
        ),
        Shortcut(
            "native",
            (
                (
                    _BO + "register_new_invocations",
                    "199bcff6ca070b9e94d377df842f5a3770d6e2c792e33cfd414b648952931bcd",
                ),
                (
                    _BO + "route_call",
                    "6a370098a613c80250008c1cf59a882302aed5f6897526d51d9eb47602833b94",
                ),
                (
                    _BO + "_route_new_call_invocation",
                    "727ef66c955da1eedd5bfa7bcc58c534cc1afea03a9d2fe3ddc5358fdfd55463",
                ),
                (
                    _BO + "route_calls",
                    "6db28959cd7bf80915d9860d4408fd927e69c8487121e64afff59030e76cdcdd",
                ),
                (
                    _BO + "set_invocation_status",
                    "3c1f8305834c59ae688a34331fbaab973446c563424c3bff6c4da1458aab2e97",
                ),
                (
                    _BO + "set_invocation_result",
                    "4356ff8418779933f4d3c061971b9fa5cbf9b276454940c68a1797bd2029a38d",
                ),
                (
                    _BO + "set_invocation_exception",
                    "06a3e5478e7f638c08fc895c153552c5a60e4ee8ce9e9673cdbc94b5fe584b41",
                ),
                (
                    _BO + "set_invocation_retry",
                    "ba9d3c296008aa3abf61ac3543fd2c76ba550a563f790e568bd55d1e3151232f",
                ),
                (
                    _BO + "reroute_invocations",
                    "784622b709eab645579f44f5f95fd8699e77d1bcc57c4eb50e1f0900db06269d",
                ),
                (
                    _BO + "get_additional_invocations_to_run",
                    "caa2acc9ee4178b608295454d3f333d55a1158cb121683e8aebcd9607c267832",
                ),
                (
                    _DI + "DistributedInvocation.from_parent",
                    "8ac9d5b67be3e42f56a71beb18171d68188cba1846bf1b8e146a6ac34dcca6a8",
                ),
            ),
            "Cpp*NativeOrchestrator (native/, _pick.py); off: mixed mode, as cpp_native=false",
            "each hot-path step (submit, claim, status change, result) one engine call",
        ),
        Shortcut(
            "gate",
            (
                (
                    _BO + "is_candidate_to_run_by_concurrency_control",
                    "f5177f73b241a92c861ca010b6aa5a8abbdecc1fb86fbeb0c12f4b69c73470ee",
                ),
                (
                    _BO + "is_authorize_to_run_by_concurrency_control",
                    "741273f6ac1a07017b60a571104859e556540399cea0649d2b6d5b3182415c2d",
                ),
                (
                    _BO + "_is_authorize_by_concurrency_control",
                    "a545e4c58d1f1c76e29c1ccf4bf3e29f3cc01ad256568eae83f987c3ace3f9c6",
                ),
                (
                    _BO + "get_blocking_invocations_to_run",
                    "27bd14779c50d5c6f2ec99b8a8b4ac83e59218780e0c57bd7b2eefa7e4d0c2ee",
                ),
                (
                    _BO + "get_additional_invocations_to_run",
                    "caa2acc9ee4178b608295454d3f333d55a1158cb121683e8aebcd9607c267832",
                ),
            ),
            "ConcurrencyGate (_concurrency.py)",
            "running concurrency control checked and applied in one engine step (no check-then-set race)",
        ),
        Shortcut(
            "result_wait",
            (
                (
                    "pynenc.runner.base_runner:BaseRunner.waiting_for_results",
                    "90c88077a2cdcf6b6cb438138ccac356a928d1fc995b178ce989fa6012274334",
                ),
            ),
            "CppRunner.waiting_for_results (runner.py, _result_wait.py)",
            "a client blocks in the engine until a result is final instead of sleeping between reads",
        ),
        Shortcut(
            "cron",
            (
                (
                    "pynenc.trigger.base_trigger:BaseTrigger.check_time_based_triggers",
                    "7c8474f7c45709b6ab2c3ba03dbf06196635083f469b88f19a973bab8e316b64",
                ),
            ),
            "CppTrigger.check_time_based_triggers (trigger.py, _cron.py)",
            "each cron condition judged at its slot, so a late first slot does not delay the next ones",
        ),
        Shortcut(
            "scalars",
            (
                (
                    "pynenc.client_data_store.base_client_data_store:BaseClientDataStore.serialize",
                    "42da436f403727f1577f0543d5acb2eec21392a647819dfd0f3b14f8eca4807a",
                ),
                (
                    "pynenc.client_data_store.base_client_data_store:BaseClientDataStore.is_reference",
                    "00d897c50011b3f8a456c13caaa749fa421e61aa29c0df637ce144d56010da1b",
                ),
                (
                    "pynenc.client_data_store.base_client_data_store:BaseClientDataStore.deserialize_arguments",
                    "a894cab36e2fb2401391c96fef5672c1c2acc429648a40192ea9d0bc6cbe5dcc",
                ),
                (
                    "pynenc.client_data_store.base_client_data_store:BaseClientDataStore.resolve",
                    "7f793dc786c203369696a2c99c9142a0241dbfdab5db12109fcfe4fa003d369c",
                ),
            ),
            "CppClientDataStore (client_data_store.py, _scalars.py)",
            "plain scalars written and read without jsonpickle (the same text)",
        ),
        Shortcut(
            "history",
            (
                (
                    "pynenc.state_backend.base_state_backend:BaseStateBackend.add_history",
                    "7a6d2ee43dfd225e19aa805173a5fda7e82606ff4288b7e7826287e031fc3e24",
                ),
                (
                    "pynenc.state_backend.base_state_backend:BaseStateBackend.add_histories",
                    "153af91782d8583ad66d56dd2f883bd1352ba290b57a23cb53d9ce6ec20a03e2",
                ),
            ),
            "CppStateBackend.add_history(ies) (state_backend.py)",
            "each history row dated when its status was set, so rows keep the order of the changes",
        ),
    )
}

#: Copies of pynenc code with no pynenc function to fall back to (pynenc has no
#: per-id claim); a changed digest is reported, and fails the tests.
TRACKED: dict[str, Shortcut] = {
    "claim": Shortcut(
        "claim",
        (
            (
                _BO + "get_additional_invocations_to_run",
                "caa2acc9ee4178b608295454d3f333d55a1158cb121683e8aebcd9607c267832",
            ),
        ),
        "_claim.claim_one (CppRunner with another orchestrator; mixed mode's claim_for_run)",
        "pynenc's per-id claim body for an id the runner's engine took from the broker",
    ),
}

#: The states ``state`` reports.
ACTIVE = "active"
OFF_CHANGED = "off (pynenc changed)"
OFF_SETTING = "off (disabled by setting)"


class ShortcutsValueError(ValueError):
    """A ``PYNENC_CPP_SHORTCUTS`` or ``cpp_shortcuts`` value ``parse`` refuses."""


def accepted_values() -> str:
    """The accepted values, for error messages."""
    names = ", ".join(sorted(SHORTCUTS))
    return f"'on', 'off', or a comma list of '-name' (names: {names})"


def parse(raw: object) -> frozenset[str]:
    """The shortcut names ``raw`` switches off: ``on``/empty none, ``off`` all, or
    ``-name,-name``. Raises ``ShortcutsValueError`` for anything else."""
    if not isinstance(raw, str):
        raise ShortcutsValueError(f"{raw!r}: expected {accepted_values()}")
    text = raw.strip().lower()
    if text in ("", "on"):
        return frozenset()
    if text == "off":
        return frozenset(SHORTCUTS)
    off = set()
    for item in text.split(","):
        name = item.strip()
        if not name.startswith("-") or name[1:].strip() not in SHORTCUTS:
            raise ShortcutsValueError(
                f"{raw!r}: {item.strip()!r} is not -name; expected {accepted_values()}"
            )
        off.add(name[1:].strip())
    return frozenset(off)


def problem(raw: object) -> str | None:
    """What is wrong with ``raw`` as ``cpp_shortcuts`` (None: accepted)."""
    try:
        parse(raw)
    except ShortcutsValueError as exc:
        return f"cpp_shortcuts={exc}"
    return None


def resolve(qualified: str) -> Any:
    """The function ``module:Qual.name`` names (a property: its getter)."""
    module_name, _, path = qualified.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in path.split("."):
        obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
    if isinstance(obj, property):
        obj = obj.fget
    if isinstance(obj, classmethod | staticmethod):
        obj = obj.__func__
    return obj


def source_digest(qualified: str) -> str | None:
    """sha256 of the installed pynenc's source of ``qualified`` (None: it is gone)."""
    try:
        source = inspect.getsource(resolve(qualified))
    except (ImportError, AttributeError, OSError, TypeError):
        return None
    return hashlib.sha256(source.encode()).hexdigest()


_lock = threading.Lock()
_changed: dict[str, tuple[str, ...]] | None = None
#: app -> its active shortcuts (``of_app``).
_per_app: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()


def changed() -> dict[str, tuple[str, ...]]:
    """Shortcut (and tracked copy) name -> the replaced functions whose source differs in
    the installed pynenc; computed once per process, logged once (WARNING)."""
    global _changed
    with _lock:
        if _changed is None:
            found = {}
            for s in (*SHORTCUTS.values(), *TRACKED.values()):
                diff = tuple(q for q, digest in s.replaces if source_digest(q) != digest)
                if diff:
                    found[s.name] = diff
            _changed = found
            if found:
                logger.warning(
                    "the installed pynenc %s differs from pynenc %s, which pynenc-cpp's "
                    "shortcuts were written against, in functions they replace; these "
                    "shortcuts are off and pynenc's own code runs instead: %s",
                    _pynenc_version(),
                    WRITTEN_AGAINST,
                    "; ".join(f"{n} ({', '.join(q)})" for n, q in sorted(found.items())),
                )
        return _changed


def forget() -> None:
    """Makes the next ``changed`` compute the digests again (tests that patch them)."""
    global _changed
    with _lock:
        _changed = None
        _per_app.clear()


def _pynenc_version() -> str:
    try:
        return importlib.metadata.version("pynenc")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def disabled(setting: object = None) -> frozenset[str]:
    """The names switched off by ``PYNENC_CPP_SHORTCUTS`` or by ``setting`` (an app's
    ``cpp_shortcuts``; None: not set)."""
    off = parse(os.environ.get(ENV_VAR, "on"))
    if setting is not None:
        off |= parse(setting)
    return off


def state(name: str, setting: object = None) -> str:
    """``ACTIVE``, ``OFF_CHANGED`` or ``OFF_SETTING`` for the shortcut ``name``."""
    if name not in SHORTCUTS:
        raise KeyError(name)
    if name in changed():
        return OFF_CHANGED
    if name in disabled(setting):
        return OFF_SETTING
    return ACTIVE


def active(name: str, setting: object = None) -> bool:
    """Whether the shortcut ``name`` is taken: pynenc's functions are the ones it was
    written against, and neither the environment nor ``setting`` switches it off."""
    return state(name, setting) == ACTIVE


def active_set(setting: object = None) -> frozenset[str]:
    """The names of the active shortcuts (a choice point keeps this once per component)."""
    off = disabled(setting) | frozenset(changed())
    return frozenset(SHORTCUTS) - off


def of_app(app: Any) -> frozenset[str]:
    """``active_set`` for ``app``'s ``cpp_shortcuts`` setting, kept per app (until
    ``forget``): what every choice point asks."""
    try:
        return _per_app[app]
    except (KeyError, TypeError):
        pass
    from pynenc_cpp.config import ConfigCpp

    conf = ConfigCpp(config_values=app.config_values, config_filepath=app.config_filepath)
    on = active_set(conf.cpp_shortcuts)
    try:
        _per_app[app] = on
    except TypeError:  # an app that cannot be weakly referenced: asked again next time
        pass
    return on


class PynencChanged(RuntimeError):
    """The installed pynenc changed a function that a tracked copy follows and that has
    no fallback: the component that needs the copy refuses to start."""


def require_unchanged(name: str, needed_by: str) -> None:
    """Raises ``PynencChanged`` if the tracked copy ``name`` no longer matches pynenc's
    source: ``needed_by`` would otherwise run pynenc 0.4.0's code in place of the
    installed release's."""
    diff = changed().get(name)
    if diff:
        raise PynencChanged(
            f"{needed_by} cannot run on pynenc {_pynenc_version()}: it claims each "
            f"invocation with a copy of pynenc {WRITTEN_AGAINST}'s {', '.join(diff)}, which "
            "this release changed. Use one of pynenc's own runners (MultiThreadRunner, "
            "PersistentProcessRunner, ...) with this release, or a pynenc-cpp release "
            "that supports it (docs/shortcuts.md)."
        )


def report(setting: object = None) -> list[tuple[str, str, str]]:
    """(name, state, replaced functions) of each shortcut and tracked copy, for ``doctor``."""
    rows = [
        (n, state(n, setting), ", ".join(q for q, _ in s.replaces)) for n, s in SHORTCUTS.items()
    ]
    changed_now = changed()
    for n, s in TRACKED.items():
        st = (
            "tracked copy, pynenc changed (no fallback)"
            if n in changed_now
            else "tracked copy, same as pynenc's"
        )
        rows.append((n, st, ", ".join(q for q, _ in s.replaces)))
    return rows
