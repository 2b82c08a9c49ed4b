"""The pynenc builder plugin: adds ``cpp_mem()``, ``cpp_sqlite()``, ``cpp_redis()``
and ``cpp_runner()`` to ``PynencBuilder``.

Registered in the ``pynenc.plugins`` entry-point group (see pyproject.toml), so
the methods are available as soon as pynenc-cpp is installed::

    app = PynencBuilder().app_id("demo").cpp_sqlite(path="demo.db").build()
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any

from pynenc_cpp._urls import redis_url_problem
from pynenc_cpp.config import SYNCHRONOUS_MODES, spin_wait_problem

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


_FLAG_VALUES = ("true", "false", "1", "0", "yes", "no", "on", "off")


def _check_native(native: object) -> bool:
    if not isinstance(native, bool):
        raise TypeError(f"native must be a bool, got {type(native).__name__}")
    return native


def _use(builder: PynencBuilder, backend: str, native: bool, in_memory: bool) -> None:
    # Importing registers the classes as subclasses of pynenc's ABCs, which is
    # how pynenc resolves the class names.
    import pynenc_cpp  # noqa: F401

    classes = components(backend, native=_check_native(native))
    builder._config.update(classes)
    builder._config["cpp_native"] = "true" if native else "false"
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

    :param path: The database file (created if missing). Relative paths are
        resolved now, so child processes open the same file. Default: a file
        named after the app id in the system temp directory.
    :param synchronous: ``"normal"`` (default, WAL) or ``"full"`` (fsync every commit).
    :param busy_timeout_ms: How long a write waits for another process's lock.
    :param wal_buffer: Write a commit's WAL frames with one system call (default);
        ``False`` opens the file with SQLite's default VFS (docs/backends/sqlite.md).
    :param native: Native mode (default): each orchestration step is one engine
        call (one SQLite transaction). ``False``: mixed mode.
    """
    if synchronous not in SYNCHRONOUS_MODES:
        raise ValueError(f"synchronous={synchronous!r}: expected one of {SYNCHRONOUS_MODES}")
    if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
        raise TypeError(f"busy_timeout_ms must be an int, got {type(busy_timeout_ms).__name__}")
    if not 0 <= busy_timeout_ms <= 3_600_000:
        raise ValueError(f"busy_timeout_ms={busy_timeout_ms}: expected 0..3600000")
    if not isinstance(wal_buffer, bool):
        raise TypeError(f"wal_buffer must be a bool, got {type(wal_buffer).__name__}")
    if path is None:
        app_id = builder._config.get("app_id", "pynenc")
        path = os.path.join(tempfile.gettempdir(), f"pynenc-cpp-{app_id}.db")
    _use(builder, "Sqlite", native, in_memory=False)
    builder._config["cpp_sqlite_path"] = os.path.abspath(os.fspath(path))
    builder._config["cpp_sqlite_synchronous"] = synchronous
    builder._config["cpp_sqlite_busy_timeout_ms"] = busy_timeout_ms
    builder._config["cpp_sqlite_wal_buffer"] = "true" if wal_buffer else "false"
    return builder


def cpp_redis(
    builder: PynencBuilder, url: str = "redis://127.0.0.1:6379/0", *, native: bool = True
) -> PynencBuilder:
    """Use the native Redis components: every component of the app on one server.

    :param url: ``redis://[[user]:password@]host[:port][/db]`` (an ACL user and
        its password, or only a password; percent-encoded; the host may be an IPv6
        literal such as ``[::1]``) or ``unix:///path/to.sock`` (a unix socket),
        optionally with ``?db=N&connect_timeout_ms=N&io_timeout_ms=N&password=P``.
        ``rediss://`` is a clear error (no TLS in this build). Errors never show
        the password. Keys are namespaced by app id, so several apps share one
        database.
    :param native: Native mode (default): each orchestration step is one engine
        call. ``False``: mixed mode.
    """
    if problem := redis_url_problem(url):
        raise ValueError(f"url={problem}")
    _use(builder, "Redis", native, in_memory=False)
    builder._config["cpp_redis_url"] = url
    return builder


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
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise TypeError(f"workers must be an int, got {type(workers).__name__}")
    if workers < 0:
        raise ValueError(f"workers={workers}: expected >= 0")
    if isinstance(task_timeout_sec, bool) or not isinstance(task_timeout_sec, int | float):
        raise TypeError(f"task_timeout_sec must be a number, got {type(task_timeout_sec).__name__}")
    if not 0 <= task_timeout_sec < 1e9:
        raise ValueError(f"task_timeout_sec={task_timeout_sec}: expected >= 0")
    if isinstance(prefetch, bool) or not isinstance(prefetch, int):
        raise TypeError(f"prefetch must be an int, got {type(prefetch).__name__}")
    if not 1 <= prefetch <= 1000:
        raise ValueError(f"prefetch={prefetch}: expected 1 to 1000")
    import pynenc_cpp  # noqa: F401  (registers CppRunner for pynenc's name lookup)

    builder._config["runner_cls"] = "CppRunner"
    builder._using_memory_components = False  # CppRunner's workers share the process
    builder._config["cpp_runner_workers"] = workers
    builder._config["cpp_runner_task_timeout_sec"] = float(task_timeout_sec)
    builder._config["cpp_runner_prefetch"] = prefetch
    return builder


def _validate(config: dict[str, Any]) -> None:
    """Reject wrong types and values of the cpp_* settings before anything is built."""
    path = config.get("cpp_sqlite_path")
    if path is not None and not isinstance(path, str):
        raise TypeError(f"cpp_sqlite_path must be a str, got {type(path).__name__}")
    mode = config.get("cpp_sqlite_synchronous")
    if mode is not None and mode not in SYNCHRONOUS_MODES:
        raise ValueError(f"cpp_sqlite_synchronous={mode!r}: expected one of {SYNCHRONOUS_MODES}")
    url = config.get("cpp_redis_url")
    if url is not None and (problem := redis_url_problem(url)):
        raise ValueError(f"cpp_redis_url={problem}")
    native = config.get("cpp_native")
    if native is not None and str(native).strip().lower() not in _FLAG_VALUES:
        raise ValueError(f"cpp_native={native!r}: expected true or false")
    wal_buffer = config.get("cpp_sqlite_wal_buffer")
    if wal_buffer is not None and str(wal_buffer).strip().lower() not in _FLAG_VALUES:
        raise ValueError(f"cpp_sqlite_wal_buffer={wal_buffer!r}: expected true or false")
    spin = config.get("cpp_spin_wait_us")
    if spin is not None and (problem := spin_wait_problem(spin)):
        raise ValueError(problem)
    timeout = config.get("cpp_sqlite_busy_timeout_ms")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        raise TypeError(f"cpp_sqlite_busy_timeout_ms must be an int, got {type(timeout).__name__}")


class CppPlugin:
    """Entry point object: pynenc calls ``register_builder_methods`` once."""

    @staticmethod
    def register_builder_methods(builder_cls: type[PynencBuilder]) -> None:
        builder_cls.register_plugin_method("cpp_mem", cpp_mem)
        builder_cls.register_plugin_method("cpp_sqlite", cpp_sqlite)
        builder_cls.register_plugin_method("cpp_redis", cpp_redis)
        builder_cls.register_plugin_method("cpp_runner", cpp_runner)
        builder_cls.register_plugin_validator(_validate)
