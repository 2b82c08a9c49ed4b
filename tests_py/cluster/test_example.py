"""examples/cluster_master.py --demo: three nodes, SIGKILL of the master, takeover."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster_master.py"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.mark.timeout(120)
def test_cluster_example_demo_fails_over_to_another_node() -> None:
    ports = _free_ports(3)
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "--ports", ",".join(map(str, ports))],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    before, sep, after = out.stdout.partition("--- SIGKILL the master on port ")
    assert sep, out.stdout
    victim = after.split()[0]
    # Before the kill: the node killed is the last one to have become master. While
    # the nodes find each other, an older node seen late may take over from the
    # first one elected ("stopped being master: not elected"), so there may be more
    # than one MASTER line here, never zero.
    masters_before = re.findall(r"\[(\d+)\] MASTER", before)
    assert masters_before and masters_before[-1] == victim, out.stdout
    # After it: another node, and only another node, becomes master, and the demo
    # names that node as the one that took over.
    masters_after = re.findall(r"\[(\d+)\] MASTER", after)
    assert masters_after, out.stdout
    heir = masters_after[0]
    assert heir != victim and int(heir) in ports, out.stdout
    assert victim not in masters_after, out.stdout
    assert re.search(rf"port {heir} took over [0-9.]+ s after the kill", after), out.stdout
    # The survivors leave gracefully at the end; the killed node never does.
    left = set(re.findall(r"\[(\d+)\] left the cluster", out.stdout))
    assert left == {str(p) for p in ports} - {victim}
