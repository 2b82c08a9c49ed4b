"""Keep one piece of work running on exactly one node: pynenc_cpp.cluster.

Run one node per terminal (each prints when it becomes master or stops being one):

    .venv/bin/python examples/cluster_master.py --port 7401
    .venv/bin/python examples/cluster_master.py --port 7402
    .venv/bin/python examples/cluster_master.py --port 7403

or let the script do it: ``--demo`` starts three nodes as child processes, waits for a
master, kills it with SIGKILL and shows another node taking over.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

from pynenc_cpp.cluster import Activation, ClusterConfig, run_cluster

DEFAULT_PORTS = (7401, 7402, 7403)


def run_node(port: int, ports: tuple[int, ...]) -> None:
    config = ClusterConfig(
        host="127.0.0.1",
        port=port,
        seeds=tuple(f"127.0.0.1:{p}" for p in ports),
        quorum=2,
        heartbeat_ms=100,
        suspect_timeout_ms=300,
        stabilize_ms=200,
    )
    working = threading.Event()

    def work() -> None:
        while working.is_set():
            time.sleep(0.5)
            if working.is_set():
                print(f"[{port}] working", flush=True)

    def start(activation: Activation) -> None:
        print(f"[{port}] MASTER (epoch {activation.epoch:#x})", flush=True)
        working.set()
        threading.Thread(target=work, daemon=True).start()

    def stop(activation: Activation, reason: str) -> None:
        working.clear()
        print(f"[{port}] stopped being master: {reason}", flush=True)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with run_cluster(start, stop, config) as handle:
        print(f"[{port}] node {handle.node_id[:8]} listening on {handle.address}", flush=True)
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
    print(f"[{port}] left the cluster", flush=True)


def demo(ports: tuple[int, ...]) -> None:
    procs = {
        port: subprocess.Popen(
            [
                sys.executable,
                "-u",
                __file__,
                "--port",
                str(port),
                "--ports",
                ",".join(map(str, ports)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for port in ports
    }
    master: list[int] = []

    def pump(port: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if "MASTER" in line:
                master.append(port)

    for port, proc in procs.items():
        threading.Thread(target=pump, args=(port, proc), daemon=True).start()
    try:
        deadline = time.monotonic() + 20
        while not master and time.monotonic() < deadline:
            time.sleep(0.05)
        if not master:
            raise SystemExit("no master within 20 s")
        time.sleep(1.5)
        # The master now: the last node to print MASTER. While the nodes find each
        # other, an older node seen late may already have taken over from the first
        # one elected, so this need not be master[0].
        victim = master[-1]
        seen = len(master)
        print(f"--- SIGKILL the master on port {victim}", flush=True)
        killed_at = time.monotonic()
        os.kill(procs[victim].pid, signal.SIGKILL)

        def successor() -> int | None:
            return next((p for p in master[seen:] if p != victim), None)

        while successor() is None and time.monotonic() < killed_at + 20:
            time.sleep(0.01)
        heir = successor()
        if heir is None:
            raise SystemExit("no takeover within 20 s")
        print(f"--- port {heir} took over {time.monotonic() - killed_at:.3f} s after the kill")
        time.sleep(1.5)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="this node's port (one of --ports)")
    parser.add_argument(
        "--ports", default=",".join(map(str, DEFAULT_PORTS)), help="every node's port"
    )
    parser.add_argument("--demo", action="store_true")
    args = parser.parse_args()
    ports = tuple(int(p) for p in args.ports.split(","))
    if args.demo:
        demo(ports)
    elif args.port in ports:
        run_node(args.port, ports)
    else:
        parser.error("give --demo, or --port with one of --ports")
