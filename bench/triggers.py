"""Trigger latency: how long after its event a triggered task is registered.

Not a test. Run with ``.venv/bin/python bench/triggers.py`` (``make bench-triggers``;
``--quick`` watches one cron slot instead of two). Each row serves
``tests_py/trigger_tasks.py`` with two ``pynenc runner start`` processes on one
store, every setting at its default (pynenc's atomic service every 5 minutes):

* **status trigger**: 40 ``order_placed`` calls, one at a time, 50 ms apart; each
  SUCCESS fires one ``send_receipt``. Delay: the receipt's REGISTERED history row
  minus the order's SUCCESS row (both stamped by the store's writers on this
  machine's clock). Receipts not registered within ``--wait`` seconds are counted
  as missed;
* **cron trigger**: ``every_minute`` (``* * * * *``). Delay: its REGISTERED row
  minus the minute slot; a slot watched with no run within it is missed.

Rows: ``cpp-sqlite`` and ``cpp-redis`` (native mode, ``CppRunner`` with its trigger
wake, ``cpp_runner_trigger_wake``), and ``pynenc-sqlite`` (pynenc's own SQLite
backend with ``MultiThreadRunner``: triggers fire on the atomic service).
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests_py.procs import orphan_guard  # noqa: E402
from tests_py.redis_server import RedisServer  # noqa: E402

RUNNERS = 2
WORKERS = 4
ORDERS = 40
GAP_SEC = 0.05

ROWS = ("cpp-sqlite", "cpp-redis", "pynenc-sqlite")


def env_for(row: str, app_id: str, store: str) -> dict[str, str]:
    """``PYNENC__*`` configuration of one row (runners and the measuring child)."""
    env = {"PYNENC__APP_ID": app_id, "PYNENC__LOGGING_LEVEL": "warning"}
    if row == "pynenc-sqlite":
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
    stem = "Sqlite" if row == "cpp-sqlite" else "Redis"
    for kind, cls in (
        ("ORCHESTRATOR", "NativeOrchestrator"),
        ("BROKER", "Broker"),
        ("STATE_BACKEND", "StateBackend"),
        ("CLIENT_DATA_STORE", "ClientDataStore"),
        ("TRIGGER", "Trigger"),
    ):
        env[f"PYNENC__{kind}_CLS"] = f"Cpp{stem}{cls}"
    env.update(
        {
            "PYNENC__RUNNER_CLS": "CppRunner",
            "PYNENC__CPP_RUNNER_WORKERS": str(WORKERS),
            "PYNENC__CPP_NATIVE": "true",
        }
    )
    env["PYNENC__CPP_SQLITE_PATH" if stem == "Sqlite" else "PYNENC__CPP_REDIS_URL"] = store
    return env


def registered_at(app: Any, invocation_id: Any) -> datetime | None:
    for h in app.state_backend.get_history(invocation_id):
        if h.status_record.status.value == "registered":
            return h.status_record.timestamp  # type: ignore[no-any-return]
    return None


def status_at(app: Any, invocation_id: Any, status: str) -> datetime | None:
    for h in app.state_backend.get_history(invocation_id):
        if h.status_record.status.value == status:
            return h.status_record.timestamp  # type: ignore[no-any-return]
    return None


def child(row: str, store: str, where: str, wait_sec: float, slots: int) -> None:
    """In the child: start the runners, measure, print the figures as JSON."""
    os.environ.update(env_for(row, f"trbench-{uuid.uuid4().hex[:8]}", store))
    from tests_py import trigger_tasks as tt

    began = datetime.now(UTC)
    runners = [
        subprocess.Popen(
            [sys.executable, "-m", "pynenc", "--app", "tests_py.trigger_tasks", "runner", "start"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=open(f"{where}/runner{i}.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=orphan_guard(),
        )
        for i in range(RUNNERS)
    ]
    app = tt.app
    try:
        ledger = f"{where}/ledger"
        _ = tt.order_placed(ledger, "warm-up").result  # the runners are up
        orders = {}
        for i in range(ORDERS):
            inv = tt.order_placed(ledger, f"o{i}")
            _ = inv.result
            orders[f"o{i}"] = inv.invocation_id
            time.sleep(GAP_SEC)
        deadline = time.monotonic() + wait_sec
        receipts: dict[str, Any] = {}
        while time.monotonic() < deadline and len(receipts) < len(orders):
            for iid in app.orchestrator.get_existing_invocations(tt.send_receipt):
                tag = app.state_backend.get_invocation(iid).call.arguments.kwargs["tag"]
                receipts[tag] = iid
            time.sleep(0.2)
        status_delays = []
        for tag, order_id in orders.items():
            if tag in receipts:
                done = status_at(app, order_id, "success")
                reg = registered_at(app, receipts[tag])
                if done is not None and reg is not None:
                    status_delays.append((reg - done).total_seconds())
        # Cron: every minute slot that starts 5 s after the runners did and ends
        # before the watch does.
        first = (began + timedelta(seconds=65)).replace(second=0, microsecond=0)
        watched = [first + timedelta(minutes=k) for k in range(slots)]
        while datetime.now(UTC) < watched[-1] + timedelta(seconds=59):
            time.sleep(0.5)
        runs = [
            reg
            for iid in app.orchestrator.get_existing_invocations(tt.every_minute)
            if (reg := registered_at(app, iid)) is not None
        ]
        cron_delays = []
        for slot in watched:
            inside = [
                (r - slot).total_seconds() for r in runs if slot <= r < slot + timedelta(minutes=1)
            ]
            if inside:
                cron_delays.append(min(inside))
        print(
            json.dumps(
                {
                    "status_delays": status_delays,
                    "status_missed": len(orders) - len(status_delays),
                    "cron_delays": cron_delays,
                    "cron_missed": len(watched) - len(cron_delays),
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


def measure(row: str, store: str, where: Path, wait_sec: float, slots: int) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            str(Path(__file__)),
            "--child",
            row,
            store,
            str(where),
            str(wait_sec),
            str(slots),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    (where / "child.log").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise RuntimeError(f"{row} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def pct(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    v = ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return f"{v * 1e3:,.0f} ms" if v < 10 else f"{v:,.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="watch one cron slot")
    parser.add_argument("--slots", type=int, default=2, help="cron slots watched per row")
    parser.add_argument(
        "--wait", type=float, default=60.0, help="how long receipts are waited for (s)"
    )
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        row, store, where, wait_sec, slots = args.child
        child(row, store, where, float(wait_sec), int(slots))
        return
    slots = 1 if args.quick else args.slots
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis").start()
        try:
            for row in args.rows.split(","):
                where = Path(tmp) / row
                where.mkdir()
                store = server.url if row == "cpp-redis" else str(where / "bench.db")
                results[row] = measure(row, store, where, args.wait, slots)
                print(f"{row}: {json.dumps(results[row])[:300]}", flush=True)
        finally:
            server.stop()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(
        f"\nTrigger latency, {RUNNERS} runner processes, default settings, "
        f"{ORDERS} status events, {slots} cron slot(s) per row, {stamp}"
    )
    print(
        "| row | status p50 | status p99 | status missed (> wait) "
        "| cron p50 | cron max | cron slots missed |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row, r in results.items():
        s, c = r["status_delays"], r["cron_delays"]
        print(
            f"| {row} | {pct(s, 0.5)} | {pct(s, 0.99)} | {r['status_missed']} / {ORDERS} "
            f"| {pct(c, 0.5)} | {pct(c, 1.0)} | {r['cron_missed']} / {slots} |"
        )
    base = results.get("pynenc-sqlite")
    if base and base["status_delays"]:
        for row, r in results.items():
            if row != "pynenc-sqlite" and r["status_delays"]:
                ratio = statistics.median(base["status_delays"]) / statistics.median(
                    r["status_delays"]
                )
                print(f"status p50: pynenc-sqlite / {row} = {ratio:,.0f}x")
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    path = results_dir / f"triggers-{stamp}.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nJSON: {path}")


if __name__ == "__main__":
    main()
