"""Where a pynenc-cpp task's time goes: cProfile of the submit and run paths.

Not a test. Run with ``.venv/bin/python bench/profile_paths.py --stack cpp-redis``
(cpp-mem, cpp-sqlite, cpp-redis; a private redis-server is started for
cpp-redis). Everything runs in this one thread, so cProfile sees all of it:

* submit: N calls of ``noop(i)`` (what a client does per task);
* run: the runner's per-task work without its threads: take the invocations to
  run from the orchestrator (``get_invocations_to_run``, as pynenc's runners do)
  and call ``DistributedInvocation.run`` on each (PENDING -> RUNNING -> task ->
  SUCCESS + result).

Prints the top functions by own time (tottime) for each path, and the time per
task.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--stack", default="cpp-redis", choices=("cpp-mem", "cpp-sqlite", "cpp-redis")
    )
    parser.add_argument("--mode", default="mixed", choices=("mixed", "native"))
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pynenc-profile-"))
    redis = None
    cfg = {
        "app_id": f"profile-{uuid.uuid4().hex[:6]}",
        "stack": args.stack,
        "mode": args.mode,
        "runner": "thread",
        "path": str(tmp / "profile.db"),
        "status_cache": 0.0,
    }
    if args.stack == "cpp-redis":
        sys.path.insert(0, str(HERE.parent))
        from tests_py.redis_server import RedisServer

        redis = RedisServer(tmp / "redis").start()
        cfg["url"] = redis.url
    os.environ["PEERS_PYNENC"] = json.dumps(cfg)
    sys.path.insert(0, str(HERE))
    try:
        from peer_systems import pynenc_app

        if pynenc_app.REASON:
            print(f"cannot profile {args.stack} ({args.mode}): {pynenc_app.REASON}")
            return 1
        app, noop = pynenc_app.app, pynenc_app.noop
        ctx = app.runner.runner_context
        for k in range(10):  # warm-up: submitted here, run by _drain
            noop(-1 - k)
        _drain(app, ctx)

        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        invs = [noop(i) for i in range(args.n)]
        prof.disable()
        submit_s = time.perf_counter() - t
        _report("submit path", prof, submit_s, args.n, args.top)

        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        ran = _drain(app, ctx)
        prof.disable()
        run_s = time.perf_counter() - t
        _report("run path", prof, run_s, ran, args.top)
        assert all(inv.result == i for i, inv in enumerate(invs)), "a result is missing"
    finally:
        if redis is not None:
            redis.stop()
    return 0


def _drain(app, ctx) -> int:  # type: ignore[no-untyped-def]
    """Run every routed invocation in this thread, as a runner would."""
    ran = 0
    while True:
        batch = list(app.orchestrator.get_invocations_to_run(64, ctx))
        if not batch:
            return ran
        for inv in batch:
            inv.run(ctx)
            ran += 1


def _report(title: str, prof: cProfile.Profile, seconds: float, n: int, top: int) -> None:
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).sort_stats("tottime")
    stats.print_stats(top)
    print(
        f"== {title}: {n} tasks in {seconds:.3f} s = {1e6 * seconds / max(n, 1):.0f} us/task (under cProfile)"
    )
    lines = out.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    for ln in lines[start : start + top + 1]:
        print(
            ln.replace(str(HERE.parent) + "/", "").replace(
                sys.prefix + "/lib/python3.12/site-packages/", ""
            )
        )
    print()


if __name__ == "__main__":
    sys.exit(main())
