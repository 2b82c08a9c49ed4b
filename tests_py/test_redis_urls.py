"""Redis URLs as redis-py reads them, each against a real redis-server started
here: a unix socket with ``db`` and ``password`` in the query, an IPv6 literal, a
server with ``requirepass`` and a Redis 6 ACL user; ``rediss://`` is a clear error.
Each app runs tasks end to end (a ``CppRunner`` in a thread) and the keys are
checked where the URL says they go."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import BackendError, BadConfig
from tests_py import runner_tasks as rt
from tests_py.redis_server import FIXTURE_PIDS, free_port
from tests_py.test_cpp_runner import FAST, running

PASSWORD = "s3cr3t/p@ss"  # a '/' and an '@': percent-encoded in URLs


def start(args: list[str], ready: socket.socket, address: object) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (scripts/setup.sh installs it)"
    proc = subprocess.Popen([binary, *args, "--save", "", "--appendonly", "no"])
    FIXTURE_PIDS.add(proc.pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert proc.poll() is None, "redis-server exited"
        try:
            probe = socket.socket(ready.family, socket.SOCK_STREAM)
            probe.settimeout(0.5)
            probe.connect(address)  # type: ignore[arg-type]
            probe.close()
            return proc
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("redis-server did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(10)
    FIXTURE_PIDS.discard(proc.pid)


def raw(address: object, family: int, *commands: list[str]) -> list[bytes]:
    """Sends RESP commands on a fresh socket; one raw reply line per command."""
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(address)  # type: ignore[arg-type]
        replies = []
        for cmd in commands:
            s.sendall(
                f"*{len(cmd)}\r\n".encode()
                + b"".join(f"${len(a.encode())}\r\n{a}\r\n".encode() for a in cmd)
            )
            replies.append(s.recv(65536))
        return replies


def app_for(url: str) -> Pynenc:
    app = (
        PynencBuilder()
        .app_id(f"urls-{uuid.uuid4().hex[:8]}")
        .cpp_redis(url)
        .cpp_runner(workers=2)
        .custom_config(**FAST)
        .build()
    )
    rt.use(app)
    return app


def runs_tasks(app: Pynenc) -> None:
    with running(app):
        invocations = [rt.add(i, 2) for i in range(5)]
        assert [inv.result for inv in invocations] == [i + 2 for i in range(5)]


@pytest.fixture
def unix_server(tmp_path: Path) -> Iterator[Path]:
    sock = tmp_path / "r.sock"
    family = socket.AF_UNIX
    proc = start(
        ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
         "--requirepass", PASSWORD, "--dir", str(tmp_path)],
        socket.socket(family),
        str(sock),
    )  # fmt: skip
    yield sock
    stop(proc)


def test_unix_socket_with_db_and_password_in_the_query(unix_server: Path) -> None:
    url = f"unix://{unix_server}?db=5&password={quote(PASSWORD, safe='')}"
    app = app_for(url)
    runs_tasks(app)
    auth, _, size5, _, size0 = raw(
        str(unix_server),
        socket.AF_UNIX,
        ["AUTH", PASSWORD],
        ["SELECT", "5"],
        ["DBSIZE"],
        ["SELECT", "0"],
        ["DBSIZE"],
    )
    assert auth.startswith(b"+OK")
    assert int(size5[1:].strip()) > 0  # db 5 holds the app's keys
    assert size0.strip() == b":0"  # and db 0 none


def test_unix_socket_with_a_wrong_password_is_a_clear_error(unix_server: Path) -> None:
    with pytest.raises(BadConfig) as info:
        _ = app_for(f"unix://{unix_server}?password=wrong-{uuid.uuid4().hex}").broker
    assert "refused AUTH" in str(info.value) and "wrong-" not in str(info.value)


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_ipv6_literal_with_an_acl_user(tmp_path: Path) -> None:
    port = free_port()
    proc = start(
        ["--port", str(port), "--bind", "::1", "--dir", str(tmp_path),
         "--user", "default", "off",
         "--user", "app", "on", f">{PASSWORD}", "~*", "&*", "+@all"],
        socket.socket(socket.AF_INET6),
        ("::1", port),
    )  # fmt: skip
    try:
        url = f"redis://app:{quote(PASSWORD, safe='')}@[::1]:{port}/3"
        runs_tasks(app_for(url))
        _, size = raw(("::1", port), socket.AF_INET6, ["AUTH", "app", PASSWORD], ["DBSIZE"])
        assert size.strip() == b":0"  # db 0 is empty: the keys went to db 3
        _, _, size3 = raw(
            ("::1", port), socket.AF_INET6, ["AUTH", "app", PASSWORD], ["SELECT", "3"], ["DBSIZE"]
        )
        assert int(size3[1:].strip()) > 0
        with pytest.raises((BadConfig, BackendError)) as info:  # the default user is off
            _ = app_for(f"redis://[::1]:{port}/0").broker
        assert "NOAUTH" in str(info.value) and "[::1]" in str(info.value)
    finally:
        stop(proc)


@pytest.mark.parametrize("where", ["builder", "config"])
def test_rediss_is_a_clear_error_naming_what_is_missing(where: str) -> None:
    url = "rediss://:s3cr3t@h:6380/0"
    with pytest.raises(ValueError) as info:  # BadConfig is a ValueError too
        if where == "builder":
            PynencBuilder().cpp_redis(url)
        else:
            app = (
                PynencBuilder()
                .app_id("rediss")
                .cpp_redis("redis://h:1/0")
                .custom_config(cpp_redis_url=url)
                .build()
            )
            _ = app.broker
    assert "no TLS" in str(info.value) and "stunnel" in str(info.value)
    assert "s3cr3t" not in str(info.value)
