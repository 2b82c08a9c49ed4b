"""The pynenc builder plugin: adds ``cpp_mem()``, ``cpp_sqlite()``, ``cpp_redis()``
and ``cpp_runner()`` to ``PynencBuilder``.

Registered in the ``pynenc.plugins`` entry-point group (see pyproject.toml), so
the methods are available as soon as pynenc-cpp is installed::

    app = PynencBuilder().app_id("demo").cpp_sqlite(path="demo.db").build()

``cpp_sqlite()`` and ``cpp_redis()`` also select ``CppRunner`` unless the builder
names another runner (before or after them), so ``pynenc --app tasks.app runner
start`` serves such an app as it is. ``cpp_mem()`` does not: its memory is this
process's, which no ``runner start`` process can see, so it keeps pynenc's default as
``memory()`` does (name ``cpp_runner()`` or ``thread_runner()`` to run it in-process).

``build()`` of a builder that chose a ``cpp_*`` backend or ``cpp_runner()`` checks
every ``cpp_*`` setting from every source (``pynenc_cpp._settings``) and raises
``BadConfig`` itself (pynenc wraps a plugin validator's error in a ``ValueError``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pynenc_cpp._settings import check_setting, strict_settings
from pynenc_cpp.errors import BadConfig

if TYPE_CHECKING:
    from pynenc.builder import PynencBuilder

_KINDS = ("broker", "orchestrator", "state_backend", "trigger", "client_data_store")
_CLASS_STEMS = {
    "broker": "Broker",
    "orchestrator": "Orchestrator",
    "state_backend": "StateBackend",
    "trigger": "Trigger",
    "client_data_store": "ClientDataStore",
}


def components(backend: str, native: bool = True) -> dict[str, str]:
    """The ``*_cls`` config of every component for ``backend`` ("Mem", "Sqlite", "Redis").

    :param native: Native mode (``Cpp<Backend>NativeOrchestrator``, the default)
        or mixed mode (``Cpp<Backend>Orchestrator``: pynenc's orchestration code
        over the native components).
    """
    classes = {f"{kind}_cls": f"Cpp{backend}{_CLASS_STEMS[kind]}" for kind in _KINDS}
    if native:
        classes["orchestrator_cls"] = f"Cpp{backend}NativeOrchestrator"
    return classes


#: Component class names per backend (native mode), as pynenc resolves them from config.
MEM_COMPONENTS: dict[str, str] = components("Mem")
SQLITE_COMPONENTS: dict[str, str] = components("Sqlite")
REDIS_COMPONENTS: dict[str, str] = components("Redis")


#: The Python type each typed builder argument takes (a TypeError otherwise, as for
#: any Python function); its value is then checked by its setting's rule.
_ARG_TYPES: dict[str, tuple[type, ...]] = {
    "native": (bool,),
    "wal_buffer": (bool,),
    "busy_timeout_ms": (int,),
    "workers": (int,),
    "prefetch": (int,),
    "task_timeout_sec": (int, float),
    "synchronous": (str,),
    "min_replicas": (int,),
}


def _arg(name: str, raw: object, method: str, arg: str) -> Any:
    """A builder argument: TypeError for a wrong Python type, else checked by the rule
    of setting ``name`` (BadConfig naming the setting and the argument)."""
    types = _ARG_TYPES.get(arg)
    if types is not None and (
        not isinstance(raw, types) or (isinstance(raw, bool) and bool not in types)
    ):
        expected = {bool: "a bool", int: "an int", str: "a str"}.get(types[0], "a number")
        expected = "a number" if len(types) > 1 else expected
        raise TypeError(f"{arg} must be {expected}, got {type(raw).__name__}")
    return check_setting(name, raw, f"from {method}({arg}=...)")


def _strict_build(builder: PynencBuilder) -> None:
    """Makes ``builder.build()`` check every cpp_* setting first, raising BadConfig
    itself: pynenc runs plugin validators inside ``except Exception`` and re-raises
    a ``ValueError`` (``_validate`` below still runs, for builders configured with
    ``custom_config`` alone)."""

    def build() -> Any:
        strict_settings(builder._config, None)
        return type(builder).build(builder)

    builder.__dict__["build"] = build


def _use(builder: PynencBuilder, backend: str, native: bool, in_memory: bool) -> None:
    # Importing registers the classes as subclasses of pynenc's ABCs, which is
    # how pynenc resolves the class names.
    import pynenc_cpp  # noqa: F401

    native_text = _arg("cpp_native", native, f"cpp_{backend.lower()}", "native")
    classes = components(backend, native=native_text == "true")
    builder._config.update(classes)
    builder._config["cpp_native"] = native_text
    if not in_memory:
        # A runner named before (here) or after (it overwrites this) wins.
        builder._config.setdefault("runner_cls", "CppRunner")
    _strict_build(builder)
    # pynenc's memory check knows only its own runners; CppRunner shares the process.
    builder._using_memory_components = (
        in_memory and builder._config.get("runner_cls") != "CppRunner"
    )
    builder._plugin_components.clear()
    builder._plugin_components.update(classes)


def cpp_mem(builder: PynencBuilder, *, native: bool = True) -> PynencBuilder:
    """Use the in-memory native components for every backend.

    Like pynenc's ``memory()``: state lives in this process, so only runners that
    share the process (``ThreadRunner``, ``DummyRunner``) can be used with it.

    :param native: Native mode (default): each orchestration step is one engine
        call. ``False``: mixed mode (pynenc's orchestration code, native storage).
    """
    _use(builder, "Mem", native, in_memory=True)
    return builder


def cpp_sqlite(
    builder: PynencBuilder,
    path: str | os.PathLike[str] | None = None,
    *,
    synchronous: str = "normal",
    busy_timeout_ms: int = 5000,
    wal_buffer: bool = True,
    native: bool = True,
) -> PynencBuilder:
    """Use the native SQLite components: every component of the app in one file.

    :param path: The database file (created if missing; ``~`` is expanded). A
        relative path is resolved now, against the working directory, so the
        processes this one starts open the same file; a process that builds the app
        itself from another folder resolves it there. Default: a file named after
        the app id in the system temp directory.
    :param synchronous: ``"normal"`` (default, WAL) or ``"full"`` (fsync every commit).
    :param busy_timeout_ms: How long a write waits for another process's lock.
    :param wal_buffer: Write a commit's WAL frames with one system call (default);
        ``False`` opens the file with SQLite's default VFS (docs/backends/sqlite.md).
    :param native: Native mode (default): each orchestration step is one engine
        call (one SQLite transaction). ``False``: mixed mode.
    """
    method = "cpp_sqlite"
    synchronous = _arg("cpp_sqlite_synchronous", synchronous, method, "synchronous")
    busy_timeout_ms = _arg("cpp_sqlite_busy_timeout_ms", busy_timeout_ms, method, "busy_timeout_ms")
    wal_text = _arg("cpp_sqlite_wal_buffer", wal_buffer, method, "wal_buffer")
    if path is None:
        app_id = builder._config.get("app_id", "pynenc")
        path = os.path.join(tempfile.gettempdir(), f"pynenc-cpp-{app_id}.db")
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    path = _arg("cpp_sqlite_path", path, method, "path")
    _use(builder, "Sqlite", native, in_memory=False)
    builder._config["cpp_sqlite_path"] = os.path.abspath(os.path.expanduser(path))
    builder._config["cpp_sqlite_synchronous"] = synchronous
    builder._config["cpp_sqlite_busy_timeout_ms"] = busy_timeout_ms
    builder._config["cpp_sqlite_wal_buffer"] = wal_text
    return builder


def cpp_redis(
    builder: PynencBuilder,
    url: str | None = None,
    *,
    sentinels: Sequence[tuple[str, int] | str] | None = None,
    master_name: str | None = None,
    password: str | None = None,
    db: int = 0,
    sentinel_password: str | None = None,
    min_replicas: int = 0,
    native: bool = True,
) -> PynencBuilder:
    """Use the native Redis components: every component of the app on one server.

    :param url: ``redis://[[user]:password@]host[:port][/db]`` (an ACL user and
        its password, or only a password; percent-encoded; the host may be an IPv6
        literal such as ``[::1]``) or ``unix:///path/to.sock`` (a unix socket),
        optionally with ``?db=N&connect_timeout_ms=N&io_timeout_ms=N&password=P``;
        or a master behind Sentinel:
        ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db]``
        (``sentinel://`` too; the hosts are the sentinels, port 26379 by default;
        ``?sentinel_password=P&sentinel_username=U`` for the sentinels).
        ``rediss://`` is a clear error (no TLS in this build). Errors never show
        the password. Keys are namespaced by app id, so several apps share one
        database. Default: ``redis://127.0.0.1:6379/0``.
    :param sentinels: Instead of ``url``: the Sentinel deployment's sentinels, as
        ``(host, port)`` pairs or ``"host:port"`` strings, with ``master_name`` (and
        ``password``, ``db``, ``sentinel_password`` for it). The master is the one
        the sentinels name, asked again on every new connection, so the app follows
        a failover; a server that reports itself a replica is never written to.
    :param master_name: The name the sentinels monitor the master by.
    :param password: The master's password (with ``sentinels``).
    :param db: The master's database (with ``sentinels``).
    :param sentinel_password: The sentinels' password (with ``sentinels``).
    :param min_replicas: ``cpp_redis_min_replicas``: how many replicas must
        acknowledge every write (``WAIT``) before it returns; 0 (default): none.
    :param native: Native mode (default): each orchestration step is one engine
        call. ``False``: mixed mode.
    """
    if sentinels is not None:
        if url is not None:
            raise BadConfig("cpp_redis(): give url= or sentinels=, not both")
        url = sentinel_url(sentinels, master_name, password, db, sentinel_password)
    elif master_name is not None or password is not None or sentinel_password is not None or db:
        raise BadConfig(
            "cpp_redis(): master_name=, password=, db= and sentinel_password= go with "
            "sentinels=; with url= they are part of the URL"
        )
    url = _arg("cpp_redis_url", url or "redis://127.0.0.1:6379/0", "cpp_redis", "url")
    replicas = _arg("cpp_redis_min_replicas", min_replicas, "cpp_redis", "min_replicas")
    _use(builder, "Redis", native, in_memory=False)
    builder._config["cpp_redis_url"] = url
    builder._config["cpp_redis_min_replicas"] = replicas
    return builder


def sentinel_url(
    sentinels: Sequence[tuple[str, int] | str],
    master_name: str | None,
    password: str | None = None,
    db: int = 0,
    sentinel_password: str | None = None,
) -> str:
    """The ``redis+sentinel://`` URL of a Sentinel deployment (what ``cpp_redis``
    builds from ``sentinels=``; passwords percent-encoded)."""
    if isinstance(sentinels, str) or not sentinels:
        raise BadConfig(
            "cpp_redis(sentinels=...): expected a non-empty list of (host, port) or 'host:port'"
        )
    if not master_name or not isinstance(master_name, str):
        raise BadConfig("cpp_redis(sentinels=...) needs master_name=, the name Sentinel monitors")
    if isinstance(db, bool) or not isinstance(db, int) or not 0 <= db <= 1_000_000:
        raise BadConfig(f"cpp_redis(db={db!r}): expected a database number from 0 to 1000000")
    hosts = []
    for entry in sentinels:
        if isinstance(entry, str):
            hosts.append(entry)
            continue
        if not (isinstance(entry, tuple | list) and len(entry) == 2):
            raise BadConfig(f"cpp_redis(sentinels=...): {entry!r} is not (host, port)")
        host, port = entry
        if not isinstance(host, str) or isinstance(port, bool) or not isinstance(port, int):
            raise BadConfig(f"cpp_redis(sentinels=...): {entry!r} is not (host, port)")
        hosts.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    auth = f":{quote(password, safe='')}@" if password else ""
    query = f"?sentinel_password={quote(sentinel_password, safe='')}" if sentinel_password else ""
    return f"redis+sentinel://{auth}{','.join(hosts)}/{quote(master_name, safe='')}/{db}{query}"


def cpp_runner(
    builder: PynencBuilder, workers: int = 0, task_timeout_sec: float = 0.0, prefetch: int = 1
) -> PynencBuilder:
    """Run invocations with ``CppRunner``: the runner loop in C++.

    :param workers: Worker threads (parallel invocations); 0: one per CPU.
    :param task_timeout_sec: An invocation running longer is set FAILED with a
        ``TaskTimeoutError`` and its worker replaced; 0: no timeout.
    :param prefetch: The most invocations a worker holds, 1 to 1000
        (``cpp_runner_prefetch``; 1, the default, prefetches nothing).
    """
    workers = _arg("cpp_runner_workers", workers, "cpp_runner", "workers")
    timeout = _arg(
        "cpp_runner_task_timeout_sec", task_timeout_sec, "cpp_runner", "task_timeout_sec"
    )
    prefetch = _arg("cpp_runner_prefetch", prefetch, "cpp_runner", "prefetch")
    import pynenc_cpp  # noqa: F401  (registers CppRunner for pynenc's name lookup)

    builder._config["runner_cls"] = "CppRunner"
    builder._using_memory_components = False  # CppRunner's workers share the process
    builder._config["cpp_runner_workers"] = workers
    builder._config["cpp_runner_task_timeout_sec"] = timeout
    builder._config["cpp_runner_prefetch"] = prefetch
    _strict_build(builder)
    return builder


def _uses_pynenc_cpp(config: dict[str, Any]) -> bool:
    return any(str(k).startswith("cpp_") for k in config) or any(
        str(k).endswith("_cls") and str(v).startswith("Cpp") for k, v in config.items()
    )


def _validate(config: dict[str, Any]) -> None:
    """Every cpp_* setting of a builder that uses pynenc-cpp, checked from every source
    (pynenc re-raises the BadConfig as ``ValueError("Plugin configuration validation
    failed: ...")``; builders that called a cpp_* method raised it before, see
    ``_strict_build``)."""
    if _uses_pynenc_cpp(config):
        strict_settings(config, None)


class CppPlugin:
    """Entry point object: pynenc calls ``register_builder_methods`` once."""

    @staticmethod
    def register_builder_methods(builder_cls: type[PynencBuilder]) -> None:
        builder_cls.register_plugin_method("cpp_mem", cpp_mem)
        builder_cls.register_plugin_method("cpp_sqlite", cpp_sqlite)
        builder_cls.register_plugin_method("cpp_redis", cpp_redis)
        builder_cls.register_plugin_method("cpp_runner", cpp_runner)
        builder_cls.register_plugin_validator(_validate)
