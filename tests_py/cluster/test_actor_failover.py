"""Event-sourced singleton failover with real processes (issue 7).

Three ``actor_proc.py`` nodes share an SQLite generation source and an SQLite
journal; each spawns the event-sourced singleton ``counter`` (anchored to the
leader: the first node started). Clients on the two other nodes send a steady
stream of increments, each confirmed by ``ask``, while the owner is SIGKILLed,
stopped gracefully (SIGTERM) or paused past failover (SIGSTOP). Afterwards the
counter equals the number of confirmed increments (none lost, none applied
twice), every ask was answered, the journal holds exactly one entry per
increment, and the activation logs never show two live generations.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pynenc_cpp.cluster.actors import SqliteJournal
from tests_py.cluster.harness import (
    NodeProc,
    _read_line,
    instance_lifetimes,
    node_stderr,
    overlaps,
    pause_outside_sqlite_writes,
    read_jsonl,
    wait_for,
)

ACTOR_PROC = Path(__file__).with_name("actor_proc.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "actors-faults"
WAIT = 60.0
pytestmark = pytest.mark.timeout(240)


class ActorNodes:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: list[NodeProc] = []

    def start(self, name: str, clients: int = 0, count: int = 0) -> NodeProc:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        seeds = ",".join(n.address for n in self.nodes)
        cmd = [
            sys.executable,
            str(ACTOR_PROC),
            "--name",
            name,
            "--seeds",
            seeds,
            "--cluster-name",
            CLUSTER,
            "--quorum",
            "2",
            "--generation-source",
            f"sqlite://{self.root}/generations.db",
            "--journal",
            str(self.root / "journal.db"),
            "--activation-log",
            str(d / "activation.jsonl"),
            "--log",
            str(d / "work.jsonl"),
            "--clients",
            str(clients),
            "--count",
            str(count),
            "--interval-ms",
            "5",
            "--ask-timeout",
            "20",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        with open(d / "stderr.log", "w") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        node = NodeProc(name, proc, d)
        self.nodes.append(node)
        line = _read_line(proc, 60.0)
        if not line.startswith("READY "):
            raise RuntimeError(f"{name} did not start: {line!r}; {node_stderr(node)}")
        import json

        info = json.loads(line[len("READY ") :])
        node.address, node.node_id = info["address"], info["node"]
        return node

    def close(self) -> None:
        for n in self.nodes:
            if n.proc.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(n.proc.pid, sig)
                    except ProcessLookupError:
                        pass
        for n in self.nodes:
            try:
                n.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            if n.proc.stdout:
                n.proc.stdout.close()


@pytest.fixture
def actors(tmp_path: Path) -> Iterator[ActorNodes]:
    a = ActorNodes(tmp_path)
    try:
        yield a
    finally:
        a.close()


def confirmed(nodes: list[NodeProc]) -> list[dict]:
    return [r for n in nodes for r in read_jsonl(n.work_log) if r.get("event") == "confirmed"]


def owner_of(nodes: list[NodeProc]) -> NodeProc:
    def one() -> NodeProc | None:
        owners = []
        for n in nodes:
            recs = [r for r in n.activations() if r.get("label") == "counter"]
            starts = [r for r in recs if r["event"] == "instance_start"]
            ends = [r for r in recs if r["event"] in ("instance_stop", "instance_lease_expired")]
            if len(starts) > len(ends):
                owners.append(n)
        return owners[0] if len(owners) == 1 else None

    return wait_for(one, WAIT, what="one node running the counter")


def run_with_fault(actors: ActorNodes, fault: signal.Signals) -> None:
    clients, count = 2, 120
    first = actors.start("n0")
    others = [actors.start(f"n{i}", clients=clients, count=count) for i in (1, 2)]
    nodes = [first, *others]
    owner = owner_of(nodes)
    assert owner is first  # anchored to the leader, the oldest node
    wait_for(lambda: len(confirmed(others)) >= 40, WAIT, what="a steady stream of increments")

    if fault == signal.SIGKILL:
        first.signal(signal.SIGKILL)
    elif fault == signal.SIGTERM:
        os.kill(first.proc.pid, signal.SIGTERM)
    else:  # SIGSTOP past failover, then SIGCONT: the stale instance must not write
        # (frozen inside a journal append, n0 would hold the file's lock: see the helper)
        pause_outside_sqlite_writes(first, sorted(actors.root.glob("*.db")))
        wait_for(lambda: owner_of(others) is not None, WAIT, what="a successor")
        n_before = len(confirmed(others))
        wait_for(lambda: len(confirmed(others)) >= n_before + 20, WAIT, what="the successor serves")
        first.signal(signal.SIGCONT)

    def finals() -> list[dict] | None:
        f = [r for n in others for r in read_jsonl(n.work_log) if r.get("event") == "final"]
        return f if len(f) == len(others) else None

    done = wait_for(finals, 180.0, interval=0.1, what="every client done")
    timeouts = [r for n in others for r in read_jsonl(n.work_log) if r.get("event") == "timeout"]
    assert timeouts == [], f"asks went unanswered: {timeouts[:5]}"
    total = len(confirmed(others))
    assert total == clients * count * len(others)
    # The counter equals the confirmed increments: none lost, none applied twice.
    last = max(done, key=lambda r: r["mono_ms"])
    assert last["value"] == total, (last, total)
    journal = SqliteJournal(str(actors.root / "journal.db"), CLUSTER)
    assert journal.last_seq("counter") == total  # one entry per increment
    # Never two live generations of the singleton.
    by_node = {
        n.name: [(lt["start"], lt["end"]) for lt in instance_lifetimes(n.activations(), "counter")]
        for n in nodes
    }
    assert overlaps(by_node) == [], "two live generations of the counter"
    lifetimes = sorted(
        (lt for n in nodes for lt in instance_lifetimes(n.activations(), "counter")),
        key=lambda lt: lt["start"],
    )
    assert len(lifetimes) >= 2
    gens = [lt["generation"] for lt in lifetimes]
    assert gens == sorted(set(gens))


def test_sigkill_owner_of_an_event_sourced_counter_loses_and_duplicates_nothing(
    actors: ActorNodes,
) -> None:
    run_with_fault(actors, signal.SIGKILL)


def test_graceful_shutdown_of_the_owner_hands_over_losing_nothing(actors: ActorNodes) -> None:
    run_with_fault(actors, signal.SIGTERM)


def test_owner_paused_past_failover_cannot_corrupt_the_journal(actors: ActorNodes) -> None:
    run_with_fault(actors, signal.SIGSTOP)
