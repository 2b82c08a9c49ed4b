"""One engine storage per app object and URI (``pynenc_cpp._storage``): the app's
components take their engine ports from it, apps share only what the server or file
holds, and the storage goes with its app."""

from __future__ import annotations

import gc
import uuid
import weakref
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.identifiers.invocation_id import InvocationId

from pynenc_cpp import _core
from pynenc_cpp._storage import storage_for
from pynenc_cpp.errors import BadConfig
from tests_py.cpp_apps import BACKENDS


def _app(backend: str, request: pytest.FixtureRequest, tmp_path: Path, app_id: str) -> Pynenc:
    builder = PynencBuilder().app_id(app_id)
    if backend == "mem":
        return builder.cpp_mem().build()
    if backend == "sqlite":
        return builder.cpp_sqlite(path=tmp_path / "shared.db").build()
    return builder.cpp_redis(request.getfixturevalue("redis_url")).build()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_components_of_an_app_take_their_engines_from_one_storage(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    app = _app(backend, request, tmp_path, f"storage-{uuid.uuid4().hex[:8]}")
    components = (
        app.broker,
        app.state_backend,
        app.orchestrator,
        app.trigger,
        app.client_data_store,
    )
    storage = app.broker.storage
    assert isinstance(storage, _core.Storage)
    assert all(c.storage is storage for c in components)
    assert storage.kind == {"mem": "memory"}.get(backend, backend)
    assert storage.app_id == app.app_id
    # Each adapter's engine is the storage's port: the same object every time.
    assert app.broker._engine is storage.broker()
    assert app.state_backend._engine is storage.state_backend()
    assert app.orchestrator._engine is storage.orchestrator()
    assert app.trigger._engine is storage.trigger_store()
    assert app.client_data_store._engine is storage.client_data_store()
    # The native orchestrator's composite is built over that storage.
    assert app.orchestrator._lifecycle() is not None
    assert storage_for(app, app.broker.engine_uri) is storage


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_apps_share_only_what_the_server_or_file_holds(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    app_id = f"storage-{uuid.uuid4().hex[:8]}"
    first = _app(backend, request, tmp_path, app_id)
    second = _app(backend, request, tmp_path, app_id)
    assert first is not second
    assert first.broker.storage is not second.broker.storage
    first.broker.route_invocation(InvocationId("inv-1"), first.broker.conf.queues[0], 0.0)
    # On a server or a file the second app sees it; on memory it has a world of its own.
    assert second.broker.count_invocations() == (0 if backend == "mem" else 1)
    # A component of another app is never composed with this app's (its storage differs).
    assert not second.orchestrator.shares_storage_with(first.broker)
    assert second.orchestrator.shares_storage_with(second.broker)


def test_the_storage_goes_with_its_app(tmp_path: Path) -> None:
    app = (
        PynencBuilder()
        .app_id(f"storage-{uuid.uuid4().hex[:8]}")
        .cpp_sqlite(path=tmp_path / "gone.db")
        .build()
    )
    gone = weakref.ref(app.broker.storage)
    assert gone() is not None
    del app
    gc.collect()
    assert gone() is None


def test_a_bad_uri_is_a_clear_error_and_nothing_is_kept(tmp_path: Path) -> None:
    app = PynencBuilder().app_id(f"storage-{uuid.uuid4().hex[:8]}").cpp_mem().build()
    with pytest.raises(BadConfig, match="ftp"):
        storage_for(app, "ftp://nowhere")
    with pytest.raises(BadConfig):
        _core.Storage("memory://", "")
    # The failed open left nothing behind: the app's own storage still opens.
    assert isinstance(app.broker.storage, _core.Storage)
