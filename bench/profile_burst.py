"""Where a burst's time goes, in both processes of it (issue 14's "find the time").

Not a test. ``make profile`` installs py-spy into .venv and runs this; or
``.venv/bin/python bench/profile_burst.py [--stack cpp-redis] [--mode native] [--n 3000]``.

One client process submits N no-op tasks (``bench/peer_systems/pynenc_app.py``,
the same app as ``bench/peers.py``) and reads every result, while one runner
process (``CppRunner``, 2 workers) runs them, against a private redis-server (or
SQLite file). Measured over the burst only (after a warm-up):

* **Round trips per task** on Redis, in a first burst with no sampler: a MONITOR
  connection counts the commands clients send (a script call is one) apart from
  the commands scripts run inside Redis.
* **CPU per task** of the client, the runner and redis-server, same burst (psutil:
  user + system time over the burst, divided by N): what a 2-core machine pays;
  on Redis again in a burst with no MONITOR (which makes redis-server format and
  send every command it runs, several times its own work).
* **Context switches per task** of each process, same burst (and on Redis the
  plain one), by thread name (``/proc/<pid>/task/*/status``): how often its
  threads block and wake (GIL hand-offs, round trips, wake-ups).
* **GIL acquisitions per task** in each process, same burst:
  ``_core.gil_handovers()`` before and after (engine calls that released the GIL
  and took it back, and engine threads that took it to run Python).
* **py-spy** on both processes, second burst (``--gil --native``: only the thread
  holding the GIL is sampled, C++ frames included, so the profile is where the
  GIL's time goes, the one resource a process's threads share; engine calls made
  with the GIL released do not appear): the top entries by own and by inclusive
  samples, per process.
* **perf** (``--perf``), third burst, both processes (and redis-server): the top symbols by own
  on-CPU time.

Each burst runs in fresh processes against a fresh redis-server.

Raw profiles go to ``bench/results/profile-<stack>-<mode>-<ts>/`` (not committed).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
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
sys.path.insert(0, str(HERE))

from peers import start_redis  # noqa: E402

# --------------------------------------------------------------------- child side


def _gil() -> dict[str, int]:
    from pynenc_cpp import _core

    return dict(_core.gil_handovers())


def _lock_waits() -> dict[str, int]:
    """SQLite's busy-handler pauses so far in this process (lock contention)."""
    from pynenc_cpp import _core

    m = _core.engine_metrics()
    return {"waits": int(m["sqlite_busy_waits"]), "us": int(m["sqlite_busy_wait_us"])}


def client_main(n: int) -> int:
    """Warm up, say READY, wait for GO on stdin, run the burst, print its figures."""
    if os.environ.get("PROFILE_BURST_NO_READ_AHEAD"):  # --no-read-ahead: the A/B
        from pynenc_cpp.native import CppRedisNativeOrchestrator

        CppRedisNativeOrchestrator._reads_ahead = False
    from peer_systems.pynenc_app import noop

    warm = [noop(-1 - k) for k in range(20)]
    if [h.result for h in warm] != [-1 - k for k in range(20)]:
        return 1
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 1
    gil0, waits0 = _gil(), _lock_waits()
    t0 = time.perf_counter()
    handles = [noop(i) for i in range(n)]
    t1 = time.perf_counter()
    results = [h.result for h in handles]
    t2 = time.perf_counter()
    gil1, waits1 = _gil(), _lock_waits()
    out = {
        "n": n,
        "completed": sum(1 for i, r in enumerate(results) if r == i),
        "submit_per_s": n / (t1 - t0),
        "done_per_s": n / (t2 - t0),
        "gil": {k: gil1[k] - gil0[k] for k in gil0},
        "lock_waits": {k: waits1[k] - waits0[k] for k in waits0},
    }
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def worker_main() -> int:
    """The runner; on SIGTERM (graceful stop) prints its GIL counts since start."""
    from peer_systems.pynenc_app import app

    if os.environ.get("PROFILE_BURST_NO_TAKE_AHEAD"):  # --no-take-ahead: the A/B
        app.runner.conf.cpp_runner_take_ahead = False
    gil0, waits0 = _gil(), _lock_waits()
    app.runner.run()
    gil1, waits1 = _gil(), _lock_waits()
    print("GIL " + json.dumps({k: gil1[k] - gil0[k] for k in gil0}), flush=True)
    print("WAITS " + json.dumps({k: waits1[k] - waits0[k] for k in waits0}), flush=True)
    engine = getattr(app.runner, "_engine", None)
    print("AHEAD " + json.dumps({"taken_ahead": getattr(engine, "taken_ahead", 0)}), flush=True)
    return 0


