"""A filesystem served by storage agents that the cluster places by constraint.

After murmer's orchestrator example: a gateway (node class ``edge``) and two
workers advertising ``volume=photos`` and ``volume=docs`` form one cluster. The
gateway submits three storage agents; the Coordinator (on the elected leader)
places each on a node that satisfies its constraints, and any node can query
them (``handle.ask``). Killing a worker runs each spec's crash strategy:

* ``storage/photos`` (volume=photos, WaitForReturn 6 s): waits for that very
  node id to come back (a restarted process counts), then runs there again;
* ``storage/docs`` (volume=docs, Redistribute): no other node has the volume, so
  it is reported unplaced, with the reason, until one does;
* ``storage/scratch`` (any worker, Redistribute, a soft preference for store-a):
  moves to the other worker.

Run everything in one go (``--demo``: this process is the gateway and starts the
two workers as child processes, kills one with SIGKILL, restarts it, ...):

    .venv/bin/python examples/orchestrator.py --demo

or one node per terminal:

    .venv/bin/python examples/orchestrator.py gateway --port 7500
    .venv/bin/python examples/orchestrator.py worker --volume photos --seed 127.0.0.1:7500 --root /tmp/photos
    .venv/bin/python examples/orchestrator.py worker --volume docs --seed 127.0.0.1:7500 --root /tmp/docs
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pynenc_cpp.cluster import (
    ActorSpec,
    ClusterConfig,
    ClusterHandle,
    CrashStrategy,
    InstanceContext,
    Pinned,
    PlacementConstraints,
    run_cluster,
)

CLUSTER = "orchestrator-demo"


def config(
    port: int, seeds: list[str], node_class: str, meta: dict[str, str], state: str
) -> ClusterConfig:
    return ClusterConfig(
        host="127.0.0.1",
        port=port,
        seeds=tuple(seeds),
        quorum=2,
        heartbeat_ms=100,
        suspect_timeout_ms=300,
        stabilize_ms=200,
        node_class=node_class,
        metadata=meta,
        cluster_name=CLUSTER,
        state_dir=state,  # a restarted worker keeps its node id: WaitForReturn sees it return
    )


class StorageAgent:
    """Serves one directory: ``{"op": "list"|"read", "path": ...}`` -> JSON answer."""

    def __init__(self, ctx: InstanceContext, node_name: str, root: str) -> None:
        self.ctx, self.node, self.root = ctx, node_name, Path(root)
        print(f"[{node_name}] started {ctx.label} (generation {ctx.generation})", flush=True)

    def on_message(self, payload: bytes) -> bytes:
        req = json.loads(payload)
        path = (self.root / req["path"].lstrip("/")).resolve()
        if not path.is_relative_to(self.root.resolve()):
            return json.dumps({"error": "outside the volume"}).encode()
        if req["op"] == "list":
            entries = sorted(p.name for p in path.iterdir())
            return json.dumps({"node": self.node, "entries": entries}).encode()
        return json.dumps({"node": self.node, "content": path.read_text()}).encode()

    def stop(self, reason: str) -> None:
        print(f"[{self.node}] stopped {self.ctx.label}: {reason}", flush=True)


def run_worker(args: argparse.Namespace) -> None:
    meta = {"volume": args.volume, "name": args.name}
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    cfg = config(args.port, args.seed, "worker", meta, args.state_dir)
    with run_cluster(config=cfg) as handle:
        handle.register_actor_type("storage", lambda ctx: StorageAgent(ctx, args.name, args.root))
        print(f"READY {handle.address}", flush=True)
        while not done.wait(0.2):
            pass


SPECS = [
    ActorSpec(
        "storage/photos",
        "storage",
        crash_strategy=CrashStrategy.wait_for_return(6.0),
        constraints=PlacementConstraints(
            required_classes=("worker",), required_metadata={"volume": "photos"}
        ),
    ),
    ActorSpec(
        "storage/docs",
        "storage",
        crash_strategy=CrashStrategy.redistribute(),
        constraints=PlacementConstraints(
            required_classes=("worker",), required_metadata={"volume": "docs"}
        ),
    ),
]


def scratch_spec(prefer: str | None) -> ActorSpec:
    """Any worker; with ``prefer`` (a node id), that one while it is up (a soft pin)."""
    return ActorSpec(
        "storage/scratch",
        "storage",
        constraints=PlacementConstraints(required_classes=("worker",)),
        strategy=Pinned(prefer) if prefer else None,
    )


def show(handle: ClusterHandle) -> None:
    names = {n.id: n.metadata.get("name", n.id[:8]) for n in handle.cluster_view().nodes}
    for s in handle.spec_statuses():
        where = names.get(s.node, "-") if s.node else "-"
        extra = f" ({s.reason})" if s.reason else ""
        print(
            f"  {s.label:16} {s.state:18} on {where:8} generation {s.generation}{extra}", flush=True
        )


def ask(handle: ClusterHandle, label: str, op: str, path: str) -> dict:
    # The directory a node keeps may lag the leader by a moment right after a move.
    deadline = time.monotonic() + 10
    while True:
        try:
            return json.loads(
                handle.ask(label, json.dumps({"op": op, "path": path}).encode(), timeout=2)
            )
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_node(handle: ClusterHandle, name: str, timeout: float = 20.0) -> str:
    """The id of the node whose metadata says ``name``, once the leader sees it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            for n in handle.cluster_view(timeout=2).nodes:
                if n.metadata.get("name") == name and n.alive:
                    return n.id
        except Exception:  # no leader yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"node {name} not in the cluster view")
        time.sleep(0.05)


