"""What the cluster's Coordinator manages, and what it reports.

Specs are frozen dataclasses validated at construction (``ValueError`` naming the
field); times are in seconds. Here the fields are converted (types, names of
kinds, seconds to milliseconds); the rules on their values are the engine's
(``cpp/src/cluster/coordinator/specs.cc``), the ones the leader applies to every
spec it is sent, raised as ``InvalidArgument`` (a ``ValueError``). See
docs/cluster/coordinator.md and docs/cluster/singletons.md for the semantics.

* ``ActorSpec``: an actor placed by ``PlacementConstraints`` and a placement
  strategy (``LeastLoaded``, ``RandomPlacement``, ``Pinned``), recovered after a
  node failure by its ``CrashStrategy``.
* ``SingletonSpec``: exactly one instance, on the node its ``SingletonAnchor``
  names (the leader, the oldest node of a class, or one node), fenced by a
  ``Generation``.
* ``AgentFamily``: agents (by URI) spread evenly over the nodes that run them.
* ``SpecStatus``, ``ClusterView``, ``NodeView``, ``Placement``: the leader's
  answers and a node's directory copy.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pynenc_cpp import _core
from pynenc_cpp._storage import cluster_storage

Generation = _core.Generation
"""``Generation(term, seq)``: ordered term-major; ``.packed`` is ``term << 32 | seq``."""

InstanceContext = _core.InstanceContext
"""What a factory receives: node, label, kind, actor_type, state (bytes), generation."""

CrashKind = Literal["redistribute", "wait_for_return", "abandon"]
AnchorKind = Literal["leader", "class", "node"]
DistributionKind = Literal["evenly", "evenly_by_capability"]

_INT64_MAX = 2**63 - 1
_MAX_SECONDS = _INT64_MAX // 1000  # what the engine's int64 milliseconds hold


def _ms(seconds: float, what: str) -> int:
    """``seconds`` in whole milliseconds, as the engine holds them."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"{what} must be a number of seconds, got {seconds!r}")
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{what} must be a number of seconds, got {seconds!r}")
    if abs(seconds) > _MAX_SECONDS:
        raise ValueError(f"{what} must be at most {_MAX_SECONDS} seconds, got {seconds!r}")
    return int(round(seconds * 1000))


def _is_text(value: object) -> bool:
    """A str the engine can take: one that encodes as UTF-8 (no lone surrogates)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _name(value: object, what: str) -> None:
    if not _is_text(value):
        raise ValueError(f"{what} must be a non-empty str, got {value!r}")


def _bytes(value: object, what: str) -> None:
    if not isinstance(value, bytes):
        raise ValueError(f"{what} must be bytes, got {type(value).__name__}")


def _strings(value: object, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{what} must be a sequence of str, got {value!r}")
    out = tuple(value)
    for v in out:
        if not _is_text(v):
            raise ValueError(f"{what} must contain non-empty str, got {v!r}")
    return out


@dataclass(frozen=True)
class CrashStrategy:
    """What the Coordinator does when an actor's node fails or leaves."""

    kind: CrashKind = "redistribute"
    wait_s: float = 0.0
    """``wait_for_return`` only: how long to wait for the same node id to come back."""

    def __post_init__(self) -> None:
        if self.kind not in ("redistribute", "wait_for_return", "abandon"):
            raise ValueError(
                f"crash strategy kind must be redistribute, wait_for_return or abandon, got {self.kind!r}"
            )
        if self.kind == "wait_for_return":
            core = _core.ActorSpec()
            core.crash_strategy, core.wait_ms = self.kind, _ms(self.wait_s, "wait_s")
            core.check_crash_strategy()

    @classmethod
    def redistribute(cls) -> CrashStrategy:
        """Place the actor on another eligible node at once (the default)."""
        return cls("redistribute")

    @classmethod
    def wait_for_return(cls, seconds: float) -> CrashStrategy:
        """Wait for the same node id (a restarted process counts), then redistribute."""
        return cls("wait_for_return", seconds)

    @classmethod
    def abandon(cls) -> CrashStrategy:
        """Let the actor die with its node: it is never placed again."""
        return cls("abandon")


