"""Sending, for ``ClusteredActorSystem``: ``tell`` and ``ask``, the encoding of a
message for the wire (``_encode``), the frame size check (``_fits``, raising
``MessageTooLarge``) and the hand-over to the node (``_transmit``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pynenc_cpp import _core
from pynenc_cpp.cluster.actors.refs import ActorRef, AskTimeout, MessageTooLarge, _held_here
from pynenc_cpp.cluster.runtime import timeout_ms

if TYPE_CHECKING:
    from pynenc_cpp.cluster.actors.serialization import Serializer
    from pynenc_cpp.cluster.actors.system import ClusteredActorSystem
    from pynenc_cpp.cluster.config import ClusterConfig
    from pynenc_cpp.cluster.runtime import ClusterHandle

logger = logging.getLogger("pynenc_cpp.cluster.actors")


class _Messaging:
    """``ClusteredActorSystem``'s sending (a mixin; ``self`` is the system, which
    ``cast`` tells the type checker where it is passed as one)."""

    config: ClusterConfig
    serializer: Serializer
    overflow: str
    _temps: dict[str, asyncio.Future[Any]]
    _counter: itertools.count[int]
    _msg_prefix: str
    _dropped: int

    if TYPE_CHECKING:

        @property
        def address(self) -> str: ...

        def _cluster(self) -> ClusterHandle: ...

        def _deliver_local(self, path: str, msg: Any) -> None: ...

    def tell(self, ref: ActorRef[Any], msg: Any) -> None:
        """Sends ``msg`` to ``ref``. To a singleton: serialized now (an unpicklable message
        raises here), then delivered at least once, in order, across failovers, buffered
        while no owner runs it. To an actor on another node: at most once. To a local actor:
        queued at once. Inside an event-sourced command: held until its events are in
        the journal (serialized now all the same, so an unpicklable message raises here)."""
        held = _held_here()
        if held is not None:
            held.append((ref, msg, self._encode(ref, msg)))
            return
        self._send(ref, msg)

    def _send(self, ref: ActorRef[Any], msg: Any) -> None:
        self._transmit(ref, msg, self._encode(ref, msg))

    def _encode(self, ref: ActorRef[Any], msg: Any) -> bytes | None:
        """What goes on the wire for ``msg`` to ``ref`` (None: a local actor, no bytes).
        Raises here if ``msg`` cannot be serialized, and ``MessageTooLarge`` (a
        ``ValueError``) if it would not fit in one frame (``max_frame_bytes``)."""
        if ref.label is not None:
            payload = self.serializer.dumps((self._msg_prefix + str(next(self._counter)), msg))
            return self._fits(payload, ref.label)
        if ref.address == self.address:
            return None
        return self._fits(self.serializer.dumps(msg), ref.path)

    def _fits(self, payload: bytes, name: str) -> bytes:
        limit = self.config.max_frame_bytes - len(name.encode()) - 64
        if len(payload) > limit:
            raise MessageTooLarge(
                f"message to {name!r} is {len(payload)} bytes serialized, over the limit of "
                f"{limit} bytes (max_frame_bytes={self.config.max_frame_bytes} less the "
                "frame's header); raise max_frame_bytes on every node or send less"
            )
        return payload

    def _transmit(self, ref: ActorRef[Any], msg: Any, payload: bytes | None) -> None:
        if payload is None:
            self._deliver_local(ref.path, msg)
            return
        if ref.label is not None:
            try:
                self._cluster()._core().send_to_label(ref.label, payload)
            except _core.BufferFull:
                if self.overflow == "raise":
                    raise
                self._dropped += 1
                logger.warning(
                    "dropped a message to %r: its buffer is full (%d dropped so far)",
                    ref.label,
                    self._dropped,
                )
            return
        self._cluster()._core().send_to_path(ref.address, ref.path, payload)

    async def ask(
        self, ref: ActorRef[Any], make: Callable[[ActorRef[Any]], Any], timeout: float = 5.0
    ) -> Any:
        """Sends ``make(reply_to)`` to ``ref`` and returns the first message sent to
        ``reply_to``; raises ``AskTimeout`` (a ``TimeoutError``) after ``timeout`` s. The
        request leaves at once, also from inside an event-sourced command."""
        timeout_ms(timeout)  # finite, > 0, at most a day: ValueError otherwise
        loop = asyncio.get_running_loop()
        path = f"temp/{next(self._counter)}"
        fut: asyncio.Future[Any] = loop.create_future()
        self._temps[path] = fut
        try:
            self._send(
                ref, make(ActorRef(cast("ClusteredActorSystem", self), self.address, path, None))
            )
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AskTimeout(f"no reply from {ref!r} within {timeout} s") from None
        finally:
            self._temps.pop(path, None)
