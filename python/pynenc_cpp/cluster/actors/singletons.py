"""Singletons, for ``ClusteredActorSystem``: spawning one on this node (registering
its actor type, submitting its spec to the leader) and starting or stopping its
instance here when the node says so.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pynenc_cpp import _core
from pynenc_cpp.cluster.actors.cell import _Cell
from pynenc_cpp.cluster.actors.refs import ActorRef
from pynenc_cpp.cluster.specs import SingletonAnchor, SingletonSpec

if TYPE_CHECKING:
    from pynenc_cpp.cluster.actors.behaviors import Singleton
    from pynenc_cpp.cluster.actors.system import ClusteredActorSystem
    from pynenc_cpp.cluster.runtime import ClusterHandle
    from pynenc_cpp.cluster.specs import Generation

logger = logging.getLogger("pynenc_cpp.cluster.actors")

M = TypeVar("M")


class _Singletons:
    """``ClusteredActorSystem``'s singletons (a mixin; ``self`` is the system, which
    ``cast`` tells the type checker where it is passed as one)."""

    _instances: dict[str, _Cell]
    _factories: dict[str, Singleton[Any]]
    _tasks: set[asyncio.Task[Any]]
    _submits: set[asyncio.Task[Any]]
    _closed: bool

    if TYPE_CHECKING:

        def _cluster(self) -> ClusterHandle: ...

    def _spawn_singleton(self, behavior: Singleton[M], name: str) -> ActorRef[M]:
        if name in self._factories:
            raise ValueError(f"singleton {name!r} is already spawned on this node")
        self._factories[name] = behavior
        actor_type = f"singleton:{name}"
        stop_ms = int(behavior.drain_timeout_s * 1000) + 1000
        self._cluster()._core().register_inbox_actor_type(actor_type, stop_ms)
        kind, _, value = behavior.anchor.partition(":")
        spec = SingletonSpec(
            name,
            actor_type,
            anchor=SingletonAnchor(kind, value),  # type: ignore[arg-type]
            drain_timeout_s=behavior.drain_timeout_s,
        )
        task = asyncio.get_running_loop().create_task(self._submit(spec))
        self._submits.add(task)
        task.add_done_callback(self._submits.discard)
        return ActorRef(cast("ClusteredActorSystem", self), "", "", name)

    async def _submit(self, spec: SingletonSpec) -> None:
        """Stores the singleton's spec with the leader (every spawning node does; the same spec
        again is a no-op), retrying while there is no leader yet."""
        loop = asyncio.get_running_loop()
        delay = 0.05
        while not self._closed:
            try:
                await loop.run_in_executor(None, self._cluster().start_singleton, spec, 2.0)
                return
            except (_core.Unavailable, _core.Timeout):
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
            except _core.BackendError as exc:  # the leader's generation source failed
                logger.warning("singleton %r: %s; submitting again", spec.label, exc)
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
            except _core.Conflict as exc:
                logger.error(
                    "singleton %r: %s (spawned with another behaviour elsewhere?)", spec.label, exc
                )
                return
            except Exception:
                logger.exception("singleton %r: its spec could not be submitted", spec.label)
                return

    def _spawn_task(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_instance(self, label: str, gen: Generation) -> None:
        spec = self._factories.get(label)
        if spec is None:  # not spawned here (cannot happen: the type is registered by spawn)
            logger.error("no singleton %r spawned on this node", label)
            return
        old = self._instances.pop(label, None)
        if old is not None:  # a stop not yet finished: never two cells for one label
            self._spawn_task(old.stop())
        ref: ActorRef[Any] = ActorRef(cast("ClusteredActorSystem", self), "", "", label)
        self._instances[label] = _Cell(
            cast("ClusteredActorSystem", self),
            label,
            ref,
            None,
            gen,
            factory=spec.factory,
            drain_s=spec.drain_timeout_s,
        )

    async def _stop_instance(self, label: str, gen: Generation) -> None:
        cell = self._instances.get(label)
        try:
            # Not a newer instance that started after this stop was given up on.
            if cell is not None and cell.generation is not None and cell.generation <= gen:
                await cell.stop()
                if self._instances.get(label) is cell:
                    del self._instances[label]
        finally:
            self._cluster()._core().instance_stopped(label, gen)
