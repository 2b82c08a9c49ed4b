"""The node's inbox, for ``ClusteredActorSystem``: the pump the loop runs when the
inbox's eventfd is readable (``_pump``), the delivery of what it drains to local actors,
singleton instances and asks, and the acknowledgements back to the node.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from pynenc_cpp.cluster.actors.cell import _NOT_HERE, _REJECTED, _Cell
from pynenc_cpp.cluster.actors.refs import _current_system

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from pynenc_cpp.cluster.actors.serialization import Serializer
    from pynenc_cpp.cluster.actors.system import ClusteredActorSystem
    from pynenc_cpp.cluster.runtime import ClusterHandle
    from pynenc_cpp.cluster.specs import Generation

logger = logging.getLogger("pynenc_cpp.cluster.actors")

# Inbox item kinds (cluster/actors.h).
_START, _STOP, _LABEL, _PATH, _REGRANT = range(5)


class _InboxPump:
    """``ClusteredActorSystem``'s inbox (a mixin; ``self`` is the system, which
    ``cast`` tells the type checker where it is passed as one)."""

    serializer: Serializer
    _handle: ClusterHandle | None
    _cells: dict[str, _Cell]
    _instances: dict[str, _Cell]
    _temps: dict[str, asyncio.Future[Any]]

    if TYPE_CHECKING:

        def _spawn_task(self, coro: Any) -> None: ...

        def _start_instance(self, label: str, gen: Generation) -> None: ...

        def _stop_instance(self, label: str, gen: Generation) -> Coroutine[Any, Any, None]: ...

    def _pump(self) -> None:
        if self._handle is None:
            return
        core = self._handle._core()
        while True:
            items = core.drain_inbox(1024)
            if not items:
                return
            for kind, label, gen, _kind_name, _type, payload, token in items:
                try:
                    if kind == _LABEL:
                        self._deliver_label(label, gen, payload, token)
                    elif kind == _PATH:
                        self._deliver_path(label, payload)
                    elif kind == _START:
                        self._start_instance(label, gen)
                    elif kind == _STOP:
                        self._spawn_task(self._stop_instance(label, gen))
                    elif kind == _REGRANT:
                        cell = self._instances.get(label)
                        if cell is not None:
                            cell.generation = gen
                except Exception:
                    logger.exception("inbox item for %r", label)

    def _deliver_label(self, label: str, gen: Generation, payload: bytes, token: int) -> None:
        cell = self._instances.get(label)
        if cell is None or cell.stopping:
            self._ack(token, _NOT_HERE)
            return
        reset = _current_system.set(cast("ClusteredActorSystem", self))
        try:
            msg_id, msg = self.serializer.loads(payload)
        except Exception:
            logger.exception("undecodable message for %r (dropped)", label)
            self._ack(token, _REJECTED)
            return
        finally:
            _current_system.reset(reset)
        cell.enqueue(msg, msg_id, token)

    def _deliver_path(self, path: str, payload: bytes) -> None:
        if path not in self._temps and path not in self._cells:
            # Nothing is decoded for a path with no actor behind it.
            logger.debug("message to %r dropped: no such actor", path)
            return
        reset = _current_system.set(cast("ClusteredActorSystem", self))
        try:
            msg = self.serializer.loads(payload)
        except Exception:
            logger.exception("undecodable message for %r (dropped)", path)
            return
        finally:
            _current_system.reset(reset)
        self._deliver_local(path, msg)

    def _deliver_local(self, path: str, msg: Any) -> None:
        fut = self._temps.get(path)
        if fut is not None:
            if not fut.done():
                fut.set_result(msg)
            return
        cell = self._cells.get(path)
        if cell is not None and not cell.stopping:
            cell.enqueue(msg)
        else:
            logger.debug("message to %s dropped: no such actor", path)

    def _ack(self, token: int | None, outcome: int) -> None:
        if token is not None and self._handle is not None:
            self._handle._core().ack_label(token, outcome)

    def _cell_ended(self, cell: _Cell) -> None:
        if self._cells.get(cell.ref.path) is cell and cell.ref.label is None:
            del self._cells[cell.ref.path]
