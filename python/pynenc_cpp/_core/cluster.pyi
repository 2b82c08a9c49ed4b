"""
The cluster core: transport, membership, election.
"""

from __future__ import annotations

import collections.abc
import typing

import pynenc_cpp._core.coordinator
import pynenc_cpp._core.storage

__all__: list[str] = [
    "ClusterActivation",
    "ClusterHostedInstance",
    "ClusterMember",
    "ClusterMemberEvent",
    "ClusterNode",
    "ClusterNodeStatus",
    "ClusterOptions",
]

class ClusterMember:
    """
    One member as this node sees it (read-only snapshot).
    """
    @property
    def address(self) -> str:
        """
        'host:port' the member listens on.
        """
    @property
    def id(self) -> str:
        """
        Node id (lowercase hex; persistent with a state dir).
        """
    @property
    def incarnation(self) -> int:
        """
        SWIM incarnation number.
        """
    @property
    def metadata(self) -> dict[str, str]:
        """
        The member's key-value metadata.
        """
    @property
    def node_class(self) -> str:
        """
        The member's node class.
        """
    @property
    def started_at_ms(self) -> int:
        """
        Wall-clock ms at which the member's process started (join order).
        """
    @property
    def state(self) -> str:
        """
        'alive', 'suspect', 'dead' or 'left'.
        """

class ClusterMemberEvent:
    """
    A membership change seen by this node.
    """
    @property
    def kind(self) -> str:
        """
        'joined', 'suspected', 'alive_again', 'dead' or 'left'.
        """
    @property
    def member(self) -> ClusterMember:
        """
        The member record after the change.
        """

class ClusterActivation:
    """
    What the work start/stop callbacks receive.
    """
    @property
    def epoch(self) -> int:
        """
        The agreed membership epoch of the election.
        """
    @property
    def lease_until_mono_ms(self) -> int:
        """
        End of the mastership lease, CLOCK_MONOTONIC ms (0 in standalone mode).
        """
    @property
    def node(self) -> str:
        """
        This node's id.
        """
    @property
    def standalone(self) -> bool:
        """
        True without a cluster.
        """

class ClusterHostedInstance:
    """
    An instance this node hosts.
    """
    @property
    def generation(self) -> pynenc_cpp._core.coordinator.Generation: ...
    @property
    def kind(self) -> str:
        """
        'actor', 'singleton' or 'agent'.
        """
    @property
    def label(self) -> str: ...
    @property
    def phase(self) -> str:
        """
        'acquiring', 'starting', 'active' or 'stopping'.
        """

class ClusterNodeStatus:
    """
    A snapshot of this node's view.
    """
    @property
    def address(self) -> str:
        """
        'host:port' (empty in standalone mode).
        """
    @property
    def epoch(self) -> int:
        """
        The agreed epoch of the current view.
        """
    @property
    def has_quorum(self) -> bool:
        """
        Whether live members reach quorum.
        """
    @property
    def hosted(self) -> list[ClusterHostedInstance]:
        """
        Instances this node hosts, any phase.
        """
    @property
    def id(self) -> str:
        """
        This node's id.
        """
    @property
    def incarnation(self) -> int:
        """
        This node's incarnation.
        """
    @property
    def leader(self) -> str | None:
        """
        The elected node id, or None.
        """
    @property
    def lease_until_mono_ms(self) -> int:
        """
        This node's lease end, CLOCK_MONOTONIC ms (0: none).
        """
    @property
    def standalone(self) -> bool:
        """
        True without a cluster.
        """
    @property
    def state(self) -> str:
        """
        Supervisor state: 'standby', 'activating', 'master' or 'stopping'.
        """
    @property
    def transport(self) -> dict:
        """
        Transport counters (monotonic; all 0 in standalone mode): frames_sent, frames_received (socket traffic), frames_local (to itself), frames_dropped, sends_oversize, handshakes_rejected, frames_oversize, frames_malformed, records_rejected (sealed frames that did not open), connections_established, reconnect_attempts, links_expired.
        """