@dataclass(frozen=True)
class PlacementConstraints:
    """Hard filters on the nodes that may run an actor (every one must hold)."""

    required_classes: tuple[str, ...] = ()
    required_metadata: Mapping[str, str] = field(default_factory=dict)
    anti_affinity_labels: tuple[str, ...] = ()
    colocate_with: str | None = None
    """Only the node that runs this label (if none runs it, the spec is unplaced)."""
    required_node_id: str | None = None
    """Exactly this node; never relocated (unplaced while it is down)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "required_classes", _strings(self.required_classes, "required_classes")
        )
        object.__setattr__(
            self,
            "anti_affinity_labels",
            _strings(self.anti_affinity_labels, "anti_affinity_labels"),
        )
        meta = dict(self.required_metadata)
        for k, v in meta.items():
            if not _is_text(k) or not _is_text(v):
                raise ValueError(
                    f"required_metadata must map non-empty str to str, got {k!r}: {v!r}"
                )
        object.__setattr__(self, "required_metadata", meta)
        for name in ("colocate_with", "required_node_id"):
            v = getattr(self, name)
            if v is not None and not _is_text(v):
                raise ValueError(f"{name} must be None or a non-empty str, got {v!r}")
        core = _core.ActorSpec()
        self._into(core)
        core.check_constraints()

    def _into(self, o: _core.ActorSpec) -> None:
        o.required_classes = list(self.required_classes)
        o.required_metadata = dict(self.required_metadata)
        o.anti_affinity_labels = list(self.anti_affinity_labels)
        o.colocate_with = self.colocate_with
        o.required_node_id = self.required_node_id


@dataclass(frozen=True)
class LeastLoaded:
    """Fewest actors placed on the node wins (ties: smallest node id)."""


@dataclass(frozen=True)
class RandomPlacement:
    """A seeded, reproducible random choice among eligible nodes."""

    seed: int = 0

    def __post_init__(self) -> None:
        try:  # any integer type (numpy's too), as the engine's uint64 takes it
            seed = operator.index(self.seed) if not isinstance(self.seed, bool) else None
        except TypeError:
            seed = None
        if seed is None or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an int in [0, 2**64), got {self.seed!r}")
        object.__setattr__(self, "seed", seed)


@dataclass(frozen=True)
class Pinned:
    """Prefer ``node_id`` while it is eligible; any other eligible node otherwise."""

    node_id: str


PlacementStrategy = LeastLoaded | RandomPlacement | Pinned


@dataclass(frozen=True)
class ActorSpec:
    """An actor the Coordinator places and keeps running (exactly one instance)."""

    label: str
    actor_type: str
    initial_state: bytes = b""
    crash_strategy: CrashStrategy = field(default_factory=CrashStrategy)
    constraints: PlacementConstraints = field(default_factory=PlacementConstraints)
    strategy: PlacementStrategy | None = None
    """None: the cluster's default (``ClusterConfig.placement``)."""

    def __post_init__(self) -> None:
        _name(self.label, "label")
        _name(self.actor_type, "actor_type")
        _bytes(self.initial_state, "initial_state")
        if not isinstance(self.crash_strategy, CrashStrategy):
            raise ValueError(f"crash_strategy must be a CrashStrategy, got {self.crash_strategy!r}")
        if not isinstance(self.constraints, PlacementConstraints):
            raise ValueError(f"constraints must be PlacementConstraints, got {self.constraints!r}")
        if self.strategy is not None and not isinstance(
            self.strategy, LeastLoaded | RandomPlacement | Pinned
        ):
            raise ValueError(
                f"strategy must be LeastLoaded, RandomPlacement, Pinned or None, got {self.strategy!r}"
            )
        if isinstance(self.strategy, Pinned) and not _is_text(self.strategy.node_id):
            raise ValueError(f"Pinned's node_id must be a str, got {self.strategy.node_id!r}")
        self._to_core().check()

    def _to_core(self) -> _core.ActorSpec:
        o = _core.ActorSpec()
        o.label, o.actor_type, o.initial_state = self.label, self.actor_type, self.initial_state
        o.crash_strategy = self.crash_strategy.kind
        o.wait_ms = _ms(self.crash_strategy.wait_s, "wait_s")
        self.constraints._into(o)
        match self.strategy:
            case None:
                o.strategy = "default"
            case LeastLoaded():
                o.strategy = "least_loaded"
            case RandomPlacement(seed):
                o.strategy, o.strategy_seed = "random", seed
            case Pinned(node_id):
                o.strategy, o.strategy_node = "pinned", node_id
        return o


