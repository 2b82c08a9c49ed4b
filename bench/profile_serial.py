"""Where a serial task's time goes (S2 of bench/peers.py, taken apart).

Not a test. Run with
``.venv/bin/python bench/profile_serial.py [--stack cpp-redis] [--m 1000]``.

One client submits a task, waits for its result, and repeats M times, against a
runner in another process (``CppRunner``, 2 workers, the app of
``bench/peer_systems/pynenc_app.py``; on ``cpp-mem`` a thread of the client, which
is where its state lives) and, on Redis, a private redis-server. The task
(``stamp``) returns the system-wide monotonic clock at its body, so each serial
task splits into:

* **submit**: the ``task(...)`` call, from its start to its return;
* **to body**: from the submit's return to the task's body in the runner (the
  runner's wake-up, take and claim, the run's Python up to the call);
* **to result**: from the body to ``result`` returning in the client (the finish,
  the waiter's wake-up, the client's reads).

On Redis it also turns ``SLOWLOG`` on with no threshold for the measured tasks and
reports every script and command the clients sent: how many a serial task makes,
the server's time for each (p50 / p90, in us, as ``SLOWLOG`` measures it: the
script with the commands it runs), and which process sent it (the client's
connections are those still open after the runner stopped). Scripts are named by
the first 8 characters of their SHA1.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import statistics
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

WARMUP = 50


# ------------------------------------------------------------------ a RESP client


def _read_reply(f: Any) -> Any:
    """One RESP2 reply from the socket file ``f``."""
    line = f.readline()
    if not line:
        raise ConnectionError("redis-server closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data: bytes = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")


def redis_call(port: int, *args: str) -> Any:
    """One command on a new connection (the main venv has no redis client)."""
    payload = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(payload.encode())
        with s.makefile("rb") as f:
            return _read_reply(f)


def _client_addrs(port: int) -> set[str]:
    listing = redis_call(port, "CLIENT", "LIST")
    text = listing.decode() if isinstance(listing, bytes) else str(listing)
    out = set()
    for line in text.splitlines():
        for field in line.split():
            if field.startswith("addr="):
                out.add(field[5:])
    return out


# -------------------------------------------------------------------- the runner


def worker_main() -> None:
    """The runner process: CppRunner on the main thread, as ``pynenc runner start``."""
    from peer_systems.pynenc_app import app

    app.runner.run()


# ----------------------------------------------------------------------- the run


def _pct(xs: list[int], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] / 1000


def app_config(prefix: str, stack: str, mode: str, slots: int, tmp: Path) -> dict[str, Any]:
    """``PEERS_PYNENC`` for a profiling tool's app (``peer_systems/pynenc_app.py``): a new
    app id, CppRunner with ``slots`` workers, peers.py's tuning, a SQLite file in ``tmp``
    (used on cpp-sqlite); the caller adds ``url`` on cpp-redis."""
    return {
        "app_id": f"{prefix}-{uuid.uuid4().hex[:8]}",
        "stack": stack,
        "mode": mode,
        "runner": "cpp",
        "sleep": 0.01,
        "status_cache": 0.0,
        "slots": slots,
        "path": str(tmp / "app.sqlite"),
    }


def run(stack: str, m: int, mode: str) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="profile-serial-"))
    cfg = app_config("serial", stack, mode, 2, tmp)
    redis = None
    if stack == "cpp-redis":
        from peers import start_redis

        redis = start_redis(tmp / "redis")
        cfg["url"] = redis.url
    os.environ["PEERS_PYNENC"] = json.dumps(cfg)
    from peer_systems import pynenc_app

    if pynenc_app.REASON:
        raise SystemExit(f"{stack} {mode}: {pynenc_app.REASON}")
    app, stamp = pynenc_app.app, pynenc_app.stamp
    worker: subprocess.Popen[bytes] | None = None
    thread: threading.Thread | None = None
    try:
        if stack == "cpp-mem":
            thread = threading.Thread(target=app.runner.run, daemon=True)
            thread.start()
        else:
            worker = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "_worker"], env=os.environ
            )
        for i in range(WARMUP):
            _ = stamp(-1 - i).result
        if redis is not None:
            redis_call(redis.port, "CONFIG", "SET", "slowlog-max-len", str(200 * (m + 10)))
            redis_call(redis.port, "SLOWLOG", "RESET")
            redis_call(redis.port, "CONFIG", "SET", "slowlog-log-slower-than", "0")
        submit, to_body, to_result, total = [], [], [], []
        for i in range(m):
            t0 = time.monotonic_ns()
            inv = stamp(i)
            t1 = time.monotonic_ns()
            body = inv.result
            t2 = time.monotonic_ns()
            submit.append(t1 - t0)
            to_body.append(body - t1)
            to_result.append(t2 - body)
            total.append(t2 - t0)
        out: dict[str, Any] = {"stack": stack, "mode": mode, "m": m}
        for name, xs in (
            ("submit", submit),
            ("to body", to_body),
            ("to result", to_result),
            ("total", total),
        ):
            out[name] = {
                "p50": statistics.median(xs) / 1000,
                "p90": _pct(xs, 0.9),
                "p99": _pct(xs, 0.99),
            }
        if redis is not None:
            redis_call(redis.port, "CONFIG", "SET", "slowlog-log-slower-than", "-1")
            entries = redis_call(redis.port, "SLOWLOG", "GET", str(200 * (m + 10)))
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=30)
            worker = None
        if redis is not None:
            out["commands"] = _sent(entries, _client_addrs(redis.port), m)
        return out
    finally:
        if worker is not None:
            worker.kill()
            worker.wait(timeout=30)
        if thread is not None:
            app.runner.stop_runner_loop()
            thread.join(timeout=10)
        if redis is not None:
            redis.stop()


def _sent(entries: list[Any], client_addrs: set[str], m: int) -> list[dict[str, Any]]:
    """The commands the processes sent (a script's own commands are in its time),
    grouped by what they are and who sent them, per serial task."""
    # An entry: [id, unix time, duration us, [args...], client addr, client name].
    # SLOWLOG logs the commands a script runs as well, under their own names: only
    # the kinds a client sends and a script cannot run (scripts, blocking pops) are
    # kept, each with its script's commands in its time.
    top = {b"EVALSHA", b"EVAL", b"FCALL", b"BLPOP", b"BRPOP", b"BLMOVE"}
    groups: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for e in entries:
        args = e[3]
        if not args or args[0].upper() not in top:
            continue
        cmd = args[0].upper().decode()
        what = (
            f"{cmd} {args[1][:8].decode(errors='replace')}" if cmd in ("EVALSHA", "FCALL") else cmd
        )
        who = "client" if e[4].decode() in client_addrs else "runner"
        groups[(what, who)].append(int(e[2]))
    rows = []
    for (what, who), durations in groups.items():
        rows.append(
            {
                "what": what,
                "sent by": who,
                "per task": len(durations) / m,
                "p50 us": statistics.median(durations),
                "p90 us": sorted(durations)[int(0.9 * len(durations))],
            }
        )
    rows.sort(key=lambda r: (-r["per task"], r["what"]))
    return rows


def text(r: dict[str, Any]) -> str:
    lines = [
        f"profile_serial: {r['stack']} {r['mode']}, CppRunner 2 workers, {r['m']} serial tasks"
    ]
    for name in ("submit", "to body", "to result", "total"):
        s = r[name]
        lines.append(
            f"  {name:10s} p50 {s['p50']:8.1f}  p90 {s['p90']:8.1f}  p99 {s['p99']:8.1f} us"
        )
    if "commands" in r:
        lines.append(
            "  sent to redis-server, per serial task (server time as SLOWLOG measures it):"
        )
        for c in r["commands"]:
            lines.append(
                f"    {c['what']:18s} {c['sent by']:6s} {c['per task']:5.2f}  "
                f"p50 {c['p50 us']:5.0f}  p90 {c['p90 us']:5.0f} us"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_worker"]:
        worker_main()
        return 0
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--stack", choices=("cpp-redis", "cpp-sqlite", "cpp-mem"), default="cpp-redis")
    p.add_argument("--mode", choices=("native", "mixed"), default="native")
    p.add_argument("--m", type=int, default=1000, help="serial tasks measured (default 1000)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    r = run(args.stack, args.m, args.mode)
    print(json.dumps(r, indent=1) if args.json else text(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