class ClusterOptions:
    """
    Options of ClusterNode.start (pynenc_cpp.cluster.ClusterConfig builds them; the engine validates them again).
    """
    def __init__(self) -> None:
        """
        The engine's defaults.
        """
    @property
    def activation_log(self) -> str:
        """
        JSON-lines activation log path ('': none).
        """
    @activation_log.setter
    def activation_log(self, arg0: str) -> None: ...
    @property
    def actor_buffer_limit(self) -> int:
        """
        Per label: actor messages sent and not yet acknowledged, at most.
        """
    @actor_buffer_limit.setter
    def actor_buffer_limit(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def actor_inbox_limit(self) -> int:
        """
        Messages waiting for this process's actor runtime, at most.
        """
    @actor_inbox_limit.setter
    def actor_inbox_limit(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def actor_resend_ms(self) -> int:
        """
        An unacknowledged label message is sent again after this, ms.
        """
    @actor_resend_ms.setter
    def actor_resend_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def cluster_name(self) -> str:
        """
        Cluster name.
        """
    @cluster_name.setter
    def cluster_name(self, arg0: str) -> None: ...
    @property
    def election(self) -> str:
        """
        'oldest', 'hrw' or 'lowest_address'.
        """
    @election.setter
    def election(self, arg1: str) -> None: ...
    @property
    def election_class(self) -> str:
        """
        Oldest election only: candidates restricted to this node class.
        """
    @election_class.setter
    def election_class(self, arg0: str) -> None: ...
    @property
    def generation_source(self) -> str:
        """
        memory://, sqlite:///path or redis://host:port/db.
        """
    @generation_source.setter
    def generation_source(self, arg0: str) -> None: ...
    @property
    def heartbeat_ms(self) -> int:
        """
        Probe period, ms.
        """
    @heartbeat_ms.setter
    def heartbeat_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def host(self) -> str:
        """
        Listen host ('' with no seeds: standalone).
        """
    @host.setter
    def host(self, arg0: str) -> None: ...
    @property
    def indirect_probes(self) -> int:
        """
        Members asked to ping-req before suspicion.
        """
    @indirect_probes.setter
    def indirect_probes(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def lease_ms(self) -> int:
        """
        Lease length, ms (0: suspect).
        """
    @lease_ms.setter
    def lease_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def leave_timeout_ms(self) -> int:
        """
        How long a graceful stop waits for its instances to be handed over, ms.
        """
    @leave_timeout_ms.setter
    def leave_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def max_frame_bytes(self) -> int:
        """
        Frame size limit.
        """
    @max_frame_bytes.setter
    def max_frame_bytes(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def metadata(self) -> dict[str, str]:
        """
        This node's key-value metadata.
        """
    @metadata.setter
    def metadata(self, arg0: collections.abc.Mapping[str, str]) -> None: ...
    @property
    def node_class(self) -> str:
        """
        This node's class.
        """
    @node_class.setter
    def node_class(self, arg0: str) -> None: ...
    @property
    def node_id(self) -> str:
        """
        This node's id ('': random, or the state dir's).
        """
    @node_id.setter
    def node_id(self, arg0: str) -> None: ...
    @property
    def placement(self) -> str:
        """
        Default placement strategy: 'least_loaded', 'random:<seed>' or 'pinned:<node id>'.
        """
    @placement.setter
    def placement(self, arg1: str) -> None: ...
    @property
    def port(self) -> int:
        """
        Listen port (0: ephemeral).
        """
    @port.setter
    def port(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def quorum(self) -> int:
        """
        Quorum (0: majority of seeds + self).
        """
    @quorum.setter
    def quorum(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def request_timeout_ms(self) -> int:
        """
        Default deadline of coordinator requests and asks, ms.
        """
    @request_timeout_ms.setter
    def request_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def secret(self) -> str:
        """
        Shared cluster secret.
        """
    @secret.setter
    def secret(self, arg0: str) -> None: ...
    @property
    def seeds(self) -> list[str]:
        """
        Seed addresses 'host:port'.
        """
    @seeds.setter
    def seeds(self, arg0: collections.abc.Sequence[str]) -> None: ...
    @property
    def send_queue_bound(self) -> int:
        """
        Frames queued per peer before dropping the oldest.
        """
    @send_queue_bound.setter
    def send_queue_bound(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def spawn_timeout_ms(self) -> int:
        """
        Spawn ack deadline before a re-send, ms (0: max(5000, 3 * lease)).
        """
    @spawn_timeout_ms.setter
    def spawn_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def stabilize_ms(self) -> int:
        """
        Time elected before starting the work, ms.
        """
    @stabilize_ms.setter
    def stabilize_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...
    @property
    def state_dir(self) -> str:
        """
        Node id / peers dir ('': none).
        """
    @state_dir.setter
    def state_dir(self, arg0: str) -> None: ...
    @property
    def storage(self) -> pynenc_cpp._core.storage.Storage:
        """
        The Storage (on generation_source, app id cluster_name) the generation source is taken from; None: the node opens its own.
        """
    @storage.setter
    def storage(self, arg0: pynenc_cpp._core.storage.Storage) -> None: ...
    @property
    def suspect_timeout_ms(self) -> int:
        """
        Suspect -> Dead timeout, ms.
        """
    @suspect_timeout_ms.setter
    def suspect_timeout_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None: ...

class ClusterNode:
    """
    A running cluster node (use pynenc_cpp.cluster.run_cluster).
    """
    @staticmethod
    def start(
        options: ClusterOptions,
        start: typing.Any,
        stop: typing.Any,
        on_event: typing.Any = None,
        on_log: typing.Any = None,
    ) -> ClusterNode:
        """
        Validates the options, binds, joins the seeds and returns the running node. start(activation) and stop(activation, reason) run on the node's callback thread; on_event(event) and on_log(level, line) too (level: 0 debug, 1 info, 2 warning, 3 error; None: warnings and errors go to stderr). Raises BadConfig (bad option, unwritable state dir) or BackendError (address in use).
        """
    def ack_label(
        self,
        token: typing.SupportsInt | typing.SupportsIndex,
        outcome: typing.SupportsInt | typing.SupportsIndex,
    ) -> None:
        """
        Answers a label message: 0 processed, 1 duplicate, 2 not here, 3 rejected.
        """
    def ask(
        self, label: str, payload: bytes, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> bytes:
        """
        Sends bytes to the label's instance and returns its answer.
        """
    def directory(self) -> list[pynenc_cpp._core.coordinator.LabelPlacement]:
        """
        This node's copy of the directory.
        """
    def drain_inbox(self, max: typing.SupportsInt | typing.SupportsIndex = 1024) -> list:
        """
        Up to `max` waiting inbox items: (kind, label, generation, spec kind, actor type, payload, token); kind 0 start, 1 stop, 2 label message, 3 path message, 4 regrant.
        """
    def inbox_fd(self) -> int:
        """
        The inbox eventfd (readable while items wait); -1 standalone.
        """
    def instance_stopped(
        self, label: str, generation: pynenc_cpp._core.coordinator.Generation
    ) -> None:
        """
        The runtime finished a stop item.
        """
    def lookup(self, label: str) -> pynenc_cpp._core.coordinator.LabelPlacement | None:
        """
        Where the label runs per this node's directory copy, or None.
        """
    def mail_stats(self) -> dict:
        """
        Actor message counters and the messages buffered per label.
        """
    def members(self) -> list[ClusterMember]:
        """
        Every known member, self included, dead and left ones too, sorted by id.
        """
    def query_statuses(
        self, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> list[pynenc_cpp._core.coordinator.SpecStatus]:
        """
        The leader's statuses of every managed label.
        """
    def query_view(
        self, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> pynenc_cpp._core.coordinator.CoordinatorClusterView:
        """
        The leader's cluster view.
        """
    def raise_generation_floor(
        self, label: str, floor: pynenc_cpp._core.coordinator.Generation
    ) -> None:
        """
        The label's storage is fenced at `floor`, above its instance's generation: the node drops that instance and the leader claims a term above `floor`.
        """
    def register_actor_type(self, actor_type: str, factory: typing.Any) -> None:
        """
        factory(InstanceContext) -> object (optional methods stop(reason), on_generation(Generation), on_message(bytes) -> bytes), called on the callback thread. Raises InvalidArgument (bad name) or TypeError.
        """
    def register_agent_family(
        self, family: pynenc_cpp._core.coordinator.AgentFamily, factory: typing.Any
    ) -> None:
        """
        Declares an agent family and the factory of its agents.
        """
    def register_inbox_actor_type(
        self, actor_type: str, stop_timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Offers an actor type whose instances the runtime runs through the inbox.
        """
    def remove_spec(
        self, label: str, timeout_ms: typing.SupportsInt | typing.SupportsIndex
    ) -> None:
        """
        Removes a spec (its instance stops); raises InvocationNotFound if unknown.
        """
    def send_to_label(self, label: str, payload: bytes) -> int:
        """
        Reliable, in-order delivery to the label's instance; returns the message's sequence number; raises BufferFull when the label's buffer is full.
        """
    def send_to_path(self, address: str, path: str, payload: bytes) -> None:
        """
        Best effort to the local actor at `path` of the node at `address`.
        """
    def status(self) -> ClusterNodeStatus:
        """
        A snapshot of this node's status.
        """
    def stop(self) -> None:
        """
        Graceful: stops the work (waits for the stop callback), sends Leaving, shuts the transport down. Idempotent.
        """
    def submit_actor(
        self,
        spec: pynenc_cpp._core.coordinator.ActorSpec,
        timeout_ms: typing.SupportsInt | typing.SupportsIndex,
    ) -> None:
        """
        Submits an actor spec to the leader; raises InvalidArgument, Conflict, Unavailable, Timeout or BackendError.
        """
    def submit_singleton(
        self,
        spec: pynenc_cpp._core.coordinator.SingletonSpec,
        timeout_ms: typing.SupportsInt | typing.SupportsIndex,
    ) -> None:
        """
        Submits a singleton spec to the leader.
        """
    def tell(self, label: str, payload: bytes) -> None:
        """
        Fire and forget; raises Unavailable if the directory knows no running instance.
        """
    def unregister_actor_type(self, actor_type: str) -> None:
        """
        This node stops offering the type. Raises InvocationNotFound if not registered.
        """