def wait_state(handle: ClusterHandle, label: str, state: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while handle.spec_status(label).state != state:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{label} not {state}: {handle.spec_status(label)}")
        time.sleep(0.05)


def demo(gateway_port: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="orchestrator-demo-"))
    for vol, files in {
        "photos": {"beach.jpg": "(a beach)", "cat.jpg": "(a cat)"},
        "docs": {"readme.txt": "hello from docs"},
    }.items():
        (tmp / vol).mkdir()
        for name, text in files.items():
            (tmp / vol / name).write_text(text)
    gw = run_cluster(
        config=config(gateway_port, [], "edge", {"name": "gateway"}, str(tmp / "gateway-state"))
    )
    workers: dict[str, subprocess.Popen[str]] = {}

    def start_worker(name: str, volume: str) -> None:
        p = subprocess.Popen(
            [
                sys.executable,
                "-u",
                __file__,
                "worker",
                "--name",
                name,
                "--volume",
                volume,
                "--seed",
                gw.address,
                "--root",
                str(tmp / volume),
                "--state-dir",
                str(tmp / f"{name}-state"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = p.stdout.readline() if p.stdout else ""
        assert line.startswith("READY"), line
        threading.Thread(
            target=lambda: [print(ln, end="", flush=True) for ln in p.stdout], daemon=True
        ).start()
        workers[name] = p

    try:
        start_worker("store-a", "photos")
        start_worker("store-b", "docs")
        print("gateway, store-a (volume=photos) and store-b (volume=docs) are up", flush=True)
        store_a = wait_node(gw, "store-a")
        for spec in [*SPECS, scratch_spec(store_a)]:
            gw.submit(spec, timeout=10)
        for spec in [*SPECS, scratch_spec(store_a)]:
            gw.wait_running(spec.label)
        show(gw)
        print(f"list /  on storage/photos -> {ask(gw, 'storage/photos', 'list', '/')}", flush=True)
        print(
            f"read /readme.txt on storage/docs -> {ask(gw, 'storage/docs', 'read', '/readme.txt')}",
            flush=True,
        )

        print("SIGKILL store-a", flush=True)
        workers["store-a"].send_signal(signal.SIGKILL)
        workers["store-a"].wait()
        wait_state(gw, "storage/photos", "waiting_for_return")
        wait_state(gw, "storage/scratch", "running")
        show(gw)
        print("restart store-a (same node id)", flush=True)
        start_worker("store-a", "photos")
        wait_state(gw, "storage/photos", "running")
        show(gw)
        print(f"list /  on storage/photos -> {ask(gw, 'storage/photos', 'list', '/')}", flush=True)

        print("SIGKILL store-b", flush=True)
        workers["store-b"].send_signal(signal.SIGKILL)
        workers["store-b"].wait()
        wait_state(gw, "storage/docs", "unplaced")
        wait_state(gw, "storage/scratch", "running")  # moved back to store-a
        show(gw)
        print("demo done", flush=True)
    finally:
        for p in workers.values():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        gw.stop()


def run_gateway(args: argparse.Namespace) -> None:
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with run_cluster(
        config=config(args.port, args.seed, "edge", {"name": "gateway"}, args.state_dir)
    ) as gw:
        print(f"gateway on {gw.address}", flush=True)
        submitted = False
        while not done.wait(2.0):
            try:
                if not submitted:
                    for spec in [*SPECS, scratch_spec(None)]:
                        gw.submit(spec, timeout=2)
                    submitted = True
                show(gw)
            except Exception as exc:  # no leader yet (the workers have not joined)
                print(f"  waiting for the cluster: {exc}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("role", nargs="?", choices=("gateway", "worker"))
    p.add_argument("--demo", action="store_true", help="run the whole scenario in one go")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seed", action="append", default=[])
    p.add_argument("--volume", default="photos")
    p.add_argument("--root", default=".")
    p.add_argument("--name", default="")
    p.add_argument("--state-dir", default="")
    args = p.parse_args()
    if args.demo:
        demo(args.port)
    elif args.role == "worker":
        args.name = args.name or f"worker-{args.volume}"
        run_worker(args)
    elif args.role == "gateway":
        run_gateway(args)
    else:
        p.error("give --demo, or a role: gateway | worker")


if __name__ == "__main__":
    main()
