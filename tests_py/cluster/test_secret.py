"""No node without a secret: the per-user secret file, and outsiders refused.

* the secret file is created with mode 0600 on first use, and a file anyone else
  can read, an empty file, a symlink or another user's file are refused with a
  clear error that never shows the secret;
* a node started as the README shows (loopback, no secret) cannot be made to decode
  a single frame by a local process that follows docs/cluster/transport.md with an
  empty or a wrong key, on 127.0.0.1, 127.0.0.2, ::1 and the machine's own
  (non-loopback) address; the same hand-written client holding the real secret is
  delivered (so the frames it sends are right);
* after the handshake only frames sealed for that connection are decoded: a frame
  injected in clear, replayed or sealed for another connection closes it, and the
  sealing is re-implemented here from the documented layout (hmac + AES-GCM from
  the `cryptography` package), so the documentation is checked too;
* a second process with another secret file cannot join.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import multiprocessing
import os
import pickle
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pynenc_cpp.cluster import ClusterConfig
from pynenc_cpp.cluster.actors import ActorContext, Behavior, Behaviors, ClusteredActorSystem
from pynenc_cpp.cluster.secret import (
    ENV_VAR,
    SecretFileError,
    default_secret_path,
    load_or_create_secret,
)

pytestmark = pytest.mark.timeout(120)
REPO_ROOT = Path(__file__).resolve().parents[2]


# -- the secret file -------------------------------------------------------------------


def test_secret_file_is_created_0600_in_a_0700_dir_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "pynenc-cpp" / "cluster-secret"
    first = load_or_create_secret(path)
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create_secret(path) == first
    assert [p.name for p in path.parent.iterdir()] == ["cluster-secret"], "no temp file left"


def test_another_file_gets_another_secret(tmp_path: Path) -> None:
    assert load_or_create_secret(tmp_path / "a") != load_or_create_secret(tmp_path / "b")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_a_file_others_can_read_is_refused_naming_the_fix(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "cluster-secret"
    path.write_text("the-secret-text\n")
    path.chmod(mode)
    with pytest.raises(SecretFileError) as exc:
        load_or_create_secret(path)
    assert f"{mode:04o}" in str(exc.value)
    assert f"chmod 600 {path}" in str(exc.value)
    assert "the-secret-text" not in str(exc.value)


def test_an_empty_file_a_symlink_and_a_directory_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    empty.chmod(0o600)
    with pytest.raises(SecretFileError, match="is empty"):
        load_or_create_secret(empty)
    real = tmp_path / "real"
    real.write_text("s3cret")
    real.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(SecretFileError, match="symbolic link"):
        load_or_create_secret(link)
    d = tmp_path / "dir"
    d.mkdir(mode=0o700)
    with pytest.raises(SecretFileError, match="not a regular file"):
        load_or_create_secret(d)


def test_an_uncreatable_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "plain"
    blocker.write_text("x")
    with pytest.raises(SecretFileError, match=f"cannot (open|create) it .*{ENV_VAR}"):
        load_or_create_secret(blocker / "sub" / "cluster-secret")


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_another_users_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cluster-secret"
    path.write_text("theirs")
    path.chmod(0o600)
    os.chown(path, 65534, 65534)
    with pytest.raises(SecretFileError, match="owned by uid 65534"):
        load_or_create_secret(path)


def _race(path: str, q: Any) -> None:
    q.put(load_or_create_secret(Path(path)))


def test_processes_creating_the_file_at_once_agree(tmp_path: Path) -> None:
    path = tmp_path / "race" / "cluster-secret"
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(path), q)) for _ in range(6)]
    for p in procs:
        p.start()
    got = {q.get(timeout=60) for _ in procs}
    for p in procs:
        p.join(timeout=60)
    assert got == {path.read_text().strip()}


def test_default_path_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env-secret"))
    assert default_secret_path() == tmp_path / "env-secret"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_secret_path() == tmp_path / "xdg" / "pynenc-cpp" / "cluster-secret"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_secret_path() == tmp_path / "home" / ".config" / "pynenc-cpp" / "cluster-secret"


def test_config_resolves_the_secret_only_for_a_clustered_node(tmp_path: Path) -> None:
    path = tmp_path / "s"
    assert ClusterConfig(secret_file=str(path)).to_options().secret == ""  # standalone
    assert not path.exists(), "a standalone node needs no secret file"
    o = ClusterConfig(host="127.0.0.1", secret_file=str(path)).to_options()
    assert o.secret == path.read_text().strip() != ""
    assert ClusterConfig(host="127.0.0.1", secret="given").to_options().secret == "given"
    # An explicit secret wins over a file (PYNENC_CPP_CLUSTER_SECRET_FILE may be set
    # for every process while one is given PYNENC_CPP_CLUSTER_SECRET).
    both = ClusterConfig(host="127.0.0.1", secret="given", secret_file=str(path))
    assert both.to_options().secret == "given"
    env = {
        "PYNENC_CPP_CLUSTER_HOST": "127.0.0.1",
        "PYNENC_CPP_CLUSTER_SECRET": "from-env",
        "PYNENC_CPP_CLUSTER_SECRET_FILE": str(path),
    }
    assert ClusterConfig.from_env(environ=env).to_options().secret == "from-env"
    path.chmod(0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        ClusterConfig(host="127.0.0.1", secret_file=str(path)).to_options()


# -- an outsider following the documented handshake -------------------------------------

CLIENT_LABEL = b"pynenc-cpp/transport/v1/client-proof"
SERVER_LABEL = b"pynenc-cpp/transport/v1/server-proof"
RECORD_KEY_LABEL = b"pynenc-cpp/transport/v1/client-record-key"
RECORD_IV_LABEL = b"pynenc-cpp/transport/v1/client-record-iv"
HELLO, CHALLENGE, AUTH, ACCEPT, SEALED, PATH_MESSAGE = 1, 2, 3, 4, 5, 66
PROTOCOL_VERSION = 2  # docs/cluster/transport.md, "Handshake"


def _s(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def _frame(ftype: int, body: bytes) -> bytes:
    return struct.pack(">IBB", len(body) + 2, 1, ftype) + body


def _read_frame(sock: socket.socket) -> tuple[int, bytes] | None:
    def exact(n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = sock.recv(n - len(buf))
            except (ConnectionResetError, TimeoutError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    head = exact(6)
    if head is None:
        return None
    length, _version, ftype = struct.unpack(">IBB", head)
    body = exact(length - 2)
    return None if body is None else (ftype, body)


def _proof(key: bytes, label: bytes, t: dict[str, bytes]) -> bytes:
    msg = (
        _s(label)
        + struct.pack(">H", PROTOCOL_VERSION)
        + _s(t["cluster"])
        + _s(t["client"])
        + _s(t["server"])
        + t["cn"]
        + t["sn"]
    )
    return hmac.new(key, msg, hashlib.sha256).digest()


class Sealer:
    """The client side of the record layer, from docs/cluster/transport.md alone."""

    def __init__(self, key: bytes, t: dict[str, bytes]) -> None:
        self.aead = AESGCM(_proof(key, RECORD_KEY_LABEL, t))
        self.iv = _proof(key, RECORD_IV_LABEL, t)[:12]
        self.seq = 0

    def seal(self, ftype: int, payload: bytes) -> bytes:
        plain = bytes([ftype]) + payload
        header = struct.pack(">IBB", len(plain) + 16 + 2, 1, SEALED)
        counter = bytes(4) + struct.pack(">Q", self.seq)
        nonce = bytes(a ^ b for a, b in zip(self.iv, counter, strict=True))
        self.seq += 1
        return header + self.aead.encrypt(nonce, plain, header)


Wire = bytes | tuple[int, bytes]  # raw bytes, or (protocol type, payload) to seal


def outsider(host: str, port: int, cluster: str, key: bytes, frames: list[Wire]) -> bool:
    """Runs the client handshake with ``key`` and, whatever the answer, sends ``frames``.

    A ``(type, payload)`` frame is sealed with the record key derived from ``key``
    and this connection's transcript; raw bytes are sent as they are. True when
    the server answered ACCEPT with a proof that verifies under ``key``.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect((host, port))
        t = {"cluster": cluster.encode(), "client": b"127.0.0.1:9", "cn": os.urandom(32)}
        sock.sendall(
            _frame(
                HELLO,
                struct.pack(">H", PROTOCOL_VERSION) + _s(t["cluster"]) + _s(t["client"]) + t["cn"],
            )
        )
        got = _read_frame(sock)
        assert got is not None and got[0] == CHALLENGE, "the server answers HELLO with CHALLENGE"
        body = got[1]
        (n,) = struct.unpack(">I", body[2:6])
        t["server"], t["sn"] = body[6 : 6 + n], body[6 + n : 6 + n + 32]
        sock.sendall(_frame(AUTH, _proof(key, CLIENT_LABEL, t)))
        acc = _read_frame(sock)
        accepted = (
            acc is not None
            and acc[0] == ACCEPT
            and hmac.compare_digest(acc[1], _proof(key, SERVER_LABEL, t))
        )
        sealer = Sealer(key, t)
        try:
            for f in frames:
                sock.sendall(f if isinstance(f, bytes) else sealer.seal(*f))
            time.sleep(0.3)  # let the node read (and, were it accepted, deliver) them
        except (BrokenPipeError, ConnectionResetError):
            pass
        return accepted