@dataclass(frozen=True)
class SingletonAnchor:
    """Which node owns a singleton: the leader, the oldest live node of a class, or one node."""

    kind: AnchorKind = "leader"
    value: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("leader", "class", "node"):
            raise ValueError(f"anchor kind must be leader, class or node, got {self.kind!r}")
        if not _is_text(self.value):
            if self.kind == "leader":
                raise ValueError(f"anchor value must be a str, got {self.value!r}")
            raise ValueError(f"a {self.kind} anchor needs a non-empty value")
        core = _core.SingletonSpec()
        core.anchor, core.anchor_value = self.kind, self.value
        core.check_anchor()

    @classmethod
    def leader(cls) -> SingletonAnchor:
        return cls("leader")

    @classmethod
    def of_class(cls, node_class: str) -> SingletonAnchor:
        return cls("class", node_class)

    @classmethod
    def node(cls, node_id: str) -> SingletonAnchor:
        return cls("node", node_id)


@dataclass(frozen=True)
class SingletonSpec:
    """A cluster singleton: one instance on its anchor's node, fenced by a generation."""

    label: str
    actor_type: str
    state: bytes = b""
    anchor: SingletonAnchor = field(default_factory=SingletonAnchor)
    drain_timeout_s: float = 5.0
    """A graceful move waits this long for the old owner to stop before starting the new one."""

    def __post_init__(self) -> None:
        _name(self.label, "label")
        _name(self.actor_type, "actor_type")
        _bytes(self.state, "state")
        if not isinstance(self.anchor, SingletonAnchor):
            raise ValueError(f"anchor must be a SingletonAnchor, got {self.anchor!r}")
        self._to_core().check()

    def _to_core(self) -> _core.SingletonSpec:
        o = _core.SingletonSpec()
        o.label, o.actor_type, o.state = self.label, self.actor_type, self.state
        o.anchor, o.anchor_value = self.anchor.kind, self.anchor.value
        o.drain_timeout_ms = _ms(self.drain_timeout_s, "drain_timeout_s")
        return o


@dataclass(frozen=True)
class AgentFamily:
    """Agents named by URI (``<scheme>://<name>``), assigned evenly by the leader.

    ``supported`` lists the agents this node can run (None: every one it knows);
    ``distribution="evenly_by_capability"`` only places an agent on nodes that
    list it (blue/green), ``"evenly"`` on any node that registered the family.
    """

    scheme: str
    agents: tuple[str, ...]
    supported: tuple[str, ...] | None = None
    distribution: DistributionKind = "evenly"
    drain_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        _name(self.scheme, "scheme")
        object.__setattr__(self, "agents", _strings(self.agents, "agents"))
        if self.supported is not None:
            object.__setattr__(self, "supported", _strings(self.supported, "supported"))
        if self.distribution not in ("evenly", "evenly_by_capability"):
            raise ValueError(
                f"distribution must be evenly or evenly_by_capability, got {self.distribution!r}"
            )
        self._to_core().check()

    def _to_core(self) -> _core.AgentFamily:
        o = _core.AgentFamily()
        o.scheme, o.agents = self.scheme, list(self.agents)
        o.supported = None if self.supported is None else list(self.supported)
        o.distribution = self.distribution
        o.drain_timeout_ms = _ms(self.drain_timeout_s, "drain_timeout_s")
        return o


