"""Benchmark: per-task orchestration cost, mixed mode vs native mode, one run.

Not a test. ``.venv/bin/python bench/native.py [-n 2000] [--repeats 3] [--json out.json]``

For each backend (memory, SQLite file, a private redis-server started here on a
free port) and each mode, in this one process, it times:

* submit: N calls of a no-op task through pynenc's API (``task(i)``: route_call
  -> register_new_invocations: state-backend upsert, register, history, route);
* run: the N invocations driven through the orchestrator's hot path exactly as
  pynenc's runners call it, without the task body: ``get_invocations_to_run``
  (retrieve + PENDING), ``set_invocation_status(RUNNING)``,
  ``set_invocation_result``.

It prints the median microseconds per task of each phase, mixed beside native,
and the mixed/native ratio (> 1: native is faster). Logging is set to "error"
so log formatting does not dominate either mode.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pynenc import PynencBuilder  # noqa: E402
from pynenc.invocation import InvocationStatus  # noqa: E402
from pynenc.runner.runner_context import RunnerContext  # noqa: E402

from bench import bench_tasks  # noqa: E402
from tests_py.redis_server import RedisServer  # noqa: E402

BACKENDS = ("mem", "sqlite", "redis")
MODES = ("mixed", "native")
PHASES = ("submit", "run", "submit_cpu", "run_cpu")


def build_app(backend: str, native: bool, tmp: Path, redis_url: str):  # noqa: ANN201
    builder = PynencBuilder().app_id(f"bench-native-{uuid.uuid4().hex[:8]}").logging_level("error")
    if backend == "mem":
        builder = builder.cpp_mem(native=native)
    elif backend == "sqlite":
        builder = builder.cpp_sqlite(path=tmp / f"{uuid.uuid4().hex}.db", native=native)
    else:
        builder = builder.cpp_redis(redis_url, native=native)
    return builder.build()


def one_run(backend: str, native: bool, n: int, tmp: Path, redis_url: str) -> dict[str, float]:
    app = build_app(backend, native, tmp, redis_url)
    bench_tasks.noop.app = app
    runner = RunnerContext(runner_cls="BenchRunner", runner_id=f"bench-{uuid.uuid4().hex[:6]}")
    orch = app.orchestrator
    queues = list(app.broker.conf.queues)

    c0, t0 = time.process_time(), time.perf_counter()
    invocations = [bench_tasks.noop(i) for i in range(n)]
    c1, t1 = time.process_time(), time.perf_counter()
    done = 0
    while done < n:
        batch = list(orch.get_invocations_to_run(8, runner, lambda: queues, lambda q: None))
        if not batch:
            raise RuntimeError(f"only {done} of {n} invocations came back from the broker")
        for inv in batch:
            orch.set_invocation_status(inv.invocation_id, InvocationStatus.RUNNING, runner)
            orch.set_invocation_result(inv, 0, runner)
        done += len(batch)
    c2, t2 = time.process_time(), time.perf_counter()
    if orch.get_invocation_status(invocations[-1].invocation_id) != InvocationStatus.SUCCESS:
        raise RuntimeError("the last invocation did not reach SUCCESS")
    app.purge()
    return {
        "submit": (t1 - t0) / n * 1e6,
        "run": (t2 - t1) / n * 1e6,
        "submit_cpu": (c1 - c0) / n * 1e6,
        "run_cpu": (c2 - c1) / n * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="tasks per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]

    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-native-") as d:
        tmp = Path(d)
        server = RedisServer(tmp / "redis").start() if "redis" in backends else None
        url = server.url if server else ""
        try:
            for backend in backends:
                samples: dict[str, dict[str, list[float]]] = {
                    m: {p: [] for p in PHASES} for m in MODES
                }
                for _ in range(args.repeats):
                    for mode in MODES:  # interleaved: both modes see the same machine load
                        r = one_run(backend, mode == "native", args.n, tmp, url)
                        for phase, value in r.items():
                            samples[mode][phase].append(value)
                results[backend] = {
                    m: {p: statistics.median(v) for p, v in phases.items()}
                    for m, phases in samples.items()
                }
                print(f"  {backend}: done", file=sys.stderr)
        finally:
            if server:
                server.stop()

    print(f"\nper-task orchestration cost, median of {args.repeats} runs of {args.n} tasks (us)")
    print("wall = elapsed time; cpu = this process's CPU time (Python + engine, not Redis)")
    print(f"{'backend':8} {'phase':11} {'mixed':>9} {'native':>9} {'mixed/native':>13}")
    for backend, modes in results.items():
        for kind in ("", "_cpu"):
            for phase in ("submit", "run"):
                mixed, native = modes["mixed"][phase + kind], modes["native"][phase + kind]
                label = phase + (" cpu" if kind else " wall")
                print(f"{backend:8} {label:11} {mixed:9.1f} {native:9.1f} {mixed / native:12.2f}x")
            total_m = modes["mixed"]["submit" + kind] + modes["mixed"]["run" + kind]
            total_n = modes["native"]["submit" + kind] + modes["native"]["run" + kind]
            label = "total" + (" cpu" if kind else " wall")
            print(
                f"{backend:8} {label:11} {total_m:9.1f} {total_n:9.1f} {total_m / total_n:12.2f}x"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
