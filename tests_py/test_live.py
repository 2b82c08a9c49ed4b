"""pynenc_cpp._live: the invocation objects an app handed out, held weakly by id."""

from __future__ import annotations

import gc
from typing import Any

from pynenc_cpp import _live


class _App:
    """Stands in for a Pynenc app: only hashed and weakly referenced here."""


class _Invocation:
    def __init__(self, invocation_id: str) -> None:
        self.invocation_id = invocation_id


def test_every_object_of_an_id_is_held_while_someone_holds_it() -> None:
    app: Any = _App()
    first, second, other = _Invocation("a"), _Invocation("a"), _Invocation("b")
    _live.remember(app, [first, second, other, first])  # `first` twice: kept once
    assert _live.held(app, "a") == [first, second]
    assert _live.held(app, "b") == [other]
    assert _live.held(app, "unknown") == []
    assert _live.held(_App(), "a") == []  # another app's objects are its own
    del first
    gc.collect()
    assert _live.held(app, "a") == [second]
    del second, other
    gc.collect()
    assert _live.held(app, "a") == [] and _live.held(app, "b") == []


def test_ids_of_objects_gone_are_swept_and_apps_are_not_kept() -> None:
    app: Any = _App()
    for k in range(3 * _live._SWEEP_EVERY):
        _live.remember(app, [_Invocation(f"gone-{k}")])  # dropped at once
    kept = _Invocation("kept")
    _live.remember(app, [kept])
    assert len(_live.registry(app).by_id) <= _live._SWEEP_EVERY + 1
    assert _live.held(app, "kept") == [kept]
    before = len(_live._live)
    del app
    gc.collect()
    assert len(_live._live) == before - 1
