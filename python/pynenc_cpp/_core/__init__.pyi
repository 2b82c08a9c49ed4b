"""
pynenc-cpp engine bindings (private; use the pynenc_cpp package).
"""

from __future__ import annotations

import typing

from pynenc_cpp._core.broker import Broker
from pynenc_cpp._core.client_data_store import ClientDataStore
from pynenc_cpp._core.cluster import (
    ClusterActivation,
    ClusterHostedInstance,
    ClusterMember,
    ClusterMemberEvent,
    ClusterNode,
    ClusterNodeStatus,
    ClusterOptions,
)
from pynenc_cpp._core.coordinator import (
    ActorSpec,
    AgentFamily,
    CoordinatorClusterView,
    CoordinatorNodeView,
    FencedStore,
    Generation,
    GenerationSource,
    InstanceContext,
    Journal,
    LabelPlacement,
    SingletonSpec,
    SpecStatus,
)
from pynenc_cpp._core.lifecycle import Lifecycle, history_json
from pynenc_cpp._core.orchestrator import Orchestrator
from pynenc_cpp._core.report import describe_backend
from pynenc_cpp._core.runner import (
    PendingFinish,
    RunnerCallbacks,
    RunnerEngine,
    RunnerSettings,
    RunnerSource,
)
from pynenc_cpp._core.state_backend import StateBackend
from pynenc_cpp._core.storage import Storage
from pynenc_cpp._core.trigger import TriggerStore

from . import (
    broker,
    client_data_store,
    cluster,
    coordinator,
    lifecycle,
    orchestrator,
    report,
    runner,
    state_backend,
    storage,
    trigger,
)

__all__: list[str] = [
    "ActorSpec",
    "AgentFamily",
    "BackendConnectionError",
    "BackendError",
    "BadConfig",
    "Broker",
    "BufferFull",
    "Change",
    "Claim",
    "ClientDataStore",
    "ClusterActivation",
    "ClusterHostedInstance",
    "ClusterMember",
    "ClusterMemberEvent",
    "ClusterNode",
    "ClusterNodeStatus",
    "ClusterOptions",
    "Conflict",
    "CoordinatorClusterView",
    "CoordinatorNodeView",
    "EngineError",
    "FencedStore",
    "Finish",
    "Generation",
    "GenerationSource",
    "IllegalTransition",
    "InstanceContext",
    "InvalidArgument",
    "InvocationNotFound",
    "Journal",
    "LabelPlacement",
    "Lifecycle",
    "Orchestrator",
    "OwnershipViolation",
    "PendingFinish",
    "RunnerCallbacks",
    "RunnerEngine",
    "RunnerSettings",
    "RunnerSource",
    "SingletonSpec",
    "SpecStatus",
    "StaleGeneration",
    "StateBackend",
    "StatusRecord",
    "Storage",
    "Timeout",
    "TriggerStore",
    "Unavailable",
    "apply_transition",
    "args_id",
    "broker",
    "client_data_store",
    "cluster",
    "coordinator",
    "describe_backend",
    "engine_metrics",
    "gil_handovers",
    "history_json",
    "lifecycle",
    "new_invocation_id",
    "orchestrator",
    "report",
    "runner",
    "set_engine_metrics_enabled",
    "set_spin_wait_us",
    "spin_wait_us",
    "state_backend",
    "status_names",
    "status_table",
    "storage",
    "trigger",
]

class EngineError(Exception):
    """
    Base class of every error raised by the pynenc-cpp engine.
    """

class InvocationNotFound(EngineError, KeyError):
    """
    An invocation, key or record named by the caller does not exist.
    """

class IllegalTransition(EngineError):
    """
    The invocation status machine forbids this transition.
    """

    from_status: str | None
    to_status: str
    allowed: list[str]
    reason: str

class OwnershipViolation(EngineError):
    """
    The status machine's runner-ownership rules forbid this change.
    """

    from_status: str
    to_status: str
    current_owner: str | None
    attempted_owner: str | None
    reason: str

class BackendError(EngineError, RuntimeError):
    """
    The storage backend failed (I/O, server, corrupt data).
    """

class BackendConnectionError(BackendError):
    """
    The connection to the storage server failed (refused, reset, timed out, still loading): the server may come back. maybe_applied: the command was sent on the lost connection, so it may or may not have been applied.
    """

    maybe_applied: bool

class BadConfig(EngineError, ValueError):
    """
    A configuration value is missing, malformed or unsupported.
    """

class InvalidArgument(EngineError, ValueError):
    """
    An argument is out of range or malformed.
    """

class Conflict(EngineError):
    """
    A compare-and-set lost: the stored value is not the expected one.
    """

class StaleGeneration(Conflict):
    """
    A write or command carries a generation below the one already stored.
    """

class Unavailable(EngineError, ConnectionError):
    """
    The cluster cannot serve the request now (no leader, no quorum).
    """

