"""Actor benchmark (issue 7 targets), real processes on loopback, peers side by side.

pynenc-cpp (``bench/actor_node.py`` children) and, when its virtualenv exists
(``scripts/bench_setup.sh`` makes ``.venv-bench-casty``), casty
(``bench/peer_systems/casty_node.py``):

1. **ask**: a client node asks a singleton on a server node (another process) and
   waits for the reply, one ask at a time: round-trip p50 / p99.
2. **failover**: a client streams asks (0.5 s timeout each) to the singleton while
   the node running it is SIGKILLed; the time from the kill to the first reply
   served by another node, over ``--trials`` kills (the killed node is restarted
   between trials). Heartbeat 100 ms, suspect timeout 300 ms.
3. **handover**: the same with SIGTERM (a graceful shutdown): from the signal to the
   first reply served by the new owner.

Targets: ask p50 <= 0.5 ms; failover p99 <= 1.5 s over >= 20 trials; handover
<= 200 ms. Prints medians, p99 and ratios (to the targets and to the peer), and
writes the JSON to bench/results/.

    .venv/bin/python bench/actors.py [--trials 20] [--asks 2000]
    .venv/bin/python bench/actors.py --quick        # a short smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NODE = Path(__file__).with_name("actor_node.py")
CASTY_NODE = Path(__file__).parent / "peer_systems" / "casty_node.py"
CASTY_PY = ROOT / ".venv-bench-casty" / "bin" / "python"
ASK_P50_TARGET_MS = 0.5
FAILOVER_P99_TARGET_MS = 1500.0
HANDOVER_TARGET_MS = 200.0


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[str]
    port: int


@dataclass
class Cluster:
    """Processes of one system under test; `node_cmd` builds a node's command line."""

    python: str
    script: Path
    root: Path
    extra: list[str] = field(default_factory=list)
    procs: dict[str, Proc] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def start(self, name: str, role: str, seeds: list[str], *args: str) -> Proc:
        port = self.ports.setdefault(name, free_port())
        cmd = [
            self.python,
            str(self.script),
            "--role",
            role,
            "--name",
            name,
            "--port",
            str(port),
            "--seeds",
            ",".join(seeds),
            *self.extra,
            *args,
        ]
        with open(self.root / f"{name}.stderr", "a") as err:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if not line.startswith("READY"):
            raise RuntimeError(
                f"{name}: {line!r}: {(self.root / f'{name}.stderr').read_text()[-2000:]}"
            )
        proc = Proc(name, p, port)
        self.procs[name] = proc
        return proc

    def seeds(self, names: list[str]) -> list[str]:
        return [f"127.0.0.1:{self.ports[n]}" for n in names if n in self.ports]

    def close(self) -> None:
        for p in self.procs.values():
            if p.popen.poll() is None:
                os.kill(p.popen.pid, signal.SIGKILL)
            p.popen.wait()


