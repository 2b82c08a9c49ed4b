"""The engine's invocation records and pynenc's objects, each built from the other.

A record holds the columns pynenc's ``SQLiteStateBackend`` stores, with the same values
(``_invocation_record``, ``_record_fields``); ``_dtos`` rebuilds pynenc's DTOs from one
as that backend does. The arguments' JSON is written and read without json's wrappers
(``_arguments_json``, ``_arguments_from_json``), and the task ids read back are kept
per process (``_task_id``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _json_string
from json.scanner import make_scanner
from typing import Any

from pynenc.identifiers.call_id import CallId
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.identifiers.task_id import TaskId
from pynenc.models.call_dto import CallDTO
from pynenc.models.invocation_dto import InvocationDTO
from pynenc.workflow.workflow_identity import WorkflowIdentity


def _arguments_json(arguments: dict[str, str]) -> str:
    """``json.dumps(arguments)``, the same text, built directly for the usual mapping
    of names to serialized texts (every submit stores one)."""
    parts = []
    for name, text in arguments.items():
        if type(name) is not str or type(text) is not str:
            return json.dumps(arguments)
        parts.append(f"{_json_string(name)}: {_json_string(text)}")
    return "{" + ", ".join(parts) + "}"


# json's own scanner (what json.loads runs); typeshed types its argument as the
# scanner class itself, not the decoder it is given.
_scan_json: Callable[[str, int], tuple[Any, int]] = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _arguments_from_json(text: str) -> Any:
    """``json.loads(text)``, the same value, without its wrappers when ``text`` is one
    JSON value from its first character to its last (as ``_arguments_json`` writes);
    otherwise ``json.loads``'s own result or error."""
    try:
        value, end = _scan_json(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _invocation_record(inv_dto: InvocationDTO, call_dto: CallDTO) -> dict[str, str | None]:
    """The engine's invocation record: sqlite_state_backend's columns, same values."""
    return _record_fields(
        inv_dto.invocation_id,
        call_dto.call_id,
        call_dto.serialized_arguments,
        inv_dto.parent_invocation_id,
        inv_dto.parent_event_id,
        inv_dto.workflow,
    )


def _record_fields(
    invocation_id: str,
    call_id: CallId,
    serialized_arguments: dict[str, str],
    parent_invocation_id: str | None,
    parent_event_id: str | None,
    wf: WorkflowIdentity | None,
) -> dict[str, str | None]:
    """``_invocation_record`` of the DTOs' fields (``_submit.record_of`` passes them
    without building the DTOs)."""
    return {
        "invocation_id": invocation_id,
        "call_id": call_id.key,
        "task_id": call_id.task_id.key,
        "arguments_id": call_id.args_id,
        "serialized_arguments": _arguments_json(serialized_arguments),
        "parent_invocation_id": parent_invocation_id,
        "parent_event_id": parent_event_id,
        "workflow_id": wf.workflow_id if wf else None,
        "workflow_type": wf.workflow_type.key if wf else None,
        "parent_workflow_id": wf.parent_workflow_id if wf else None,
    }


#: ``TaskId.from_key`` of the task keys read back, kept per process (a ``TaskId`` is
#: immutable; an app has few tasks). Bounded so that reading many apps' records
#: cannot grow it without end.
_TASK_IDS: dict[str, TaskId] = {}
_TASK_IDS_MAX = 4096


def _task_id(key: str) -> TaskId:
    task_id = _TASK_IDS.get(key)
    if task_id is None:
        task_id = TaskId.from_key(key)
        if len(_TASK_IDS) < _TASK_IDS_MAX:
            _TASK_IDS[key] = task_id
    return task_id


def _call_id(record: dict[str, str | None]) -> CallId:
    """The record's ``CallId``: from its task and arguments columns when both are
    there (what ``CallId.from_key`` of its ``call_id`` would parse), else parsed."""
    task_key, args_id = record.get("task_id"), record.get("arguments_id")
    if task_key and args_id and ":" not in args_id and record["call_id"] == f"{task_key}:{args_id}":
        return CallId(task_id=_task_id(task_key), args_id=args_id)
    return CallId.from_key(str(record["call_id"]))


def _dtos(record: dict[str, str | None]) -> tuple[InvocationDTO, CallDTO]:
    """Inverse of ``_invocation_record``, rebuilt as sqlite_state_backend does."""
    call_id = _call_id(record)
    parent_id = record["parent_invocation_id"]
    inv_dto = InvocationDTO(
        invocation_id=InvocationId(str(record["invocation_id"])),
        call_id=call_id,
        workflow=_record_workflow(record),
        parent_invocation_id=InvocationId(parent_id) if parent_id else None,
        parent_event_id=record["parent_event_id"] or None,
    )
    call_dto = CallDTO(
        call_id=call_id,
        serialized_arguments=_arguments_from_json(str(record["serialized_arguments"])),
    )
    return inv_dto, call_dto


def _record_workflow(record: dict[str, str | None]) -> WorkflowIdentity | None:
    """The record's workflow identity (None when it has none)."""
    wf_id, wf_type, wf_parent = (
        record["workflow_id"],
        record["workflow_type"],
        record["parent_workflow_id"],
    )
    if not (wf_id and wf_type):
        return None
    return WorkflowIdentity(
        workflow_id=InvocationId(wf_id),
        workflow_type=_task_id(wf_type),
        parent_workflow_id=InvocationId(wf_parent) if wf_parent else None,
    )


def _workflow_identity(run: tuple[str, str, str | None]) -> WorkflowIdentity:
    workflow_id, workflow_type, parent_workflow_id = run
    return WorkflowIdentity(
        workflow_id=InvocationId(workflow_id),
        workflow_type=TaskId.from_key(workflow_type),
        parent_workflow_id=InvocationId(parent_workflow_id) if parent_workflow_id else None,
    )
