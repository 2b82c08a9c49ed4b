"""Passwords out of URLs shown in errors and logs (no imports: the builder plugin uses it)."""

from __future__ import annotations


def redact_url(url: str) -> str:
    """``url`` fit for an error or a log line: the password of its user info and of
    every ``password=`` option replaced by ``***`` (the engine's ``RedactUri``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    auth, tail = rest[:cut], rest[cut:]
    if "@" in auth:
        userinfo, host = auth.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        auth = (f"{user}:***" if colon else "***") + "@" + host
    path, qmark, query = tail.partition("?")
    if qmark:
        parts = ["password=***" if p.startswith("password=") else p for p in query.split("&")]
        tail = path + "?" + "&".join(parts)
    return (scheme + sep if sep else "") + auth + tail
