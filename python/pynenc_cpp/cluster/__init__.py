"""A cluster of pynenc-cpp processes: membership, elections and one master.

``run_cluster(start, stop, config)`` joins the cluster described by
``ClusterConfig`` (or ``PYNENC_CPP_CLUSTER_*`` environment variables) and calls
``start`` on the node that becomes master and ``stop`` when it loses mastership
(its lease expired, it is no longer elected, quorum was lost, or shutdown). See
docs/cluster/python.md.
"""

from pynenc_cpp.cluster.config import ENV_PREFIX, ClusterConfig
from pynenc_cpp.cluster.runtime import (
    Activation,
    ClusterAddressInUse,
    ClusterHandle,
    EventStream,
    Member,
    MemberEvent,
    NodeStatus,
    run_cluster,
)

__all__ = [
    "ENV_PREFIX",
    "Activation",
    "ClusterAddressInUse",
    "ClusterConfig",
    "ClusterHandle",
    "EventStream",
    "Member",
    "MemberEvent",
    "NodeStatus",
    "run_cluster",
]