class _RunsWhenUnpickled:
    """Unpickling this creates ``marker``: code run by whoever decodes the frame."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def _path_message(path: str, obj: Any) -> tuple[int, bytes]:
    return (PATH_MESSAGE, _s(path.encode()) + _s(pickle.dumps(obj)))


def _path_frame(path: str, obj: Any) -> bytes:
    """The same message as a frame in clear (what an injector would write)."""
    return _frame(*_path_message(path, obj))


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def _non_loopback_ipv4() -> list[str]:
    """This machine's own address on its default route (no packet is sent), if any."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("198.51.100.1", 9))  # TEST-NET-2; a UDP connect only picks the source
            ip = str(s.getsockname()[0])
        with socket.socket() as t:
            t.bind((ip, 0))
        return [] if ip.startswith("127.") or ip == "0.0.0.0" else [ip]
    except OSError:
        return []


HOSTS = (
    ["127.0.0.1", "127.0.0.2"]
    + (["::1"] if _ipv6_loopback() else [])
    # Not only loopback: the same holds on the machine's own network address.
    + _non_loopback_ipv4()
)


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _recorder(received: list[Any]) -> Behavior[Any]:
    """An actor that appends every message it handles to ``received``."""

    def receive(ctx: ActorContext[Any], msg: Any) -> Behavior[Any]:
        received.append(msg)
        return Behaviors.same()

    return Behaviors.receive(receive)


