"""Passwords out of URLs shown in errors and logs (no package imports: the builder plugin uses it)."""

from __future__ import annotations

import re

#: A ``password=`` option anywhere: in the query, or misplaced in the path
#: (``redis://h/0&password=p``, a malformed URL whose error shows it).
_PASSWORD_OPTION = re.compile(r"(password=)[^&#]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` fit for an error or a log line: the value of every ``password=`` option
    and the password of its user info (everything up to the last ``@`` when a raw
    ``/``, ``?`` or ``#`` comes before it; never in a ``sqlite:`` path) replaced by
    ``***`` (the engine's ``RedactUri``)."""
    url = _PASSWORD_OPTION.sub(r"\1***", url)
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
