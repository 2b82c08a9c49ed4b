"""Benchmark: pynenc's own in-memory components vs pynenc-cpp's, side by side.

Not a test. Run it with ``.venv/bin/python bench/mem_backends.py`` (after
``make setup``). Every scenario runs both peers in this one process, alternating,
``--repeats`` times; the table shows medians and the pynenc-cpp / pynenc ratio
(> 1 means pynenc-cpp is faster). ``--json PATH`` writes the raw figures.

Scenarios (all through pynenc's public component API, so adapter cost counts):
  broker      route one invocation id + retrieve it again           (ops/s)
  transition  register an invocation, then REGISTERED -> PENDING ->
              RUNNING -> SUCCESS via the orchestrator                (cycles/s)
  client_data store + retrieve a 4 KiB value                         (ops/s)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pynenc import Pynenc, PynencBuilder
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tasks import noop  # noqa: E402

Scenario = Callable[[Pynenc, int], float]


def make_app(kind: str) -> Pynenc:
    builder = PynencBuilder().app_id(f"bench-{kind}-{uuid.uuid4().hex[:6]}").logging_level("error")
    return (builder.memory() if kind == "pynenc" else builder.cpp_mem()).build()


def bench_broker(app: Pynenc, n: int) -> float:
    broker = app.broker
    queue = broker.conf.queues[0]
    ids = [InvocationId(f"inv-{i}") for i in range(n)]
    start = time.perf_counter()
    for inv in ids:
        broker.route_invocation(inv, queue, 0.0)
        broker.retrieve_invocation(queue)
    return n / (time.perf_counter() - start)


def bench_client_data(app: Pynenc, n: int) -> float:
    store = app.client_data_store
    value = "v" * 4096
    start = time.perf_counter()
    for i in range(n):
        store._store(f"k{i}", value)
        store._retrieve(f"k{i}")
    return n / (time.perf_counter() - start)


def bench_transition(app: Pynenc, n: int) -> float:
    noop.app = app
    orch = app.orchestrator
    runner_id = "bench-runner"
    invocations = [noop(i) for i in range(n)]  # registers them (REGISTERED)
    start = time.perf_counter()
    for inv in invocations:
        iid = inv.invocation_id
        orch._atomic_status_transition(iid, InvocationStatus.PENDING, runner_id)
        orch._atomic_status_transition(iid, InvocationStatus.RUNNING, runner_id)
        orch._atomic_status_transition(iid, InvocationStatus.SUCCESS, runner_id)
    return n / (time.perf_counter() - start)


SCENARIOS: dict[str, tuple[Scenario, str]] = {
    "broker": (bench_broker, "ops/s"),
    "transition": (bench_transition, "cycles/s"),
    "client_data": (bench_client_data, "ops/s"),
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("-n", type=int, default=5000, help="operations per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--json", help="write raw figures to this file")
    args = parser.parse_args()

    results: dict[str, dict[str, list[float]]] = {}
    names = args.only or list(SCENARIOS)
    total = len(names) * args.repeats * 2
    done = 0
    for name in names:
        fn, _unit = SCENARIOS[name]
        results[name] = {"pynenc": [], "pynenc-cpp": []}
        for _ in range(args.repeats):
            for peer, kind in (("pynenc", "pynenc"), ("pynenc-cpp", "cpp")):
                results[name][peer].append(fn(make_app(kind), args.n))
                done += 1
                print(
                    f"\r[{'#' * (30 * done // total):<30}] {done}/{total}", end="", file=sys.stderr
                )
    print(file=sys.stderr)

    print(
        f"{'scenario':<12} {'unit':<9} {'pynenc (median)':>16} {'pynenc-cpp (median)':>20} {'ratio':>7}"
    )
    for name in names:
        unit = SCENARIOS[name][1]
        base = statistics.median(results[name]["pynenc"])
        ours = statistics.median(results[name]["pynenc-cpp"])
        print(f"{name:<12} {unit:<9} {base:>16,.0f} {ours:>20,.0f} {ours / base:>6.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"n": args.n, "repeats": args.repeats, "results": results}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