class Timeout(EngineError, TimeoutError):
    """
    No answer within the deadline.
    """

class BufferFull(EngineError):
    """
    A bounded buffer is full: the message was not queued.
    """

class StatusRecord(tuple[str, str | None, int]):
    """
    An invocation's status record as the storage holds it.
    """

    @property
    def status(self) -> str:
        """pynenc's status value"""
    @property
    def runner_id(self) -> str | None:
        """the owner's runner id, or None"""
    @property
    def timestamp_us(self) -> int:
        """when the storage made the change, in microseconds since the epoch"""

class Claim(tuple[str, StatusRecord, dict[str, typing.Any] | None, bool]):
    """
    The outcome of a claim (Lifecycle.claim, the runner's takes).
    """

    @property
    def kind(self) -> str:
        """'claimed' (now PENDING), 'started' (now RUNNING), 'not_available' or 'needs_check' (its task may have running concurrency control: nothing changed)"""
    @property
    def record(self) -> StatusRecord:
        """the StatusRecord after the claim"""
    @property
    def invocation(self) -> dict[str, typing.Any] | None:
        """the invocation's record dict, or None when not available"""
    @property
    def status_watched(self) -> bool:
        """whether a trigger condition watches the new status"""

class Change(tuple[StatusRecord, bool]):
    """
    The outcome of a status change (Lifecycle.change_status, retry, ...).
    """

    @property
    def record(self) -> StatusRecord:
        """the StatusRecord after the change"""
    @property
    def status_watched(self) -> bool:
        """whether a trigger condition watches the new status"""

class Finish(tuple[StatusRecord, bool, bool]):
    """
    The outcome of a finish (Lifecycle.finish_success / finish_failure).
    """

    @property
    def record(self) -> StatusRecord:
        """the StatusRecord after the change"""
    @property
    def status_watched(self) -> bool:
        """whether a trigger condition watches the final status"""
    @property
    def outcome_watched(self) -> bool:
        """whether a trigger condition watches the result or the exception"""

def _close_python_gate() -> None:
    """
    Stops the native threads that call Python, before the interpreter finalizes.
    """

def _register_not_found_class(cls: typing.Any) -> None:
    """
    Makes every engine 'not found' error raise ``cls`` (a subclass of ``InvocationNotFound`` called with the message): pynenc_cpp.errors registers its InvocationNotFound, which is also pynenc's InvocationNotFoundError, at import. Holds the GIL.
    """

def apply_transition(
    current: str | None, current_owner: str | None, to: str, runner_id: str | None
) -> tuple[typing.Any, typing.Any]:
    """
    Applies the status machine to one transition without storing anything.
    Returns (new_status, new_owner); raises IllegalTransition or OwnershipViolation.
    """

def args_id(serialized_arguments: dict) -> str:
    """
    pynenc's compute_args_id (pynenc 0.4.0), byte for byte: 'no_args' for an empty dict,
    else the SHA-256 hex digest of JSON(name)=JSON(text); per name in sorted order.
    Raises TypeError for a name or text that is not a str, UnicodeEncodeError for one
    that has no UTF-8 form (a lone surrogate); callers then use pynenc's own function.
    """

def engine_metrics() -> dict:
    """
    A snapshot of this process's task-engine metrics (pynenc_cpp.metrics renders it):
    entered (status -> changes applied into it, registrations included), backend_errors,
    backend_errors_connection, redis_connections_opened, redis_connections_lost,
    sqlite_busy_waits, sqlite_busy_wait_us (SQLite lock contention), and the
    queue_wait / run_time histograms (bounds_us, per-bucket counts with +Inf last, count,
    sum_us).
    """

def gil_handovers() -> dict:
    """
    How often this process handed the GIL over so far: ``engine_calls`` (binding calls
    that released it and took it back) and ``thread_entries`` (engine threads that took
    it to run Python: a runner worker running an invocation, a callback). Each is one
    GIL acquisition. For profiling (bench/profile_burst.py); never reset.
    """

def new_invocation_id() -> str:
    """
    A new invocation id: str(uuid.uuid4())'s form (36 characters, version 4), from the
    kernel's random bytes. Raises EngineError if the kernel gives none.
    """

def set_engine_metrics_enabled(enabled: bool) -> None:
    """
    Turns the engine's metric counting on or off (on by default).
    """

def set_spin_wait_us(us: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    Sets the process-wide spin budget (0 to 10000 us; ValueError otherwise).
    """

def spin_wait_us() -> int:
    """
    The process-wide spin budget in microseconds: how long a waiter polls before it
    sleeps (core/spin_wait.h; 0: never spins).
    """

def status_names() -> list:
    """
    Every invocation status the engine knows, as pynenc's string values.
    """

def status_table() -> dict:
    """
    The status machine as a dict: status (None = not registered yet) -> definition dict
    with allowed_transitions and the ownership flags, shaped like pynenc's StatusDefinition.
    """

__version__: str = "0.1.0"
