"""How actor messages cross nodes.

A ``Serializer`` turns a message into bytes and back. The default,
``PickleSerializer`` (protocol 5), runs only over the cluster's authenticated
links: every node has a non-empty secret (configured, or its per-user secret
file; there is no empty key) and the handshake is an HMAC-SHA256
challenge-response over it, so only holders of the secret can send it pickles,
and nothing is decoded for a path with no actor behind it. pickle trusts every
member: a holder of the secret can run code on every node. Serialization happens at ``tell`` time on the
sending node: an unpicklable message raises there, never later.
"""

from __future__ import annotations

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
