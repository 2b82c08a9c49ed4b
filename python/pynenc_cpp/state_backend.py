"""State backend adapter: pynenc's ``BaseStateBackend`` on the engine's state backend.

Every member converts pynenc's objects to the plain values pynenc's
``SQLiteStateBackend`` stores (same JSON, same columns) and delegates to
``_core.StateBackend``; the adapter keeps no state of its own. Timestamps cross
as integer microseconds since the epoch (``pynenc_cpp._convert``); records and DTOs
are built from each other in ``pynenc_cpp._invocation_records``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pynenc.app_info import AppInfo
from pynenc.exceptions import InvocationNotFoundError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.identifiers.task_id import TaskId
from pynenc.invocation.status import InvocationStatus
from pynenc.models.call_dto import CallDTO
from pynenc.models.invocation_dto import InvocationDTO
from pynenc.runner.runner_context import RunnerContext
from pynenc.state_backend.base_state_backend import BaseStateBackend, InvocationHistory
from pynenc.workflow.workflow_identity import WorkflowIdentity

from pynenc_cpp import _core, _live, _shortcuts
from pynenc_cpp._component import (
    CppComponentMixin,
    MemBackend,
    RedisBackend,
    SqliteBackend,
    redis_uri,
    sqlite_uri,
)
from pynenc_cpp._convert import as_invocation_ids, to_us

# Re-exported: the engine's other adapters and the tests import them from here.
from pynenc_cpp._invocation_records import _arguments_from_json as _arguments_from_json
from pynenc_cpp._invocation_records import _arguments_json as _arguments_json
from pynenc_cpp._invocation_records import _call_id as _call_id
from pynenc_cpp._invocation_records import _dtos as _dtos
from pynenc_cpp._invocation_records import _invocation_record as _invocation_record
from pynenc_cpp._invocation_records import _record_fields as _record_fields
from pynenc_cpp._invocation_records import _record_workflow as _record_workflow
from pynenc_cpp._invocation_records import _workflow_identity
from pynenc_cpp.config import ConfigCpp
from pynenc_cpp.errors import InvocationNotFound, names_invocation

if TYPE_CHECKING:
    from pynenc import Pynenc
    from pynenc.invocation.dist_invocation import DistributedInvocation
    from pynenc.invocation.status import InvocationStatusRecord

#: A result read together with its final status (``CppNativeOrchestrator``'s status
#: read) is kept for the reading thread's next ``get_result`` of that id for at most
#: this long, so that ``invocation.result`` makes one storage read instead of two.
_PREFETCH_TTL_SEC = 1.0
#: Results kept per thread (the oldest is dropped first).
_PREFETCH_MAX = 8


class CppStateBackend(CppComponentMixin, BaseStateBackend):
    """Native state backend: records and their indexes live in C++.

    Thread-safe. The backend is picked by the subclass. On memory, app infos go
    to a process-wide registry so that ``discover_app_infos`` finds every app of
    the process (like pynenc's ``MemStateBackend``); on SQLite they are in the file.
    """

    def __init__(self, app: Pynenc) -> None:
        super().__init__(app)
        self._engine = self.storage.state_backend()
        self._prefetched = threading.local()
        self._purges = 0  # prefetched results older than the last purge are not served

    def purge(self) -> None:
        """Drop every record of this app; the app info registration is kept."""
        self.forget_prefetched()
        try:
            self._engine.purge()
        finally:
            self.forget_prefetched()  # and none read while the purge ran

    def forget_prefetched(self) -> None:
        """Serve none of the results kept so far (``remember_result``), on any thread."""
        self._purges += 1

    def prefetch_generation(self) -> int:
        """What ``remember_result`` is given: read it before reading the result."""
        return self._purges

    # --- results read with their status ---------------------------------------

    def remember_result(self, invocation_id: str, serialized_result: str, generation: int) -> None:
        """Keep a serialized result just read with its SUCCESS status for this thread's
        next ``get_result`` of the same id (served once; dropped after
        ``_PREFETCH_TTL_SEC``, after a purge that began after ``generation``
        (``prefetch_generation()`` read before the storage read), or when the thread
        keeps more than ``_PREFETCH_MAX``). A final status never changes, so neither
        does its result."""
        memo: dict[str, tuple[str, float, int]] | None = getattr(self._prefetched, "memo", None)
        if memo is None:
            memo = self._prefetched.memo = {}
        elif invocation_id not in memo and len(memo) >= _PREFETCH_MAX:
            del memo[next(iter(memo))]
        memo[invocation_id] = (serialized_result, time.monotonic(), generation)

    def _take_prefetched(self, invocation_id: str) -> str | None:
        memo: dict[str, tuple[str, float, int]] | None = getattr(self._prefetched, "memo", None)
        if not memo:
            return None
        hit = memo.pop(invocation_id, None)
        if hit is None:
            return None
        serialized, at, purges = hit
        if purges != self._purges or time.monotonic() - at > _PREFETCH_TTL_SEC:
            return None
        return serialized

    # --- invocations --------------------------------------------------------

    def _upsert_invocations(self, entries: list[tuple[InvocationDTO, CallDTO]]) -> None:
        self._engine.upsert_invocations(
            [_invocation_record(inv_dto, call_dto) for inv_dto, call_dto in entries]
        )

    def _get_invocation(self, invocation_id: InvocationId) -> tuple[InvocationDTO, CallDTO] | None:
        engine = self._engine
        try:
            record = self._retried(
                lambda: engine.get_invocation(invocation_id), f"invocation:{invocation_id}"
            )
        except InvocationNotFound:
            return None
        return _dtos(record)

    def get_invocation(self, invocation_id: InvocationId) -> DistributedInvocation:
        """pynenc's ``get_invocation``; the object handed out is kept (weakly) for the
        result wait, which puts the final status it finds in its status cache
        (``pynenc_cpp._live``). An unknown id raises ``errors.InvocationNotFound``
        (also pynenc's ``InvocationNotFoundError``), as every read path does."""
        try:
            invocation: DistributedInvocation = super().get_invocation(invocation_id)
        except InvocationNotFoundError as exc:  # pynenc's, for _get_invocation's None
            if isinstance(exc, InvocationNotFound):
                raise
            raise InvocationNotFound(
                f"invocation not found: {invocation_id}", invocation_id
            ) from None
        self._live_registry.add((invocation,))
        return invocation

    @cached_property
    def _live_registry(self) -> _live.Registry:
        """The app's ``_live`` registry (looked up once: the lookup is not free)."""
        return _live.registry(self.app)

    def get_child_invocations(self, parent_invocation_id: InvocationId) -> Iterator[InvocationId]:
        ids = self._engine.child_invocations(str(parent_invocation_id))
        return iter(as_invocation_ids(ids))

    def get_invocations_by_parent_event(self, parent_event_id: str) -> Iterator[InvocationId]:
        ids = self._engine.invocations_by_parent_event(str(parent_event_id))
        return iter(as_invocation_ids(ids))

    def get_invocation_ids_by_workflow(
        self,
        workflow_id: str | None = None,
        workflow_type_key: str | None = None,
    ) -> Iterator[InvocationId]:
        ids = self._engine.invocation_ids_by_workflow(workflow_id, workflow_type_key)
        return iter(as_invocation_ids(ids))

    # --- history -----------------------------------------------------------

    def add_history(
        self,
        invocation_id: InvocationId,
        status_record: InvocationStatusRecord,
        runner_context: RunnerContext,
    ) -> None:
        """pynenc's ``add_history``, with the row dated when its status was set.

        pynenc writes a status change and its history row in two steps and dates
        the row when it is written. Two threads changing one invocation (a worker's
        RUNNING and a stop's KILLED) could then store rows whose order is not the
        order of the changes (KILLED -> RUNNING), which pynenc's own checker rejects.
        Dated by the status record (the storage's own time of the change, as a
        native composite dates its row), the rows sort in the order the changes
        were made. pynenc's own while the ``history`` shortcut is off."""
        if "history" not in _shortcuts.of_app(self.app):
            super().add_history(invocation_id, status_record, runner_context)
            return
        self.store_runner_context(runner_context)
        self._add_dated_history(invocation_id, status_record, runner_context, None)

    def add_histories(
        self,
        invocations: list[DistributedInvocation],
        status_record: InvocationStatusRecord,
        runner_context: RunnerContext,
    ) -> None:
        """pynenc's ``add_histories`` (its REGISTERED rows), dated as ``add_history``."""
        if "history" not in _shortcuts.of_app(self.app):
            super().add_histories(invocations, status_record, runner_context)
            return
        self.store_runner_context(runner_context)
        registered = status_record.status == InvocationStatus.REGISTERED
        for invocation in invocations:
            parent = invocation.parent_invocation_id if registered else None
            self._add_dated_history(invocation.invocation_id, status_record, runner_context, parent)

    def _add_dated_history(
        self,
        invocation_id: InvocationId,
        status_record: InvocationStatusRecord,
        runner_context: RunnerContext,
        registered_by: InvocationId | None,
    ) -> None:
        history = InvocationHistory(
            invocation_id=invocation_id,
            status_record=status_record,
            runner_context_id=runner_context.runner_id,
            registered_by_inv_id=registered_by,
        )
        history._timestamp = status_record.timestamp
        self._add_histories([invocation_id], history)

    def _add_histories(
        self, invocation_ids: list[InvocationId], invocation_history: InvocationHistory
    ) -> None:
        """Appends one history row to each invocation, riding out a storage outage.

        A row is not idempotent (sent twice, it is there twice), so after a lost
        connection the rows already stored are looked for first and only the missing
        ones are sent again (``_outage``); mixed mode writes every status change's
        row this way, after the change itself."""
        engine = self._engine
        row = invocation_history.to_json()
        wanted = json.loads(row)
        timestamp_us = to_us(invocation_history.timestamp)
        status = invocation_history.status_record.status
        missing = list(invocation_ids)

        def settled() -> bool:
            nonlocal missing
            missing = [
                i
                for i in missing
                if not any(json.loads(j) == wanted for j in engine.get_history(i))
            ]
            return not missing

        self._ride_out(
            lambda: engine.add_histories(missing, timestamp_us, status, row),
            f"history of {len(missing)} invocation(s) ({InvocationStatus(status).value})",
            settled=settled,
        )

    def _get_history(self, invocation_id: InvocationId) -> list[InvocationHistory]:
        rows = self._retried(lambda: self._engine.get_history(invocation_id), "history read")
        return [InvocationHistory.from_json(j) for j in rows]

    def iter_history_in_timerange(
        self,
        start_time: datetime,
        end_time: datetime,
        batch_size: int = 100,
    ) -> Iterator[list[InvocationHistory]]:
        start_us, end_us = to_us(start_time), to_us(end_time)
        cursor: tuple[int, int] | None = None
        while True:
            jsons, cursor = self._engine.history_in_range(start_us, end_us, cursor, batch_size)
            if jsons:
                yield [InvocationHistory.from_json(j) for j in jsons]
            if cursor is None:
                return

    def iter_invocations_in_timerange(
        self,
        start_time: datetime,
        end_time: datetime,
        batch_size: int = 100,
    ) -> Iterator[list[InvocationId]]:
        start_us, end_us = to_us(start_time), to_us(end_time)
        after: str | None = None
        while True:
            batch = self._engine.invocations_in_range(start_us, end_us, after, batch_size)
            if batch:
                yield as_invocation_ids(batch)
            if len(batch) < batch_size:
                return
            after = batch[-1]

    # --- results and exceptions ------------------------------------------------

    def _set_result(self, invocation_id: InvocationId, serialized_result: str) -> None:
        self._take_prefetched(invocation_id)  # never serve the value it replaces
        engine = self._engine
        self._retried(
            lambda: engine.set_result(invocation_id, serialized_result),
            f"invocation:{invocation_id} store result",
        )

    @names_invocation
    def _get_result(self, invocation_id: InvocationId) -> str:
        prefetched = self._take_prefetched(invocation_id)
        if prefetched is not None:
            return prefetched
        # A missing result raises InvocationNotFound, a KeyError as pynenc expects.
        engine = self._engine
        return self._retried(
            lambda: engine.get_result(invocation_id), f"invocation:{invocation_id} result"
        )

    def _set_exception(self, invocation_id: InvocationId, serialized_exception: str) -> None:
        engine = self._engine
        self._retried(
            lambda: engine.set_exception(invocation_id, serialized_exception),
            f"invocation:{invocation_id} store exception",
        )

    @names_invocation
    def _get_exception(self, invocation_id: InvocationId) -> str:
        # A missing exception raises InvocationNotFound, a KeyError as pynenc expects.
        engine = self._engine
        return self._retried(
            lambda: engine.get_exception(invocation_id), f"invocation:{invocation_id} exception"
        )

    # --- runner contexts ------------------------------------------------------

    def runner_context_stored(self, runner_context: RunnerContext) -> bool:
        """True when ``store_runner_context(runner_context)`` would change nothing.

        That is when this very context object, and each of its parents, is the one
        this backend's cache holds for its id (pynenc's ``store_runner_context``
        writes a context only once per id, and caches the object it was given).
        Lets the hot path skip that call for the runner's own context.
        """
        cache = self._runner_context_cache
        ctx: RunnerContext | None = runner_context
        while ctx is not None:
            if cache.get(ctx.runner_id) is not ctx:
                return False
            ctx = ctx.parent_ctx
        return True

    def _store_runner_context(self, runner_context: RunnerContext) -> None:
        parent = runner_context.parent_ctx
        self._engine.store_runner_context(
            runner_context.runner_id,
            runner_context.runner_cls,
            parent.runner_id if parent else None,
            runner_context.pid,
            runner_context.hostname,
            runner_context.thread_id,
        )

    def _runner_context(self, record: dict[str, Any]) -> RunnerContext:
        """Rebuild a context; its parent comes through ``get_runner_context`` (cached)."""
        parent_ctx = None
        parent_id = record["parent_runner_id"]
        if parent_id:
            parent_ctx = self.get_runner_context(parent_id)
            if parent_ctx is None:
                raise KeyError(f"Parent RunnerContext {parent_id} not found")
        return RunnerContext(
            runner_cls=record["runner_cls"],
            runner_id=record["runner_id"],
            parent_ctx=parent_ctx,
            pid=record["pid"],
            hostname=record["hostname"],
            thread_id=record["thread_id"],
        )

    def _get_runner_context(self, runner_id: str) -> RunnerContext | None:
        try:
            record = self._retried(
                lambda: self._engine.get_runner_context(runner_id), "runner context read"
            )
        except InvocationNotFound:
            return None
        return self._runner_context(record)

    def _get_runner_contexts(self, runner_ids: list[str]) -> list[RunnerContext]:
        ids = list(runner_ids)
        records = self._retried(
            lambda: self._engine.get_runner_contexts(ids), "runner contexts read"
        )
        return [self._runner_context(r) for r in records]

    def get_matching_runner_contexts(self, partial_id: str) -> Iterator[RunnerContext]:
        records = self._engine.match_runner_contexts(partial_id)
        return iter([self._runner_context(r) for r in records])

    # --- app info -------------------------------------------------------------

    def store_app_info(self, app_info: AppInfo) -> None:
        self._engine.store_app_info(app_info.app_id, app_info.to_json())

    def get_app_info(self) -> AppInfo:
        """This app's info; raises a ``KeyError`` if it was never stored."""
        return AppInfo.from_json(self._engine.get_app_info())

    @staticmethod
    def discover_app_infos() -> dict[str, AppInfo]:
        """Every app registered in the process's memory registry (see the subclasses)."""
        return _discover("memory://")

    # --- workflows ------------------------------------------------------------

    def store_workflow_run(self, workflow_identity: WorkflowIdentity) -> None:
        self._engine.store_workflow_run(
            workflow_identity.workflow_id,
            workflow_identity.workflow_type.key,
            workflow_identity.parent_workflow_id or None,
        )

    def get_all_workflow_types(self) -> Iterator[TaskId]:
        return iter([TaskId.from_key(key) for key in self._engine.workflow_types()])

    def get_all_workflow_runs(self) -> Iterator[WorkflowIdentity]:
        return iter([_workflow_identity(run) for run in self._engine.workflow_runs(None)])

    def get_workflow_runs(self, workflow_type: TaskId) -> Iterator[WorkflowIdentity]:
        runs = self._engine.workflow_runs(workflow_type.key)
        return iter([_workflow_identity(run) for run in runs])

    def store_workflow_sub_invocation(
        self, parent_workflow_id: InvocationId, sub_invocation_id: InvocationId
    ) -> None:
        self._engine.store_workflow_sub_invocation(parent_workflow_id, sub_invocation_id)

    def get_workflow_sub_invocations(self, workflow_id: InvocationId) -> Iterator[InvocationId]:
        ids = self._engine.workflow_sub_invocations(workflow_id)
        return iter(as_invocation_ids(ids))

    def set_workflow_data(self, workflow_identity: WorkflowIdentity, key: str, value: Any) -> None:
        serialized = self.app.client_data_store.serialize(value)
        self._engine.set_workflow_data(workflow_identity.workflow_id, key, serialized)

    def get_workflow_data(
        self, workflow_identity: WorkflowIdentity, key: str, default: Any = None
    ) -> Any:
        try:
            serialized = self._engine.get_workflow_data(workflow_identity.workflow_id, key)
        except InvocationNotFound:
            return default
        return self.app.client_data_store.deserialize(serialized)


class CppMemStateBackend(MemBackend, CppStateBackend):
    """The native state backend on process-local memory (like pynenc's ``memory()``)."""

    @staticmethod
    def discover_app_infos() -> dict[str, AppInfo]:
        """Every app of this process that stored its info in a ``cpp_mem`` backend."""
        return _discover("memory://")


class CppSqliteStateBackend(SqliteBackend, CppStateBackend):
    """The native state backend on the app's SQLite file (``cpp_sqlite_path``)."""

    @staticmethod
    def discover_app_infos() -> dict[str, AppInfo]:
        """Every app in the default-configured SQLite file.

        Like pynenc's own backends, this static method has no app: it reads the
        default configuration (config file or environment); with no
        ``cpp_sqlite_path`` configured there is nothing to discover.
        """
        conf = ConfigCpp()
        if not conf.cpp_sqlite_path:
            return {}
        return _discover(sqlite_uri(conf))


class CppRedisStateBackend(RedisBackend, CppStateBackend):
    """The native state backend on the app's Redis server (``cpp_redis_url``)."""

    @staticmethod
    def discover_app_infos() -> dict[str, AppInfo]:
        """Every app registered on the default-configured Redis server."""
        return _discover(redis_uri(ConfigCpp()))


def _discover(uri: str) -> dict[str, AppInfo]:
    found = _core.StateBackend.discover_app_infos(uri)
    return {app_id: AppInfo.from_json(info) for app_id, info in found.items()}
