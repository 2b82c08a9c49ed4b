"""``ClusterConfig``: the options of a cluster node, from code or from the environment.

Every field has the engine's default (see docs/cluster/python.md for the table).
``ClusterConfig(...)`` validates at construction and raises ``ValueError`` naming
the field; ``ClusterConfig.from_env()`` reads ``PYNENC_CPP_CLUSTER_<FIELD>``
variables and raises ``ValueError`` naming the variable. The engine validates the
options again when the node starts (``BadConfig``, also a ``ValueError``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pynenc_cpp import _core
from pynenc_cpp.cluster.secret import resolve_secret

ENV_PREFIX = "PYNENC_CPP_CLUSTER_"
ELECTIONS = ("oldest", "hrw", "lowest_address")
MIN_FRAME_BYTES = 1024
#: Upper bound of every timeout and interval, in ms (one day; the engine's
#: kMaxTimeoutMs): a deadline computed from a larger value could overflow.
MAX_TIMEOUT_MS = 86_400_000
_MS_FIELDS = (
    "heartbeat_ms",
    "suspect_timeout_ms",
    "stabilize_ms",
    "lease_ms",
    "request_timeout_ms",
    "spawn_timeout_ms",
    "leave_timeout_ms",
    "actor_resend_ms",
)
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")


def _check_address(value: str, what: str) -> None:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{what}: expected 'host:port' with a port in 1..65535, got {value!r}")


@dataclass(frozen=True)
class ClusterConfig:
    """Options of one cluster node (immutable; ``dataclasses.replace`` makes variants).

    With neither ``host`` nor ``seeds`` the node is *standalone*: no cluster at
    all, the work starts at once in this process.
    """

    host: str = ""
    """Listen host (loopback or not, the node authenticates every peer with the secret)."""
    port: int = 0
    """Listen port; 0 picks an ephemeral port (``ClusterHandle.status().address``)."""
    seeds: tuple[str, ...] = ()
    """``host:port`` of nodes to join (a list is accepted and stored as a tuple)."""
    secret: str = field(default="", repr=False)
    """Shared cluster secret (HMAC-SHA256 handshake). '': read from ``secret_file``."""
    secret_file: str = ""
    """With no ``secret``: the per-user secret file, created with mode 0600 on first use
    ('': ``$PYNENC_CPP_CLUSTER_SECRET_FILE``, else ``~/.config/pynenc-cpp/cluster-secret``;
    see ``pynenc_cpp.cluster.secret``). Ignored when ``secret`` is given. There is no
    empty key."""
    quorum: int = 0
    """Live members needed to elect anyone; 0: majority of distinct seeds plus self."""
    heartbeat_ms: int = 200
    """SWIM probe period."""
    suspect_timeout_ms: int = 1000
    """Suspect -> Dead after this long; must be >= 2 * heartbeat_ms."""
    stabilize_ms: int = 500
    """How long a node must stay elected before its work starts."""
    state_dir: str = ""
    """Directory for the persistent node id, incarnation, peers cache and the highest
    generation term this node ran (so terms keep rising across a full restart; '': nothing
    kept)."""
    node_class: str = ""
    """This node's class (travels with membership; see ``election_class``)."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """Key-value strings that travel with membership."""
    max_frame_bytes: int = 256 * 1024
    """Largest accepted frame; a longer one closes the connection before its body is read."""
    send_queue_bound: int = 1024
    """Frames queued per peer; the oldest is dropped beyond it."""
    cluster_name: str = "pynenc-cpp"
    """Nodes of another cluster name are refused at the handshake."""
    lease_ms: int = 0
    """Mastership lease length; 0: ``suspect_timeout_ms``."""
    election: str = "oldest"
    """``"oldest"`` (join order), ``"hrw"`` (rendezvous hashing) or ``"lowest_address"``."""
    election_class: str = ""
    """``oldest`` only: only nodes of this class are candidates ('': any)."""
    activation_log: str = ""
    """JSON-lines file of lease/start/stop records ('': none)."""
    indirect_probes: int = 3
    """Members asked to ping-req a silent member before suspecting it."""
    generation_source: str = "memory://"
    """Where the Coordinator keeps specs and mints generations: ``memory://`` (this
    process only), ``sqlite:///path.db`` (processes of one machine) or
    ``redis://host:port/db``. Namespaced by ``cluster_name``."""
    placement: str = "least_loaded"
    """Default placement strategy: ``least_loaded``, ``random:<seed>`` or ``pinned:<node id>``."""
    request_timeout_ms: int = 5000
    """Default deadline of coordinator requests (submit, query) and asks."""
    spawn_timeout_ms: int = 0
    """How long the Coordinator waits for a spawn's ack before re-sending (0: max(5 s, 3 leases))."""
    node_id: str = ""
    """This node's id ('': random, or kept in ``state_dir``); 1..128 of ``[A-Za-z0-9._:-]``.
    Not with ``state_dir``. A restarted process with the same id rejoins as the same node."""
    actor_buffer_limit: int = 1000
    """Per singleton: messages sent from this node and not yet acknowledged, at most."""
    actor_inbox_limit: int = 100_000
    """Messages waiting for this process's actors, at most (beyond: senders retry later)."""
    actor_resend_ms: int = 2000
    """An unacknowledged message to a singleton is sent again after this."""
    leave_timeout_ms: int = 10_000
    """A graceful stop first hands this node's instances over, waiting at most this long."""
    metrics_port: int = 0
    """Serves Prometheus metrics (docs/metrics.md) on ``http://<metrics_addr>:<port>/metrics``
    while the node runs. 0 (default): off. Needs ``prometheus_client``."""
    metrics_addr: str = "127.0.0.1"
    """The address the metrics server listens on."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", _seeds_tuple(self.seeds))
        object.__setattr__(self, "metadata", dict(self.metadata))
        self._validate()

    @property
    def standalone(self) -> bool:
        """True with neither host nor seeds: the work runs in-process, no cluster."""
        return not self.host and not self.seeds

    def _validate(self) -> None:
        for name in (
            "host",
            "secret",
            "secret_file",
            "state_dir",
            "node_class",
            "cluster_name",
            "election_class",
            "activation_log",
            "generation_source",
            "placement",
            "node_id",
            "metrics_addr",
        ):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a str, got {getattr(self, name)!r}")
        for f in dataclasses.fields(self):
            if f.type == "int":
                value = getattr(self, f.name)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{f.name} must be an int, got {value!r}")
        for name in _MS_FIELDS:
            if getattr(self, name) > MAX_TIMEOUT_MS:
                raise ValueError(
                    f"{name} must be at most {MAX_TIMEOUT_MS} ms (one day), got {getattr(self, name)}"
                )
        if self.secret and not self.secret.strip():
            # As a secret file of only whitespace is refused: a key anyone would guess.
            raise ValueError(
                "secret is only whitespace: set the cluster's secret, or '' for the file"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metrics_port must be in 0..65535 (0: off), got {self.metrics_port}")
        for seed in self.seeds:
            _check_address(seed, "seeds")
        if self.quorum < 0:
            raise ValueError(f"quorum must be >= 0 (0: majority), got {self.quorum}")
        if self.heartbeat_ms <= 0:
            raise ValueError(f"heartbeat_ms must be > 0, got {self.heartbeat_ms}")
        if self.suspect_timeout_ms < 2 * self.heartbeat_ms:
            raise ValueError(
                f"suspect_timeout_ms must be >= 2 * heartbeat_ms ({2 * self.heartbeat_ms}), "
                f"got {self.suspect_timeout_ms}"
            )
        if self.stabilize_ms < 0:
            raise ValueError(f"stabilize_ms must be >= 0, got {self.stabilize_ms}")
        if self.lease_ms < 0:
            raise ValueError(f"lease_ms must be >= 0 (0: suspect_timeout_ms), got {self.lease_ms}")
        if self.indirect_probes < 0:
            raise ValueError(f"indirect_probes must be >= 0, got {self.indirect_probes}")
        if self.max_frame_bytes < MIN_FRAME_BYTES:
            raise ValueError(
                f"max_frame_bytes must be >= {MIN_FRAME_BYTES}, got {self.max_frame_bytes}"
            )
        if self.send_queue_bound <= 0:
            raise ValueError(f"send_queue_bound must be > 0, got {self.send_queue_bound}")
        if not self.cluster_name:
            raise ValueError("cluster_name must not be empty")
        if self.election not in ELECTIONS:
            raise ValueError(f"election must be one of {ELECTIONS}, got {self.election!r}")
        if self.election_class and self.election != "oldest":
            raise ValueError("election_class is only used with election='oldest'")
        for k, v in self.metadata.items():
            if not isinstance(k, str) or not isinstance(v, str) or not k:
                raise ValueError(f"metadata must map non-empty str keys to str, got {k!r}: {v!r}")
        if not self.generation_source.startswith(("memory://", "sqlite://", "redis://")):
            raise ValueError(
                "generation_source must be memory://, sqlite:///path or redis://host:port/db, "
                f"got {self.generation_source!r}"
            )
        _check_placement(self.placement)
        if self.request_timeout_ms <= 0:
            raise ValueError(f"request_timeout_ms must be > 0, got {self.request_timeout_ms}")
        if self.spawn_timeout_ms < 0:
            raise ValueError(f"spawn_timeout_ms must be >= 0, got {self.spawn_timeout_ms}")
        if self.node_id:
            if len(self.node_id) > 128 or not all(c in _ID_CHARS for c in self.node_id):
                raise ValueError(f"node_id must be 1..128 of [A-Za-z0-9._:-], got {self.node_id!r}")
            if self.state_dir:
                raise ValueError("node_id cannot be combined with state_dir (it keeps its own id)")
        for name in ("actor_buffer_limit", "actor_inbox_limit", "actor_resend_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.leave_timeout_ms < 0:
            raise ValueError(f"leave_timeout_ms must be >= 0, got {self.leave_timeout_ms}")

    @classmethod
    def from_env(
        cls, prefix: str = ENV_PREFIX, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> ClusterConfig:
        """A config from ``<prefix><FIELD>`` environment variables, then ``overrides``.

        Lists: ``SEEDS`` is comma-separated ``host:port``; ``METADATA`` is ``k=v,k=v``.
        Integers must be decimal. A malformed variable raises ``ValueError`` naming it.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            var = prefix + f.name.upper()
            raw = env.get(var)
            if raw is None or f.name in overrides:
                continue
            values[f.name] = _parse_env(f.name, f.type, var, raw.strip())
        values.update(overrides)
        try:
            return cls(**values)
        except ValueError as exc:
            named = [prefix + k.upper() for k in values if k not in overrides]
            raise ValueError(f"{exc} (from environment: {', '.join(named) or 'none'})") from exc

    def to_options(self) -> _core.ClusterOptions:
        """The engine's options (what ``run_cluster`` passes to the node).

        A node that joins a cluster (not standalone) with no ``secret`` gets the
        content of its secret file, created on first use; an unsafe or unusable
        file raises :class:`~pynenc_cpp.cluster.secret.SecretFileError` (a ``ValueError``).
        """
        o = _core.ClusterOptions()
        for f in dataclasses.fields(self):
            if f.name in _PYTHON_ONLY_FIELDS:
                continue
            value = getattr(self, f.name)
            setattr(o, f.name, list(value) if f.name == "seeds" else value)
        if not self.standalone:
            o.secret = resolve_secret(self.secret, self.secret_file)
        return o


