"""Errors name their cause, never the engine's internals (issue 49, item 6).

One table per kind of error, each row run for real:
- SQLite files that cannot be used fail when the app's components first open their
  storage, with the path, the setting and the cause in words: a missing directory, a
  directory this user may not write (a subprocess that drops to ``nobody``: the tests
  run as root, which ignores permissions), a read-only mount (a private mount
  namespace, ``unshare -m``), a read-only file (``chattr +i``: root cannot write an
  immutable file), a junk file, a directory. No message quotes SQL or a PRAGMA, also
  for errors after the open (a lock held past the busy timeout).
- Redis: a server that needs a password the URL lacks (NOAUTH) and a wrong password
  (WRONGPASS) are both ``BadConfig`` with a hint about the URL's password, which is
  never shown; a malformed port fails the build, from the builder and from settings.
- An unknown invocation id raises ``pynenc_cpp.errors.InvocationNotFound`` (also
  pynenc's ``InvocationNotFoundError`` and a ``KeyError``) on every read path, on
  every backend, native and mixed.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder
from pynenc.exceptions import InvocationNotFoundError, PynencError

from pynenc_cpp import BadConfig, _core
from pynenc_cpp.errors import InvocationNotFound
from tests_py.redis_server import FIXTURE_PIDS, RedisServer, free_port

# Words that only the engine's SQL would put in a message.
SQL_WORDS = ("PRAGMA", "INSERT", "SELECT", "CREATE TABLE", "BEGIN", "state_app_info", "(in:")

OPEN_SCRIPT = """
import json, os, sys
from pynenc import PynencBuilder
app = PynencBuilder().app_id("errors-named").cpp_sqlite(path=sys.argv[1]).build()
if sys.argv[2] == "nobody":  # the app is built (and pynenc-cpp loaded) as root
    os.setgid(65534)
    os.setuid(65534)
try:
    app.broker
    print(json.dumps(["opened", ""]))
except Exception as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
"""


def open_error(path: Path, how: str) -> tuple[str, str]:
    """The class name and message of what opening an SQLite app on ``path`` raises,
    in a fresh process: as root (``root``), as ``nobody`` after building the app, or
    with ``path``'s directory mounted read-only in a private mount namespace."""
    cmd = [sys.executable, "-c", OPEN_SCRIPT, str(path), how]
    if how == "ro-mount":
        d = str(path.parent)
        cmd = [
            "unshare", "-m", "sh", "-c",
            f'mount --bind "{d}" "{d}" && mount -o remount,bind,ro "{d}" && exec "$@"',
            "sh", *cmd,
        ]  # fmt: skip
    # Started in the test's own folder: a process that drops to nobody may not read the
    # working directory it would inherit (a checkout in a 0700 folder, say), where
    # pynenc looks for pyproject.toml.
    cwd = path.parent
    while not cwd.is_dir():
        cwd = cwd.parent
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True, cwd=cwd)
    name, message = json.loads(out.stdout.strip().splitlines()[-1])
    return name, message


def missing_dir(tmp: Path) -> Path:
    return tmp / "no-such-dir" / "app.db"


def a_directory(tmp: Path) -> Path:
    (tmp / "a-dir").mkdir()
    return tmp / "a-dir"


def junk_file(tmp: Path) -> Path:
    (tmp / "junk.db").write_bytes(b"definitely not sqlite" * 200)
    return tmp / "junk.db"


def root_owned_dir(tmp: Path) -> Path:
    d = tmp / "root-only"
    d.mkdir(mode=0o755)
    os.chmod(tmp, 0o755)  # nobody may reach it, not write it
    return d / "app.db"


def writable_dir(tmp: Path) -> Path:
    d = tmp / "mounted"
    d.mkdir()
    return d / "app.db"


def existing_db(tmp: Path) -> Path:
    path = tmp / "existing" / "app.db"
    path.parent.mkdir()
    assert open_error(path, "root") == ("opened", "")  # a database the engine made
    return path


def immutable_db(tmp: Path) -> Path:
    path = existing_db(tmp)
    subprocess.run(["chattr", "+i", str(path)], check=True)
    return path


def chattr_works(tmp: Path) -> bool:
    probe = tmp / "chattr-probe"
    probe.touch()
    ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    return ok


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


SQLITE_CASES: list[tuple[str, Callable[[Path], Path], str, str]] = [
    # (case, make the path, how to open, the cause the message must say)
    ("missing directory", missing_dir, "root", "no such directory"),
    ("path is a directory", a_directory, "root", "is a directory"),
    ("junk file", junk_file, "root", "not a database"),
    ("directory not writable", root_owned_dir, "nobody", "permission denied"),
    ("read-only mount, new file", writable_dir, "ro-mount", "read-only file system"),
    ("read-only mount, existing file", existing_db, "ro-mount", "read-only file system"),
    ("immutable database file", immutable_db, "root", "read-only"),
]


