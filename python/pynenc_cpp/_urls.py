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
    return None
