"""The client data store's plain-scalar path gives exactly what jsonpickle gives.

``pynenc_cpp._scalars`` writes and reads the JSON text of small ints, flags,
``None`` and plain ASCII strings without jsonpickle; every figure here is checked
against jsonpickle itself, so pynenc's own workers and clients read what ours write
and the other way round.
"""

from __future__ import annotations

import enum
import random
import string
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import jsonpickle
import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.client_data_store.base_client_data_store import BaseClientDataStore

from pynenc_cpp import _scalars

warnings.filterwarnings("ignore", category=DeprecationWarning, module="jsonpickle")


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


PLAIN: list[Any] = [
    0, 1, -1, 7, 10**18 - 1, -(10**18 - 1), True, False, None,
    "", "a", "abc", "py/id", "py/object", " spaced out ", "~!#$%&'()*+,-./:;<=>?@[]^_`{|}",
    "__pynenc__client_data__:not-a-key", "0", "-3", "true", "null",
]  # fmt: skip

NOT_PLAIN: list[Any] = [
    10**18, -(10**18), 2**70, 1.5, 0.0, float("nan"), "é", "\u2603", 'a"b', "a\\b", "\n", "\x00",
    "\x7f", "\t", Color.RED, Name("x"), (1,), [1], {"a": 1}, b"x", {1}, 1j,
]  # fmt: skip


def _random_values(seed: int, count: int) -> Iterator[Any]:
    rng = random.Random(seed)
    alphabet = string.printable + "é✓\x00\x7f"
    for _ in range(count):
        if rng.random() < 0.5:
            yield rng.randint(-(10**20), 10**20) if rng.random() < 0.3 else rng.randint(-999, 10**6)
        else:
            yield "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_scalars_encode_as_jsonpickle_does_and_decode_back(value: Any) -> None:
    text = _scalars.encode(value)
    assert text == jsonpickle.dumps(value)
    decoded = _scalars.decode(text)
    assert decoded == value and type(decoded) is type(value)


@pytest.mark.parametrize("value", NOT_PLAIN, ids=repr)
def test_other_values_are_left_to_jsonpickle(value: Any) -> None:
    assert _scalars.encode(value) is None
    try:
        text = jsonpickle.dumps(value)
    except Exception:
        return
    assert _scalars.decode(text) is _scalars.MISS


def test_random_values_match_jsonpickle_both_ways() -> None:
    encoded = 0
    for value in _random_values(seed=14, count=20_000):
        reference = jsonpickle.dumps(value)
        text = _scalars.encode(value)
        if text is not None:
            encoded += 1
            assert text == reference, value
        decoded = _scalars.decode(reference)
        if decoded is not _scalars.MISS:
            assert decoded == value and type(decoded) is type(value), reference
    assert encoded > 5_000  # the path is taken, not only the fallback


@pytest.mark.parametrize(
    "text",
    ["", "01", "-", "-01", "+5", " 5", "5 ", "1e3", "1.0", "٣", "²", "True", "NULL", "nul",
     '"', '"a', 'a"', '"a\\"b"', '"\\u00e9"', '"é"', '"a"b"', "[1]", "{}", "-0", "00",
     '""', '"py/id"', "9" * 18, "9" * 19, "-" + "9" * 18],
)  # fmt: skip
def test_decode_agrees_with_jsonpickle_or_leaves_the_text_to_it(text: str) -> None:
    """Text that is not exactly a plain form (malformed, escaped, a float) is MISS;
    text that is decodes to jsonpickle's value, of jsonpickle's type."""
    decoded = _scalars.decode(text)
    if decoded is _scalars.MISS:
        return
    expected = jsonpickle.loads(text)
    assert decoded == expected and type(decoded) is type(expected)


def test_decode_leaves_malformed_text_to_jsonpickle() -> None:
    for text in ["01", "-", "+5", " 5", "5 ", "٣", "True", '"a', '"a"b"', "00", "9" * 19]:
        assert _scalars.decode(text) is _scalars.MISS, text


# ---- through the adapter ---------------------------------------------------------


@pytest.fixture
def no_jsonpickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("jsonpickle was called")

    monkeypatch.setattr(jsonpickle, "dumps", refuse)
    monkeypatch.setattr(jsonpickle, "loads", refuse)


def test_store_writes_and_reads_plain_scalars_without_jsonpickle(
    cpp_mem_app: Pynenc, no_jsonpickle: None
) -> None:
    store = cpp_mem_app.client_data_store
    assert store.serialize(42) == "42"
    assert store.serialize("hello") == '"hello"'
    assert store.serialize(None, disable_cache=True) == "null"
    assert store.resolve("42") == 42
    assert store.resolve('"hello"') == "hello"
    assert store.serialize_arguments({"x": 1, "y": "two"}, ()) == {"x": "1", "y": '"two"'}
    assert store.deserialize_arguments({"x": "1", "y": '"two"'}) == {"x": 1, "y": "two"}


def test_store_gives_pynenc_text_for_every_value(cpp_mem_app: Pynenc) -> None:
    """Same text as pynenc's own ``BaseClientDataStore.serialize``, and read back
    as pynenc's ``resolve`` reads it."""
    store = cpp_mem_app.client_data_store
    for value in [*PLAIN, *NOT_PLAIN[:-1]]:  # 1j: jsonpickle cannot read it back
        text = store.serialize(value)
        assert text == BaseClientDataStore.serialize(store, value)
        if value == value and not store.is_reference(text):  # not NaN, not a key
            restored = store.resolve(text)
            assert restored == value and type(restored) is type(value)
            assert restored == BaseClientDataStore.resolve(store, text)


def test_large_plain_strings_still_go_to_the_store(cpp_mem_app: Pynenc) -> None:
    store = cpp_mem_app.client_data_store
    big = "x" * (cpp_mem_app.client_data_store.conf.min_size_to_cache + 10)
    ref = store.serialize(big)
    assert store.is_reference(ref)
    assert store._retrieve(ref) == f'"{big}"'
    assert store.resolve(ref) == big
    assert store.serialize(ref) == ref  # a reference passes through unchanged
    assert store.serialize(big, disable_cache=True) == f'"{big}"'


def test_another_serializer_is_used_as_configured() -> None:
    app = (
        PynencBuilder()
        .app_id(f"cpp-test-{uuid.uuid4().hex[:8]}")
        .cpp_mem()
        .serializer_pickle()
        .build()
    )
    store = app.client_data_store
    assert store.serialize(42) == app.serializer.serialize(42) != "42"
    assert store.resolve(store.serialize("42")) == "42"