@pytest.mark.asyncio
@pytest.mark.parametrize("host", HOSTS)
async def test_an_outsider_gets_no_frame_decoded(host: str, tmp_path: Path) -> None:
    secret_file = Path(os.environ[ENV_VAR])
    received: list[Any] = []

    port = _free_port(host)
    # As the README shows: loopback, no secret (the node reads the per-user file).
    async with ClusteredActorSystem(name="cluster", host=host, port=port, node_id="n1") as node:
        ref = node.spawn(_recorder(received), "recorder")
        marker = tmp_path / "pwned"
        evil = _RunsWhenUnpickled(str(marker))
        attack: list[Wire] = [
            _path_message(ref.path, evil),
            _path_frame(ref.path, evil),
            _path_message("/user/none", evil),
        ]
        for key in (b"", b"wrong-key", b"pynenc-cpp"):
            accepted = await asyncio.to_thread(outsider, host, port, "cluster", key, attack)
            assert not accepted, f"key {key!r} was accepted"
        await asyncio.sleep(0.2)
        assert not marker.exists(), "an outsider's pickle was decoded"
        assert received == []
        stats = node._cluster().status().transport
        assert stats["handshakes_rejected"] >= 3
        assert stats["frames_received"] == 0, "not a single frame read past the handshake"

        # The same client holding the secret is delivered: the frames above were right.
        key = secret_file.read_text().strip().encode()
        ok = await asyncio.to_thread(
            outsider, host, port, "cluster", key, [_path_message(ref.path, "hello")]
        )
        assert ok
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.05)
        assert received == ["hello"]
        # A holder of the secret still gets nothing decoded for a path with no actor.
        await asyncio.to_thread(
            outsider, host, port, "cluster", key, [_path_message("/user/none", evil)]
        )
        await asyncio.sleep(0.2)
        assert not marker.exists(), "a payload for a path with no actor was decoded"


