"""CppMemStateBackend used directly, inside a memory app whose state backend it is."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.app_info import AppInfo
from pynenc.exceptions import InvocationNotFoundError
from pynenc.identifiers.call_id import CallId
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.identifiers.task_id import TaskId
from pynenc.invocation.status import InvocationStatus, InvocationStatusRecord
from pynenc.models.call_dto import CallDTO
from pynenc.models.invocation_dto import InvocationDTO
from pynenc.runner.runner_context import RunnerContext
from pynenc.state_backend.base_state_backend import InvocationHistory
from pynenc.workflow.workflow_identity import WorkflowIdentity

import pynenc_cpp
from pynenc_cpp import _core
from pynenc_cpp.state_backend import (
    CppMemStateBackend,
    _arguments_from_json,
    _arguments_json,
    _call_id,
)

BASE = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def app() -> Pynenc:
    return (
        PynencBuilder()
        .app_id(f"sb-adapter-{uuid.uuid4().hex[:8]}")
        .memory()
        .custom_config(state_backend_cls="CppMemStateBackend")
        .build()
    )


@pytest.fixture
def backend(app: Pynenc) -> CppMemStateBackend:
    sb = app.state_backend
    assert isinstance(sb, CppMemStateBackend)
    return sb


def _dtos(
    inv_id: str,
    parent: str | None = None,
    event: str | None = None,
    workflow: WorkflowIdentity | None = None,
    args: dict[str, str] | None = None,
) -> tuple[InvocationDTO, CallDTO]:
    call_id = CallId(TaskId("my.module", "my_task"), f"args-{inv_id}")
    inv = InvocationDTO(
        invocation_id=InvocationId(inv_id),
        call_id=call_id,
        workflow=workflow,
        parent_invocation_id=InvocationId(parent) if parent else None,
        parent_event_id=event,
    )
    return inv, CallDTO(call_id=call_id, serialized_arguments=args or {})


def _history(inv_id: str, status: InvocationStatus, at: datetime) -> InvocationHistory:
    hist = InvocationHistory(
        invocation_id=inv_id,
        status_record=InvocationStatusRecord(status=status),
        runner_context_id="runner-1",
    )
    hist._timestamp = at
    return hist


def test_every_abstract_member_is_implemented() -> None:
    assert CppMemStateBackend.__abstractmethods__ == frozenset()
    assert pynenc_cpp.CppMemStateBackend is CppMemStateBackend


def test_invocation_round_trip_keeps_every_field(backend: CppMemStateBackend) -> None:
    wf = WorkflowIdentity(
        workflow_id=InvocationId("wf-1"),
        workflow_type=TaskId("flows", "main"),
        parent_workflow_id=InvocationId("wf-0"),
    )
    full = _dtos("i-1", parent="p-1", event="ev-1", workflow=wf, args={"a": "1", "b": '"x"'})
    bare = _dtos("i-2")
    backend._upsert_invocations([full, bare])
    assert backend._get_invocation(InvocationId("i-1")) == full
    assert backend._get_invocation(InvocationId("i-2")) == bare


def test_missing_invocation(backend: CppMemStateBackend) -> None:
    assert backend._get_invocation(InvocationId("nope")) is None
    with pytest.raises(InvocationNotFoundError):
        backend.get_invocation(InvocationId("nope"))


def test_children_event_and_workflow_queries(backend: CppMemStateBackend) -> None:
    wf = WorkflowIdentity(InvocationId("wf"), TaskId("flows", "main"))
    backend._upsert_invocations(
        [
            _dtos("c-2", parent="p", event="e"),
            _dtos("c-1", parent="p", workflow=wf),
            _dtos("other", parent="q", event="e2"),
        ]
    )
    assert list(backend.get_child_invocations(InvocationId("p"))) == ["c-2", "c-1"]
    assert list(backend.get_child_invocations(InvocationId("none"))) == []
    assert list(backend.get_invocations_by_parent_event("e")) == ["c-2"]
    assert list(backend.get_invocation_ids_by_workflow(workflow_id="wf")) == ["c-1"]
    assert list(backend.get_invocation_ids_by_workflow(workflow_type_key=wf.workflow_type.key)) == [
        "c-1"
    ]
    assert list(backend.get_invocation_ids_by_workflow()) == ["c-1"]
    assert list(backend.get_invocation_ids_by_workflow(workflow_id="missing")) == []


def test_history_is_ordered_and_round_trips(backend: CppMemStateBackend) -> None:
    hists = [
        _history("h", InvocationStatus.RUNNING, BASE + timedelta(seconds=2)),
        _history("h", InvocationStatus.REGISTERED, BASE),
        _history("h", InvocationStatus.PENDING, BASE + timedelta(seconds=1)),
    ]
    for hist in hists:
        backend._add_histories([InvocationId("h")], hist)
    got = backend.get_history(InvocationId("h"))
    assert [h.status_record.status for h in got] == [
        InvocationStatus.REGISTERED,
        InvocationStatus.PENDING,
        InvocationStatus.RUNNING,
    ]
    assert [h.timestamp for h in got] == sorted(h.timestamp for h in hists)
    assert got[0].to_json() == hists[1].to_json()
    assert backend.get_history(InvocationId("none")) == []


def test_add_histories_through_public_api_stores_runner_context(
    backend: CppMemStateBackend,
) -> None:
    ctx = RunnerContext(runner_cls="TestRunner", runner_id="ctx-public")
    backend.add_history(InvocationId("x"), InvocationStatusRecord(InvocationStatus.PENDING), ctx)
    assert [h.runner_context_id for h in backend.get_history(InvocationId("x"))] == ["ctx-public"]
    assert backend._get_runner_context("ctx-public") == ctx


def test_iter_history_in_timerange_pages_in_order(backend: CppMemStateBackend) -> None:
    for i in range(7):
        at = BASE + timedelta(minutes=(7 - i) * 5)  # added out of order
        hist = _history(f"inv-{i}", InvocationStatus.RUNNING, at)
        backend._add_histories([InvocationId(f"inv-{i}")], hist)
    late = _history("late", InvocationStatus.RUNNING, BASE + timedelta(hours=2))
    backend._add_histories([InvocationId("late")], late)
    hour = BASE + timedelta(hours=1)
    batches = list(backend.iter_history_in_timerange(BASE, hour, batch_size=3))
    assert [len(b) for b in batches] == [3, 3, 1]
    stamps = [h.timestamp for batch in batches for h in batch]
    assert stamps == sorted(stamps)
    assert "late" not in {h.invocation_id for batch in batches for h in batch}
    # Inclusive bounds.
    five = BASE + timedelta(minutes=5)
    exact = list(backend.iter_history_in_timerange(five, five))
    assert [[h.invocation_id for h in b] for b in exact] == [["inv-6"]]
    day = BASE + timedelta(days=1)
    assert list(backend.iter_history_in_timerange(day, day + timedelta(days=1))) == []


def test_iter_invocations_in_timerange_pages_distinct_sorted(backend: CppMemStateBackend) -> None:
    for name in ["d", "a", "c", "b", "e"]:
        for minute, status in [(1, InvocationStatus.RUNNING), (2, InvocationStatus.SUCCESS)]:
            backend._add_histories(
                [InvocationId(name)], _history(name, status, BASE + timedelta(minutes=minute))
            )
    batches = list(backend.iter_invocations_in_timerange(BASE, BASE + timedelta(hours=1), 2))
    assert batches == [["a", "b"], ["c", "d"], ["e"]]
    exactly_full = list(backend.iter_invocations_in_timerange(BASE, BASE + timedelta(hours=1), 5))
    assert exactly_full == [["a", "b", "c", "d", "e"]]


def test_naive_and_aware_timestamps_compare_as_utc(backend: CppMemStateBackend) -> None:
    naive = BASE.replace(tzinfo=None) + timedelta(minutes=1)
    backend._add_histories([InvocationId("n")], _history("n", InvocationStatus.RUNNING, naive))
    batches = backend.iter_history_in_timerange(BASE, BASE + timedelta(minutes=2))
    found = [h for batch in batches for h in batch]
    assert [h.invocation_id for h in found] == ["n"]


def test_bad_batch_size_is_a_value_error(backend: CppMemStateBackend) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        list(backend.iter_history_in_timerange(BASE, BASE, batch_size=0))
    with pytest.raises(ValueError, match="batch_size"):
        list(backend.iter_invocations_in_timerange(BASE, BASE, batch_size=-1))


def test_results_and_exceptions(backend: CppMemStateBackend) -> None:
    inv = InvocationId("r")
    with pytest.raises(KeyError):
        backend.get_result(inv)
    with pytest.raises(KeyError):
        backend.get_exception(inv)
    backend.set_result(inv, {"answer": [4, 2]})
    assert backend.get_result(inv) == {"answer": [4, 2]}
    backend.set_exception(inv, ValueError("boom"))
    exc = backend.get_exception(inv)
    assert isinstance(exc, ValueError) and exc.args == ("boom",)


def test_runner_context_parent_chain_is_rebuilt(backend: CppMemStateBackend) -> None:
    root = RunnerContext(runner_cls="Root", runner_id="root-ctx")
    child = root.new_child_context("Worker", "child-ctx")
    backend.store_runner_context(child)  # stores the parent too
    backend._runner_context_cache.clear()  # force the engine path
    got = backend._get_runner_context("child-ctx")
    assert got == child and got is not None and got.parent_ctx == root
    assert backend._get_runner_context("unknown") is None
    assert backend._get_runner_contexts(["unknown", "root-ctx"]) == [root]
    assert {c.runner_id for c in backend.get_matching_runner_contexts("-ctx")} == {
        "root-ctx",
        "child-ctx",
    }
    assert list(backend.get_matching_runner_contexts("zzz")) == []


def test_runner_context_stored_only_for_the_stored_objects(backend: CppMemStateBackend) -> None:
    """The hot path skips store_runner_context only when it would change nothing."""
    root = RunnerContext(runner_cls="Root", runner_id="stored-root")
    child = root.new_child_context("Worker", "stored-child")
    assert not backend.runner_context_stored(child)
    backend.store_runner_context(root)
    assert backend.runner_context_stored(root)
    assert not backend.runner_context_stored(child)  # the child itself is not stored
    backend.store_runner_context(child)
    assert backend.runner_context_stored(child)
    # Another object for a stored id: pynenc's store would cache it, so not "stored".
    twin = RunnerContext(runner_cls="Worker", runner_id="stored-child", parent_ctx=root)
    assert not backend.runner_context_stored(twin)
    # A stored child whose parent object is not the cached one.
    other_root = RunnerContext(runner_cls="Root", runner_id="stored-root")
    orphan = RunnerContext(runner_cls="Worker", runner_id="stored-orphan", parent_ctx=other_root)
    backend._runner_context_cache["stored-orphan"] = orphan
    assert not backend.runner_context_stored(orphan)


def test_app_info_and_discovery(app: Pynenc, backend: CppMemStateBackend) -> None:
    # The app registered itself when it opened its state backend.
    assert backend.get_app_info().app_id == app.app_id
    info = AppInfo(app_id=app.app_id, module="some.module", config_values={"k": 1})
    backend.store_app_info(info)
    assert backend.get_app_info() == info
    discovered = CppMemStateBackend.discover_app_infos()
    assert discovered[app.app_id] == info
    with pytest.raises(KeyError):
        _core.StateBackend("memory://", f"never-{uuid.uuid4().hex}").get_app_info()


def test_workflows(backend: CppMemStateBackend) -> None:
    t1, t2 = TaskId("flows", "one"), TaskId("flows", "two")
    wf1 = WorkflowIdentity(InvocationId("w1"), t1)
    wf2 = WorkflowIdentity(InvocationId("w2"), t1, parent_workflow_id=InvocationId("w1"))
    wf3 = WorkflowIdentity(InvocationId("w3"), t2)
    for wf in (wf1, wf2, wf3, wf1):
        backend.store_workflow_run(wf)
    assert set(backend.get_all_workflow_types()) == {t1, t2}
    assert list(backend.get_all_workflow_runs()) == [wf1, wf2, wf3]
    assert list(backend.get_workflow_runs(t1)) == [wf1, wf2]
    assert list(backend.get_workflow_runs(TaskId("flows", "none"))) == []

    backend.store_workflow_sub_invocation(InvocationId("w1"), InvocationId("s2"))
    backend.store_workflow_sub_invocation(InvocationId("w1"), InvocationId("s1"))
    backend.store_workflow_sub_invocation(InvocationId("w1"), InvocationId("s2"))
    assert list(backend.get_workflow_sub_invocations(InvocationId("w1"))) == ["s2", "s1"]
    assert list(backend.get_workflow_sub_invocations(InvocationId("w9"))) == []

    backend.set_workflow_data(wf1, "state", {"step": 3, "items": ["a"]})
    assert backend.get_workflow_data(wf1, "state") == {"step": 3, "items": ["a"]}
    assert backend.get_workflow_data(wf1, "missing", "dflt") == "dflt"
    assert backend.get_workflow_data(wf3, "state") is None


def test_purge_keeps_only_app_info(app: Pynenc, backend: CppMemStateBackend) -> None:
    backend._upsert_invocations([_dtos("p1", parent="pp")])
    backend._add_histories([InvocationId("p1")], _history("p1", InvocationStatus.RUNNING, BASE))
    backend._set_result(InvocationId("p1"), "r")
    backend.store_workflow_run(WorkflowIdentity(InvocationId("w"), TaskId("f", "g")))
    backend.purge()
    assert backend._get_invocation(InvocationId("p1")) is None
    assert list(backend.get_child_invocations(InvocationId("pp"))) == []
    assert backend.get_history(InvocationId("p1")) == []
    assert list(backend.get_all_workflow_runs()) == []
    with pytest.raises(KeyError):
        backend._get_result(InvocationId("p1"))
    assert backend.get_app_info().app_id == app.app_id


def test_engine_rejects_bad_input_clearly() -> None:
    engine = _core.StateBackend("memory://", "bad-input")
    with pytest.raises(KeyError, match="call_id"):
        engine.upsert_invocations([{"invocation_id": "x"}])
    with pytest.raises(TypeError, match="task_id"):
        engine.upsert_invocations(
            [
                {
                    "invocation_id": "x",
                    "call_id": "c",
                    "task_id": 3,
                    "arguments_id": "a",
                    "serialized_arguments": "{}",
                }
            ]
        )
    with pytest.raises(TypeError, match="list of dicts"):
        engine.upsert_invocations([("x",)])
    with pytest.raises(ValueError, match="unknown invocation status"):
        engine.add_histories(["x"], 0, "not-a-status", "{}")
    with pytest.raises(pynenc_cpp.BadConfig):
        _core.StateBackend("nosuch://", "a")
    with pytest.raises(pynenc_cpp.BadConfig):
        _core.StateBackend.discover_app_infos("nosuch://")


def test_concurrent_threads(backend: CppMemStateBackend) -> None:
    def work(t: int) -> None:
        for i in range(100):
            inv = f"t{t}-{i}"
            backend._upsert_invocations([_dtos(inv, parent="shared")])
            backend._add_histories(
                [InvocationId(inv)],
                _history(inv, InvocationStatus.RUNNING, BASE + timedelta(microseconds=i)),
            )
            backend._set_result(InvocationId(inv), inv)
            assert backend._get_invocation(InvocationId(inv)) is not None

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(list(backend.get_child_invocations(InvocationId("shared")))) == 600
    batches = backend.iter_invocations_in_timerange(BASE, BASE + timedelta(seconds=1))
    ids = [i for batch in batches for i in batch]
    assert len(ids) == 600 and ids == sorted(ids)
    assert backend._get_result(InvocationId("t5-99")) == "t5-99"


# ---- the hot path's record helpers -------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"x": "5"},
        {"a": '"quoted"', "b": "line\nbreak", "c": "caf\u00e9 \u2603", "d": "\\"},
        {"k": '{"py/object": "builtins.complex"}'},
    ],
)
def test_arguments_json_is_json_dumps(arguments: dict[str, str]) -> None:
    assert _arguments_json(arguments) == json.dumps(arguments)


def test_arguments_json_falls_back_for_other_values() -> None:
    odd: dict[Any, Any] = {"x": 1, 2: "y"}
    assert _arguments_json(odd) == json.dumps(odd)


def test_call_id_from_the_task_and_arguments_columns() -> None:
    record: dict[str, str | None] = {
        "call_id": "pkg.mod.task:abc123",
        "task_id": "pkg.mod.task",
        "arguments_id": "abc123",
    }
    assert _call_id(record) == CallId.from_key("pkg.mod.task:abc123")
    assert _call_id(record).task_id is _call_id(record).task_id  # read once, then kept


@pytest.mark.parametrize(
    "task_id, arguments_id",
    [(None, None), ("pkg.mod.other", "abc123"), ("pkg.mod", "task:abc123")],
)
def test_call_id_is_parsed_when_the_columns_disagree(
    task_id: str | None, arguments_id: str | None
) -> None:
    record: dict[str, str | None] = {
        "call_id": "pkg.mod.task:abc123",
        "task_id": task_id,
        "arguments_id": arguments_id,
    }
    assert _call_id(record) == CallId.from_key("pkg.mod.task:abc123")


def test_a_bad_task_key_is_pynencs_error() -> None:
    record: dict[str, str | None] = {
        "call_id": "nodot:a1",
        "task_id": "nodot",
        "arguments_id": "a1",
    }
    with pytest.raises(ValueError, match="Invalid TaskId key format"):
        _call_id(record)


@pytest.mark.parametrize(
    "text", ['{"x": "5"}', "{}", ' {"x": "5"}', '{"x": "5"} ', '["a", 1]', '"s"', "12"]
)
def test_arguments_from_json_is_json_loads(text: str) -> None:
    assert _arguments_from_json(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"x": "5"} junk', '{"x": "5"}{}', "nope"])
def test_arguments_from_json_raises_json_loads_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        _arguments_from_json(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)
