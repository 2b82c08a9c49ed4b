"""How actor messages cross nodes.

A ``Serializer`` turns a message into bytes and back. The default,
``PickleSerializer`` (protocol 5), runs only over the cluster's authenticated
links: every node has a non-empty secret (configured, or its per-user secret
file; there is no empty key) and the handshake is an HMAC-SHA256
challenge-response over it, so only holders of the secret can send it pickles,
and nothing is decoded for a path with no actor behind it. pickle trusts every
member: a holder of the secret can run code on every node. Serialization happens at ``tell`` time on the
sending node: an unpicklable message raises there, never later.

``JsonSerializer`` executes nothing it decodes: for actors whose messages are plain
data (None, bool, int, float, str, lists, dicts with str keys, and ``ActorRef``), so
that a member can send such actors data but never code.
"""

from __future__ import annotations

import json
import math
import pickle
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Serializer(Protocol):
    def dumps(self, obj: Any) -> bytes: ...
    def loads(self, data: bytes) -> Any: ...


class PickleSerializer:
    """pickle, protocol 5 by default (out-of-band buffers are not used)."""

    def __init__(self, protocol: int = 5) -> None:
        if not 2 <= protocol <= pickle.HIGHEST_PROTOCOL:
            raise ValueError(f"protocol must be 2..{pickle.HIGHEST_PROTOCOL}, got {protocol}")
        self.protocol = protocol

    def dumps(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=self.protocol)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)  # noqa: S301 - authenticated cluster links only (see above)


_REF_KEY = "__actor_ref__"
_SCALARS = (type(None), bool, int, float, str)


def _check_plain(obj: Any) -> None:
    """Raises unless ``obj`` is exactly plain data (no subclass: an ``IntEnum`` or a
    dict subclass would come back as its base type) with str dict keys, finite floats
    and ActorRefs; a dict of the message's own may not use the ref key."""
    from pynenc_cpp.cluster.actors.refs import ActorRef

    stack = [obj]
    while stack:
        o = stack.pop()
        t = type(o)
        if t in _SCALARS:
            if t is float and not math.isfinite(o):
                raise ValueError(f"JsonSerializer cannot send the float {o!r}")
        elif t is list or t is tuple:
            stack.extend(o)
        elif t is dict:
            for k, v in o.items():
                if type(k) is not str:
                    raise TypeError(f"JsonSerializer sends dicts with str keys only, got key {k!r}")
                if k == _REF_KEY:
                    raise ValueError(f"a message may not contain a dict with the key {_REF_KEY!r}")
                stack.append(v)
        elif t is not ActorRef:
            raise TypeError(
                f"JsonSerializer cannot send {t.__name__!r}: plain data and ActorRef only"
            )


def _no_constant(name: str) -> Any:
    raise ValueError(f"JsonSerializer does not accept {name} (only finite numbers)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf
        raise ValueError(f"JsonSerializer does not accept {text} (only finite numbers)")
    return value


class JsonSerializer:
    """JSON for plain data: decoding runs no code of the sender's choosing.

    Messages may be None, bool, int, finite float, str, lists, tuples (decoded as
    lists), dicts with str keys, and ``ActorRef`` (for ``reply_to``; decoded bound to
    the receiving system), of exactly those types (a subclass such as an ``IntEnum``
    would not come back as itself). Anything else raises ``TypeError`` (a non-finite
    float ``ValueError``) at ``tell``/``ask``, so what arrives is what was sent. A
    dict whose only key is ``"__actor_ref__"`` is how a ref travels, so a message may
    not contain a dict with that key of its own (``ValueError`` at ``tell``).
    """

    def dumps(self, obj: Any) -> bytes:
        # json first: it refuses a message that contains itself (ValueError) before
        # the walk below, which then always ends.
        text = json.dumps(
            obj, default=self._encode, allow_nan=False, separators=(",", ":"), ensure_ascii=False
        )
        _check_plain(obj)
        return text.encode()

    def loads(self, data: bytes) -> Any:
        return json.loads(
            data,
            object_hook=self._decode,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )

    @staticmethod
    def _encode(obj: Any) -> Any:
        from pynenc_cpp.cluster.actors.refs import ActorRef

        if isinstance(obj, ActorRef):
            return {_REF_KEY: [obj.address, obj.path, obj.label]}
        raise TypeError(
            f"JsonSerializer cannot send {type(obj).__name__!r}: plain data and ActorRef only"
        )

    @staticmethod
    def _decode(d: dict[str, Any]) -> Any:
        if _REF_KEY not in d:
            return d
        from pynenc_cpp.cluster.actors.refs import _rebuild_ref

        ref = d[_REF_KEY]
        if (
            len(d) != 1
            or not isinstance(ref, list)
            or len(ref) != 3
            or not isinstance(ref[0], str)
            or not isinstance(ref[1], str)
            or not (ref[2] is None or isinstance(ref[2], str))
        ):
            raise ValueError(f"malformed {_REF_KEY!r} object")
        return _rebuild_ref(ref[0], ref[1], ref[2])