# -------------------------------------------------------------------- parent side


def _frame(raw: str) -> str:
    """``func (file:line)`` -> ``func (file)``: one entry per function."""
    name, sep, where = raw.partition(" (")
    return f"{name} ({where.rstrip(')').split(':')[0]})" if sep else name


def _top_from_collapsed(
    path: Path, k: int = 15
) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """(total samples, top own, top inclusive) of a py-spy ``--format raw`` file."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        c = int(count)
        total += c
        frames = [_frame(f) for f in stack.split(";")[1:]]
        if not frames:
            continue
        own[frames[-1]] += c
        for f in set(frames):
            incl[f] += c
    return total, own.most_common(k), incl.most_common(k)


def _render_top(title: str, path: Path) -> str:
    if not path.exists() or path.stat().st_size == 0:
        return f"{title}: no profile ({path.name} missing)\n"
    total, own, incl = _top_from_collapsed(path)
    lines = [f"{title}: {total} samples", "  own:"]
    lines += [f"    {100 * c / total:5.1f}%  {name}" for name, c in own]
    lines.append("  inclusive:")
    lines += [f"    {100 * c / total:5.1f}%  {name}" for name, c in incl]
    return "\n".join(lines) + "\n"


class _Monitor:
    """Counts, over a MONITOR connection, the commands clients send (round trips; a
    script call is one) apart from the commands scripts run inside Redis.
    ``bench/redis_server_cost.py`` records the lines instead (``on_lines``)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
        self.client: collections.Counter[str] = collections.Counter()
        self.scripted: collections.Counter[str] = collections.Counter()
        self.counting = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buf = b""
        self.sock.settimeout(None)
        while True:
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\r\n")
            self.on_lines(lines)

    def on_lines(self, lines: list[bytes]) -> None:
        """What the connection read, whole lines (the reader thread)."""
        for line in lines:
            if not self.counting or not line.startswith(b"+") or b'"' not in line:
                continue
            head, _, rest = line.partition(b' "')
            name = rest.split(b'"', 1)[0].decode(errors="replace").lower()
            (self.scripted if b"lua]" in head else self.client)[name] += 1

    def close(self) -> None:
        self.sock.close()


