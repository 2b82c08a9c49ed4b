"""``ClusteredActorSystem``: asyncio actors on a pynenc-cpp cluster.

The C++ node carries membership, placement and routing; behaviours run on the
asyncio loop that entered the system (``async with``). The node hands over what
its instances must do through an inbox whose eventfd the loop watches
(``add_reader``): no thread of the node ever takes the GIL on the message path.
See docs/cluster/actors.md for the delivery guarantees.

This module holds the public class (its state, lifecycle and ``spawn``); its parts
are mixins of their own: sending in ``messaging.py``, singletons in ``singletons.py``,
the node's inbox in ``inbox.py``. A running actor (mailbox, event sourcing, fencing)
is ``cell.py``; refs and the errors of ``tell``/``ask`` are ``refs.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TypeVar

from pynenc_cpp.cluster.actors.behaviors import Behavior, Singleton
from pynenc_cpp.cluster.actors.cell import ActorContext as ActorContext
from pynenc_cpp.cluster.actors.cell import _Cell
from pynenc_cpp.cluster.actors.inbox import _InboxPump
from pynenc_cpp.cluster.actors.messaging import _Messaging
from pynenc_cpp.cluster.actors.refs import ActorRef as ActorRef
from pynenc_cpp.cluster.actors.refs import AskTimeout as AskTimeout
from pynenc_cpp.cluster.actors.refs import MessageTooLarge as MessageTooLarge

# Pickled refs name their rebuilder here (refs.py pins its module): keep it importable.
from pynenc_cpp.cluster.actors.refs import _rebuild_ref as _rebuild_ref
from pynenc_cpp.cluster.actors.serialization import PickleSerializer, Serializer
from pynenc_cpp.cluster.actors.singletons import _Singletons
from pynenc_cpp.cluster.config import ClusterConfig
from pynenc_cpp.cluster.runtime import ClusterHandle, run_cluster

logger = logging.getLogger("pynenc_cpp.cluster.actors")

M = TypeVar("M")


class ClusteredActorSystem(_Messaging, _Singletons, _InboxPump):
    """Actors on a cluster, as an async context manager.

    ``name`` is the cluster name; ``seed_nodes`` are ``(host, port)`` pairs or
    ``"host:port"`` strings; ``node_id`` names this node (a restarted process with the
    same id is the same node). ``config`` gives every other cluster option
    (``ClusterConfig``; its host, port, seeds, node id and cluster name are taken
    from the arguments). ``buffer_size`` (default: the config's ``actor_buffer_limit``,
    1000) bounds the messages this node has sent a singleton and not yet had
    acknowledged, in flight or waiting for an owner; beyond it ``tell`` raises
    ``BufferFull`` (``overflow="raise"``) or drops the message, counts it in ``stats()``
    and logs it (``overflow="drop"``).
    """

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        node_id: str = "",
        seed_nodes: Iterable[tuple[str, int] | str] = (),
        *,
        secret: str = "",
        config: ClusterConfig | None = None,
        serializer: Serializer | None = None,
        buffer_size: int | None = None,
        overflow: str = "raise",
        **cluster_options: Any,
    ) -> None:
        if overflow not in ("raise", "drop"):
            raise ValueError(f"overflow must be 'raise' or 'drop', got {overflow!r}")
        seeds = tuple(s if isinstance(s, str) else f"{s[0]}:{s[1]}" for s in seed_nodes)
        base = config or ClusterConfig()
        if buffer_size is not None:
            cluster_options["actor_buffer_limit"] = buffer_size
        self.config = replace(
            base,
            cluster_name=name,
            host=host,
            port=port,
            node_id=node_id,
            seeds=seeds,
            secret=secret or base.secret,
            **cluster_options,
        )
        self.serializer: Serializer = serializer or PickleSerializer()
        self.overflow = overflow
        self._handle: ClusterHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._cells: dict[str, _Cell] = {}  # local actors by path
        self._instances: dict[str, _Cell] = {}  # singleton instances by label
        self._factories: dict[str, Singleton[Any]] = {}
        self._temps: dict[str, asyncio.Future[Any]] = {}
        self._counter = itertools.count(1)
        self._msg_prefix = f"{os.getpid():x}.{time.monotonic_ns():x}."
        self._tasks: set[asyncio.Task[Any]] = set()  # instance stops
        self._submits: set[asyncio.Task[Any]] = set()  # singleton specs to the leader
        self._dropped = 0
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------
    async def __aenter__(self) -> ClusteredActorSystem:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        """Joins the cluster and starts watching the node's inbox."""
        if self._handle is not None:
            raise RuntimeError("the system is already started")
        self._loop = asyncio.get_running_loop()
        self._handle = run_cluster(config=self.config)
        self._fd = self._handle._core().inbox_fd()
        self._loop.add_reader(self._fd, self._pump)

    async def shutdown(self) -> None:
        """Stops the local actors, hands this node's singletons over, leaves the cluster."""
        if self._closed or self._handle is None:
            self._closed = True
            return
        self._closed = True
        for cell in list(self._cells.values()):
            await cell.stop()
        for task in list(self._submits):
            task.cancel()
        await self._flush_outboxes()
        loop = asyncio.get_running_loop()
        # The node stops (and hands over) singleton instances through the inbox while
        # this loop keeps running; so stop() runs on another thread.
        await loop.run_in_executor(None, self._handle.stop)
        self._pump()
        for cell in list(self._instances.values()):
            await cell.stop()
        # Instance stops still reporting (their cells are stopped: they end at once).
        await asyncio.gather(*self._tasks, return_exceptions=True)
        loop.remove_reader(self._fd)
        for fut in self._temps.values():
            if not fut.done():
                fut.set_exception(AskTimeout("the actor system shut down"))

    async def _flush_outboxes(self) -> None:
        """Before leaving: waits (up to ``leave_timeout_ms``) until the singletons
        acknowledged what this node sent them; what is left is logged, never dropped
        silently."""
        core = self._cluster()._core()
        deadline = time.monotonic() + self.config.leave_timeout_ms / 1000
        while True:
            left = {label: n for label, n in core.mail_stats()["buffered"].items() if n}
            if not left or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.02)
        if left:
            logger.warning(
                "shutdown: %d message(s) to singleton(s) %s not acknowledged within %d ms "
                "(leave_timeout_ms) are discarded",
                sum(left.values()),
                ", ".join(sorted(left)),
                self.config.leave_timeout_ms,
            )

    @property
    def address(self) -> str:
        return self._cluster().address

    @property
    def node_id(self) -> str:
        return self._cluster().node_id

    @property
    def handle(self) -> ClusterHandle:
        """The cluster node under the system (status, members, cluster view...)."""
        return self._cluster()

    def stats(self) -> dict[str, Any]:
        """Message counters: the node's (``buffered`` per singleton, ``label_overflowed``,
        ``label_resent``...) and ``dropped`` (messages dropped by ``overflow="drop"``)."""
        s = dict(self._cluster()._core().mail_stats())
        s["dropped"] = self._dropped
        return s

    # -- spawning and messaging ---------------------------------------------------------------
    def spawn(self, behavior: Behavior[M], name: str) -> ActorRef[M]:
        """Starts an actor named ``name`` on this node, or (``Behaviors.singleton``) joins the
        cluster's singleton ``name``: spawn it with the same name on every node that may run
        it; every such spawn returns a ref to the one instance."""
        self._cluster()
        if not name or "/" in name:
            raise ValueError(f"name must be non-empty without '/', got {name!r}")
        if isinstance(behavior, Singleton):
            return self._spawn_singleton(behavior, name)
        path = f"user/{name}"
        if path in self._cells:
            raise ValueError(f"an actor named {name!r} already runs on this node")
        ref: ActorRef[M] = ActorRef(self, self.address, path, None)
        self._cells[path] = _Cell(self, name, ref, behavior)
        return ref

    def singleton_ref(self, name: str) -> ActorRef[Any]:
        """A ref to the cluster's singleton ``name`` without spawning it here (a node that
        only talks to it: the owner is chosen among the nodes that spawned it)."""
        if not name:
            raise ValueError("name must not be empty")
        return ActorRef(self, "", "", name)

    def _cluster(self) -> ClusterHandle:
        if self._handle is None:
            raise RuntimeError("the actor system is not started (use 'async with')")
        return self._handle