def read_replies(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    except FileNotFoundError:
        pass
    return out


def wait_for(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(0.01)


def measure_ask(python: str, script: Path, extra: list[str], asks: int) -> list[float]:
    with tempfile.TemporaryDirectory() as d:
        c = Cluster(python, script, Path(d), extra)
        try:
            c.start("server-0", "server", [])
            time.sleep(0.05)
            out = Path(d) / "latency.json"
            client = c.start(
                "client",
                "client",
                c.seeds(["server-0"]),
                "--mode",
                "latency",
                "--asks",
                str(asks),
                "--out",
                str(out),
            )
            wait_for(out.exists, 120, "latency results")
            time.sleep(0.05)
            rtts = json.loads(out.read_text())["rtts_us"]
            client.popen.send_signal(signal.SIGTERM)
            return [r / 1000.0 for r in rtts]
        finally:
            c.close()


def measure_failover(
    python: str, script: Path, extra: list[str], trials: int, sig: signal.Signals
) -> list[float]:
    """Each trial: signal the node that answers, time to the first answer from another."""
    results: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        c = Cluster(python, script, Path(d), extra)
        servers = ["server-0", "server-1", "server-2"]
        try:
            for s in servers:
                c.start(s, "server", c.seeds(servers))
                time.sleep(0.03)  # join order: server-0 is the oldest
            out = Path(d) / "stream.jsonl"
            c.start("client", "client", c.seeds(servers), "--mode", "stream", "--out", str(out))
            wait_for(lambda: len(read_replies(out)) > 20, 60, "the stream starts")
            for _ in range(trials):
                time.sleep(0.5)  # steady state
                owner = read_replies(out)[-1]["node"]
                t0 = now_ms()
                c.procs[owner].popen.send_signal(sig)

                def moved(t0: float = t0, owner: str = owner) -> float | None:
                    for r in read_replies(out):
                        if r["mono_ms"] > t0 and r["node"] != owner:
                            return r["mono_ms"] - t0
                    return None

                results.append(wait_for(moved, 60, f"a new owner after {sig.name}"))
                c.procs[owner].popen.wait(timeout=60)
                c.start(owner, "server", c.seeds([s for s in servers if s != owner]))
            c.procs["client"].popen.send_signal(signal.SIGTERM)
        finally:
            c.close()
    return results


def summarize(name: str, values: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values),
    }
    if len(values) <= 200:  # the per-trial figures (failover, handover) go into the JSON
        out["samples_ms"] = [round(v, 3) for v in values]
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--asks", type=int, default=2000)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-peers", action="store_true")
    a = p.parse_args()
    if a.quick:
        a.trials, a.asks = 3, 300
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as d:
        ours = [sys.executable, NODE, ["--generation-source", f"sqlite://{d}/generations.db"]]
        systems = {"pynenc-cpp": ours}
        if not a.no_peers and CASTY_PY.exists() and CASTY_NODE.exists():
            systems["casty"] = [str(CASTY_PY), CASTY_NODE, []]
        elif not a.no_peers:
            print("casty: not measured (run scripts/bench_setup.sh to make .venv-bench-casty)")
        for name, (python, script, extra) in systems.items():
            r: dict[str, Any] = {}
            r["ask_ms"] = summarize("ask", measure_ask(python, script, extra, a.asks))
            r["failover_ms"] = summarize(
                "failover", measure_failover(python, script, extra, a.trials, signal.SIGKILL)
            )
            r["handover_ms"] = summarize(
                "handover", measure_failover(python, script, extra, a.trials, signal.SIGTERM)
            )
            results[name] = r
            print(
                f"{name}: ask p50 {r['ask_ms']['p50']:.3f} ms p99 {r['ask_ms']['p99']:.3f} ms; "
                f"failover p50 {r['failover_ms']['p50']:.0f} ms p99 {r['failover_ms']['p99']:.0f} ms; "
                f"handover p50 {r['handover_ms']['p50']:.0f} ms p99 {r['handover_ms']['p99']:.0f} ms",
                flush=True,
            )
    ours_r = results["pynenc-cpp"]
    print()
    print(
        f"{'metric':28} {'pynenc-cpp':>12} {'target':>10} {'vs target':>10}"
        + ("".join(f" {n:>12} {'ratio':>8}" for n in results if n != "pynenc-cpp"))
    )
    rows = [
        ("ask round trip p50 (ms)", "ask_ms", "p50", ASK_P50_TARGET_MS),
        ("ask round trip p99 (ms)", "ask_ms", "p99", None),
        ("failover p50 (ms)", "failover_ms", "p50", None),
        ("failover p99 (ms)", "failover_ms", "p99", FAILOVER_P99_TARGET_MS),
        ("graceful handover p50 (ms)", "handover_ms", "p50", HANDOVER_TARGET_MS),
        ("graceful handover p99 (ms)", "handover_ms", "p99", None),
    ]
    for label, key, stat, target in rows:
        v = ours_r[key][stat]
        line = f"{label:28} {v:12.3f} {target if target else '-':>10} "
        line += f"{v / target:9.2f}x" if target else f"{'-':>10}"
        for n, r in results.items():
            if n == "pynenc-cpp":
                continue
            pv = r[key][stat]
            line += f" {pv:12.3f} {v / pv if pv else float('nan'):7.2f}x"
        print(line)
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"actors-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"trials": a.trials, "asks": a.asks, "results": results}, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
