"""Redis URL checks shared by the builder and the adapters (nothing but ``_redact``
imported: the builder plugin uses it before pynenc-cpp's engine is loaded)."""

from __future__ import annotations

from pynenc_cpp._redact import redact_url

REDIS_URL_FORMS = (
    "redis://[[user]:password@]host[:port][/db], unix:///path/to.sock[?db=N] or "
    "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db]"
)
#: The schemes of a Redis behind Sentinel (``sentinel://`` as kombu writes it).
SENTINEL_SCHEMES = ("redis+sentinel://", "sentinel://")


def redis_url_problem(url: object) -> str | None:
    """Why ``url`` cannot be a ``cpp_redis_url`` (a message that never shows a
    password), or None. The engine checks the rest when it connects."""
    if not isinstance(url, str):
        return f"{type(url).__name__}: expected {REDIS_URL_FORMS}"
    if url.startswith("rediss://"):
        return (
            f"{redact_url(url)!r}: rediss:// (Redis over TLS) is not supported by this build: "
            "the hiredis it links (Debian's 0.14) has no TLS. Reach the server through a local "
            "TLS tunnel (stunnel, spiped) with a redis:// or unix:// URL"
        )
    if not url.startswith(("redis://", "unix://", *SENTINEL_SCHEMES)):
        return f"{redact_url(url)!r}: expected {REDIS_URL_FORMS}"
    if url.startswith("redis://") and (problem := _host_port_problem(url)):
        return f"{redact_url(url)!r}: {problem}"
    sentinel = url.startswith(SENTINEL_SCHEMES)
    if sentinel and (problem := _sentinel_problem(url)):
        return f"{redact_url(url)!r}: {problem}"
    if problem := _options_problem(url, sentinel=sentinel):
        return f"{redact_url(url)!r}: {problem}"
    return None


#: The engine's URL options (``ParseRedisLocation``) and the whole numbers each takes.
_NUMERIC_OPTIONS = {
    "db": (0, 1_000_000, "expected a database number from 0 to 1000000"),
    "connect_timeout_ms": (1, 3_600_000, "expected milliseconds between 1 and 3600000"),
    "io_timeout_ms": (1, 3_600_000, "expected milliseconds between 1 and 3600000"),
    "min_replicas": (0, 1_000, "expected a number of replicas from 0 to 1000"),
    "min_replicas_timeout_ms": (1, 3_600_000, "expected milliseconds between 1 and 3600000"),
}
_KNOWN_OPTIONS = (
    "db, connect_timeout_ms, io_timeout_ms, password, min_replicas, min_replicas_timeout_ms, "
    "and with Sentinel sentinel_username, sentinel_password"
)


def url_option(url: str, key: str) -> str | None:
    """The value of option ``key`` in the ``?options`` of ``url`` (the last one), or None."""
    found = None
    for pair in filter(None, url.partition("?")[2].partition("#")[0].split("&")):
        name, _, value = pair.partition("=")
        if name == key:
            found = value
    return found


def _options_problem(url: str, *, sentinel: bool = False) -> str | None:
    """What is wrong with the ``?options`` of a URL, as the engine reads them, or None."""
    query = url.partition("?")[2].partition("#")[0]
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        if key == "password" or (sentinel and key in ("sentinel_password", "sentinel_username")):
            continue
        if key not in _NUMERIC_OPTIONS:
            return f"unknown option {key!r}; known: {_KNOWN_OPTIONS}"
        low, high, expected = _NUMERIC_OPTIONS[key]
        if not (value.isascii() and value.isdigit() and low <= int(value) <= high):
            return f"option {key}={value!r}: {expected}"
    return None


def _host_port_problem(url: str) -> str | None:
    """What is wrong with the host, port or database of a ``redis://`` URL, read as
    the engine reads it (``ParseRedisLocation``), or None. A part of a URL with user
    info is never quoted: a password with an unencoded ``/`` could land in it."""
    rest = url.removeprefix("redis://")
    stops = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    at = rest.rfind("@", 0, min(stops) if stops else len(rest))
    secretive = "@" in url

    def shown(part: str) -> str:
        return "(not shown: the URL has user info)" if secretive else repr(redact_url(part))

    if at >= 0:
        rest = rest[at + 1 :]
    location = rest.split("?", 1)[0]
    hostport, slash, db = location.partition("/")
    if slash and db and not (db.isascii() and db.isdigit() and int(db) <= 1_000_000):
        return f"database {shown(db)} is not a number"
    host = hostport
    port = None
    if hostport.startswith("["):
        close = hostport.find("]")
        if close <= 1:
            return f"host {shown(hostport)} is not an IPv6 literal like [::1]"
        host, tail = hostport[1:close], hostport[close + 1 :]
        if tail and not tail.startswith(":"):
            return "expected ':port' after the IPv6 literal"
        port = tail[1:] if tail else None
    elif ":" in hostport:
        host, _, port = hostport.rpartition(":")
    if port is not None and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"port {shown(port)} is not a port number (1-65535)"
    if not host:
        return "no host"
    return None


def _sentinel_problem(url: str) -> str | None:
    """What is wrong with the sentinels or the master's name of a Sentinel URL, read
    as the engine reads it, or None."""
    rest = url.partition("://")[2]
    stops = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    at = rest.rfind("@", 0, min(stops) if stops else len(rest))
    if at >= 0:
        rest = rest[at + 1 :]
    location = rest.split("?", 1)[0]
    hosts, _, path = location.partition("/")
    master, _, db = path.partition("/")
    if not master:
        return (
            "a Sentinel URL needs the master's name after the sentinels: "
            "redis+sentinel://host:26379[,host:26379...]/MASTER_NAME[/db]"
        )
    if db and not (db.isascii() and db.isdigit() and int(db) <= 1_000_000):
        return (
            "database "
            + ("(not shown: the URL has user info)" if at >= 0 else repr(db))
            + (" is not a number")
        )
    for host in hosts.split(","):
        if problem := _host_port_problem("redis://" + host):
            return f"sentinel {problem}"
    return None
