"""Strict ``cpp_*`` settings: every value checked, whatever its source, before any
pynenc-cpp component or ``CppRunner`` uses it.

The settings are the ``cpp_*`` ``ConfigField``s declared by the config classes
(``config_classes``), so a field declared later joins the checks by being declared:
its value is checked by its row in ``RULES``, or, without one, by its default's type.

``strict_settings`` reads each setting as cistell does (``PynencBuilder`` /
``config_values``, ``[tool.pynenc]`` of ``pyproject.toml``, the file named by
``config_filepath`` or ``PYNENC__FILEPATH``, ``PYNENC__*`` variables), keeping the
raw value and where it came from, and raises ``BadConfig`` naming the setting, its
source and the accepted values for a wrong value, and the nearest known name for an
unknown ``cpp_*`` key. A relative ``cpp_sqlite_path`` is made absolute here, once:
against the working directory for a builder value or an environment variable (both
rewritten in place, so the processes the app starts inherit the absolute path), and
against the folder of the file it was read from.

Called by ``ConfigCpp.__init__`` and ``ConfigCppRunner.__init__`` (so at the first
use of a component or runner of an app configured from files or env: pynenc builds
them lazily and offers no hook at ``Pynenc()``), and by ``PynencBuilder.build()`` of
a builder that chose a ``cpp_*`` backend or ``cpp_runner()``.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cistell import ConfigField
from cistell._internal import load_config_file
from pynenc.conf.config_base import ConfigPynencBase

from pynenc_cpp._redact import redact_url
from pynenc_cpp._urls import redis_url_problem
from pynenc_cpp.errors import BadConfig

if TYPE_CHECKING:
    from cistell.root import ConfigRoot

PREFIX = "cpp_"
_ENV = f"{ConfigPynencBase.ENV_PREFIX}{ConfigPynencBase.ENV_SEP}"  # "PYNENC__"
_SEP = ConfigPynencBase.ENV_SEP

#: The largest cpp_outage_budget_sec: a day.
MAX_OUTAGE_BUDGET_SEC = 86_400.0
SYNCHRONOUS_MODES = ("normal", "full")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
FLAG_TEXT = "true or false (also yes/no, on/off, 1/0)"
#: A whole number as text: ASCII digits only (str.isdigit() also takes "²", which int() refuses).
_WHOLE = re.compile(r"[+-]?[0-9]+")


class Refused(Exception):
    """A rule's answer for a value it does not accept: what it expects."""


@dataclass(frozen=True)
class Rule:
    """How one setting is checked: ``convert`` returns the value to use or raises
    ``Refused``; ``shown`` is how the raw value appears in a message."""

    convert: Callable[[object], object]
    shown: Callable[[object], str] = repr


# ---------------------------------------------------------------- rule makers