@runtime_checkable
class Actor(Protocol):
    """What a factory returns. Every method is optional; all run on the node's callback thread.

    ``stop(reason)`` ends the instance's lifetime (keep it short); ``on_message(payload)``
    answers ``ask``/``tell`` (return bytes or None); ``on_generation(generation)`` tells a
    running instance it was granted again under a higher generation.
    """

    def stop(self, reason: str) -> None: ...


@dataclass(frozen=True)
class SpecStatus:
    """A managed label's status, as the leader sees it."""

    label: str
    kind: str  # "actor" | "singleton" | "agent"
    state: str  # "pending" | "running" | "waiting_for_return" | "unplaced"
    node: str | None
    generation: Generation
    reason: str

    @classmethod
    def _from_core(cls, s: _core.SpecStatus) -> SpecStatus:
        return cls(s.label, s.kind, s.state, s.node, s.generation, s.reason)


@dataclass(frozen=True)
class NodeView:
    """One node as the leader sees it."""

    id: str
    address: str
    incarnation: int
    state: str
    alive: bool
    node_class: str
    metadata: Mapping[str, str]
    actor_types: tuple[str, ...]
    running: tuple[str, ...]


@dataclass(frozen=True)
class ClusterView:
    """The leader's view: every known node, with what runs where."""

    leader: str | None
    nodes: tuple[NodeView, ...]
    alive_count: int
    total_count: int

    @classmethod
    def _from_core(cls, v: _core.CoordinatorClusterView) -> ClusterView:
        nodes = tuple(
            NodeView(
                n.id,
                n.address,
                n.incarnation,
                n.state,
                n.alive,
                n.node_class,
                dict(n.metadata),
                tuple(n.actor_types),
                tuple(n.running),
            )
            for n in v.nodes
        )
        return cls(v.leader, nodes, v.alive_count, v.total_count)


@dataclass(frozen=True)
class Placement:
    """Where a label runs, per this node's copy of the leader's directory."""

    label: str
    kind: str
    state: str
    node: str | None
    address: str
    generation: Generation
    reason: str

    @classmethod
    def _from_core(cls, p: _core.LabelPlacement) -> Placement:
        return cls(p.label, p.kind, p.state, p.node, p.address, p.generation, p.reason)


@dataclass(frozen=True)
class FencedValue:
    value: bytes
    generation: Generation


class FencedStore:
    """Storage for a singleton's data that a stale owner cannot overwrite.

    Every write is stamped with the writer's generation (``Generation`` or its packed
    int); a write stamped lower than the stored one raises ``StaleGeneration`` and
    changes nothing. ``delete`` leaves a tombstone that keeps fencing the key.
    ``uri``: ``sqlite:///path.db`` or ``redis://host:port/db`` (``memory://`` for tests).
    """

    def __init__(self, uri: str, namespace: str = "pynenc-cpp") -> None:
        # The process's storage of this URI and namespace, shared with the journal.
        self._storage = cluster_storage(uri, namespace)
        self._store = _core.FencedStore(self._storage)

    @staticmethod
    def _packed(generation: Generation | int) -> int:
        return generation.packed if isinstance(generation, Generation) else int(generation)

    def write(self, key: str, value: bytes, generation: Generation | int) -> None:
        self._store.write(key, value, self._packed(generation))

    def read(self, key: str) -> FencedValue | None:
        got = self._store.read(key)
        return None if got is None else FencedValue(got[0], Generation.from_packed(got[1]))

    def delete(self, key: str, generation: Generation | int) -> None:
        self._store.delete(key, self._packed(generation))


GenerationSource = _core.GenerationSource
"""The authority that mints generations and keeps specs (``memory://``, SQLite, Redis)."""
