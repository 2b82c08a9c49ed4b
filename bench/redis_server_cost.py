"""What one task costs redis-server, as an instruction count (issue 51's target).

Not a test. ``make bench-redis-cost`` (installs valgrind), or
``.venv/bin/python bench/redis_server_cost.py [--n 300] [--mode native] [--keep DIR]``.

Wall-clock and CPU figures of redis-server move 10-20% between runs of the same
input on these 2-core VMs (it shares them with the client and the runner), which
hides a change of a few commands a task. An instruction count does not move:

1. **Capture.** A burst as ``bench/profile_burst.py`` runs it (the same client and
   runner processes, ``CppRunner`` with 2 workers, N no-op tasks after a warm-up)
   against a private redis-server with a MONITOR connection attached from the
   start, recording every command the clients send, in the order the server ran
   them, and counting the commands scripts run inside it.
2. **Replay** the capture, pipelined on one connection, into a fresh
   redis-server under ``valgrind --tool=callgrind`` twice: the whole capture, and
   only what came before the burst (start-up, script loads, warm-up). The
   difference of the two instruction totals, divided by N, is the server's work a
   task. Blocking commands (``BLPOP``) and connection housekeeping (``CLIENT``,
   ``INFO``, ``HELLO``, ...) are left out of the replay: what they move (wake
   tokens) changes no script's path but an empty pop's.

The replay runs ~50x slower than the burst did, so keys that expire (consumer
leases, the recovery guard: both in seconds) may lapse in it where they did not
in the burst; keep N small (the default, 300) so that the replay of the burst
takes well under the 10 s lease. Compare two builds by running this with each
(the capture is each build's own: its scripts and arguments).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peers import start_redis  # noqa: E402
from profile_burst import _Monitor  # noqa: E402

#: Commands the replay leaves out: they block, or touch only the connection.
SKIPPED = {
    "blpop", "brpop", "bzpopmin", "wait", "monitor", "client", "info", "config",
    "hello", "auth", "select", "ping", "quit", "command", "readonly", "role",
}  # fmt: skip


def parse_monitor_line(line: bytes) -> tuple[bool, list[bytes]] | None:
    """(run by a script, argv) of one MONITOR line, or None for a line that is not a
    command (``+OK``). Arguments are quoted as ``sdscatrepr`` writes them."""
    if not line.startswith(b"+") or b'"' not in line:
        return None
    head, sep, rest = line.partition(b' "')
    if not sep:
        return None
    scripted = b"lua]" in head
    args: list[bytes] = []
    cur = bytearray()
    i, n = 0, len(rest)
    in_arg = True  # the partition consumed the first opening quote
    while i < n:
        c = rest[i]
        if not in_arg:
            if c == 0x22:  # "
                in_arg, cur = True, bytearray()
            i += 1
            continue
        if c == 0x5C and i + 1 < n:  # backslash
            e = rest[i + 1]
            if e == ord("x") and i + 3 < n:
                cur.append(int(rest[i + 2 : i + 4], 16))
                i += 4
                continue
            cur.append(
                {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("a"): 7, ord("b"): 8}.get(e, e)
            )
            i += 2
            continue
        if c == 0x22:
            args.append(bytes(cur))
            in_arg = False
            i += 1
            continue
        cur.append(c)
        i += 1
    return scripted, args


class Recorder(_Monitor):
    """A MONITOR connection recording what clients send, from the moment it opens."""

    def __init__(self, port: int) -> None:
        self.sent: list[list[bytes]] = []
        self.burst_from: int | None = None  # index into sent where the burst began
        self.lock = threading.Lock()
        super().__init__(port)

    def on_lines(self, lines: list[bytes]) -> None:
        with self.lock:
            for line in lines:
                parsed = parse_monitor_line(line)
                if parsed is None:
                    continue
                scripted, argv = parsed
                if scripted:
                    if self.counting:
                        self.scripted[argv[0].decode(errors="replace").lower()] += 1
                elif argv:
                    self.sent.append(argv)

    def mark_burst(self) -> None:
        time.sleep(0.3)  # the stream catches up with the warm-up
        with self.lock:
            self.burst_from = len(self.sent)
            self.counting = True

    def close(self) -> None:
        time.sleep(0.3)
        with self.lock:
            self.counting = False
        self.sock.close()


def capture(args: argparse.Namespace) -> tuple[Recorder, dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="redis-cost-"))
    redis = start_redis(tmp / "redis")
    rec = Recorder(redis.port)
    cfg = {
        "app_id": f"cost-{uuid.uuid4().hex[:6]}",
        "stack": "cpp-redis",
        "mode": args.mode,
        "runner": "cpp",
        "url": redis.url,
        "path": str(tmp / "app.db"),
        "sleep": 0.01,
        "status_cache": 0.0,
        "slots": 2,
    }
    env = {**os.environ, "PEERS_PYNENC": json.dumps(cfg), "PYTHONPATH": str(HERE)}
    me = [sys.executable, str(HERE / "profile_burst.py")]
    worker = subprocess.Popen([*me, "_worker"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    client = subprocess.Popen([*me, "_client", str(args.n)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    result: dict[str, Any] = {}
    try:
        assert client.stdout is not None and client.stdin is not None
        if client.stdout.readline().strip() != "READY":
            raise RuntimeError("the client did not warm up")
        time.sleep(1.0)
        rec.mark_burst()
        client.stdin.write("GO\n")
        client.stdin.flush()
        for line in client.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
                break
        rec.close()
    finally:
        for p in (client, worker):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        redis.stop()
    return rec, result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _resp(argv: list[bytes]) -> bytes:
    out = [b"*%d\r\n" % len(argv)]
    for a in argv:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _read_replies(sock: socket.socket, count: int) -> int:
    """Reads `count` RESP replies; returns how many were errors other than
    NOSCRIPT (a script's first call before its load, as in the burst)."""
    f = sock.makefile("rb")
    errors = 0

    def one() -> None:
        nonlocal errors
        line = f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-" and not rest.startswith(b"NOSCRIPT"):
            errors += 1
            print(
                "error reply in the replay:", rest[:200].decode(errors="replace"), file=sys.stderr
            )
        elif kind == b"$":
            n = int(rest)
            if n >= 0:
                f.read(n + 2)
        elif kind == b"*":
            for _ in range(max(0, int(rest))):
                one()

    for _ in range(count):
        one()
    return errors


def replay(commands: list[list[bytes]], out_dir: Path, name: str) -> tuple[int, int]:
    """(total instructions (callgrind Ir), error replies) of a fresh redis-server
    that ran `commands`."""
    port = free_port()
    out = out_dir / f"callgrind.{name}.out"
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "redis-server",
         "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(out_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=600)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        errors = 0
        for k in range(0, len(commands), 200):
            chunk = commands[k : k + 200]
            sock.sendall(b"".join(_resp(c) for c in chunk))
            errors += _read_replies(sock, len(chunk))
        sock.sendall(_resp([b"SHUTDOWN", b"NOSAVE"]))
        sock.close()
        server.wait(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]), errors
    raise RuntimeError(f"no instruction total in {out}")


