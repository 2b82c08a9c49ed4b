"""Cluster singletons with real processes on loopback (issue 6).

Three ``node_proc.py`` children share an SQLite generation source and an SQLite
fenced store. Each offers the actor type ``writer``: an instance writes to the
fenced store under its generation every 20 ms. A singleton ``catalog`` of that
type is anchored to the leader. Claims are proven from the activation logs
(``instance_lease`` records are written before each owner-lease extension takes
effect, ``instance_start`` / ``instance_stop`` / ``instance_lease_expired`` around
the instance) and from the writers' logs and the fenced store itself.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pynenc_cpp.cluster import FencedStore, Generation
from tests_py.cluster.harness import (
    LocalCluster,
    NodeProc,
    instance_lifetimes,
    overlaps,
    pause_outside_sqlite_writes,
    wait_for,
)

WAIT = 45.0
LABEL = "catalog"
CLUSTER = "pynenc-cpp-singletons"
pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path, heartbeat_ms=100, suspect_ms=300, stabilize_ms=200, quorum=2, cluster_name=CLUSTER
    )
    try:
        yield c
    finally:
        c.close()


def extra(root: Path, submit: bool = False) -> list[str]:
    args = [
        "--writer-type",
        "writer",
        "--node-class",
        "worker",
        "--generation-source",
        f"sqlite://{root}/generations.db",
        "--fenced-store",
        f"sqlite://{root}/fenced.db",
    ]
    return args + (["--submit-singleton", f"{LABEL}=leader"] if submit else [])


def start_three(cluster: LocalCluster) -> list[NodeProc]:
    nodes = [cluster.start_node(extra=extra(cluster.root, submit=(i == 0))) for i in range(3)]
    cluster.wait_converged()
    return nodes


def active_on(node: NodeProc) -> Generation | None:
    """The generation of LABEL if ``node`` runs it (per its status file)."""
    st = node.status()
    for h in (st or {}).get("hosted", []):
        if h["label"] == LABEL and h["phase"] == "active":
            return Generation(h["term"], h["seq"])
    return None


def owner(cluster: LocalCluster, exclude: NodeProc | None = None) -> NodeProc:
    def one() -> NodeProc | None:
        running = [n for n in cluster.live() if n is not exclude and active_on(n)]
        return running[0] if len(running) == 1 else None

    return wait_for(one, WAIT, what=f"exactly one node running {LABEL}")


def writes(node: NodeProc, event: str, after_ms: float = 0.0) -> list[dict]:
    return [
        r
        for r in node.work()
        if r.get("event") == event and r.get("label") == LABEL and r["mono_ms"] >= after_ms
    ]


def assert_single_lifetimes(nodes: list[NodeProc]) -> list[dict]:
    """No two nodes ever had the right to run LABEL at once; generations only grow."""
    by_node = {n.name: instance_lifetimes(n.activations(), LABEL) for n in nodes}
    intervals = {name: [(lt["start"], lt["end"]) for lt in lts] for name, lts in by_node.items()}
    assert overlaps(intervals) == [], "two live generations of one singleton"
    lifetimes = sorted((lt for lts in by_node.values() for lt in lts), key=lambda lt: lt["start"])
    gens = [lt["generation"] for lt in lifetimes]
    assert gens == sorted(set(gens)), f"generations did not strictly increase: {gens}"
    return lifetimes


def test_singleton_fails_over_between_three_nodes(cluster: LocalCluster) -> None:
    nodes = start_three(cluster)
    first = owner(cluster)
    g1 = active_on(first)
    assert g1 == Generation(1, 0)
    wait_for(lambda: writes(first, "write_ok"), WAIT, what="the first owner writes")

    # SIGKILL the owner: another node runs it under a strictly higher term.
    kill1 = first.signal(signal.SIGKILL)
    second = owner(cluster, exclude=first)
    g2 = active_on(second)
    assert g2 is not None and g2 > g1 and g2.term > g1.term
    wait_for(lambda: writes(second, "write_ok", kill1), WAIT, what="the second owner writes")

    # The killed node comes back (same state dir: same node id) and the second owner
    # is killed: the singleton moves again, to one of the two left.
    restarted = cluster.start_node(first.name + "b", extra=extra(cluster.root))
    cluster.wait_converged()
    kill2 = second.signal(signal.SIGKILL)
    third = owner(cluster, exclude=second)
    g3 = active_on(third)
    assert g3 is not None and g3.term > g2.term
    wait_for(lambda: writes(third, "write_ok", kill2), WAIT, what="the third owner writes")

    lifetimes = assert_single_lifetimes(nodes + [restarted])
    assert len(lifetimes) == 3
    # The fenced store holds the current owner's writes only.
    value = FencedStore(f"sqlite://{cluster.root}/fenced.db", CLUSTER).read(LABEL)
    assert value is not None and value.generation == g3
    assert value.value.decode().startswith(f"{third.name}:{g3}:")


def test_stale_owner_paused_past_failover_is_fenced_by_storage_and_stopped(
    cluster: LocalCluster,
) -> None:
    nodes = start_three(cluster)
    stale = owner(cluster)
    old_gen = active_on(stale)
    assert old_gen is not None
    wait_for(lambda: writes(stale, "write_ok"), WAIT, what="the owner writes")

    # (frozen inside a fenced write, it would hold the file's lock: see the helper)
    paused_at = pause_outside_sqlite_writes(stale, sorted(cluster.root.glob("*.db")))
    successor = owner(cluster, exclude=stale)
    new_gen = active_on(successor)
    assert new_gen is not None and new_gen.term > old_gen.term
    wait_for(lambda: writes(successor, "write_ok", paused_at), WAIT, what="the successor writes")

    resumed_at = stale.signal(signal.SIGCONT)
    # Its node stops the stale instance: the lease ran out while it was paused.
    wait_for(
        lambda: [
            r
            for r in stale.activations()
            if r.get("label") == LABEL
            and r["event"] == "instance_stop"
            and r["mono_ms"] >= resumed_at
        ],
        WAIT,
        what="the woken node stops its stale instance",
    )
    woke = [
        r for r in stale.activations() if r.get("label") == LABEL and r["mono_ms"] >= resumed_at
    ]
    assert woke[0]["event"] == "instance_lease_expired", woke[:3]
    stop = next(r for r in woke if r["event"] == "instance_stop")
    assert stop["reason"] == "lease expired"
    assert stop["generation"] == old_gen.packed
    # Its next fenced write (the writer resumes, then flushes on stop) is rejected by
    # storage, and it wrote nothing after the successor started.
    rejected = writes(stale, "write_rejected", resumed_at)
    assert rejected, "the stale owner's write after waking was not rejected"
    assert all(r["generation"] == old_gen.packed for r in rejected)
    assert f"stored {new_gen.term}." in rejected[0]["reason"]
    assert writes(stale, "write_ok", resumed_at) == []
    stopped = writes(stale, "actor_stop", resumed_at)
    assert stopped and stopped[0]["reason"] == "lease expired"
    # The successor kept running and its data is intact.
    assert active_on(successor) == new_gen
    value = FencedStore(f"sqlite://{cluster.root}/fenced.db", CLUSTER).read(LABEL)
    assert value is not None and value.generation == new_gen
    assert_single_lifetimes(nodes)
