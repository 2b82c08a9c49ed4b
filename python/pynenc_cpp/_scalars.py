"""The text pynenc's ``JsonPickleSerializer`` gives a plain scalar, without jsonpickle.

A task's arguments and result are, most often, small ints, flags, ``None`` and
short ASCII strings. jsonpickle spends ~4-5 us on each of them (its pickler and
unpickler, a JSON backend call and, with jsonpickle 4.1, a ``DeprecationWarning``
per call), four times per task. For exactly these values the JSON text does not
depend on jsonpickle's backend or its options, so the client data store writes and
reads it directly:

* ``int`` (not a subclass) with fewer than 19 digits: its decimal digits;
* ``True`` / ``False`` / ``None``: ``true`` / ``false`` / ``null``;
* ``str`` (not a subclass) of printable ASCII without ``"`` or ``\\``: the string
  in double quotes.

:func:`encode` returns the same text ``jsonpickle.dumps`` returns for such a value
and ``None`` for anything else; :func:`decode` returns the value
``jsonpickle.loads`` returns for text that has exactly one of these forms and
:data:`MISS` otherwise (floats, escapes, containers, malformed text: the caller
asks jsonpickle, which decides, and raises, as before). Thread-safe: pure functions.
"""

from __future__ import annotations

from typing import Any, Final

MISS: Final = object()  # decode()'s "not one of the plain forms"

_MAX_INT_DIGITS: Final = 18  # |n| < 10**18: decimal text never near Python's digit cap
_INT_BOUND: Final = 10**_MAX_INT_DIGITS
_WORDS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None}


def _plain(text: str) -> bool:
    """True if ``text`` is written unchanged between JSON quotes by every backend."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def encode(obj: Any) -> str | None:
    """``jsonpickle.dumps(obj)`` for a plain scalar, else ``None``."""
    kind = type(obj)
    if kind is int:
        return str(obj) if -_INT_BOUND < obj < _INT_BOUND else None
    if kind is str:
        return f'"{obj}"' if _plain(obj) else None
    if obj is None:
        return "null"
    if kind is bool:
        return "true" if obj else "false"
    return None


def decode(text: str) -> Any:
    """``jsonpickle.loads(text)`` if ``text`` is one of :func:`encode`'s forms, else :data:`MISS`."""
    if not text:
        return MISS
    first = text[0]
    if first == '"':
        inner = text[1:-1]
        if len(text) >= 2 and text[-1] == '"' and _plain(inner):
            return inner
        return MISS
    digits = text[1:] if first == "-" else text
    if (
        digits.isascii()
        and digits.isdigit()
        and len(digits) <= _MAX_INT_DIGITS
        and (digits[0] != "0" or len(digits) == 1)
    ):
        return int(text)
    return _WORDS.get(text, MISS)
