"""Real-process cluster harness shared by the fault tests and bench/cluster_failover.py.

``LocalCluster`` starts ``node_proc.py`` children on loopback (the first on an
ephemeral port, the others seeded with every address started before them), and
reads back their work logs, event logs, status files and activation logs. Its
``close()`` kills every child (SIGCONT first, then SIGKILL) and is safe to call
twice; use it as a context manager or from a fixture finalizer.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests_py.sqlite_locks import sqlite_write_locked

NODE_PROC = Path(__file__).with_name("node_proc.py")
REPO_ROOT = Path(__file__).resolve().parents[2]


def now_ms() -> float:
    """CLOCK_MONOTONIC in ms, the clock of every log."""
    return time.monotonic() * 1000.0


def wait_for[T](
    predicate: Callable[[], T], timeout: float, interval: float = 0.02, what: str = "condition"
) -> T:
    """Polls ``predicate`` until it returns a truthy value; raises TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete JSON lines of ``path`` (a torn last line, if any, is ignored)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


@dataclass
class NodeProc:
    name: str
    proc: subprocess.Popen[str]
    dir: Path
    address: str = ""
    node_id: str = ""
    paused: bool = False
    killed: bool = False

    @property
    def work_log(self) -> Path:
        return self.dir / "work.jsonl"

    @property
    def events_log(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def activation_log(self) -> Path:
        return self.dir / "activation.jsonl"

    @property
    def status_file(self) -> Path:
        return self.dir / "status.json"

    def work(self) -> list[dict[str, Any]]:
        return read_jsonl(self.work_log)

    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.events_log)

    def activations(self) -> list[dict[str, Any]]:
        return read_jsonl(self.activation_log)

    def status(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.status_file.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def running_work(self) -> bool:
        """True if this node's last work record is a start (as seen in its work log)."""
        w = self.work()
        return bool(w) and w[-1]["event"] == "work_start"

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.killed

    def signal(self, sig: int) -> float:
        """Sends ``sig``; returns the monotonic ms just before sending, rounded down to whole
        ms, because the engine's records carry truncated whole ms: every record written
        after the signal has ``mono_ms >=`` the returned value."""
        t = float(math.floor(now_ms()))
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            self.killed = True
            self.proc.wait(timeout=30)
        elif sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False
        return t


def all_threads_stopped(pid: int) -> bool:
    """True once every thread of ``pid`` is stopped (state T in /proc): a SIGSTOP
    has taken effect, not merely been sent."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state not in ("T", "t"):
                return False
    except (FileNotFoundError, ProcessLookupError):
        return False
    return True


def pause_outside_sqlite_writes(node: NodeProc, dbs: list[Path], attempts: int = 200) -> float:
    """SIGSTOPs ``node`` at a moment it holds none of ``dbs``' write locks; returns the
    time of the stop that stuck, as ``NodeProc.signal`` does.

    A process frozen inside a write transaction keeps the file's write lock, and every
    other process's writes to that file wait for it until SIGCONT (SQLite's locking;
    the engine reports it as an outage once the busy timeout has passed): the store is
    then down for everyone, which is not what a paused-owner test is about. So a stop
    that lands inside a write (or while another node writes: the check cannot tell)
    is undone with SIGCONT and tried again a moment later."""
    for _ in range(attempts):
        stopped_at = node.signal(signal.SIGSTOP)
        wait_for(lambda: all_threads_stopped(node.proc.pid), 5.0, 0.001, what="the stop")
        if not any(p.exists() and sqlite_write_locked(p) for p in dbs):
            return stopped_at
        node.signal(signal.SIGCONT)
        time.sleep(random.uniform(0.001, 0.01))
    raise AssertionError(f"{node.name}: every stop landed while one of {dbs} was write-locked")


@dataclass
class LocalCluster:
    root: Path
    heartbeat_ms: int = 100
    suspect_ms: int = 300
    stabilize_ms: int = 200
    quorum: int = 0
    secret: str = ""
    cluster_name: str = "pynenc-cpp-faults"
    nodes: list[NodeProc] = field(default_factory=list)

    def start_node(
        self,
        name: str | None = None,
        *,
        seeds: list[str] | None = None,
        secret: str | None = None,
        quorum: int | None = None,
        ready_timeout: float = 60.0,
        extra: list[str] | None = None,
    ) -> NodeProc:
        """Starts one child; waits for its READY line. Seeds default to every earlier address."""
        name = name or f"n{len(self.nodes)}"
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        if seeds is None:
            seeds = [n.address for n in self.nodes if n.address]
        cmd = [
            sys.executable,
            str(NODE_PROC),
            "--name",
            name,
            "--seeds",
            ",".join(seeds),
            "--quorum",
            str(self.quorum if quorum is None else quorum),
            "--secret",
            self.secret if secret is None else secret,
            "--cluster-name",
            self.cluster_name,
            "--heartbeat-ms",
            str(self.heartbeat_ms),
            "--suspect-ms",
            str(self.suspect_ms),
            "--stabilize-ms",
            str(self.stabilize_ms),
            "--state-dir",
            str(d / "state"),
            "--activation-log",
            str(d / "activation.jsonl"),
            "--work-log",
            str(d / "work.jsonl"),
            "--events-log",
            str(d / "events.jsonl"),
            "--status-file",
            str(d / "status.json"),
            *(extra or []),
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        with open(d / "stderr.log", "w") as err:  # the child keeps its own copy of the fd
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        node = NodeProc(name, proc, d)
        self.nodes.append(node)
        line = _read_line(proc, ready_timeout)
        if not line.startswith("READY "):
            raise RuntimeError(f"{name} did not start: {line!r}; stderr: {node_stderr(node)}")
        info = json.loads(line[len("READY ") :])
        node.address, node.node_id = info["address"], info["node"]
        return node

    def wait_converged(self, timeout: float = 30.0) -> None:
        """Waits until every live node sees exactly the live nodes as alive members."""
        ids = {n.node_id for n in self.live()}

        def converged() -> bool:
            for n in self.live():
                st = n.status()
                if not st or {m["id"] for m in st["members"] if m["state"] == "alive"} != ids:
                    return False
            return True

        wait_for(converged, timeout, what="every node sees every live node alive")

    def start(self, n: int) -> list[NodeProc]:
        """Starts ``n`` nodes one after the other and waits until they all see each other."""
        nodes = [self.start_node() for _ in range(n)]
        self.wait_converged()
        return nodes

    def live(self) -> list[NodeProc]:
        return [n for n in self.nodes if n.alive() and not n.paused]

    def working(self) -> list[NodeProc]:
        """Live, unpaused nodes whose work is running."""
        return [n for n in self.live() if n.running_work()]

    def wait_single_master(
        self, timeout: float = 30.0, exclude: NodeProc | None = None
    ) -> NodeProc:
        """Waits until exactly one live node (other than ``exclude``) runs the work."""

        def one() -> NodeProc | None:
            w = [n for n in self.working() if n is not exclude]
            return w[0] if len(w) == 1 else None

        return wait_for(one, timeout, what="exactly one master")

    def close(self) -> None:
        for n in self.nodes:
            if n.proc.poll() is None:
                try:
                    os.kill(n.proc.pid, signal.SIGCONT)
                    os.kill(n.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for n in self.nodes:
            try:
                n.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            if n.proc.stdout:
                n.proc.stdout.close()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def node_stderr(node: NodeProc) -> str:
    try:
        return (node.dir / "stderr.log").read_text()[-2000:]
    except FileNotFoundError:
        return ""


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The child's first stdout line, or '' if it exits or times out first."""
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            return ""
        return proc.stdout.readline().strip()
    finally:
        sel.close()