def burst(args: argparse.Namespace, how: str, out_dir: Path) -> dict[str, Any]:
    """One burst in fresh processes; ``how``: "count" (MONITOR, no sampler), "plain"
    (neither), "py-spy" or "perf" (samplers attached to the processes over the burst
    only)."""
    tmp = Path(tempfile.mkdtemp(prefix="profile-burst-"))
    redis = start_redis(tmp / "redis")
    cfg = {
        "app_id": f"profile-{uuid.uuid4().hex[:6]}",
        "stack": args.stack,
        "mode": args.mode,
        "runner": "cpp",
        "url": redis.url,
        "path": str(tmp / "app.db"),
        "sleep": 0.01,
        "status_cache": 0.0,
        "slots": 2,
    }
    env = {**os.environ, "PEERS_PYNENC": json.dumps(cfg), "PYTHONPATH": str(HERE)}
    me = [sys.executable, str(Path(__file__).resolve())]
    worker_log = open(out_dir / f"worker-{how}.log", "w")
    worker = subprocess.Popen(
        [*me, "_worker"], env=env, stdout=worker_log, stderr=subprocess.STDOUT
    )
    client = subprocess.Popen(
        [*me, "_client", str(args.n)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    samplers: list[subprocess.Popen[bytes]] = []
    monitor = _Monitor(redis.port) if how == "count" and args.stack == "cpp-redis" else None
    result: dict[str, Any] = {}
    try:
        assert client.stdout is not None and client.stdin is not None
        if client.stdout.readline().strip() != "READY":
            raise RuntimeError(f"client did not warm up; see {worker_log.name}")
        if how == "py-spy":
            for name, pid in (("client", client.pid), ("runner", worker.pid)):
                cmd = [args.py_spy, "record", "--native", "--gil", "--rate", str(args.rate), "--format", "raw",
                       "-o", str(out_dir / f"{name}.pyspy.txt"), "--pid", str(pid)]  # fmt: skip
                samplers.append(
                    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
        if how == "perf":
            targets = [("client", client.pid), ("runner", worker.pid)]
            if args.stack == "cpp-redis" and redis.proc is not None:
                targets.append(("redis-server", redis.proc.pid))
            for name, pid in targets:
                cmd = [args.perf_bin, "record", "-F", "999", "-o", str(out_dir / f"{name}.perf.data"),
                       "-p", str(pid)]  # fmt: skip
                samplers.append(
                    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
        time.sleep(1.5)  # samplers attached, warm-up traffic over
        if monitor is not None:
            monitor.counting = True
        procs = {"client": client.pid, "runner": worker.pid}
        if args.stack == "cpp-redis" and redis.proc is not None:
            procs["redis-server"] = redis.proc.pid
        stats = how == "plain" and args.stack == "cpp-redis"
        if stats:
            _redis_cli(redis.port, "CONFIG", "RESETSTAT")
        cpu0, sw0 = _cpu(procs), _switches(procs)
        client.stdin.write("GO\n")
        client.stdin.flush()
        for line in client.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
                break
        cpu1, sw1 = _cpu(procs), _switches(procs)
        result["switches_per_task"] = _switch_delta(sw0, sw1, args.n)
        result["cpu_us_per_task"] = {
            k: 1e6 * (cpu1[k] - cpu0[k]) / args.n for k in procs if k in cpu0 and k in cpu1
        }
        if stats:
            result["commandstats"] = _commandstats(_redis_cli(redis.port, "INFO", "commandstats"))
        time.sleep(0.2)  # the MONITOR stream catches up
        if monitor is not None:
            monitor.counting = False
            result["client_commands"] = dict(monitor.client)
            result["scripted_commands"] = dict(monitor.scripted)
        for s in samplers:
            s.send_signal(signal.SIGINT)
        for s in samplers:
            s.wait(timeout=60)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    finally:
        if monitor is not None:
            monitor.close()
        for p in (client, worker, *samplers):
            if p.poll() is None:
                p.kill()
        worker_log.close()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for line in Path(worker_log.name).read_text(errors="replace").splitlines():
        if line.startswith("GIL "):
            result["runner_gil"] = json.loads(line[4:])
        if line.startswith("WAITS "):
            result["runner_lock_waits"] = json.loads(line[6:])
        if line.startswith("AHEAD "):
            result["taken_ahead"] = json.loads(line[6:])["taken_ahead"]
    return result


def _redis_cli(port: int, *args: str) -> str:
    """One command through Debian's redis-cli (installed with redis-server)."""
    cmd = ["redis-cli", "-p", str(port), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout


def _commandstats(info: str) -> dict[str, tuple[int, int]]:
    """``INFO commandstats`` as {command: (calls, usec)}; a script's commands are
    counted under their own names, and their time inside the script's too."""
    out: dict[str, tuple[int, int]] = {}
    for line in info.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, fields = line[len("cmdstat_") :].partition(":")
        kv = dict(f.split("=", 1) for f in fields.split(","))
        out[name] = (int(kv["calls"]), int(kv["usec"]))
    return out


def _render_commandstats(stats: dict[str, tuple[int, int]], n: int) -> str:
    """Per task: calls and microseconds of each command (scripts' own time apart)."""
    scripts = {"evalsha", "eval", "fcall"}
    top = sorted(stats.items(), key=lambda kv: -kv[1][1])
    script_us = sum(us for name, (_, us) in stats.items() if name in scripts)
    inner_us = sum(us for name, (_, us) in stats.items() if name not in scripts)
    lines = [
        f"redis-server time per task (INFO commandstats, plain burst): scripts {script_us / n:.1f} us "
        f"of which commands run inside them and plain commands {inner_us / n:.1f} us"
    ]
    for name, (calls, us) in top[:14]:
        lines.append(f"  {name:<16} {calls / n:6.2f} calls  {us / n:7.1f} us")
    return "\n".join(lines)


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each named process."""
    import psutil

    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        out[name] = t.user + t.system
    return out


def _switches(pids: dict[str, int]) -> dict[str, dict[str, int]]:
    """Context switches (voluntary + involuntary) so far of each named process, by
    thread name (``/proc/<pid>/task/<tid>``; threads of one name summed)."""
    out: dict[str, dict[str, int]] = {}
    for name, pid in pids.items():
        threads: dict[str, int] = {}
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                comm = (task / "comm").read_text().strip()
                status = (task / "status").read_text()
            except OSError:
                continue  # the thread ended
            n = sum(
                int(line.split()[1])
                for line in status.splitlines()
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
            )
            threads[comm] = threads.get(comm, 0) + n
        out[name] = threads
    return out


def _switch_delta(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], n: int
) -> str:
    """Context switches per task of each process over a burst, its busiest threads
    named (a thread that started during the burst counts from 0)."""
    parts = []
    for name, threads in after.items():
        old = before.get(name, {})
        per = {t: (v - old.get(t, 0)) / n for t, v in threads.items()}
        busy = ", ".join(
            f"{t} {v:.2f}" for t, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.05
        )
        parts.append(f"{name} {sum(per.values()):.2f} ({busy})")
    return "; ".join(parts)


def _per_task(counts: dict[str, int], n: int) -> str:
    per = {k: v / n for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if v / n >= 0.005}
    return (
        f"{sum(counts.values()) / n:.2f} ("
        + ", ".join(f"{k} {v:.2f}" for k, v in per.items())
        + ")"
    )


def _perf_top(perf: str, data: Path, k: int = 20) -> str:
    rep = subprocess.run(
        [perf, "report", "-i", str(data), "--stdio", "--no-children", "-g", "none",
         "--sort", "dso,symbol", "--percent-limit", "0.8"],  # fmt: skip
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    rows = [
        " ".join(ln.split())
        for ln in rep.stdout.splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    return "\n".join("    " + r for r in rows[:k])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_client"]:
        return client_main(int(argv[1]))
    if argv[:1] == ["_worker"]:
        return worker_main()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--stack", default="cpp-redis", choices=("cpp-redis", "cpp-sqlite"))
    parser.add_argument("--mode", default="native", choices=("native", "mixed"))
    parser.add_argument("--n", type=int, default=3000, help="tasks in each burst")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument(
        "--perf", action="store_true", help="also a burst under perf (both processes)"
    )
    parser.add_argument("--no-py-spy", action="store_true", help="counts only (no sampling)")
    parser.add_argument(
        "--no-read-ahead",
        action="store_true",
        help="the client reads each result on its own (the status reads' read-ahead off)",
    )
    parser.add_argument(
        "--no-take-ahead",
        action="store_true",
        help="the runner's finishes take nothing ahead (cpp_runner_take_ahead off)",
    )
    args = parser.parse_args(argv)
    if args.no_read_ahead:
        os.environ["PROFILE_BURST_NO_READ_AHEAD"] = "1"
    if args.no_take_ahead:
        os.environ["PROFILE_BURST_NO_TAKE_AHEAD"] = "1"

    args.py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which(
        "py-spy"
    )
    if not args.no_py_spy and args.py_spy is None:
        print("py-spy not found: `make profile` installs it (.venv/bin/pip install py-spy)")
        return 2
    args.perf_bin = shutil.which("perf") if args.perf else None
    if args.perf and args.perf_bin is None:
        print("perf not found: apt-get install linux-perf")
        return 2

    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = HERE / "results" / f"profile-{args.stack}-{args.mode}-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    n = args.n
    counted = burst(args, "count", out_dir)
    report = [
        f"profile_burst: {args.stack} {args.mode}, CppRunner 2 workers, N={n} per burst, {os.cpu_count()} CPUs",
        f"unsampled burst: submit {counted.get('submit_per_s', 0):,.0f}/s, done {counted.get('done_per_s', 0):,.0f}/s, "
        f"{counted.get('completed')} of {n} correct"
        + (" (MONITOR attached: slower than bench/peers.py)" if args.stack == "cpp-redis" else ""),
    ]
    cpu = counted.get("cpu_us_per_task", {})
    report.append(
        "CPU per task (user + system, unsampled burst"
        + (", MONITOR attached" if args.stack == "cpp-redis" else "")
        + "): "
        + ", ".join(f"{k} {v:.0f} us" for k, v in cpu.items())
    )
    if args.stack != "cpp-redis":  # on Redis: from the plain burst below
        report.append(
            "context switches per task (by thread name): " + counted.get("switches_per_task", "")
        )
    if args.stack == "cpp-redis":  # MONITOR makes redis-server format every command
        plain = burst(args, "plain", out_dir)
        report.append(
            f"plain burst (no MONITOR, no sampler): submit {plain.get('submit_per_s', 0):,.0f}/s, "
            f"done {plain.get('done_per_s', 0):,.0f}/s; CPU per task: "
            + ", ".join(f"{k} {v:.0f} us" for k, v in plain.get("cpu_us_per_task", {}).items())
            + f"; invocations the runner's finishes took ahead: {plain.get('taken_ahead', 0)}"
        )
        report.append(
            "context switches per task, plain burst (by thread name): "
            + plain.get("switches_per_task", "")
        )
        if "commandstats" in plain:
            report.append(_render_commandstats(plain["commandstats"], n))
    if "client_commands" in counted:
        report.append(
            "redis commands sent per task, both processes (a script call is one; the "
            "commands of one pipeline, such as a finish and its take ahead, are one round "
            "trip between them): " + _per_task(counted["client_commands"], n)
        )
        report.append(
            "redis commands run inside scripts per task: "
            + _per_task(counted["scripted_commands"], n)
        )
    gil, rgil = counted.get("gil", {}), counted.get("runner_gil", {})
    report.append(
        "GIL acquisitions per task: client "
        + ", ".join(f"{k} {v / n:.2f}" for k, v in gil.items())
        + "; runner (warm-up's 20 included) "
        + ", ".join(f"{k} {v / (n + 20):.2f}" for k, v in rgil.items())
    )
    waits, rwaits = counted.get("lock_waits", {}), counted.get("runner_lock_waits", {})
    if waits.get("waits") or rwaits.get("waits"):
        report.append(
            "SQLite lock waits per task (busy-handler pauses, us slept): client "
            f"{waits.get('waits', 0) / n:.2f} ({waits.get('us', 0) / n:.0f} us); runner "
            f"{rwaits.get('waits', 0) / n:.2f} ({rwaits.get('us', 0) / n:.0f} us)"
        )
    report.append("")
    if not args.no_py_spy:
        sampled = burst(args, "py-spy", out_dir)
        report.append(
            f"py-spy burst ({args.rate} Hz, --gil --native): done {sampled.get('done_per_s', 0):,.0f}/s"
        )
        report.append("(--gil: only the thread holding the GIL is sampled)")
        report.append(_render_top("client (py-spy)", out_dir / "client.pyspy.txt"))
        report.append(_render_top("runner (py-spy)", out_dir / "runner.pyspy.txt"))
    if args.perf_bin is not None:
        perfed = burst(args, "perf", out_dir)
        report.append(
            f"perf burst (999 Hz, on-CPU only): done {perfed.get('done_per_s', 0):,.0f}/s"
        )
        for name in ("client", "runner", "redis-server"):
            if not (out_dir / f"{name}.perf.data").exists():
                continue
            report.append(
                f"{name} (perf, own time):\n"
                + _perf_top(args.perf_bin, out_dir / f"{name}.perf.data")
            )
    text = "\n".join(report)
    (out_dir / "report.txt").write_text(text + "\n")
    print(text)
    print(f"\nraw profiles: {out_dir.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