# Fields the Python layer handles itself (not engine options).
_PYTHON_ONLY_FIELDS = frozenset({"secret_file", "metrics_port", "metrics_addr"})


def _check_placement(value: str) -> None:
    if value == "least_loaded":
        return
    kind, sep, arg = value.partition(":")
    if sep and kind == "random" and arg.isdigit():
        return
    if sep and kind == "pinned" and arg:
        return
    raise ValueError(
        f"placement must be 'least_loaded', 'random:<seed>' or 'pinned:<node id>', got {value!r}"
    )


def _seeds_tuple(seeds: Any) -> tuple[str, ...]:
    if isinstance(seeds, str):
        raise ValueError(f"seeds must be a sequence of 'host:port' strings, got the str {seeds!r}")
    try:
        out = tuple(seeds)
    except TypeError:
        raise ValueError(
            f"seeds must be a sequence of 'host:port' strings, got {seeds!r}"
        ) from None
    for s in out:
        if not isinstance(s, str):
            raise ValueError(f"seeds must contain 'host:port' strings, got {s!r}")
    return out


def _parse_env(name: str, type_name: Any, var: str, raw: str) -> Any:
    if name == "seeds":
        seeds = tuple(s.strip() for s in raw.split(",") if s.strip())
        for s in seeds:
            _check_address(s, var)
        return seeds
    if name == "metadata":
        meta: dict[str, str] = {}
        for item in (i.strip() for i in raw.split(",")):
            if not item:
                continue
            k, sep, v = item.partition("=")
            if not sep or not k.strip():
                raise ValueError(f"{var}: expected 'key=value,key=value', got {raw!r}")
            meta[k.strip()] = v.strip()
        return meta
    if type_name == "int":
        try:
            return int(raw, 10)
        except ValueError:
            raise ValueError(f"{var}: expected an integer, got {raw!r}") from None
    return raw
