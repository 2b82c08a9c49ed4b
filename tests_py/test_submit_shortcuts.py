"""The native submit's shortcuts (``pynenc_cpp._submit``): each must give what the pynenc
code it stands in for gives, and step aside when that code is patched.

* the engine's ``args_id`` against pynenc's ``compute_args_id`` on random texts (quotes,
  backslashes, every C0 control, non-ASCII, astral characters), and the fallback for
  what the engine refuses;
* the engine's invocation ids (``str(uuid.uuid4())``'s form, unique), and a patched
  ``generate_invocation_id`` being used;
* a submitted invocation's stored record (call id, arguments id, arguments) against
  pynenc's own DTOs of the same invocation, on every backend;
* the kept signature: the same binding as pynenc's, rebuilt when the function's code or
  defaults change, and left alone for a function with its own ``__signature__``.
"""

from __future__ import annotations

import inspect
import pickle
import random
import re
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pynenc import Pynenc
from pynenc.call import Call, compute_args_id
from pynenc.invocation import dist_invocation

from pynenc_cpp import _core, _submit
from pynenc_cpp.state_backend import _invocation_record
from tests_py.cpp_apps import BACKENDS, build_cpp_app

_task_app = Pynenc()


@_task_app.task
def join(a: str, b: str = "-", *, c: str = "") -> str:
    return a + b + c


@_task_app.task
def no_args() -> int:
    return 1


#: Characters whose JSON form differs, or whose UTF-8 bytes sort unlike UTF-16 units.
_ALPHABET = [
    *"ab=;{}[]: ",
    '"',
    "\\",
    "/",
    *(chr(c) for c in range(0x20)),
    "\x7f",
    "é",
    "€",
    "\u2028",
    "\ud7ff",
    "\ue000",
    "\uffff",
    "😀",
    "\U0010ffff",
]


def _text(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, most)))


def test_args_id_is_pynencs_byte_for_byte() -> None:
    rng = random.Random(14)
    for _ in range(5000):
        arguments = {_text(rng, 5): _text(rng, 12) for _ in range(rng.randint(0, 5))}
        assert _core.args_id(arguments) == compute_args_id(arguments), arguments
    assert _core.args_id({}) == compute_args_id({}) == "no_args"


def test_args_id_refuses_what_it_cannot_encode() -> None:
    with pytest.raises(TypeError):
        _core.args_id({"x": 1})  # type: ignore[dict-item]
    with pytest.raises(UnicodeEncodeError):
        _core.args_id({"x": "\ud800"})  # a lone surrogate: no UTF-8 form


def test_call_args_id_falls_back_to_pynenc() -> None:
    """A text the engine refuses is left to pynenc's property, which raises what it
    raises; an args id already computed is not computed again."""
    call: Call[Any, Any] = Call(join, join.args("\ud800"))
    call._serialized_arguments = {"a": "\ud800"}
    _submit.compute_args_id(call)
    assert call._args_id is None
    with pytest.raises(UnicodeEncodeError):
        _ = call.args_id  # pynenc's own error

    done: Call[Any, Any] = Call(join, join.args("x"))
    done._args_id = "kept"
    _submit.compute_args_id(done)
    assert done.args_id == "kept"


def test_call_args_id_steps_aside_for_a_patched_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pynenc.call.compute_args_id", lambda serialized: "patched")
    call: Call[Any, Any] = Call(join, join.args("x"))
    _submit.compute_args_id(call)
    assert call._args_id is None
    assert call.args_id == "patched"


def test_invocation_ids_are_uuid4_text() -> None:
    ids = {_core.new_invocation_id() for _ in range(20000)}
    assert len(ids) == 20000
    form = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
    for text in list(ids)[:2000]:
        assert form.fullmatch(text), text
        assert str(uuid.UUID(text)) == text and uuid.UUID(text).version == 4


@pytest.fixture(params=BACKENDS)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pynenc]:
    app = build_cpp_app(request.param, request, tmp_path, "submit")
    for task in (join, no_args):
        task.app = app
    yield app
    app.purge()


def test_submitted_record_is_pynencs(app: Pynenc) -> None:
    """What the native submit stores is what pynenc's DTOs of the same invocation say."""
    rng = random.Random(47)
    for _ in range(40):
        a, b = _text(rng, 8), _text(rng, 8)
        inv = join(a, b=b)
        stored = app.state_backend.get_invocation(inv.invocation_id)
        assert stored.call.call_id == inv.call.call_id
        assert stored.call.args_id == compute_args_id(inv.call.serialized_arguments)
        assert stored.call.arguments.kwargs == {"a": a, "b": b, "c": ""}
        pynencs = _invocation_record(inv.to_dto(), inv.call.to_dto())
        assert _submit.record_of(inv) == pynencs
    inv = no_args()
    assert inv.call.args_id == "no_args"
    assert app.state_backend.get_invocation(inv.invocation_id).call.call_id == inv.call.call_id


def test_patched_id_generator_is_used(app: Pynenc, monkeypatch: pytest.MonkeyPatch) -> None:
    made = iter(f"fixed-{k}" for k in range(3))
    monkeypatch.setattr(dist_invocation, "generate_invocation_id", lambda: next(made))
    assert [join("x").invocation_id for _ in range(3)] == ["fixed-0", "fixed-1", "fixed-2"]
    monkeypatch.undo()
    assert uuid.UUID(join("y").invocation_id).version == 4


def test_kept_signature_binds_as_pynenc(app: Pynenc) -> None:
    func = join.func
    before = inspect.signature(func)
    join("x")
    assert isinstance(func.__dict__.get("__signature__"), _submit._KeptSignature)
    assert inspect.signature(func) == before
    assert join("x", c="!").call.arguments.kwargs == {"a": "x", "b": "-", "c": "!"}

    defaults, kwdefaults = func.__defaults__, func.__kwdefaults__
    try:
        func.__defaults__ = ("+",)
        func.__kwdefaults__ = {"c": "?"}
        # the very next call binds with the new defaults, as pynenc's own would
        assert join("x").call.arguments.kwargs == {"a": "x", "b": "+", "c": "?"}
    finally:
        func.__defaults__, func.__kwdefaults__ = defaults, kwdefaults
    assert join("x").call.arguments.kwargs == {"a": "x", "b": "-", "c": ""}
    with pytest.raises(TypeError):
        join()  # type: ignore[call-arg]  # a missing argument is still pynenc's error


def test_own_signature_is_left_alone() -> None:
    def f(x: int) -> int:
        return x

    theirs = inspect.Signature([inspect.Parameter("y", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    f.__signature__ = theirs  # type: ignore[attr-defined]
    _submit.keep_signature(f)
    assert f.__dict__["__signature__"] is theirs

    def g(x: int) -> int:
        return x

    g.__wrapped__ = f  # type: ignore[attr-defined]
    _submit.keep_signature(g)
    assert "__signature__" not in g.__dict__
    _submit.keep_signature(len)  # not a plain function: nothing to keep
    assert inspect.signature(len) == inspect.signature(len)


def test_kept_signature_pickles_as_none() -> None:
    """A function's ``__dict__`` pickled by value (as cloudpickle pickles a function of
    ``__main__``) carries no kept signature: None, which inspect passes over."""

    def f(x: int, y: int = 2) -> int:
        return x + y

    _submit.keep_signature(f)
    copied = pickle.loads(pickle.dumps(dict(f.__dict__)))
    assert copied == {"__signature__": None}
    g = types.FunctionType(f.__code__, {}, "g", f.__defaults__)
    g.__annotations__ = f.__annotations__
    g.__dict__.update(copied)
    assert inspect.signature(g) == inspect.signature(f)
