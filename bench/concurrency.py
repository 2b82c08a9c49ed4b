"""Running concurrency control under load: overlaps and cost, gated beside ungated.

Not a test. Run with ``.venv/bin/python bench/concurrency.py`` (``make
bench-concurrency``; ``--quick`` for one round). For each durable backend (native
``cpp_sqlite``, ``cpp_redis``), in the same run:

* **overlaps**: two ``pynenc runner start`` processes of 4 ``CppRunner`` workers
  each take 100 calls of ``keyed_order`` (running concurrency by ``sku``, rerouted
  when deferred; each body 20 ms) on ONE key; the ledger the bodies write gives the
  pairs of bodies that overlapped in time (``tests_py/chaos/guarantees.py``) and the
  time from the first call to the last result (serial execution needs >= 2.0 s);
* **cost**: the same two runners drain 1,000 calls of a task with running
  concurrency by key, each call its own key (nothing to defer: the check's cost
  alone), beside 1,000 calls of the same task without control; calls/s each.

Rows: ``gated`` (this package: the check and the status change in one engine
step), ``ungated`` (pynenc's check in Python, acted on in another call, as before
issue 48: ``bench/concurrency_app.py``), and on SQLite ``pynenc`` (pynenc's own
SQLite backend with two ``MultiThreadRunner`` processes). Medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests_py.chaos.guarantees import parse, running_overlaps  # noqa: E402
from tests_py.procs import orphan_guard  # noqa: E402
from tests_py.redis_server import RedisServer  # noqa: E402

WORKERS = 4
RUNNERS = 2
BODY_SEC = 0.02
CALLS = 100
BURST = 1000

STEMS = {"sqlite": "Sqlite", "redis": "Redis"}


def env_for(variant: str, backend: str, app_id: str, store: str) -> dict[str, str]:
    """``PYNENC__*`` configuration of one row's app (runners and this client)."""
    env = {
        "PYNENC__APP_ID": app_id,
        "PYNENC__LOGGING_LEVEL": "warning",
        "PYNENC__RUNNER_LOOP_SLEEP_TIME_SEC": "0.01",
        "PYNENC__INVOCATION_WAIT_RESULTS_SLEEP_TIME_SEC": "0.01",
    }
    if variant == "pynenc":
        env.update(
            {
                "PYNENC__ORCHESTRATOR_CLS": "SQLiteOrchestrator",
                "PYNENC__BROKER_CLS": "SQLiteBroker",
                "PYNENC__STATE_BACKEND_CLS": "SQLiteStateBackend",
                "PYNENC__CLIENT_DATA_STORE_CLS": "SQLiteClientDataStore",
                "PYNENC__TRIGGER_CLS": "SQLiteTrigger",
                "PYNENC__SQLITE_DB_PATH": store,
                "PYNENC__RUNNER_CLS": "MultiThreadRunner",
                "PYNENC__CONFIGMULTITHREADRUNNER__MIN_PROCESSES": "1",
                "PYNENC__CONFIGMULTITHREADRUNNER__MAX_PROCESSES": "1",
                "PYNENC__CONFIGMULTITHREADRUNNER__MAX_THREADS": str(WORKERS),
            }
        )
        return env
    stem = STEMS[backend]
    orchestrator = (
        f"Ungated{stem}Orchestrator" if variant == "ungated" else f"Cpp{stem}NativeOrchestrator"
    )
    env.update(
        {
            "PYNENC__ORCHESTRATOR_CLS": orchestrator,
            "PYNENC__BROKER_CLS": f"Cpp{stem}Broker",
            "PYNENC__STATE_BACKEND_CLS": f"Cpp{stem}StateBackend",
            "PYNENC__CLIENT_DATA_STORE_CLS": f"Cpp{stem}ClientDataStore",
            "PYNENC__TRIGGER_CLS": f"Cpp{stem}Trigger",
            "PYNENC__RUNNER_CLS": "CppRunner",
            "PYNENC__CPP_RUNNER_WORKERS": str(WORKERS),
            "PYNENC__CPP_NATIVE": "true",
        }
    )
    env["PYNENC__CPP_SQLITE_PATH" if backend == "sqlite" else "PYNENC__CPP_REDIS_URL"] = store
    return env