#: Unit costs (--unit-costs): Lua bodies run 10 times in one EVALSHA.
UNIT_COSTS = (
    ("redis.call EXISTS (a missing key)", "redis.call('EXISTS', 'x')"),
    ("redis.call HMGET of 3 fields", "redis.call('HMGET', 'h', 'a', 'b', 'c')"),
    ("redis.call HSET of 1 field", "redis.call('HSET', 'h', 'd', 'v')"),
    ("redis.call ZADD (a number score)", "redis.call('ZADD', 'z', i, 'm' .. i)"),
    ("redis.call ZADD (a string score)", "redis.call('ZADD', 'z', '5', 'm')"),
    ("a 250-byte string .. a number", "t = s .. i"),
    ("string.format('%020d', n)", "t = string.format('%020d', i)"),
)


def unit_costs(out_dir: Path) -> None:
    """Instructions of single Lua operations inside a script, each run 10 times in
    1,000 EVALSHA calls, minus an empty script's; and of an EVALSHA itself."""
    import hashlib

    def run(src: str, n: int) -> int:
        sha = hashlib.sha1(src.encode()).hexdigest().encode()
        cmds = [[b"SCRIPT", b"LOAD", src.encode()], [b"HSET", b"h", b"a", b"1", b"b", b"2"]]
        cmds += [[b"EVALSHA", sha, b"0", b"arg"]] * n
        return replay(cmds, out_dir, "unit")[0]

    prelude = "local s, t = string.rep('x', 250), nil "
    empty = run(prelude + "for i = 1, 10 do end return 1", 1000)
    call = (empty - run(prelude + "return 1", 0)) / 1000
    print(f"an EVALSHA of an empty loop (its call, ARGV, reply): {call / 1e3:,.1f} k instructions")
    for name, body in UNIT_COSTS:
        total = run(prelude + f"for i = 1, 10 do {body} end return 1", 1000)
        print(f"{name}: {(total - empty) / 10_000 / 1e3:,.1f} k instructions each")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=300, help="tasks in the burst (default 300)")
    ap.add_argument("--mode", choices=("native", "mixed"), default="native")
    ap.add_argument("--keep", type=Path, help="keep the callgrind files in this folder")
    ap.add_argument(
        "--unit-costs",
        action="store_true",
        help="also the instructions of single Lua operations inside a script",
    )
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind not found: apt-get install valgrind (or make bench-redis-cost)")
        return 2
    rec, result = capture(args)
    assert rec.burst_from is not None
    kept = [c for c in rec.sent if c[0].decode(errors="replace").lower() not in SKIPPED]
    before = [
        c
        for c in rec.sent[: rec.burst_from]
        if c[0].decode(errors="replace").lower() not in SKIPPED
    ]
    sent = collections.Counter(
        c[0].decode(errors="replace").lower() for c in rec.sent[rec.burst_from :]
    )
    n = args.n
    print(f"redis_server_cost: cpp-redis {args.mode}, CppRunner 2 workers, N={n}")
    print(
        f"burst: {result.get('completed', 0)} of {n} correct, done {result.get('done_per_s', 0):,.0f}/s"
    )
    print("commands sent a task: " + ", ".join(f"{k} {v / n:.2f}" for k, v in sent.most_common()))
    total_scripted = sum(rec.scripted.values())
    print(
        f"commands run inside scripts a task: {total_scripted / n:.2f} ("
        + ", ".join(f"{k} {v / n:.2f}" for k, v in rec.scripted.most_common())
        + ")"
    )
    with tempfile.TemporaryDirectory(prefix="redis-cost-replay-") as d:
        out = args.keep or Path(d)
        out.mkdir(parents=True, exist_ok=True)
        whole, errors = replay(kept, out, "whole")
        base, _ = replay(before, out, "before")
        print(
            f"redis-server instructions a task (callgrind, replay of the burst): "
            f"{(whole - base) / n / 1e3:,.1f} k (whole {whole / 1e6:,.1f} M, before the burst "
            f"{base / 1e6:,.1f} M; {len(kept)} commands replayed, {errors} errors)"
        )
        if args.unit_costs:
            unit_costs(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
