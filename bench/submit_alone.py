"""What one ``task(...)`` costs the client, and how much of it is the engine call.

Not a test. Run with
``.venv/bin/python bench/submit_alone.py [--stack cpp-redis] [--n 5000] [--json]``.

A client alone (no runner: nothing else competes for the two cores) submits N no-op
tasks (``bench/peer_systems/pynenc_app.py``'s ``noop``, native mode) in blocks of
1,000, after a warm-up, against a private redis-server on Redis or a fresh SQLite
file. It reports, per submit:

* **wall** p50 of the whole ``task(...)`` call, and the submit rate;
* **engine** p50 of its one engine call (``Lifecycle.register_and_route``, timed
  around it), and the rest: the Python on pynenc's and pynenc-cpp's side of it;
* **CPU**: the process's CPU time (user + system) per submit, median of the blocks.

``bench/results/2026-12-01-stop-47-submit-less-python.md`` has what it found and a py-spy
profile of the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BLOCK = 1000
WARMUP = 300


class _TimedLifecycle:
    """The app's lifecycle with ``register_and_route`` timed (everything else as is)."""

    def __init__(self, lifecycle: Any) -> None:
        self._lifecycle = lifecycle
        self.ns: list[int] = []

    def register_and_route(self, *args: Any) -> Any:
        t = time.perf_counter_ns()
        try:
            return self._lifecycle.register_and_route(*args)
        finally:
            self.ns.append(time.perf_counter_ns() - t)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lifecycle, name)


def run(stack: str, n: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="submit-alone-"))
    from profile_serial import app_config

    cfg = app_config("submit", stack, "native", 1, tmp)
    redis = None
    if stack == "cpp-redis":
        from peers import start_redis

        redis = start_redis(tmp / "redis")
        cfg["url"] = redis.url
    try:
        os.environ["PEERS_PYNENC"] = json.dumps(cfg)
        from peer_systems import pynenc_app

        if pynenc_app.REASON:
            raise SystemExit(f"{stack}: {pynenc_app.REASON}")
        app, noop = pynenc_app.app, pynenc_app.noop
        lifecycle = app.orchestrator._lifecycle()
        if lifecycle is None:
            raise SystemExit(f"{stack}: not in native mode")
        timed = _TimedLifecycle(lifecycle)
        app.orchestrator._lifecycle = lambda: timed  # this instance only
        for i in range(WARMUP):
            noop(i)
        timed.ns.clear()
        wall: list[int] = []
        cpu_us: list[float] = []
        rates: list[float] = []
        for start in range(0, n, BLOCK):
            count = min(BLOCK, n - start)
            c0, w0 = time.process_time_ns(), time.perf_counter_ns()
            for i in range(start, start + count):
                t = time.perf_counter_ns()
                noop(i)
                wall.append(time.perf_counter_ns() - t)
            cpu_us.append((time.process_time_ns() - c0) / count / 1000)
            rates.append(count / ((time.perf_counter_ns() - w0) / 1e9))
        wall_p50 = statistics.median(wall) / 1000
        engine_p50 = statistics.median(timed.ns) / 1000
        return {
            "stack": stack,
            "n": n,
            "engine_calls": len(timed.ns),
            "wall_p50_us": wall_p50,
            "engine_p50_us": engine_p50,
            "rest_p50_us": wall_p50 - engine_p50,
            "cpu_us_per_submit": statistics.median(cpu_us),
            "submits_per_s": statistics.median(rates),
        }
    finally:
        if redis is not None:
            redis.stop()


def text(r: dict[str, Any]) -> str:
    share = 100 * r["rest_p50_us"] / r["wall_p50_us"] if r["wall_p50_us"] else 0.0
    return (
        f"submit_alone: {r['stack']} native, {r['n']} submits, no runner\n"
        f"  task(...)     p50 {r['wall_p50_us']:8.1f} us   {r['submits_per_s']:,.0f} submits/s\n"
        f"  engine call   p50 {r['engine_p50_us']:8.1f} us   ({r['engine_calls']} calls)\n"
        f"  the rest      p50 {r['rest_p50_us']:8.1f} us   ({share:.0f}% of a submit)\n"
        f"  process CPU       {r['cpu_us_per_submit']:8.1f} us a submit"
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", choices=("cpp-mem", "cpp-sqlite", "cpp-redis"), default="cpp-mem")
    p.add_argument("--n", type=int, default=5000, help="submits measured (default 5000)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    result = run(args.stack, args.n)
    print(json.dumps(result, indent=1) if args.json else text(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
