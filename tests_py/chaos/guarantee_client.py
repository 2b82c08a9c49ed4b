"""A client process for the guarantees suite: makes calls of one of the suite's
tasks and appends ``<invocation id> <tag>`` to an acknowledgement file after each
call returns (one O_APPEND write, so a kill leaves only whole lines).

    python -m tests_py.chaos.guarantee_client keyed <ledger> <acks> <prefix> <count> <keys> <sec>
    python -m tests_py.chaos.guarantee_client restock <ledger> <acks> <prefix> <count> <keys> <sec>
    python -m tests_py.chaos.guarantee_client order <ledger> <acks> <prefix> <count> <keys> <sec>

``keyed``: ``keyed_order`` calls, tags ``<prefix>-<i>``, keys ``sku-<i % keys>``;
``restock``: ``restock`` calls on ``sku-<i % keys>`` (calls made while one is
REGISTERED share it, so an acknowledged id may repeat); ``order``: ``order_placed``
calls (``tests_py/trigger_tasks.py``, a status trigger starts a receipt for each),
tags ``<prefix>-<i>``, one every ``<sec>`` seconds.
The app is configured from the ``PYNENC__*`` environment, like a runner's.
"""

from __future__ import annotations

import os
import sys
import time

from tests_py import runner_tasks as rt
from tests_py import trigger_tasks as tt


def main(kind: str, ledger: str, acks: str, prefix: str, count: int, keys: int, sec: float) -> None:
    fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in range(count):
            key = f"sku-{i % keys}"
            if kind == "keyed":
                tag = f"{prefix}-{i}"
                inv = rt.keyed_order(ledger, key, tag, sec)
            elif kind == "order":
                tag = f"{prefix}-{i}"
                inv = tt.order_placed(ledger, tag)
                time.sleep(sec)
            else:
                tag = key
                inv = rt.restock(ledger, key, sec)
            os.write(fd, f"{inv.invocation_id} {tag}\n".encode())
    finally:
        os.close(fd)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), float(a[6]))
