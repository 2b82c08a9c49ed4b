"""The pynenc app of every pynenc-based peer in bench/peers.py.

Client and worker processes import this module with the same ``PEERS_PYNENC``
environment variable (JSON), so both build the same app and resolve the same
task. Keys: ``app_id``, ``stack`` (pynenc-mem, pynenc-sqlite, pynenc-redis,
rustvello-redis, rustvello-sqlite, cpp-mem, cpp-sqlite, cpp-redis), ``mode``
(``native``/``mixed``/``""``), ``runner`` (``thread``, ``multithread``,
``process``, ``cpp``), ``url``, ``path``, ``sleep`` (pynenc's runner and
result-wait poll interval), ``status_cache`` (pynenc's ``cached_status_time``:
how long a client trusts a non-final status it read), ``slots`` (worker slots).
"""

from __future__ import annotations

import inspect
import json
import os
import time
from typing import Any

from pynenc import Pynenc, PynencBuilder
from pynenc.conf.config_task import ConcurrencyControlType

CFG: dict[str, Any] = json.loads(os.environ.get("PEERS_PYNENC", "{}") or "{}")


def builder_method(name: str) -> Any:
    """A builder method, core or registered by a plugin (pynenc loads plugins lazily)."""
    PynencBuilder._load_plugins()
    return getattr(PynencBuilder, name, None) or PynencBuilder._plugin_methods.get(name)


def unavailable(cfg: dict[str, Any]) -> str | None:
    """Why ``cfg``'s system cannot run in this environment, or None if it can."""
    stack, mode, runner = cfg.get("stack", ""), cfg.get("mode", ""), cfg.get("runner", "")
    if runner == "cpp" and builder_method("cpp_runner") is None:
        return "CppRunner not available (PynencBuilder has no cpp_runner())"
    if stack.startswith("cpp-"):
        method = builder_method(stack.replace("-", "_"))
        if method is None:
            return f"PynencBuilder has no {stack.replace('-', '_')}() (pynenc-cpp not installed)"
        if mode == "native" and "native" not in inspect.signature(method).parameters:
            return f"native mode not available ({stack.replace('-', '_')}() has no native=)"
    if stack.startswith("rustvello-"):
        try:
            import rustvello.rustvello  # noqa: F401
        except Exception as exc:  # an ImportError, or a broken native module
            return f"rustvello does not import: {type(exc).__name__}: {exc}"
        return _components_fail(cfg, ("pynenc", "pynenc-rustvello", "rustvello"))
    if stack == "pynenc-redis":
        if builder_method("redis") is None:
            return "pynenc-redis not installed (PynencBuilder has no redis())"
        return _components_fail(cfg, ("pynenc", "pynenc-redis"))
    return None


def _components_fail(cfg: dict[str, Any], packages: tuple[str, ...]) -> str | None:
    """Instantiate every component of a plugin's app; the first error, exactly."""
    import importlib.metadata as md

    probe = build({**cfg, "app_id": f"{cfg['app_id']}-probe"})
    for name in ("broker", "orchestrator", "state_backend", "trigger", "client_data_store"):
        try:
            getattr(probe, name)
        except Exception as exc:
            versions = ", ".join(f"{p} {md.version(p)}" for p in packages)
            return f"does not run with {versions}: app.{name}: {type(exc).__name__}: {exc}"
    return None


def build(cfg: dict[str, Any]) -> Pynenc:
    """The app described by ``cfg`` (see the module docstring)."""
    b = PynencBuilder().app_id(cfg["app_id"]).logging_level("error")
    stack, mode = cfg["stack"], cfg.get("mode", "")
    if stack.startswith("cpp-") and cfg.get("metrics") is False:
        from pynenc_cpp.metrics import set_engine_metrics_enabled

        set_engine_metrics_enabled(False)  # the "-nometrics" rows: counting's cost
    native: dict[str, Any] = {}
    if stack.startswith("cpp-") and mode:
        method = builder_method(stack.replace("-", "_"))
        if "native" in inspect.signature(method).parameters:
            native = {"native": mode == "native"}
    if stack == "pynenc-mem":
        b.memory()
    elif stack == "pynenc-sqlite":
        b.sqlite(sqlite_db_path=cfg["path"])
    elif stack == "pynenc-redis":
        b.redis(url=cfg["url"])
    elif stack == "rustvello-redis":
        b.rustvello_redis(redis_url=cfg["url"], native=mode != "mixed")
    elif stack == "rustvello-sqlite":
        b.rustvello_sqlite(sqlite_db_path=cfg["path"], native=mode != "mixed")
    elif stack == "cpp-mem":
        b.cpp_mem(**native)
    elif stack == "cpp-sqlite":
        b.cpp_sqlite(path=cfg["path"], **native)
    elif stack == "cpp-redis":
        b.cpp_redis(url=cfg["url"], **native)
    else:
        raise ValueError(f"unknown stack {stack!r}")
    slots = int(cfg.get("slots", 2))
    runner = cfg["runner"]
    if runner == "thread":
        b.thread_runner(min_threads=1, max_threads=slots)
    elif runner == "multithread":
        b.multi_thread_runner(min_threads=1, max_threads=1, enforce_max_processes=True)
        b.custom_config(min_processes=slots, max_processes=slots)
    elif runner == "process":
        b.process_runner()
    elif runner == "cpp":
        prefetch = int(cfg.get("prefetch", 1))
        b.cpp_runner(workers=slots, **({"prefetch": prefetch} if prefetch != 1 else {}))
    else:
        raise ValueError(f"unknown runner {runner!r}")
    sleep = float(cfg.get("sleep", 0.01))
    b.runner_tuning(
        runner_loop_sleep_time_sec=sleep,
        invocation_wait_results_sleep_time_sec=sleep,
        min_parallel_slots=1,
    )
    b.custom_config(cached_status_time=float(cfg.get("status_cache", 0.1)))
    return b.build()


#: Why this module's system cannot run here (None: it can); checked before building.
REASON: str | None = unavailable(CFG) if CFG else "PEERS_PYNENC is not set"
app = build(CFG) if REASON is None else PynencBuilder().app_id("peers-unset").memory().build()


@app.task
def noop(i: int) -> int:
    """The benchmark's task body: returns its argument."""
    return i


@app.task(running_concurrency=ConcurrencyControlType.KEYS, key_arguments=("i",))
def keyed_noop(i: int) -> int:
    """``noop`` under running concurrency control by its argument (each call a key
    of its own, so nothing is deferred): the ``-controlled`` rows, the cost of the
    atomic checks alone (docs/reliability.md)."""
    return i


@app.task
def stamp(i: int) -> int:
    """bench/profile_serial.py's task body: the system-wide monotonic clock (ns) when
    the body ran, so a client in another process can split a serial task's time."""
    return time.monotonic_ns()
