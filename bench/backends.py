"""Benchmark: each durable backend of the engine beside its raw database, one run.

Not a test. ``.venv/bin/python bench/backends.py [-n 5000] [--repeats 5] [--json out.json]``
builds ``bench/backends_bench.cc`` (Release, in build/bench) and runs it
``--repeats`` times. Each run measures, in one process and side by side:

* transitions: register + PENDING -> RUNNING -> SUCCESS through the Orchestrator
  port (cycles/s), against the same number of single-row transactions on plain
  libsqlite3 with the same pragmas (WAL, synchronous=NORMAL);
* route: Broker Route of one id + Retrieve (ops/s), against an INSERT transaction
  plus a DELETE ... RETURNING transaction on plain libsqlite3.

For Redis (a private redis-server on a free port, started here) the raw peer is
a plain hiredis loop making the same round trips: HSET + 3 x (HGETALL + HSET)
per transition cycle, RPUSH + LMOVE per route.

The table shows medians and the engine/raw ratio; the target is >= 0.50.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests_py.redis_server import RedisServer  # noqa: E402

BUILD = ROOT / "build" / "bench"


def build() -> Path:
    subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(BUILD),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DPYNENC_CPP_BUILD_BENCH=ON",
            "-DPYNENC_CPP_BUILD_TESTS=OFF",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        ["cmake", "--build", str(BUILD), "-j2", "--target", "backends_bench"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return BUILD / "bench" / "backends_bench"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("-n", type=int, default=5000, help="cycles / ops per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write every run's figures to this file")
    args = parser.parse_args()

    binary = build()
    tmp = tempfile.TemporaryDirectory(prefix="pynenc-bench-redis-")
    server = RedisServer(Path(tmp.name)).start()
    runs: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in range(args.repeats):
        print(
            f"\rrun {r + 1}/{args.repeats} [{'#' * (r + 1):<{args.repeats}}]",
            end="",
            file=sys.stderr,
            flush=True,
        )
        out = subprocess.run(
            [str(binary), str(args.n), str(server.port)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        subprocess.run(
            ["redis-cli", "-p", str(server.port), "FLUSHALL"], check=True, stdout=subprocess.DEVNULL
        )
        for line in out.splitlines():
            row = json.loads(line)
            key = (row["backend"], row["scenario"])
            runs[key]["engine"].append(row["engine"])
            if row["raw"] is not None:
                runs[key]["raw"].append(row["raw"])
    print(file=sys.stderr)
    server.stop()
    tmp.cleanup()

    print(
        f"{'backend':<8} {'scenario':<12} {'engine (median/s)':>18} {'raw (median/s)':>15} "
        f"{'ratio':>6}  target"
    )
    for (backend, scenario), figures in runs.items():
        engine = statistics.median(figures["engine"])
        raw = statistics.median(figures["raw"]) if figures["raw"] else None
        ratio = f"{engine / raw:5.2f}x" if raw else "     -"
        verdict = ("ok" if engine / raw >= 0.5 else "BELOW") if raw else "(no raw peer)"
        raw_text = f"{raw:>15,.0f}" if raw else f"{'-':>15}"
        print(f"{backend:<8} {scenario:<12} {engine:>18,.0f} {raw_text} {ratio}  {verdict}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"n": args.n, "runs": {f"{b}/{s}": v for (b, s), v in runs.items()}}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
