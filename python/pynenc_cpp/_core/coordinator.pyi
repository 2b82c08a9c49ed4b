"""
Placement, supervision and singletons.
"""

from __future__ import annotations

import collections.abc
import typing

import pynenc_cpp._core.storage

__all__: list[str] = [
    "ActorSpec",
    "AgentFamily",
    "CoordinatorClusterView",
    "CoordinatorNodeView",
    "FencedStore",
    "Generation",
    "GenerationSource",
    "InstanceContext",
    "Journal",
    "LabelPlacement",
    "SingletonSpec",
    "SpecStatus",
]

class Generation:
    """
    A singleton/actor generation {term, seq}, ordered term-major; packs into one int (term << 32 | seq) for fenced writes.
    """
    @staticmethod
    def from_packed(packed: typing.SupportsInt | typing.SupportsIndex) -> Generation:
        """
        The generation of a packed value.
        """
    def __eq__(self, arg0: Generation) -> bool: ...
    def __ge__(self, arg0: Generation) -> bool: ...
    def __gt__(self, arg0: Generation) -> bool: ...
    def __hash__(self) -> int: ...
    def __init__(
        self,
        term: typing.SupportsInt | typing.SupportsIndex = 0,
        seq: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> None:
        """
        A generation from its parts.
        """
    def __le__(self, arg0: Generation) -> bool: ...
    def __lt__(self, arg0: Generation) -> bool: ...
    def __repr__(self) -> str: ...
    def __str__(self) -> str: ...
    @property
    def packed(self) -> int:
        """
        term << 32 | seq.
        """
    @property
    def seq(self) -> int:
        """
        Bumps on a re-grant to the same owner.
        """
    @property
    def term(self) -> int:
        """
        Bumps when ownership moves (failover, move).
        """

class ActorSpec:
    """
    An actor spec (built by pynenc_cpp.cluster.ActorSpec).
    """
    def __init__(self) -> None:
        """
        An empty spec; set the fields, then submit it.
        """
    def check(self) -> None:
        """
        Raises InvalidArgument (a ValueError) with the first of the spec's rules it breaks.
        """
    def check_constraints(self) -> None:
        """
        Raises InvalidArgument if a placement constraint's rule is broken (nothing else is read).
        """
    def check_crash_strategy(self) -> None:
        """
        Raises InvalidArgument if the crash strategy's rule is broken (nothing else is read).
        """
    @property
    def actor_type(self) -> str:
        """
        Registered actor type.
        """
    @actor_type.setter
    def actor_type(self, arg0: str) -> None: ...
    @property
    def anti_affinity_labels(self) -> list[str]:
        """
        Labels that must not run on the node.
        """
    @anti_affinity_labels.setter
    def anti_affinity_labels(self, arg1: collections.abc.Sequence[str]) -> None: ...
    @property
    def colocate_with(self) -> str | None:
        """
        Only the node that runs this label (hard).
        """
    @colocate_with.setter
    def colocate_with(self, arg1: str | None) -> None: ...
    @property
    def crash_strategy(self) -> str:
        """
        'redistribute', 'wait_for_return' or 'abandon'.
        """
    @crash_strategy.setter
    def crash_strategy(self, arg1: str) -> None: ...
    @property
    def initial_state(self) -> bytes:
        """
        State bytes.
        """
    @initial_state.setter
    def initial_state(self, arg1: bytes) -> None: ...
    @property
    def label(self) -> str:
        """
        Unique label.
        """
    @label.setter
    def label(self, arg0: str) -> None: ...
    @property
    def required_classes(self) -> list[str]:
        """
        Node classes allowed (empty: any).
        """
    @required_classes.setter
    def required_classes(self, arg1: collections.abc.Sequence[str]) -> None: ...
    @property
    def required_metadata(self) -> dict[str, str]:
        """
        Metadata pairs the node must have.
        """
    @required_metadata.setter
    def required_metadata(self, arg1: collections.abc.Mapping[str, str]) -> None: ...
    @property
    def required_node_id(self) -> str | None:
        """
        Exactly this node (hard pin, never relocated).
        """
    @required_node_id.setter
    def required_node_id(self, arg1: str | None) -> None: ...
    @property
    def strategy(self) -> str:
        """
        'default', 'least_loaded', 'random' or 'pinned'.
        """
    @strategy.setter
    def strategy(self, arg1: str) -> None: ...
    @property
    def strategy_node(self) -> str:
        """
        Pinned's preferred node.
        """
    @strategy_node.setter
    def strategy_node(self, arg1: str) -> None: ...
    @property
    def strategy_seed(self) -> int:
        """
        Random's seed.
        """
    @strategy_seed.setter
    def strategy_seed(self, arg1: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def wait_ms(self) -> int:
        """
        wait_for_return: how long to wait for the node, ms.
        """
    @wait_ms.setter
    def wait_ms(self, arg1: typing.SupportsInt | typing.SupportsIndex) -> None: ...

class SingletonSpec:
    """
    A singleton spec (built by pynenc_cpp.cluster.SingletonSpec).
    """
    def __init__(self) -> None:
        """
        An empty spec; set the fields, then submit it.
        """
    def check(self) -> None:
        """
        Raises InvalidArgument (a ValueError) with the first of the spec's rules it breaks.
        """
    def check_anchor(self) -> None:
        """
        Raises InvalidArgument if the anchor's rule is broken (nothing else is read).
        """
    @property
    def actor_type(self) -> str:
        """
        Registered actor type.
        """
    @actor_type.setter
    def actor_type(self, arg0: str) -> None: ...
    @property
    def anchor(self) -> str:
        """
        'leader', 'class' or 'node'.
        """
    @anchor.setter
    def anchor(self, arg1: str) -> None: ...
    @property
    def anchor_value(self) -> str:
        """
        The class or node id of a class/node anchor.
        """
    @anchor_value.setter
    def anchor_value(self, arg1: str) -> None: ...
    @property
    def drain_timeout_ms(self) -> int:
        """
        How long a graceful move waits for the old owner to stop, ms.
        """
    @drain_timeout_ms.setter
    def drain_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def label(self) -> str:
        """
        Unique label.
        """
    @label.setter
    def label(self, arg0: str) -> None: ...
    @property
    def state(self) -> bytes:
        """
        State bytes.
        """
    @state.setter
    def state(self, arg1: bytes) -> None: ...

class AgentFamily:
    """
    An agent family as this node declares it.
    """
    def __init__(self) -> None:
        """
        An empty family; set the fields, then declare it.
        """
    def check(self) -> None:
        """
        Raises InvalidArgument (a ValueError) with the first of the family's rules it breaks.
        """
    @property
    def agents(self) -> list[str]:
        """
        Known agent URIs.
        """
    @agents.setter
    def agents(self, arg0: collections.abc.Sequence[str]) -> None: ...
    @property
    def distribution(self) -> str:
        """
        'evenly' or 'evenly_by_capability'.
        """
    @distribution.setter
    def distribution(self, arg1: str) -> None: ...
    @property
    def drain_timeout_ms(self) -> int:
        """
        How long a rebalancing move waits for the old owner, ms.
        """
    @drain_timeout_ms.setter
    def drain_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def scheme(self) -> str:
        """
        URI scheme of its agents.
        """
    @scheme.setter
    def scheme(self, arg0: str) -> None: ...
    @property
    def supported(self) -> list[str] | None:
        """
        URIs this node can run (None: all it knows).
        """
    @supported.setter
    def supported(self, arg0: collections.abc.Sequence[str] | None) -> None: ...

class InstanceContext:
    """
    What an actor factory receives.
    """
    @property
    def actor_type(self) -> str:
        """
        Actor type (agent: the scheme).
        """
    @property
    def generation(self) -> Generation:
        """
        The instance's generation: stamp fenced writes with generation.packed.
        """
    @property
    def kind(self) -> str:
        """
        'actor', 'singleton' or 'agent'.
        """
    @property
    def label(self) -> str:
        """
        The label (agent: its URI).
        """
    @property
    def node(self) -> str:
        """
        This node's id.
        """
    @property
    def state(self) -> bytes:
        """
        State bytes.
        """

class SpecStatus:
    """
    A managed label's status (leader's view).
    """
    @property
    def generation(self) -> Generation: ...
    @property
    def kind(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def node(self) -> str | None:
        """
        Current (or last) owner, or None.
        """
    @property
    def reason(self) -> str:
        """
        Why it is not running ('' when running).
        """
    @property
    def state(self) -> str:
        """
        'pending', 'running', 'waiting_for_return' or 'unplaced'.
        """

class CoordinatorNodeView:
    """
    One node as the leader sees it.
    """
    @property
    def actor_types(self) -> list[str]: ...
    @property
    def address(self) -> str: ...
    @property
    def alive(self) -> bool: ...
    @property
    def id(self) -> str: ...
    @property
    def incarnation(self) -> int: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def node_class(self) -> str: ...
    @property
    def running(self) -> list[str]:
        """
        Labels placed on the node.
        """
    @property
    def state(self) -> str: ...

class CoordinatorClusterView:
    """
    The leader's view of the cluster.
    """
    @property
    def alive_count(self) -> int: ...
    @property
    def leader(self) -> str | None: ...
    @property
    def nodes(self) -> list[CoordinatorNodeView]: ...
    @property
    def total_count(self) -> int: ...

class LabelPlacement:
    """
    Where a label runs (a node's directory copy).
    """
    @property
    def address(self) -> str: ...
    @property
    def generation(self) -> Generation: ...
    @property
    def kind(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def node(self) -> str | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def state(self) -> str: ...

class GenerationSource:
    """
    Mints generations and keeps specs (thread-safe; may block on I/O).
    """
    @typing.overload
    def __init__(self, uri: str = "memory://", namespace: str = "pynenc-cpp") -> None:
        """
        Opens the source named by `uri`; `namespace` (a cluster's name) separates data.
        """
    @typing.overload
    def __init__(self, storage: pynenc_cpp._core.storage.Storage) -> None:
        """
        A source over `storage` (its pool or database; its app id is the namespace).
        """
    def claim_seq(self, label: str, owner: str, expected: Generation) -> Generation:
        """
        Re-grant to the current owner: seq + 1 iff ownership is exactly (owner, expected); raises Conflict otherwise.
        """
    def claim_term(
        self, label: str, owner: str, min_term: typing.SupportsInt | typing.SupportsIndex = 0
    ) -> Generation:
        """
        A new ownership epoch: term = max(current, min_term) + 1, seq 0.
        """
    def current(self, label: str) -> typing.Any:
        """
        (owner, Generation) of the label, or None.
        """
    def list(self) -> list:
        """
        Every stored spec: (label, spec bytes, owner or None, Generation or None).
        """
    @property
    def shared(self) -> bool:
        """
        True when other processes see the same data (SQLite, Redis).
        """

class FencedStore:
    """
    Key -> value store that rejects writes stamped with a generation lower than the stored one (thread-safe).
    """
    @typing.overload
    def __init__(self, uri: str = "memory://", namespace: str = "pynenc-cpp") -> None:
        """
        Opens the store named by `uri`.
        """
    @typing.overload
    def __init__(self, storage: pynenc_cpp._core.storage.Storage) -> None:
        """
        A store over `storage` (its pool or database; its app id is the namespace).
        """
    def delete(self, key: str, generation: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Removes the value, keeping max(stored, generation) as a tombstone; raises StaleGeneration when the stored generation is higher.
        """
    def read(self, key: str) -> typing.Any:
        """
        (value bytes, packed generation), or None.
        """
    def write(
        self, key: str, value: bytes, generation: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Stores value under key stamped with the packed generation; raises StaleGeneration (nothing changed) when the stored generation is higher.
        """

class Journal:
    """
    Event log of event-sourced actors, per entity, fenced by generations like FencedStore (thread-safe; may block on I/O).
    """
    @typing.overload
    def __init__(self, uri: str = "memory://", namespace: str = "pynenc-cpp") -> None:
        """
        Opens the journal named by `uri`.
        """
    @typing.overload
    def __init__(self, storage: pynenc_cpp._core.storage.Storage) -> None:
        """
        A journal over `storage` (its pool or database; its app id is the namespace).
        """
    def append(
        self,
        entity: str,
        expected_seq: typing.SupportsInt | typing.SupportsIndex,
        generation: typing.SupportsInt | typing.SupportsIndex,
        events: collections.abc.Sequence[bytes],
    ) -> int:
        """
        Appends events as entries expected_seq+1.., all or none; returns the new last seq. Raises StaleGeneration when generation is below the entity's fence (checked first), Conflict when the last seq is not expected_seq.
        """
    def fence(self, entity: str, generation: typing.SupportsInt | typing.SupportsIndex) -> int:
        """
        Raises the entity's fence to generation (a new owner, before replaying); returns the last seq. Raises StaleGeneration when the fence is already higher.
        """
    def fence_of(self, entity: str) -> int:
        """
        The entity's fence, a packed generation (0: never written).
        """
    def last_seq(self, entity: str) -> int:
        """
        The entity's last seq (0: empty).
        """
    def load_snapshot(self, entity: str) -> typing.Any:
        """
        (seq, packed generation, state bytes) of the snapshot, or None.
        """
    def read(
        self,
        entity: str,
        after_seq: typing.SupportsInt | typing.SupportsIndex = 0,
        limit: typing.SupportsInt | typing.SupportsIndex = 0,
    ) -> list:
        """
        Entries with seq > after_seq in order, at most limit (0: all): [(seq, packed generation, payload bytes)].
        """
    def save_snapshot(
        self,
        entity: str,
        seq: typing.SupportsInt | typing.SupportsIndex,
        generation: typing.SupportsInt | typing.SupportsIndex,
        state: bytes,
    ) -> None:
        """
        Stores the state as of entry seq, fenced like append; ignored when a snapshot with a higher seq is stored. Raises InvalidArgument when seq is past the last seq.
        """
