"""Drain rate by ``cpp_runner_prefetch`` (K): the figure K's default is chosen by.

Not a test. Run with ``.venv/bin/python bench/prefetch.py`` (``make bench-prefetch``).
In ``bench/peers.py``'s S1 on Redis the runner keeps up with the one client, so S1
measures the client's submit rate; prefetch changes the runner's side only. Here the
runner is the bottleneck: for each backend (native ``cpp_sqlite``, ``cpp_redis``)
and each K, a fresh process queues N no-op tasks with no runner running, then
starts a ``CppRunner`` (2 workers, prefetch K) in a thread and reads every
result; the figure is N over the time from the runner's start to the last
result. It also reports the CPU time per task of the worker threads and, on
Redis, of redis-server. Rounds alternate the K values (round 1: every K, round 2:
every K, ...); the table shows medians over rounds and the ratio to K = 1.
"""

from __future__ import annotations

import argparse
import json
import os
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
ROOT = HERE.parent


def _worker_cpu_ns() -> int:
    """CPU time so far, in ns, of this process's CppRunner worker threads."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "pynenc-worker":
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            continue
    return total


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_one(backend: str, k: int, n: int, url: str, redis_pid: int) -> dict[str, Any]:
    """In this process: drain N queued tasks with prefetch ``k`` on ``backend``."""
    sys.path.insert(0, str(HERE))
    with tempfile.TemporaryDirectory() as tmp:
        cfg: dict[str, Any] = {
            "app_id": f"prefetch-{backend}-{k}-{uuid.uuid4().hex[:6]}",
            "stack": f"cpp-{backend}",
            "mode": "native",
            "runner": "cpp",
            "slots": 2,
            "prefetch": k,
            "sleep": 0.01,
            "status_cache": 0.0,
            "path": str(Path(tmp) / "drain.db"),
            "url": url,
        }
        os.environ["PEERS_PYNENC"] = json.dumps(cfg)
        from peer_systems import pynenc_app  # builds the app from PEERS_PYNENC

        if pynenc_app.REASON:
            raise RuntimeError(pynenc_app.REASON)
        app, noop = pynenc_app.app, pynenc_app.noop
        invocations = [noop(i) for i in range(n)]
        runner = app.runner
        thread = threading.Thread(target=runner.run, daemon=True)
        cpu0 = _worker_cpu_ns()
        redis0 = _proc_cpu_s(redis_pid) if redis_pid else 0.0
        t0 = time.perf_counter()
        thread.start()
        results = [inv.result for inv in invocations]
        wall = time.perf_counter() - t0
        cpu1 = _worker_cpu_ns()
        redis1 = _proc_cpu_s(redis_pid) if redis_pid else 0.0
        prefetched = runner._engine.prefetched if runner._engine is not None else 0
        runner.stop_runner_loop()
        thread.join(timeout=30)
    return {
        "backend": backend,
        "k": k,
        "n": n,
        "completed": sum(1 for i, r in enumerate(results) if r == i),
        "drain_per_s": n / wall,
        "worker_cpu_us": (cpu1 - cpu0) / n / 1000,
        "redis_cpu_us": (redis1 - redis0) / n * 1e6 if redis_pid else None,
        "prefetched": prefetched,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("-n", type=int, default=3000, help="queued tasks per drain")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--k", default="1,2,4,8,16", help="comma-separated K values")
    parser.add_argument("--backends", default="sqlite,redis")
    parser.add_argument("--json", help="also write the rows to this path")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        spec = json.loads(args.one)
        out = measure_one(spec["backend"], spec["k"], args.n, spec["url"], spec["redis_pid"])
        print("ONE-RESULT " + json.dumps(out), flush=True)
        os._exit(0)  # the runner thread is a daemon
    ks = [int(k) for k in args.k.split(",")]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    sys.path.insert(0, str(ROOT))
    from tests_py.redis_server import RedisServer

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start() if "redis" in backends else None
        try:
            for _ in range(args.rounds):
                for backend in backends:
                    for k in ks:
                        spec = {
                            "backend": backend,
                            "k": k,
                            "url": server.url if server else "",
                            "redis_pid": server.proc.pid if server and backend == "redis" else 0,
                        }
                        proc = subprocess.run(
                            [
                                sys.executable,
                                __file__,
                                "--one",
                                json.dumps(spec),
                                "-n",
                                str(args.n),
                            ],
                            capture_output=True,
                            timeout=300,
                        )
                        line = next(
                            (
                                x
                                for x in proc.stdout.decode().splitlines()
                                if x.startswith("ONE-RESULT ")
                            ),
                            None,
                        )
                        if line is None:
                            err = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
                            print(f"{backend} K={k}: failed: {' | '.join(err)}", file=sys.stderr)
                            continue
                        rows.append(json.loads(line[len("ONE-RESULT ") :]))
        finally:
            if server is not None:
                server.stop()
    print(
        f"drain of {args.n} queued no-op tasks, CppRunner 2 workers, median of {args.rounds} rounds:"
    )
    print(
        f"{'backend':<8} {'K':>3} {'drain/s':>9} {'x K=1':>6} {'worker CPU us':>14} {'redis CPU us':>13}"
    )
    for backend in backends:
        base = None
        for k in ks:
            mine = [r for r in rows if r["backend"] == backend and r["k"] == k]
            if not mine:
                continue
            rate = statistics.median(r["drain_per_s"] for r in mine)
            base = base or (rate if k == 1 else None)
            cpu = statistics.median(r["worker_cpu_us"] for r in mine)
            rcpu = [r["redis_cpu_us"] for r in mine if r["redis_cpu_us"] is not None]
            ratio = f"{rate / base:.2f}" if base else "-"
            redis = f"{statistics.median(rcpu):.1f}" if rcpu else "-"
            bad = sum(r["n"] - r["completed"] for r in mine)
            note = f"  ({bad} results wrong)" if bad else ""
            print(f"{backend:<8} {k:>3} {rate:>9,.0f} {ratio:>6} {cpu:>14.1f} {redis:>13}{note}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