@pytest.mark.asyncio
async def test_after_the_handshake_only_frames_sealed_for_the_connection_are_decoded(
    tmp_path: Path,
) -> None:
    """What a man in the middle can write into an established connection."""
    key = Path(os.environ[ENV_VAR]).read_text().strip().encode()
    received: list[Any] = []

    port = _free_port("127.0.0.1")
    async with ClusteredActorSystem(name="c", host="127.0.0.1", port=port, node_id="n1") as node:
        ref = node.spawn(_recorder(received), "recorder")
        marker = tmp_path / "pwned"
        evil = _RunsWhenUnpickled(str(marker))
        hello = _path_message(ref.path, "hello")
        # A frame in clear after a sealed one: the sealed one is delivered, then the
        # connection is closed without decoding the injected pickle.
        injected: list[Wire] = [hello, _path_frame(ref.path, evil)]
        assert await asyncio.to_thread(outsider, "127.0.0.1", port, "c", key, injected)
        # A record sealed at sequence 0 for another connection (another transcript).
        elsewhere = {"cluster": b"c", "client": b"x", "server": b"y", "cn": b"1" * 32}
        other = Sealer(key, elsewhere | {"sn": b"2" * 32}).seal(*_path_message(ref.path, evil))
        assert await asyncio.to_thread(outsider, "127.0.0.1", port, "c", key, [other])
        # A sealed frame sent twice on its connection: the copy closes it.
        assert await asyncio.to_thread(_replay, port, key, hello)
        await asyncio.sleep(0.3)
        assert not marker.exists(), "an injected pickle was decoded"
        assert received == ["hello", "hello"], "each genuine frame once, nothing else"
        stats = node._cluster().status().transport
        assert stats["frames_malformed"] == 1
        assert stats["records_rejected"] == 2


def _replay(port: int, key: bytes, message: tuple[int, bytes]) -> bool:
    """Handshakes with ``key``, sends ``message`` sealed, then the same bytes again.

    True when the node closed the connection after the copy.
    """
    with socket.socket() as sock:
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        t = {"cluster": b"c", "client": b"127.0.0.1:9", "cn": os.urandom(32)}
        sock.sendall(
            _frame(
                HELLO,
                struct.pack(">H", PROTOCOL_VERSION) + _s(t["cluster"]) + _s(t["client"]) + t["cn"],
            )
        )
        got = _read_frame(sock)
        assert got is not None and got[0] == CHALLENGE
        (n,) = struct.unpack(">I", got[1][2:6])
        t["server"], t["sn"] = got[1][6 : 6 + n], got[1][6 + n : 6 + n + 32]
        sock.sendall(_frame(AUTH, _proof(key, CLIENT_LABEL, t)))
        acc = _read_frame(sock)
        if acc is None or acc[0] != ACCEPT:
            return False
        record = Sealer(key, t).seal(*message)
        sock.sendall(record)
        time.sleep(0.2)
        try:
            sock.sendall(record)
        except (BrokenPipeError, ConnectionResetError):
            pass
        # The node closes the connection on the replay.
        return _read_frame(sock) is None


NODE_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pynenc_cpp.cluster import ClusterConfig, run_cluster
    port, seed = int(sys.argv[1]), sys.argv[2]
    cfg = ClusterConfig(host="127.0.0.1", port=port, seeds=[seed] if seed else [],
                        cluster_name="secret-test", quorum=1,
                        heartbeat_ms=100, suspect_timeout_ms=300, stabilize_ms=100)
    h = run_cluster(config=cfg)
    print("READY", flush=True)
    deadline = time.monotonic() + float(sys.argv[3])
    alive = 0  # the most members (self included) seen alive at once
    while time.monotonic() < deadline:
        alive = max(alive, sum(1 for m in h.members() if m.state == "alive"))
        time.sleep(0.05)
    print(json.dumps({"alive": alive,
                      "rejected": h.status().transport["handshakes_rejected"]}), flush=True)
    h.stop()
    """
)


def _node(port: int, seed: str, seconds: float, secret_file: Path) -> subprocess.Popen[str]:
    env = {**os.environ, ENV_VAR: str(secret_file), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", NODE_SCRIPT, str(port), seed, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )


def _result(p: subprocess.Popen[str]) -> dict[str, int]:
    import json

    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.parametrize("same_secret", [True, False])
def test_a_second_process_without_the_secret_is_refused(tmp_path: Path, same_secret: bool) -> None:
    a_port, b_port = _free_port("127.0.0.1"), _free_port("127.0.0.1")
    a = _node(a_port, "", 5.0, tmp_path / "user-a")
    assert a.stdout is not None and a.stdout.readline().startswith("READY")
    b_file = tmp_path / ("user-a" if same_secret else "user-b")
    b = _node(b_port, f"127.0.0.1:{a_port}", 2.5, b_file)
    ra, rb = _result(a), _result(b)
    if same_secret:  # the control: one user's processes share the file and join
        assert ra["alive"] == 2 and rb["alive"] == 2
    else:
        assert ra["alive"] == 1 and rb["alive"] == 1
        assert ra["rejected"] >= 1, "a refused b's handshakes"