@pytest.fixture
def sqlite_tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for path in tmp_path.rglob("*"):  # undo chattr +i, whatever the test did
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


@pytest.mark.parametrize(
    ("make", "how", "cause"),
    [case[1:] for case in SQLITE_CASES],
    ids=[case[0] for case in SQLITE_CASES],
)
def test_sqlite_open_errors_name_the_cause(
    sqlite_tmp: Path, make: Callable[[Path], Path], how: str, cause: str
) -> None:
    if how == "ro-mount" and not unshare_works():
        pytest.skip("no private mount namespace here (unshare -m)")
    if make is immutable_db and not chattr_works(sqlite_tmp):
        pytest.skip("this file system has no immutable attribute (chattr +i)")
    path = make(sqlite_tmp)
    before = path.read_bytes() if path.is_file() else None
    name, message = open_error(path, how)
    assert name == "BadConfig", (name, message)
    assert cause in message, message
    assert str(path) in message and "cpp_sqlite_path" in message, message
    for word in SQL_WORDS:
        assert word not in message, (word, message)
    if before is not None:
        assert path.read_bytes() == before  # refused, never written to


def test_a_read_only_database_fails_at_open_not_at_the_first_submit(sqlite_tmp: Path) -> None:
    if not chattr_works(sqlite_tmp):
        pytest.skip("this file system has no immutable attribute (chattr +i)")
    path = immutable_db(sqlite_tmp)
    app = PynencBuilder().app_id("errors-named").cpp_sqlite(path=path).build()
    for component in ("broker", "orchestrator", "state_backend", "client_data_store", "trigger"):
        with pytest.raises(BadConfig, match="read-only") as info:
            getattr(app, component)
        assert "INSERT" not in str(info.value)


def test_a_lock_held_past_the_busy_timeout_says_so_without_sql(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = _core.ClientDataStore(f"sqlite://{path}?busy_timeout_ms=50", "errors-named")
    store.store("k", "v")
    # Another process holds the write lock (POSIX locks of one process never conflict).
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        with pytest.raises(_core.BackendError) as info:
            store.store("k", "w")
    finally:
        holder.kill()
        holder.wait(10)
    message = str(info.value)
    assert "stayed locked" in message and "database is locked" in message, message
    assert "starting a transaction" in message, message
    for word in SQL_WORDS:
        assert word not in message, (word, message)
    assert store.retrieve("k") == "v"


HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


# --- Redis ----------------------------------------------------------------------

PASSWORD = f"pw-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def password_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server started here with ``requirepass``; its port."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (scripts/setup.sh installs it)"
    port = free_port()
    data = tmp_path_factory.mktemp("redis-pw")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
         "--save", "", "--appendonly", "no", "--requirepass", PASSWORD],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    FIXTURE_PIDS.add(proc.pid)
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, "redis-server exited"
            ping = subprocess.run(
                ["redis-cli", "-p", str(port), "--no-auth-warning", "-a", PASSWORD, "PING"],
                capture_output=True,
                text=True,
            )
            if ping.stdout.strip() == "PONG":
                break
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
        FIXTURE_PIDS.discard(proc.pid)


REDIS_AUTH_CASES = [
    # (case, URL user info and query, what the server says, the hint)
    ("no password (NOAUTH)", "", "", "NOAUTH", "needs a password and the URL gives none"),
    ("no password, db 2 (NOAUTH)", "", "?db=2", "NOAUTH", "needs a password"),
    ("wrong password (WRONGPASS)", ":wr0ng-{pw}@", "", "WRONGPASS", "check the password"),
    ("wrong user (WRONGPASS)", "nobody:{pw}@", "", "WRONGPASS", "check the password and user"),
]


@pytest.mark.parametrize(
    ("userinfo", "query", "reply", "hint"),
    [case[1:] for case in REDIS_AUTH_CASES],
    ids=[case[0] for case in REDIS_AUTH_CASES],
)
def test_redis_password_errors_are_bad_config_with_a_hint(
    password_server: int, userinfo: str, query: str, reply: str, hint: str
) -> None:
    url = f"redis://{userinfo.format(pw=PASSWORD)}127.0.0.1:{password_server}/0{query}"
    app = PynencBuilder().app_id("errors-named").cpp_redis(url).build()
    with pytest.raises(BadConfig) as info:
        _ = app.broker
    message = str(info.value)
    assert reply in message and hint in message and "cpp_redis_url" in message, message
    assert f"127.0.0.1:{password_server}" in message, message
    assert PASSWORD not in message, message