# -- activation-log analysis -------------------------------------------------------------


def lease_records(nodes: list[NodeProc]) -> dict[str, list[dict[str, Any]]]:
    """Every node's activation-log records, keyed by node name."""
    return {n.name: n.activations() for n in nodes}


def held_intervals(records: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The intervals during which one node held a lease: each "lease" record's
    [mono_ms, lease_until_mono_ms], cut short by a later "release" record (a graceful
    leave gives the lease back once the work stopped, so peers may grant a successor
    at once). The lease is granted only after the grants of a quorum arrived and the
    record is written before it takes effect, so these are the intervals the protocol
    promises never to overlap between nodes."""
    out: list[tuple[float, float]] = []
    for r in records:
        ev = r.get("event")
        if ev == "lease":
            out.append((float(r["mono_ms"]), float(r["lease_until_mono_ms"])))
        elif ev == "release":
            t = float(r["mono_ms"])
            out = [(s, min(e, t)) if s <= t else (s, e) for s, e in out]
    return out


def work_intervals(records: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """When a node had the right to run the work: from each "start" to the earlier of
    its "stop"/"lease_expired" and the last lease end recorded before that (a node
    SIGKILLed or SIGSTOPped while master keeps that right only until its lease ran out)."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    lease_end = 0.0
    for r in records:
        ev = r.get("event")
        if ev == "lease":
            lease_end = max(lease_end, float(r["lease_until_mono_ms"]))
        elif ev == "release":
            lease_end = min(lease_end, float(r["mono_ms"]))
        elif ev == "start":
            start = float(r["mono_ms"])
        elif ev in ("stop", "lease_expired") and start is not None:
            out.append((start, min(float(r["mono_ms"]), lease_end)))
            start = None
    if start is not None:
        out.append((start, lease_end))
    return out


def instance_lifetimes(records: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """One node's lifetimes of the instance ``label``, from its activation log: each is
    ``{"start", "end", "generation", "stop_reason"}`` where ``end`` is when its right to
    run ended: the earlier of its stop (or lease-expired / failed record) and the end of
    the last owner lease recorded before it ("instance_lease" records are written before
    the extension takes effect). A node killed or paused while running keeps that right
    only until its lease ran out; these intervals must never overlap across nodes."""
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    lease_end = 0.0
    for r in records:
        if r.get("label") != label:
            continue
        ev, t = r.get("event"), float(r["mono_ms"])
        if ev == "instance_lease":
            lease_end = max(lease_end, float(r["lease_until_mono_ms"]))
        elif ev == "instance_start":
            cur = {"start": t, "generation": int(r["generation"]), "stop_reason": None}
        elif ev in ("instance_stop", "instance_lease_expired", "instance_failed") and cur:
            cur["end"] = min(t, lease_end)
            cur["stop_reason"] = r.get("reason")
            out.append(cur)
            cur = None
    if cur is not None:
        cur["end"] = lease_end
        out.append(cur)
    return out


def overlaps(by_node: dict[str, list[tuple[float, float]]]) -> list[str]:
    """Descriptions of every pair of intervals of different nodes that overlap."""
    found = []
    names = sorted(by_node)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for s1, e1 in by_node[a]:
                for s2, e2 in by_node[b]:
                    if s1 < e2 and s2 < e1:
                        found.append(f"{a} [{s1:.1f}, {e1:.1f}] overlaps {b} [{s2:.1f}, {e2:.1f}]")
    return found
