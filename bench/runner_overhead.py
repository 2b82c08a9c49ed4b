"""The runner's own Python-side cost per task, excluding the task body.

Not a test. Run with ``.venv/bin/python bench/runner_overhead.py`` (bench/peers.py
runs it too). For each runner (``CppRunner`` when pynenc-cpp has it, and
pynenc's ``ThreadRunner`` for reference), a fresh process builds a ``cpp_mem``
app (native mode when available) whose runner runs in a thread, then:

* wraps the method the runner calls once per invocation to run it with a timer:
  for ``CppRunner`` on a native orchestrator
  ``CppNativeOrchestrator.run_invocation_to_finish`` (pynenc's
  ``DistributedInvocation.run``, step for step, up to the serialized result, which
  the runner's engine then stores without the GIL; ``run_invocation``, which
  stores it too, on a pynenc-cpp that does not have it), else
  ``DistributedInvocation.run`` (status changes, argument and result
  (de)serialization, result storage, the task call),
* for ``CppRunner``, also wraps ``CppRunner._execute_taken``: everything the
  runner does in Python per invocation the engine took and claimed (building the
  invocation from the claimed record, then the run above), and
* wraps the task's function (``task.func``, what ``run`` calls for the body)
  with a timer,

submits N no-op tasks, reads every result, and reports per task the time in
the run call minus the time in the body: the Python-side overhead of executing one
invocation (the engine calls it makes included). The runner's loop outside the
run call (retrieval, scheduling) is not in this figure (``execute`` adds the
claim's Python for ``CppRunner``); the wall time per task at 2 slots is reported
beside it. The same spans are also
measured in the worker thread's CPU time (``thread CPU``): the work alone,
without the time the thread waited for the GIL while the client or the other
worker held it (the median figure above is wall time, waits included). If a
runner calls neither, the wrapper sees 0 calls and the report says so instead of
printing a figure. For ``CppRunner`` it also reports the CPU time its worker
threads (``pynenc-worker``) used per task in all, engine work included (taking,
claiming, storing the result, waking up), read from /proc: what moving work out
of Python cannot hide.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET_US = 10.0  # issue 14


def _worker_cpu_ns() -> int | None:
    """CPU time so far, in ns, of this process's CppRunner worker threads (the engine
    names them ``pynenc-worker``), from /proc's per-thread schedstat; None when there
    are none (pynenc's own runners' threads have other names) or /proc lacks it."""
    total, found = 0, False
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "pynenc-worker":
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
            found = True
    except OSError:
        return None
    return total if found else None


def measure_one(runner: str, n: int) -> dict[str, Any]:
    """In this process: the per-task figures for ``runner`` on cpp_mem."""
    sys.path.insert(0, str(HERE))
    cfg: dict[str, Any] = {
        "app_id": f"overhead-{runner}-{uuid.uuid4().hex[:6]}",
        "stack": "cpp-mem",
        "mode": "native",
        "runner": runner,
        "sleep": 0.001,
        "status_cache": 0.0,
        "slots": 2,
    }
    os.environ["PEERS_PYNENC"] = json.dumps(cfg)
    from peer_systems import pynenc_app

    if pynenc_app.REASON and "native" in pynenc_app.REASON:
        cfg["mode"] = "mixed"  # native mode not there yet: measure the runner on mixed
        os.environ["PEERS_PYNENC"] = json.dumps(cfg)
        pynenc_app = importlib.reload(pynenc_app)
    if pynenc_app.REASON:
        return {"runner": runner, "status": "skipped", "reason": pynenc_app.REASON}

    from pynenc.invocation.dist_invocation import DistributedInvocation

    app, noop = pynenc_app.app, pynenc_app.noop
    run_ns: list[int] = []
    body_ns: list[int] = []
    run_cpu_ns: list[int] = []  # the same spans in the thread's CPU time
    body_cpu_ns: list[int] = []
    exec_ns: list[int] = []  # CppRunner._execute_taken: the claim's Python + the run

    def timer(orig: Any, wall: list[int], cpu: list[int] | None) -> Any:
        @functools.wraps(orig)
        def timed(*args: Any, **kwargs: Any) -> Any:
            c = time.thread_time_ns()
            t = time.perf_counter_ns()
            try:
                return orig(*args, **kwargs)
            finally:
                wall.append(time.perf_counter_ns() - t)
                if cpu is not None:
                    cpu.append(time.thread_time_ns() - c)

        return timed

    # The run call: the native orchestrator's run_invocation when CppRunner uses it
    # (patching DistributedInvocation.run would send it back to pynenc's run).
    span_owner: Any = DistributedInvocation
    span_name = "run"
    orch_cls = type(app.orchestrator)
    if runner == "cpp":
        # CppRunner's Python part of a run: up to the result's storage, which its
        # engine then makes without the GIL (run_invocation_to_finish), or, where
        # that is not there, the whole run.
        for name in ("run_invocation_to_finish", "run_invocation"):
            if callable(getattr(orch_cls, name, None)):
                span_owner, span_name = orch_cls, name
                break
    setattr(span_owner, span_name, timer(getattr(span_owner, span_name), run_ns, run_cpu_ns))
    runner_cls = type(app.runner)
    if callable(getattr(runner_cls, "_execute_taken", None)):
        runner_cls._execute_taken = timer(runner_cls._execute_taken, exec_ns, None)  # type: ignore[attr-defined]
    # the body: functools.wraps keeps the signature pynenc reads when it binds arguments
    noop.func = timer(noop.func, body_ns, body_cpu_ns)
    thread = threading.Thread(target=app.runner.run, daemon=True)
    thread.start()
    for inv in [noop(-1 - k) for k in range(20)]:  # warm-up
        _ = inv.result
    for samples in (run_ns, body_ns, run_cpu_ns, body_cpu_ns, exec_ns):
        samples.clear()
    cpu0 = _worker_cpu_ns()
    t0 = time.perf_counter()
    invs = [noop(i) for i in range(n)]
    results = [inv.result for inv in invs]
    wall = time.perf_counter() - t0
    cpu1 = _worker_cpu_ns()
    app.runner.stop_runner_loop()
    thread.join(timeout=10)
    out: dict[str, Any] = {
        "runner": runner,
        "runner_class": type(app.runner).__name__,
        "mode": cfg["mode"],
        "status": "ok",
        "n": n,
        "completed": sum(1 for i, r in enumerate(results) if r == i),
        "run_span": f"{getattr(span_owner, '__name__', span_owner)}.{span_name}",
        "run_calls": len(run_ns),
        "body_calls": len(body_ns),
        "wall_us_per_task": 1e6 * wall / n,
    }
    if cpu0 is not None and cpu1 is not None:
        # Everything the runner's worker threads did per task, engine work included
        # (take, claim, the result's storage, their Python): not only the span above.
        out["worker_cpu_us_per_task"] = (cpu1 - cpu0) / n / 1000
    if run_ns and body_ns:
        out["run_us_median"] = statistics.median(run_ns) / 1000
        out["body_us_median"] = statistics.median(body_ns) / 1000
        out["overhead_us_mean"] = (sum(run_ns) - sum(body_ns)) / len(run_ns) / 1000
        out["overhead_us_median"] = out["run_us_median"] - out["body_us_median"]
        if exec_ns:
            out["execute_overhead_us_median"] = (
                statistics.median(exec_ns) - statistics.median(body_ns)
            ) / 1000
        # CPU time of the worker thread over the same spans: the work itself, without
        # the time the thread waited for the GIL (held by the client or the other worker).
        out["overhead_cpu_us_median"] = (
            statistics.median(run_cpu_ns) - statistics.median(body_cpu_ns)
        ) / 1000
    return out


def text(results: list[dict[str, Any]]) -> str:
    lines = [
        "runner overhead per task (cpp_mem, in the runner's run call minus the task body;"
        f" target <= {TARGET_US:g} us for CppRunner):"
    ]
    for r in results:
        name = r.get("runner_class") or r["runner"]
        if r.get("status") != "ok":
            lines.append(f"  {r['runner']}: {r.get('status')}: {r.get('reason') or r.get('error')}")
        elif "overhead_us_median" not in r:
            lines.append(
                f"  {name} ({r['mode']}): {r.get('run_span', 'run')} called {r['run_calls']} times,"
                f" body {r['body_calls']} times: no per-task split; wall {r['wall_us_per_task']:.1f} us/task"
            )
        else:
            verdict = ""
            if r["runner"] == "cpp":
                verdict = " MET" if r["overhead_us_median"] <= TARGET_US else " NOT MET"
            lines.append(
                f"  {name} ({r['mode']}): overhead median {r['overhead_us_median']:.1f} us"
                f" (thread CPU {r.get('overhead_cpu_us_median', float('nan')):.1f} us),"
                f" mean {r['overhead_us_mean']:.1f} us (run {r['run_us_median']:.1f} us,"
                f" body {r['body_us_median']:.2f} us; in {r.get('run_span', 'run')})"
                + (
                    f"; with the claim's Python {r['execute_overhead_us_median']:.1f} us"
                    if "execute_overhead_us_median" in r
                    else ""
                )
                + (
                    f"; workers' CPU (engine included) {r['worker_cpu_us_per_task']:.1f} us/task"
                    if "worker_cpu_us_per_task" in r
                    else ""
                )
                + f"; wall {r['wall_us_per_task']:.1f} us/task"
                f" at 2 slots; {r['completed']}/{r['n']} completed{verdict}"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("-n", type=int, default=2000, help="tasks per runner")
    parser.add_argument("--runners", default="cpp,thread", help="comma-separated: cpp, thread")
    parser.add_argument(
        "--json-stdout", action="store_true", help="print one OVERHEAD-RESULT json line"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        try:
            out = measure_one(args.one, args.n)
        except Exception as exc:  # reported, never hidden
            out = {"runner": args.one, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
        print("ONE-RESULT " + json.dumps(out), flush=True)
        os._exit(0)  # the runner thread is a daemon; do not wait for it
    results = []
    for runner in [r.strip() for r in args.runners.split(",") if r.strip()]:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", runner, "-n", str(args.n)],
            capture_output=True,
            timeout=300,
        )
        line = next(
            (ln for ln in proc.stdout.decode().splitlines() if ln.startswith("ONE-RESULT ")), None
        )
        if line is None:
            err = " | ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-3:])
            results.append({"runner": runner, "status": "error", "error": err})
        else:
            results.append(json.loads(line[len("ONE-RESULT ") :]))
    doc = {"results": results, "text": text(results)}
    if args.json_stdout:
        print("OVERHEAD-RESULT " + json.dumps(doc))
    else:
        print(doc["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
