"""A private redis-server for tests: Debian's binary, a free loopback port, its
data dir in a temp dir. Never a server that happens to be running."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests_py.procs import orphan_guard

_SANITIZER_ENV = {"LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS"}

#: PIDs of servers owned by test fixtures; the conformance harness's reaper of
#: leftover processes must not kill them.
FIXTURE_PIDS: set[int] = set()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(
        self,
        data_dir: Path,
        *,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        extra_args: tuple[str, ...] = (),
        sentinel_conf: str | None = None,
    ) -> None:
        """``extra_args``: more ``--option value`` arguments (``--replicaof host
        port``). ``sentinel_conf``: start a sentinel (``redis-server --sentinel``) with
        this config file text instead of a data server."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (scripts/setup.sh installs it)")
        self.binary = binary
        self.data_dir = data_dir
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.port = free_port()
        self.extra_args = extra_args
        self.sentinel_conf = sentinel_conf
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        head = [self.binary]
        if self.sentinel_conf is not None:
            conf = self.data_dir / "sentinel.conf"
            if not conf.exists():  # the sentinel rewrites it with what it learns
                conf.write_text(self.sentinel_conf)
            head = [self.binary, str(conf), "--sentinel"]
        self.proc = subprocess.Popen(
            [
                *head,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.data_dir),
                *(
                    ()
                    if self.sentinel_conf is not None
                    else (
                        "--save",
                        "",
                        "--appendonly",
                        "yes" if self.appendonly else "no",
                        "--appendfsync",
                        self.appendfsync,
                    )
                ),
                "--logfile",
                str(self.data_dir / "redis.log"),
                "--daemonize",
                "no",
                *self.extra_args,
            ],
            # Not the sanitizer runtime a chaos run preloads into its Python processes.
            env={k: v for k, v in os.environ.items() if k not in _SANITIZER_ENV},
            preexec_fn=orphan_guard(),
        )
        FIXTURE_PIDS.add(self.proc.pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: see {self.data_dir / 'redis.log'}")
            try:  # accepting is not enough: a server loading its AOF answers LOADING
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        FIXTURE_PIDS.discard(self.proc.pid)
        self.proc = None


def raw_reply(port: int, *command: str) -> str:
    """One inline command to a local server and its raw RESP reply (test plumbing:
    a replication or Sentinel state read while the deployment comes up)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall((" ".join(command) + "\r\n").encode())
        time.sleep(0.05)
        return s.recv(65536).decode(errors="replace")


def await_state(what: str, pred: Callable[[], bool], timeout: float = 30.0) -> None:
    """Until ``pred()`` (a server not answering yet counts as not yet); an
    AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
