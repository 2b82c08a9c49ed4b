"""Turns a chaos run's JSON lines (``PYNENC_CPP_CHAOS_REPORT``) into a Markdown table:
per scenario, backend and mode, the runs, invocations, executions, re-runs and the
recovery time (p50 and max over every disruption of every run).

    python tests_py/chaos/report.py build/chaos-report.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def table(lines: list[dict]) -> str:
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for line in lines:
        groups[(line["scenario"], line["backend"], line["mode"])].append(line)
    out = [
        "| scenario | backend | mode | runs | invocations | executions | re-runs | recovery p50 | recovery max | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (scenario, backend, mode), runs in sorted(groups.items()):
        recovery = [s for r in runs for s in r["recovery_sec"]]
        notes: dict[str, object] = {}
        for r in runs:
            for key, value in r["extra"].items():
                if isinstance(value, list):  # one figure per disruption
                    notes[key] = int(notes.get(key, 0)) + sum(value)  # type: ignore[call-overload]
                elif isinstance(value, int):
                    notes[key] = int(notes.get(key, 0)) + value  # type: ignore[call-overload]
                elif isinstance(value, dict):  # counts per kind
                    sums = notes.setdefault(key, {})
                    for k, v in value.items():
                        sums[k] = sums.get(k, 0) + v  # type: ignore[index,union-attr,attr-defined]
                else:
                    notes[key] = value
        out.append(
            f"| {scenario} | {backend} | {mode} | {len(runs)} "
            f"| {sum(r['invocations'] for r in runs)} | {sum(r['executions'] for r in runs)} "
            f"| {sum(r['reruns'] for r in runs)} "
            + (
                f"| {statistics.median(recovery):.1f} s | {max(recovery):.1f} s "
                if recovery
                else "| - | - "
            )
            + f"| {', '.join(f'{k}={v}' for k, v in notes.items())} |"
        )
    return "\n".join(out)


def main(path: str) -> None:
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    print(table(lines))


if __name__ == "__main__":
    main(sys.argv[1])
