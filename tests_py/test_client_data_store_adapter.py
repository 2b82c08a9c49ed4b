"""CppMemClientDataStore through a cpp_mem app."""

from __future__ import annotations

import pytest
from pynenc import Pynenc

from pynenc_cpp import CppMemClientDataStore, InvocationNotFound


def test_app_uses_native_store(cpp_mem_app: Pynenc) -> None:
    assert isinstance(cpp_mem_app.client_data_store, CppMemClientDataStore)


def test_store_retrieve_purge(cpp_mem_app: Pynenc) -> None:
    store = cpp_mem_app.client_data_store
    store._store("k", "value é ✓")
    assert store._retrieve("k") == "value é ✓"
    store._store("k", "replaced")
    assert store._retrieve("k") == "replaced"
    store._purge()
    with pytest.raises(KeyError):
        store._retrieve("k")


def test_missing_key_is_a_key_error_naming_the_key(cpp_mem_app: Pynenc) -> None:
    with pytest.raises(InvocationNotFound, match="missing-key"):
        cpp_mem_app.client_data_store._retrieve("missing-key")


def test_large_values_round_trip_through_pynenc(cpp_mem_app: Pynenc) -> None:
    """pynenc's own serialize() stores big values in our engine and resolve() reads them back."""
    store = cpp_mem_app.client_data_store
    big = ["payload"] * 50_000
    ref = store.serialize(big)
    assert store.is_reference(ref)
    assert len(ref) < 1_000
    # The bytes live in the engine under the reference key.
    assert store._retrieve(ref) == cpp_mem_app.serializer.serialize(big)
    assert store.resolve(ref) == big
