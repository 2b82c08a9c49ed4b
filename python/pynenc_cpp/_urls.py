"""Redis URL checks shared by the builder and the adapters (nothing but ``_redact``
imported: the builder plugin uses it before pynenc-cpp's engine is loaded)."""

from __future__ import annotations

from pynenc_cpp._redact import redact_url

REDIS_URL_FORMS = "redis://[[user]:password@]host[:port][/db] or unix:///path/to.sock[?db=N]"


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
    if not url.startswith(("redis://", "unix://")):
        return f"{redact_url(url)!r}: expected {REDIS_URL_FORMS}"
    if url.startswith("redis://") and (problem := _host_port_problem(url)):
        return f"{redact_url(url)!r}: {problem}"
    if problem := _options_problem(url):
        return f"{redact_url(url)!r}: {problem}"
    return None


#: The engine's URL options (``ParseRedisLocation``) and the whole numbers each takes.
_NUMERIC_OPTIONS = {
    "db": (0, 1_000_000, "expected a database number from 0 to 1000000"),
    "connect_timeout_ms": (1, 3_600_000, "expected milliseconds between 1 and 3600000"),
    "io_timeout_ms": (1, 3_600_000, "expected milliseconds between 1 and 3600000"),
}


def _options_problem(url: str) -> str | None:
    """What is wrong with the ``?options`` of a URL, as the engine reads them, or None."""
    query = url.partition("?")[2].partition("#")[0]
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        if key == "password":
            continue
        if key not in _NUMERIC_OPTIONS:
            return f"unknown option {key!r}; known: db, connect_timeout_ms, io_timeout_ms, password"
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
