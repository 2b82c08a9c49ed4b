"""Configuration of the pynenc-cpp components, read like every pynenc config.

Values come from the app's config (``PynencBuilder`` / ``config_values``), a
config file or environment variables, so a child process rebuilds the same
components from the pickled config alone. Every ``cpp_*`` value is checked when a
config object is built (``pynenc_cpp._settings``): ``BadConfig`` names the setting,
its source and the accepted values.
"""

from __future__ import annotations

from cistell import ConfigField
from pynenc.conf.config_base import ConfigPynencBase

from pynenc_cpp._settings import SYNCHRONOUS_MODES, StrictCppSettings, flag_value
from pynenc_cpp.errors import BadConfig

__all__ = ["SYNCHRONOUS_MODES", "ConfigCpp", "MAX_SPIN_WAIT_US", "spin_wait_problem"]


class ConfigCpp(StrictCppSettings, ConfigPynencBase):
    """
    :cvar ConfigField[str] cpp_sqlite_path:
        The SQLite file of the ``cpp_sqlite`` components (a string). Required by
        them, unused by others. A relative path is made absolute once, where the app
        is configured: against the working directory for the builder, ``config_values``
        and an environment variable (rewritten in place, so processes the app starts
        use the same file), against the file's folder for a config file.
    :cvar ConfigField[str] cpp_sqlite_synchronous:
        ``"normal"`` (default; WAL makes it crash-safe, a power loss may drop the
        last transactions) or ``"full"`` (fsync at every commit).
    :cvar ConfigField[int] cpp_sqlite_busy_timeout_ms:
        How long a write waits for another process's lock before failing (5000).
    :cvar ConfigField[str] cpp_sqlite_wal_buffer:
        Whether a commit's WAL frames are written with one system call (default
        ``"true"``; true or false, also yes/no, on/off, 1/0, stored as
        ``"true"``/``"false"``; read it through ``sqlite_wal_buffer``).
        ``"false"`` opens the file with SQLite's default VFS (docs/backends/sqlite.md).
    :cvar ConfigField[str] cpp_redis_url:
        The Redis server of the ``cpp_redis`` components, as redis-py reads URLs:
        ``redis://[[user]:password@]host[:port][/db]`` (IPv6 as ``[::1]``) or
        ``unix:///path/to.sock``, with ``?db=N&connect_timeout_ms=N&io_timeout_ms=N&password=P``;
        or a master behind Sentinel,
        ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db]``
        (``sentinel://`` too; ``?sentinel_password=P&sentinel_username=U`` for the
        sentinels) (docs/backends/redis.md).
    :cvar ConfigField[int] cpp_redis_min_replicas:
        How many replicas must acknowledge every write of the Redis components (0,
        the default: none). Above 0, each write is followed by ``WAIT`` in the same
        round trip, and a write fewer replicas acknowledged within 1 s (URL option
        ``min_replicas_timeout_ms``) raises an error instead of returning: an
        acknowledged submit, status change or result survives the master's loss
        (docs/backends/redis.md says what ``WAIT`` does not promise).
    :cvar ConfigField[str] cpp_native:
        Native mode (default ``"true"``; true or false, also yes/no, on/off, 1/0,
        stored as ``"true"``/``"false"``; anything else is refused; read it through
        ``native_enabled``): the ``Cpp*NativeOrchestrator`` classes run
        each hot-path step as one engine call. ``False`` makes them behave exactly
        like the mixed-mode orchestrators (pynenc's own ``BaseOrchestrator`` code
        over the native components). The builder's ``native=`` flag sets both this
        and ``orchestrator_cls``, so child processes rebuild the same mode.
    :cvar ConfigField[float] cpp_outage_budget_sec:
        How long a lost connection to the storage server is ridden out (60): the
        store of a task's outcome, a status change and a client's status or result
        read are retried with backoff for this long before the error reaches
        pynenc (which may then report the invocation FAILED). 0 never retries.
        See docs/reliability.md.
    :cvar ConfigField[int] cpp_spin_wait_us:
        How long, in microseconds (0 to 10000; default 500), a waiter of the memory
        and SQLite backends polls for what it waits for before it sleeps: an idle
        worker for the next route, a client for a final status, a writer for
        SQLite's write lock. A sleep and its wake-up cost tens of microseconds on a
        VM; within the budget the waiter sees the event at once, and its waker makes
        no wake-up call. At most one thread per wait point spins, yielding its CPU
        between polls, and a wait point that timed out idle sleeps at once until it
        is woken again. 0 never spins. Process-wide: each component sets it from its
        app's value when it first opens its storage, so the apps of one process
        should agree on it (bench/results/2026-12-02-stop-48-spin-before-sleep.md).
    """

    cpp_sqlite_path = ConfigField("")
    cpp_sqlite_synchronous = ConfigField("normal")
    cpp_sqlite_busy_timeout_ms = ConfigField(5000)
    cpp_sqlite_wal_buffer = ConfigField("true")  # a str, as cpp_native below
    cpp_redis_url = ConfigField("redis://127.0.0.1:6379/0")
    cpp_redis_min_replicas = ConfigField(0)
    # A str, not a bool: cistell casts env values with the default's type, and
    # bool("False") is True.
    cpp_native = ConfigField("true")
    cpp_outage_budget_sec = ConfigField(60.0)
    cpp_spin_wait_us = ConfigField(500)
    cpp_shortcuts = ConfigField("on")  # on | off | -name,-name (pynenc_cpp._shortcuts)

    @property
    def native_enabled(self) -> bool:
        """``cpp_native`` as a bool."""
        return _flag("cpp_native", self.cpp_native)

    @property
    def sqlite_wal_buffer(self) -> bool:
        """``cpp_sqlite_wal_buffer`` as a bool."""
        return _flag("cpp_sqlite_wal_buffer", self.cpp_sqlite_wal_buffer)


def _flag(name: str, raw: object) -> bool:
    """A flag set on the object after it was checked (``conf.cpp_native = ...``)."""
    value = flag_value(raw)
    if value is None:
        raise BadConfig(f"{name}={raw!r}: expected true or false")
    return value


#: The largest ``cpp_spin_wait_us`` (core/spin_wait.h's kMaxSpinWaitUs).
MAX_SPIN_WAIT_US = 10_000


def spin_wait_problem(raw: object) -> str | None:
    """What is wrong with ``raw`` as ``cpp_spin_wait_us`` (None: whole microseconds
    from 0 to ``MAX_SPIN_WAIT_US``, as an int or, from an environment variable, its
    text)."""
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.strip().isdigit():
        value = int(raw.strip())
    if value is None or not 0 <= value <= MAX_SPIN_WAIT_US:
        return f"cpp_spin_wait_us={raw!r}: expected whole microseconds from 0 to {MAX_SPIN_WAIT_US}"
    return None
