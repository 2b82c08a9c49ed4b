"""A client process for the chaos suite: submits ``ledger_add`` invocations one by
one and appends ``<invocation id> <x>`` to an acknowledgement file after each submit
returns (one O_APPEND write, so a kill leaves only whole lines).

    python -m tests_py.chaos.submit_client <ledger> <acks> <count>

The app is configured from the ``PYNENC__*`` environment, like a runner's.
"""

from __future__ import annotations

import os
import sys

from tests_py import runner_tasks as rt


def main(ledger: str, acks: str, count: int) -> None:
    fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for x in range(count):
            inv = rt.ledger_add(ledger, f"t{x}", x, 1, 0.002)
            os.write(fd, f"{inv.invocation_id} {x}\n".encode())
    finally:
        os.close(fd)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