def flag_value(raw: object) -> bool | None:
    """``raw`` as a bool, from a bool, 0/1 or the texts in ``FLAG_TEXT``; None if it is
    none of them."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None


def flag(as_text: bool = False) -> Rule:
    """A true/false setting; ``as_text``: stored as "true"/"false" (a str field, so
    that cistell's own cast of an env value cannot turn "false" into True)."""

    def convert(raw: object) -> object:
        value = flag_value(raw)
        if value is None:
            raise Refused(f"expected {FLAG_TEXT}")
        return ("true" if value else "false") if as_text else value

    return Rule(convert)


def whole(low: int, high: int | None = None) -> Rule:
    """A whole number from ``low`` (to ``high``): an int, or its digits as text."""
    expected = (
        f"expected a whole number >= {low}"
        if high is None
        else (f"expected a whole number from {low} to {high}")
    )

    def convert(raw: object) -> object:
        value: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and _WHOLE.fullmatch(raw.strip()):
            value = int(raw.strip())
        if value is None or value < low or (high is not None and value > high):
            raise Refused(expected)
        return value

    return Rule(convert)


def number(low: float | None = None, high: float | None = None, what: str = "seconds") -> Rule:
    """A finite number (of ``what``) in [low, high]: an int, a float, or one as text."""
    if low is None:
        expected = f"expected {what} (a number)"
    elif high is None:
        expected = f"expected {what} >= {low:g}"
    else:
        expected = f"expected {what} from {low:g} to {high:g}"

    def convert(raw: object) -> object:
        value: float | None = None
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            value = float(raw)
        elif isinstance(raw, str):
            try:
                value = float(raw.strip())
            except ValueError:
                value = None
        if (
            value is None
            or not math.isfinite(value)
            or (low is not None and value < low)
            or (high is not None and value > high)
        ):
            raise Refused(expected)
        return value

    return Rule(convert)


def choice(values: tuple[str, ...]) -> Rule:
    def convert(raw: object) -> object:
        if raw not in values:
            raise Refused(f"expected one of {', '.join(values)}")
        return raw

    return Rule(convert)


def text(what: str = "a string", empty: bool = True) -> Rule:
    def convert(raw: object) -> object:
        if not isinstance(raw, str) or (not empty and not raw.strip()):
            raise Refused(f"expected {what}")
        return raw

    return Rule(convert)


def _problem_rule(
    problem: Callable[[object], str | None],
    shown: Callable[[object], str],
    prefixes: Callable[[object], tuple[str, ...]],
) -> Rule:
    """A rule from an existing ``*_problem`` check; the value it quotes at the start of
    its message (one of ``prefixes``) is left out, as the BadConfig shows it already."""

    def convert(raw: object) -> object:
        if why := problem(raw):
            for prefix in prefixes(raw):
                why = why.removeprefix(prefix)
            raise Refused(why)
        return raw

    return Rule(convert, shown)


def _shown_url(raw: object) -> str:
    return repr(redact_url(raw)) if isinstance(raw, str) else repr(raw)


def _spin_wait_problem(raw: object) -> str | None:
    from pynenc_cpp.config import spin_wait_problem

    return spin_wait_problem(raw)


def _url_prefixes(raw: object) -> tuple[str, ...]:
    shown = redact_url(raw) if isinstance(raw, str) else None
    return (f"{shown!r}: ",) if shown is not None else (f"{type(raw).__name__}: ",)


def _shortcuts_problem(raw: object) -> str | None:
    from pynenc_cpp._shortcuts import problem

    return problem(raw)


def _spin_wait(raw: object) -> object:
    _problem_rule(_spin_wait_problem, repr, lambda r: (f"cpp_spin_wait_us={r!r}: ",)).convert(raw)
    return int(str(raw).strip()) if isinstance(raw, str) else raw


#: One rule per setting. A declared ``cpp_*`` field without a row is checked by the
#: type of its default (``_rule_for``).
RULES: dict[str, Rule] = {
    "cpp_sqlite_path": text("a file path (a string)"),
    "cpp_sqlite_synchronous": choice(SYNCHRONOUS_MODES),
    "cpp_sqlite_busy_timeout_ms": whole(0, 3_600_000),
    "cpp_sqlite_wal_buffer": flag(as_text=True),
    "cpp_redis_url": _problem_rule(redis_url_problem, _shown_url, _url_prefixes),
    "cpp_redis_min_replicas": whole(0, 1_000),
    "cpp_native": flag(as_text=True),
    "cpp_outage_budget_sec": number(0.0, MAX_OUTAGE_BUDGET_SEC),
    "cpp_spin_wait_us": Rule(_spin_wait),
    "cpp_shortcuts": _problem_rule(
        _shortcuts_problem, repr, lambda r: (f"cpp_shortcuts={r!r}: ", f"{r!r}: ")
    ),
    "cpp_runner_workers": whole(0),
    "cpp_runner_task_timeout_sec": number(0.0, 1e9),
    "cpp_runner_heartbeat_interval_sec": number(0.0, MAX_OUTAGE_BUDGET_SEC),
    "cpp_runner_retrieve_wait_sec": number(0.0, 3600.0),
    "cpp_runner_stop_grace_sec": number(what="seconds (< 0: as long as it takes)"),
    "cpp_runner_metrics_port": whole(0, 65535),
    "cpp_runner_metrics_addr": text("an address such as 127.0.0.1", empty=False),
    "cpp_runner_take_ahead": flag(),
    "cpp_runner_prefetch": whole(1, 1000),
    "cpp_runner_trigger_wake": flag(),
}


def _rule_for(name: str, default: object) -> Rule:
    if name in RULES:
        return RULES[name]
    if isinstance(default, bool):
        return flag()
    if isinstance(default, int):
        return whole(min(default, 0))
    if isinstance(default, float):
        return number(what="a number")
    return text()


# ---------------------------------------------------------------- the declared fields


def config_classes() -> tuple[type[ConfigPynencBase], ...]:
    """The config classes whose ``cpp_*`` fields are pynenc-cpp's settings."""
    from pynenc_cpp.config import ConfigCpp
    from pynenc_cpp.runner import ConfigCppRunner

    return (ConfigCpp, ConfigCppRunner)


def declared(cls: type[ConfigRoot]) -> dict[str, ConfigField[Any]]:
    """The ``cpp_*`` fields ``cls`` and its bases declare, by name."""
    fields: dict[str, ConfigField[Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if name.startswith(PREFIX) and isinstance(value, ConfigField):
                fields[name] = value
    return fields


def known_settings() -> dict[str, object]:
    """Every ``cpp_*`` setting and its default."""
    out: dict[str, object] = {}
    for cls in config_classes():
        out.update({name: f._default_value for name, f in declared(cls).items()})
    return out


def _keep(value: Any, _type: type) -> Any:
    return value


_RAW: dict[tuple[type, frozenset[str]], type[ConfigPynencBase]] = {}


def _raw_class(cls: type[ConfigPynencBase]) -> type[ConfigPynencBase]:
    """A twin of ``cls`` (same name, so the same config id, env and file keys) whose
    ``cpp_*`` fields keep the raw value: reading it resolves every source exactly as
    cistell resolves ``cls``, and records where each value came from, without casting."""
    fields = declared(cls)
    key = (cls, frozenset(fields))
    if key not in _RAW:
        raw = {name: ConfigField(f._default_value, mapper=_keep) for name, f in fields.items()}
        _RAW[key] = type(cls.__name__, (ConfigPynencBase,), raw)
    return _RAW[key]


# ---------------------------------------------------------------- sources


def _abs(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _files(config_filepath: str | None) -> Iterator[tuple[str, str, str]]:
    """(path, description, cistell's source name) of each config file in use."""
    if os.path.isfile("pyproject.toml"):
        path = _abs("pyproject.toml")
        yield path, f"[tool.pynenc] in {path}", "pyproject.toml"
    if config_filepath:
        yield _abs(config_filepath), _abs(config_filepath), "config_filepath"
    key = f"{_ENV}{ConfigPynencBase.ENV_FILEPATH}"
    if os.environ.get(key):
        yield _abs(os.environ[key]), f"{_abs(os.environ[key])} ({key})", "ENV_FILEPATH"
    for cls in config_classes():
        key = f"{_ENV}{cls.__name__.upper()}{_SEP}{ConfigPynencBase.ENV_FILEPATH}"
        if os.environ.get(key):
            yield _abs(os.environ[key]), f"{_abs(os.environ[key])} ({key})", "ENV_CLASS_FILEPATH"


def _source(prov: str, config_filepath: str | None) -> tuple[str, str | None, str | None]:
    """(description, folder a relative path is resolved against (None: the working
    directory), env var) of cistell's provenance ``prov``."""
    if prov == "config_values":
        return "from PynencBuilder / config_values", None, None
    if prov.startswith("env var "):
        key = prov.removeprefix("env var ").strip("'\"")
        return f"from env {key}", None, key
    for path, description, name in _files(config_filepath):
        if name == prov:
            return f"from {description}", os.path.dirname(path), None
    return f"from {prov}", None, None


def _cpp_keys(mapping: Mapping[str, Any], depth: int = 2) -> Iterator[str]:
    """The ``cpp_*`` keys of a config mapping and of its sections (``[tool.pynenc.cpp]``)."""
    for key, value in mapping.items():
        if isinstance(key, str) and key.startswith(PREFIX):
            yield key
        elif isinstance(value, Mapping) and depth > 1:
            yield from _cpp_keys(value, depth - 1)


def _check_names(config_values: Mapping[str, Any] | None, config_filepath: str | None) -> None:
    """BadConfig for a ``cpp_*`` key that is no declared setting, in any source."""
    known = known_settings()
    found: list[tuple[str, str]] = []
    if config_values:
        found += [(k, "from PynencBuilder / config_values") for k in _cpp_keys(config_values)]
    for path, description, _ in _files(config_filepath):
        values = load_config_file(path, ConfigPynencBase.TOML_CONFIG_ID)
        found += [(k, f"from {description}") for k in _cpp_keys(values)]
    classes = {f"{cls.__name__.upper()}{_SEP}" for cls in config_classes()}
    for key in os.environ:
        if not key.startswith(_ENV):
            continue
        rest = key.removeprefix(_ENV)
        for cls_key in classes:
            if rest.startswith(cls_key) and rest != f"{cls_key}{ConfigPynencBase.ENV_FILEPATH}":
                rest = rest.removeprefix(cls_key)
        if rest.lower().startswith(PREFIX):
            found.append((rest.lower(), f"from env {key}"))
    for name, where in found:
        if name not in known:
            near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
            hint = (
                f"did you mean {near[0]}?"
                if near
                else (f"the known ones are {', '.join(sorted(known))}")
            )
            raise BadConfig(f"unknown setting {name} ({where}): {hint}")


# ---------------------------------------------------------------- checking


def check_setting(name: str, raw: object, where: str) -> Any:
    """``raw`` as setting ``name`` converted by its rule; BadConfig naming the setting,
    ``where`` it came from and what is accepted."""
    rule = _rule_for(name, known_settings().get(name))
    try:
        return rule.convert(raw)
    except Refused as exc:
        raise BadConfig(f"{name}={rule.shown(raw)} ({where}): {exc}") from None


def strict_settings(
    config_values: dict[str, Any] | None, config_filepath: str | None
) -> dict[str, object]:
    """Every ``cpp_*`` setting set by some source, checked and converted (see the
    module docstring); BadConfig for the first problem found."""
    _check_names(config_values, config_filepath)
    out: dict[str, object] = {}
    for cls in config_classes():
        raw = _raw_class(cls)(config_values=config_values, config_filepath=config_filepath)
        for name in declared(cls):
            prov = raw._provenance.get(name)
            if prov is None:
                continue  # the default
            where, folder, env_key = _source(prov, config_filepath)
            value = check_setting(name, getattr(raw, name), where)
            if name == "cpp_sqlite_path" and isinstance(value, str) and value:
                value = _absolute_path(value, folder, env_key, config_values)
            out[name] = value
    return out


def _absolute_path(
    path: str, folder: str | None, env_key: str | None, config_values: dict[str, Any] | None
) -> str:
    """``path`` made absolute against ``folder``, and written back where a process the
    app starts would read it again from another working directory."""
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):  # the working directory only when needed: it may be gone
        expanded = os.path.join(folder or os.getcwd(), expanded)
    absolute = os.path.normpath(expanded)
    if absolute == path:
        return path
    if env_key is not None:
        os.environ[env_key] = absolute  # inherited by every process started from here
    elif config_values is not None and config_values.get("cpp_sqlite_path") == path:
        config_values["cpp_sqlite_path"] = absolute  # pickled with the app
    return absolute


class StrictCppSettings:
    """Mixin of the config classes that declare ``cpp_*`` fields (``ConfigCpp``,
    ``ConfigCppRunner``): every ``cpp_*`` setting is checked, from every source, before
    cistell casts one (BadConfig naming the setting and its source), and the checked
    values replace cistell's casts."""

    def __init__(
        self, config_values: dict[str, Any] | None = None, config_filepath: str | None = None
    ) -> None:
        checked = strict_settings(config_values, config_filepath)
        super().__init__(config_values, config_filepath)  # type: ignore[call-arg]
        apply(self, checked)  # type: ignore[arg-type]


def apply(conf: ConfigRoot, checked: Mapping[str, object]) -> None:
    """Sets ``conf``'s fields to their checked values (cistell's own cast of the raw
    value, such as ``bool("false")``, is replaced)."""
    fields = set(conf.all_fields)
    for name, value in checked.items():
        if name in fields:
            setattr(conf, name, value)