def test_the_right_password_works(password_server: int) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{password_server}/0"
    app = PynencBuilder().app_id(f"errors-named-{uuid.uuid4().hex[:6]}").cpp_redis(url).build()
    assert app.state_backend.get_history("none-yet") == []  # authenticated: a read answered
    with pytest.raises(InvocationNotFound):
        app.orchestrator.get_invocation_status("none-yet")


BAD_PORTS = [
    ("not a number", "redis://127.0.0.1:notaport/0", "'notaport' is not a port number"),
    ("port 0", "redis://127.0.0.1:0/0", "'0' is not a port number"),
    ("port above 65535", "redis://127.0.0.1:65536/0", "'65536' is not a port number"),
    ("IPv6 literal, bad port", "redis://[::1]:port/0", "'port' is not a port number"),
    ("with a password", f"redis://:{PASSWORD}@h:99999/0", "port (not shown"),
]


@pytest.mark.parametrize(
    ("url", "says"), [case[1:] for case in BAD_PORTS], ids=[case[0] for case in BAD_PORTS]
)
@pytest.mark.parametrize("where", ["builder", "settings"])
def test_a_malformed_port_fails_the_build(url: str, says: str, where: str) -> None:
    with pytest.raises(ValueError) as info:  # BadConfig is a ValueError too
        if where == "builder":
            PynencBuilder().cpp_redis(url)
        else:
            builder = PynencBuilder().app_id("errors-named").cpp_redis("redis://h:1/0")
            builder.custom_config(cpp_redis_url=url).build()
    assert "cpp_redis_url" in str(info.value) or "url=" in str(info.value)
    assert says in str(info.value) and "1-65535" in str(info.value)
    assert PASSWORD not in str(info.value)


# --- Unknown invocation ids -----------------------------------------------------

READS: list[tuple[str, Callable[[Pynenc, str], object]]] = [
    ("get_invocation", lambda app, i: app.state_backend.get_invocation(i)),
    ("get_invocation_status", lambda app, i: app.orchestrator.get_invocation_status(i)),
    (
        "get_invocation_status_record",
        lambda app, i: app.orchestrator.get_invocation_status_record(i),
    ),
    ("get_result", lambda app, i: app.state_backend.get_result(i)),
    ("get_exception", lambda app, i: app.state_backend.get_exception(i)),
]


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis-reads")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["mem", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("module_redis")
        return server.url
    return request.param if request.param == "mem" else str(tmp_path / "reads.db")


@pytest.mark.parametrize("native", [True, False], ids=["native", "mixed"])
@pytest.mark.parametrize("read", [r[1] for r in READS], ids=[r[0] for r in READS])
def test_an_unknown_id_raises_one_class_on_every_read_path(
    backend: str, native: bool, read: Callable[[Pynenc, str], object]
) -> None:
    builder = PynencBuilder().app_id(f"errors-named-{uuid.uuid4().hex[:6]}")
    if backend == "mem":
        builder = builder.cpp_mem(native=native)
    elif backend.startswith("redis://"):
        builder = builder.cpp_redis(backend, native=native)
    else:
        builder = builder.cpp_sqlite(path=backend, native=native)
    app = builder.build()
    unknown = f"unknown-{uuid.uuid4().hex}"
    with pytest.raises(InvocationNotFoundError) as info:
        read(app, unknown)
    exc = info.value
    assert type(exc) is InvocationNotFound
    assert isinstance(exc, KeyError) and isinstance(exc, _core.InvocationNotFound)
    assert exc.invocation_id == unknown and unknown in str(exc)
    assert app.state_backend.get_history(unknown) == []  # as pynenc's own backends


def test_the_class_round_trips_as_pynenc_stores_exceptions() -> None:
    exc = InvocationNotFound("invocation not found: x1", "x1")
    back = PynencError.from_json("InvocationNotFound", exc.to_json())
    assert type(back) is InvocationNotFound
    assert (str(back), back.invocation_id) == ("invocation not found: x1", "x1")
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is InvocationNotFound and copy.invocation_id == "x1"
    assert str(copy) == "invocation not found: x1"


def test_other_missing_records_raise_the_same_class() -> None:
    store = _core.ClientDataStore("memory://", "errors-named")
    with pytest.raises(InvocationNotFound, match="client data key not found: nope"):
        store.retrieve("nope")
