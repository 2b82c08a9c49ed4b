"""An idle CppRunner's wake-ups and CPU, thread by thread (S3 taken apart).

Not a test. ``.venv/bin/python bench/idle_threads.py [--window 10] [--backends mem,sqlite,redis]``

For each backend, a runner process (``app.runner.run()`` on its main thread, as
``pynenc runner start`` runs it; 2 workers, native mode, bench/peer_systems's app)
first runs a few tasks that a thread of its own submits (so the wait points have
seen work and gone idle, as after S1 and S2 in bench/peers.py), then is left alone.
Over the window, from /proc/<pid>/task/*: each thread's wake-ups (voluntary and
involuntary context switches) and CPU time (schedstat), summed by thread name, and
the whole process's CPU (utime + stime), per 10 s. On a VM a wake-up of an idle
process costs far more than its work (bench/results/2026-11-28-stop-42-idle-runner-wakeups.md):
the wake-ups column is the lever, and it does not depend on the machine's noise.

Redis: a private redis-server on a free loopback port (tests_py/redis_server.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> dict[int, tuple[str, int, int]]:
    """tid -> (name, context switches, CPU ns) of every thread of ``pid``."""
    out: dict[int, tuple[str, int, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            base = f"/proc/{pid}/task/{tid}"
            with open(f"{base}/comm") as f:
                name = f.read().strip()
            switches = 0
            with open(f"{base}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
            with open(f"{base}/schedstat") as f:
                cpu_ns = int(f.read().split()[0])
        except OSError:
            continue  # the thread ended meanwhile
        out[int(tid)] = (name, switches, cpu_ns)
    return out


def _process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def measure(pid: int, window: float) -> dict[str, Any]:
    """Per thread name: wake-ups and CPU ms per 10 s over ``window`` seconds."""
    before, cpu0 = _threads(pid), _process_cpu_s(pid)
    time.sleep(window)
    after, cpu1 = _threads(pid), _process_cpu_s(pid)
    scale = 10.0 / window
    by_name: dict[str, dict[str, float]] = defaultdict(
        lambda: {"threads": 0, "wakeups": 0.0, "cpu_ms": 0.0}
    )
    for tid, (name, switches, cpu_ns) in after.items():
        _, s0, c0 = before.get(tid, (name, 0, 0))
        row = by_name[name]
        row["threads"] += 1
        row["wakeups"] += (switches - s0) * scale
        row["cpu_ms"] += (cpu_ns - c0) / 1e6 * scale
    return {"threads": dict(by_name), "process_cpu_s_per_10s": (cpu1 - cpu0) * scale}


def runner_main() -> int:
    """The runner process: warm-up tasks from a thread of its own, then idle."""
    sys.path.insert(0, str(HERE))
    from peer_systems.pynenc_app import app, noop

    def warm_up() -> None:
        for i in range(int(os.environ.get("IDLE_WARMUP", "50"))):
            assert noop(i).result == i
        print("IDLE-WARM", flush=True)

    threading.Thread(target=warm_up, daemon=True, name="warm-up").start()
    app.runner.run()
    return 0


def run_backend(backend: str, window: float, workdir: Path, redis_url: str) -> dict[str, Any]:
    cfg = {
        "app_id": f"idle-{backend}-{os.getpid()}",
        "stack": f"cpp-{backend}",
        "mode": "native",
        "runner": "cpp",
        "slots": 2,
        "url": redis_url,
        "path": str(workdir / f"idle-{backend}.db"),
        "sleep": 0.01,
        "status_cache": 0,
    }
    env = {**os.environ, "PEERS_PYNENC": json.dumps(cfg), "PYTHONPATH": str(HERE)}
    proc = subprocess.Popen(
        [sys.executable, __file__, "_runner"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("IDLE-WARM"):
                break
        else:
            raise RuntimeError(f"{backend}: the runner exited before its warm-up ended")
        time.sleep(2.0)  # the last task's spin and the first idle ticks pass
        return measure(proc.pid, window)
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured")
    parser.add_argument("--backends", default="mem,sqlite,redis")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="idle-threads-") as tmp:
        workdir = Path(tmp)
        redis = None
        if "redis" in backends:
            sys.path.insert(0, str(ROOT))
            from tests_py.redis_server import RedisServer

            redis = RedisServer(workdir / "redis").start()
        try:
            for backend in backends:
                url = redis.url if redis is not None else ""
                results[backend] = run_backend(backend, args.window, workdir, url)
        finally:
            if redis is not None:
                redis.stop()
    for backend, r in results.items():
        print(f"\n{backend}: whole process {r['process_cpu_s_per_10s']:.3f} CPU-s per 10 s")
        print(f"  {'thread':<18}{'n':>3}{'wake-ups/10s':>14}{'CPU ms/10s':>12}")
        rows = sorted(r["threads"].items(), key=lambda kv: -kv[1]["wakeups"])
        for name, row in rows:
            print(f"  {name:<18}{row['threads']:>3}{row['wakeups']:>14.0f}{row['cpu_ms']:>12.1f}")
        total = sum(row["wakeups"] for row in r["threads"].values())
        print(f"  {'all':<18}{'':>3}{total:>14.0f}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_runner"]:
        sys.exit(runner_main())
    sys.exit(main())
