"""A cluster of pynenc-cpp processes: membership, elections and one master.

``run_cluster(start, stop, config)`` joins the cluster described by
``ClusterConfig`` (or ``PYNENC_CPP_CLUSTER_*`` environment variables) and calls
``start`` on the node that becomes master and ``stop`` when it loses mastership
(its lease expired, it is no longer elected, quorum was lost, or shutdown). See
docs/cluster/python.md.

The master also runs the Coordinator: ``handle.submit(ActorSpec(...))`` and
``handle.start_singleton(SingletonSpec(...))`` from any node place actors on the
nodes that ``register_actor_type`` them, exactly once, fenced by generations; see
docs/cluster/coordinator.md and docs/cluster/singletons.md.
"""

from pynenc_cpp.cluster.config import ENV_PREFIX, ClusterConfig
from pynenc_cpp.cluster.runtime import (
    Activation,
    ClusterAddressInUse,
    ClusterHandle,
    EventStream,
    Factory,
    HostedInstance,
    Member,
    MemberEvent,
    NodeStatus,
    run_cluster,
)
from pynenc_cpp.cluster.secret import SecretFileError, default_secret_path
from pynenc_cpp.cluster.specs import (
    Actor,
    ActorSpec,
    AgentFamily,
    ClusterView,
    CrashStrategy,
    FencedStore,
    FencedValue,
    Generation,
    GenerationSource,
    InstanceContext,
    LeastLoaded,
    NodeView,
    Pinned,
    Placement,
    PlacementConstraints,
    PlacementStrategy,
    RandomPlacement,
    SingletonAnchor,
    SingletonSpec,
    SpecStatus,
)
from pynenc_cpp.errors import Conflict, StaleGeneration, Timeout, Unavailable

__all__ = [
    "ENV_PREFIX",
    "Activation",
    "Actor",
    "ActorSpec",
    "AgentFamily",
    "ClusterAddressInUse",
    "ClusterConfig",
    "ClusterHandle",
    "SecretFileError",
    "default_secret_path",
    "ClusterView",
    "Conflict",
    "CrashStrategy",
    "EventStream",
    "Factory",
    "FencedStore",
    "FencedValue",
    "Generation",
    "GenerationSource",
    "HostedInstance",
    "InstanceContext",
    "LeastLoaded",
    "Member",
    "MemberEvent",
    "NodeStatus",
    "NodeView",
    "Pinned",
    "Placement",
    "PlacementConstraints",
    "PlacementStrategy",
    "RandomPlacement",
    "SingletonAnchor",
    "SingletonSpec",
    "SpecStatus",
    "StaleGeneration",
    "Timeout",
    "Unavailable",
    "run_cluster",
]
