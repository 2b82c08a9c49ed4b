"""Shared plumbing of the adapters: each adapter class is written once against
the engine, and the backend (memory, SQLite or Redis) is chosen by a small mixin that
says which engine URI to open."""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from pynenc_cpp import _core
from pynenc_cpp._outage import Settled, ride_out
from pynenc_cpp._settings import check_setting
from pynenc_cpp._storage import storage_for
from pynenc_cpp._urls import url_option
from pynenc_cpp.config import ConfigCpp
from pynenc_cpp.errors import BadConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from pynenc import Pynenc

T = TypeVar("T")

#: Where a value set on a ConfigCpp object after it was built came from (the values
#: read from the app's configuration were checked when it was built).
_SET_ON_CONF = "set on the app's ConfigCpp"


class CppComponentMixin:
    """Gives an adapter ``cpp_conf``; subclasses pick the backend via ``engine_uri``."""

    app: Pynenc

    @cached_property
    def cpp_conf(self) -> ConfigCpp:
        return ConfigCpp(
            config_values=self.app.config_values,
            config_filepath=self.app.config_filepath,
        )

    @property
    @abstractmethod
    def engine_uri(self) -> str:
        """The engine URI this component opens."""

    @cached_property
    def storage(self) -> _core.Storage:
        """The engine storage of this component's app and URI: the one object that
        owns the connection pool, database or memory the app's pynenc-cpp components
        share, and hands out their engine ports (``_storage.storage_for``)."""
        _core.set_spin_wait_us(spin_wait_us(self.cpp_conf))
        return storage_for(self.app, self.engine_uri)

    def shares_storage_with(self, other: object) -> bool:
        """True if ``other`` is a pynenc-cpp component on this component's storage
        (same app object and URI): native composites may then work on both."""
        return isinstance(other, CppComponentMixin) and other.storage is self.storage

    @cached_property
    def outage_budget_sec(self) -> float:
        """``cpp_outage_budget_sec``, checked: a number between 0 and a day."""
        raw = self.cpp_conf.cpp_outage_budget_sec
        return float(check_setting("cpp_outage_budget_sec", raw, _SET_ON_CONF))

    def _ride_out(
        self,
        call: Callable[[], T],
        what: str,
        settled: Callable[[], bool] | None = None,
    ) -> T | Settled:
        """``call()`` retried while the storage server is unreachable (``_outage``)."""
        return ride_out(call, budget_sec=self.outage_budget_sec, what=what, settled=settled)

    def _retried(self, call: Callable[[], T], what: str) -> T:
        """A read, or a write that can be applied twice, retried while the storage server
        is unreachable."""
        out = ride_out(call, budget_sec=self.outage_budget_sec, what=what)
        assert not isinstance(out, Settled)  # no `settled`: never SETTLED
        return out


class MemBackend:
    """Process-local storage, one per app object (shared by its components)."""

    @property
    def engine_uri(self) -> str:
        return "memory://"


class SqliteBackend:
    """One SQLite file shared by all components of the app (and by other apps)."""

    cpp_conf: ConfigCpp

    @property
    def engine_uri(self) -> str:
        return sqlite_uri(self.cpp_conf)


class RedisBackend:
    """A Redis server shared by all components of the app (and by other apps)."""

    cpp_conf: ConfigCpp

    @property
    def engine_uri(self) -> str:
        return redis_uri(self.cpp_conf)


def spin_wait_us(conf: ConfigCpp) -> int:
    """``cpp_spin_wait_us``, checked (``BadConfig`` naming the problem)."""
    return int(check_setting("cpp_spin_wait_us", conf.cpp_spin_wait_us, _SET_ON_CONF))


def redis_uri(conf: ConfigCpp) -> str:
    """The engine URI for the Redis settings of ``conf`` (``cpp_redis_url``, with
    ``cpp_redis_min_replicas`` as its ``min_replicas`` option); BadConfig if unusable."""
    url = str(check_setting("cpp_redis_url", conf.cpp_redis_url, _SET_ON_CONF))
    replicas = int(
        check_setting("cpp_redis_min_replicas", conf.cpp_redis_min_replicas, _SET_ON_CONF)
    )
    if replicas == 0:
        return url
    given = url_option(url, "min_replicas")
    if given is not None:
        if int(given) != replicas:
            raise BadConfig(
                f"cpp_redis_min_replicas={replicas} and the URL's min_replicas={given} "
                "disagree: set one of them"
            )
        return url
    base, hash_, fragment = url.partition("#")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}min_replicas={replicas}{hash_}{fragment}"


def sqlite_uri(conf: ConfigCpp) -> str:
    """The engine URI for the SQLite settings of ``conf``; BadConfig if unusable."""
    path = conf.cpp_sqlite_path
    if not path:
        raise BadConfig(
            "cpp_sqlite_path is not set: build the app with PynencBuilder().cpp_sqlite(path=...), "
            "or set cpp_sqlite_path in [tool.pynenc] of pyproject.toml, in the file named by "
            "PYNENC__FILEPATH, or in PYNENC__CPP_SQLITE_PATH"
        )
    check_setting("cpp_sqlite_path", path, _SET_ON_CONF)
    synchronous = check_setting("cpp_sqlite_synchronous", conf.cpp_sqlite_synchronous, _SET_ON_CONF)
    busy_ms = check_setting(
        "cpp_sqlite_busy_timeout_ms", conf.cpp_sqlite_busy_timeout_ms, _SET_ON_CONF
    )
    return f"sqlite://{path}?synchronous={synchronous}&busy_timeout_ms={busy_ms}" + (
        "" if conf.sqlite_wal_buffer else "&wal_buffer=off"
    )
