"""``native_step``: a native orchestrator's one choice between its lifecycle's step and
mixed mode's method of the same name (``pynenc_cpp._native_step``).

Unit tests over small classes; the orchestrators themselves are covered in both modes
by the adapter and conformance suites."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pynenc_cpp._native_step import native_step


class Mixed:
    """Mixed mode's methods: what a step falls back to."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def change(self, invocation_id: str, status: str, *, note: str = "") -> str:
        self.calls.append(("mixed", (invocation_id, status), {"note": note}))
        return f"mixed {invocation_id} {status} {note}"

    def pick(self, count: int) -> Iterator[str]:
        yield from (f"mixed-{i}" for i in range(count))


def logged[F: Callable[..., Any]](method: F) -> F:
    """Another decorator wrapping a step, as ``notes_reports`` does."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("logged", args, kwargs))
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Native(Mixed):
    def __init__(self, lifecycle: object | None) -> None:
        super().__init__()
        self.lifecycle = lifecycle
        self.asked = 0

    def _lifecycle(self) -> Any:
        self.asked += 1
        return self.lifecycle

    @logged
    @native_step
    def change(self, lifecycle: Any, invocation_id: str, status: str, *, note: str = "") -> str:
        self.calls.append(("native", (lifecycle, invocation_id, status), {"note": note}))
        return f"native {invocation_id} {status} {note}"

    @native_step
    def pick(self, lifecycle: Any, count: int) -> Iterator[str]:
        yield from (f"native-{i}" for i in range(count))


class Subclass(Native):
    """A subclass that overrides a step and calls it through ``super()``."""

    def change(self, invocation_id: str, status: str, *, note: str = "") -> str:
        return "sub " + super().change(invocation_id, status, note=note)


LIFECYCLE = object()


def test_with_a_lifecycle_the_step_gets_it_and_mixed_mode_is_not_called() -> None:
    native = Native(LIFECYCLE)
    assert native.change("i1", "RUNNING", note="n") == "native i1 RUNNING n"
    assert native.calls == [
        ("logged", ("i1", "RUNNING"), {"note": "n"}),
        ("native", (LIFECYCLE, "i1", "RUNNING"), {"note": "n"}),
    ]
    assert native.asked == 1


def test_without_one_the_next_class_method_of_the_same_name_runs_with_the_same_arguments() -> None:
    native = Native(None)
    assert native.change("i1", "RUNNING", note="n") == "mixed i1 RUNNING n"
    assert native.calls == [
        ("logged", ("i1", "RUNNING"), {"note": "n"}),
        ("mixed", ("i1", "RUNNING"), {"note": "n"}),
    ]


def test_the_choice_is_made_on_every_call() -> None:
    native = Native(LIFECYCLE)
    assert native.change("i1", "A").startswith("native")
    native.lifecycle = None  # the app's components swapped for foreign ones
    assert native.change("i1", "A").startswith("mixed")
    native.lifecycle = LIFECYCLE
    assert native.change("i1", "A").startswith("native")
    assert native.asked == 3


def test_a_subclass_override_reaches_the_step_and_its_fallback() -> None:
    assert Subclass(LIFECYCLE).change("i1", "A") == "sub native i1 A "
    assert Subclass(None).change("i1", "A") == "sub mixed i1 A "


def test_a_generator_step_falls_back_to_a_generator() -> None:
    assert list(Native(LIFECYCLE).pick(2)) == ["native-0", "native-1"]
    assert list(Native(None).pick(2)) == ["mixed-0", "mixed-1"]


def test_the_step_keeps_its_name_and_docs() -> None:
    assert Native.pick.__name__ == "pick"
    assert Native.change.__qualname__ == "Native.change"


def test_its_signature_is_what_callers_pass() -> None:
    assert list(inspect.signature(Native.pick).parameters) == ["self", "count"]
    assert list(inspect.signature(Native.change).parameters) == [
        "self",
        "invocation_id",
        "status",
        "note",
    ]


def test_a_step_called_on_an_object_whose_mro_lacks_it_is_a_clear_error() -> None:
    class Owner(Mixed):
        def _lifecycle(self) -> None:
            return None

        @native_step
        def pick(self, lifecycle: Any, count: int) -> Iterator[str]:
            yield "native"

    class Plain:
        def _lifecycle(self) -> None:
            return None

    step: Any = Owner.__dict__["pick"]
    with pytest.raises(TypeError, match="Plain.pick is not a native step"):
        step(Plain(), 1)
    assert list(Owner().pick(1)) == ["mixed-0"]  # the failed lookup was not kept