def measure(variant: str, backend: str, store: str, ledger: Path, log: Path) -> dict[str, Any]:
    """One row's round, in a child process of its own (its app is configured from
    the environment, as the runners' are)."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", variant, backend, store, str(ledger)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    log.write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise RuntimeError(f"{variant}/{backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def child(variant: str, backend: str, store: str, ledger: str) -> None:
    """In the child: start the runners, make the calls, print the figures as JSON."""
    app_id = f"ccbench-{uuid.uuid4().hex[:8]}"
    os.environ.update(env_for(variant, backend, app_id, store))
    from bench import concurrency_app as ca

    runners = []
    for i in range(RUNNERS):
        runners.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pynenc",
                    "--app",
                    "bench.concurrency_app",
                    "runner",
                    "start",
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=open(f"{ledger}.runner{i}.log", "ab"),  # noqa: SIM115
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=orphan_guard(),
            )
        )
    try:
        # Overlaps: 100 calls on one key.
        began = time.monotonic()
        invocations = [ca.keyed_order(ledger, "sku-0", f"t{i}", BODY_SEC) for i in range(CALLS)]
        for inv in invocations:
            _ = inv.result
        overlaps_sec = time.monotonic() - began
        overlaps = len(running_overlaps(parse(Path(ledger))))
        # Cost: each call its own key (no deferral), beside the same task uncontrolled.
        rates = {}
        for name, task in (("controlled", ca.keyed_noop), ("free", ca.free_noop)):
            began = time.monotonic()
            burst = [task(f"k{i}") for i in range(BURST)]
            for inv in burst:
                _ = inv.result
            rates[name] = BURST / (time.monotonic() - began)
        print(
            json.dumps(
                {
                    "overlaps": overlaps,
                    "overlap_run_sec": overlaps_sec,
                    "controlled_per_sec": rates["controlled"],
                    "free_per_sec": rates["free"],
                }
            )
        )
    finally:
        for r in runners:
            try:
                os.killpg(r.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            r.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    rounds = 1 if args.quick else args.rounds
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    plan = [
        ("sqlite", "gated"),
        ("sqlite", "ungated"),
        ("sqlite", "pynenc"),
        ("redis", "gated"),
        ("redis", "ungated"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis").start()
        try:
            for r in range(rounds):
                for backend, variant in plan:  # rounds alternate the rows
                    where = Path(tmp) / f"{backend}-{variant}-{r}"
                    where.mkdir()
                    store = str(where / "bench.db") if backend == "sqlite" else server.url
                    result = measure(variant, backend, store, where / "ledger", where / "log")
                    rows.setdefault((backend, variant), []).append(result)
                    print(f"round {r + 1} {backend:6} {variant:8} {result}", flush=True)
        finally:
            server.stop()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(
        f"\nRunning concurrency control, {RUNNERS} runner processes x {WORKERS} workers, "
        f"medians of {rounds} round(s), {stamp}"
    )
    print(
        "| backend | row | overlapping pairs / 100 calls on one key | time (>= 2.0 s serial) "
        "| controlled calls/s | uncontrolled calls/s | controlled / uncontrolled |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for (backend, variant), results in rows.items():

        def med(key: str, results: list[dict[str, Any]] = results) -> float:
            return statistics.median(r[key] for r in results)

        print(
            f"| {backend} | {variant} | {med('overlaps'):.0f} | {med('overlap_run_sec'):.2f} s "
            f"| {med('controlled_per_sec'):,.0f} | {med('free_per_sec'):,.0f} "
            f"| {med('controlled_per_sec') / med('free_per_sec'):.2f} |"
        )
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    path = results_dir / f"concurrency-{stamp}.json"
    path.write_text(json.dumps({f"{b}/{v}": res for (b, v), res in rows.items()}, indent=1) + "\n")
    print(f"\nJSON: {path}")


if __name__ == "__main__":
    main()
