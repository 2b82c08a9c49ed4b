"""A pickled app carries only its config: a child process rebuilds every
component on the same SQLite file / Redis server from it."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder

CHILD = """
import pickle, sys
app = pickle.loads(sys.stdin.buffer.read())
names = [type(c).__name__ for c in (app.broker, app.orchestrator, app.state_backend,
                                     app.trigger, app.client_data_store)]
app.broker.route_invocation("from-child", app.broker.conf.queues[0], 0.0)
app.client_data_store._store("child-key", "child-value")
print(" ".join(names))
"""


def run_child(app: Pynenc) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=pickle.dumps(app),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return out.stdout.decode().split()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_child_rebuilds_components_from_the_pickled_config(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    builder = PynencBuilder().app_id(f"rebuild-{backend}")
    if backend == "sqlite":
        app = builder.cpp_sqlite(path=tmp_path / "app.db").build()
    else:
        app = builder.cpp_redis(request.getfixturevalue("redis_url")).build()
    app.purge()
    stem = "Sqlite" if backend == "sqlite" else "Redis"
    assert run_child(app) == [
        f"Cpp{stem}Broker",
        f"Cpp{stem}NativeOrchestrator",  # native mode is the default
        f"Cpp{stem}StateBackend",
        f"Cpp{stem}Trigger",
        f"Cpp{stem}ClientDataStore",
    ]
    # What the child wrote is in the parent's storage.
    assert app.broker.retrieve_invocation() == "from-child"
    assert app.client_data_store._retrieve("child-key") == "child-value"
