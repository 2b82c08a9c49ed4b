"""Passwords out of URLs shown in errors and logs (no imports: the builder plugin uses it)."""

from __future__ import annotations


def redact_url(url: str) -> str:
    """``url`` fit for an error or a log line: the value of every ``password=`` option
    and the password of its user info (everything up to the last ``@`` when a raw
    ``/``, ``?`` or ``#`` comes before it; never in a ``sqlite:`` path) replaced by
    ``***`` (the engine's ``RedactUri``)."""
    path, qmark, query = url.partition("?")
    if qmark:
        parts = ["password=***" if p.startswith("password=") else p for p in query.split("&")]
        url = path + "?" + "&".join(parts)
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    at = rest.rfind("@")
    if at >= 0 and not url.startswith(("sqlite:", "memory:")):
        userinfo, tail = rest[:at], rest[at:]
        stop = min((i for i in (userinfo.find(c) for c in "/?#") if i >= 0), default=-1)
        colon = userinfo.find(":")
        keep_user = colon >= 0 and (stop < 0 or colon < stop)
        rest = (userinfo[: colon + 1] if keep_user else "") + "***" + tail
    return (scheme + sep if sep else "") + rest
