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
    masters = re.findall(r"\[(\d+)\] MASTER", out.stdout)
    assert len(masters) == 2, out.stdout
    killed = re.search(r"SIGKILL the master on port (\d+)", out.stdout)
    assert killed and killed.group(1) == masters[0]
    assert masters[1] != masters[0] and int(masters[1]) in ports
    assert re.search(rf"port {masters[1]} took over [0-9.]+ s after the kill", out.stdout)
    # The survivors leave gracefully at the end; the killed node never does.
    left = set(re.findall(r"\[(\d+)\] left the cluster", out.stdout))
    assert left == {str(p) for p in ports} - {masters[0]}
