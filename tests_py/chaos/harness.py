"""The chaos suite's harness: a burst of invocations on real runner processes, real
signals sent to them (or to redis-server), then the checks every scenario shares.

Each runner is a ``pynenc --app tests_py.runner_tasks runner start`` process in a
session of its own, so its process group holds it and every worker process it forks
(``MultiThreadRunner``, ``PersistentProcessRunner``): a signal goes to the whole
group, as when a machine or a container dies, and the ledger line each body writes
names the group it ran in.

Every invocation is ``runner_tasks.ledger_add(ledger, tag, x, 1, body_sec)``: it
appends ``start <tag> <pgid>`` when its body starts and ``end <tag> <pgid>`` when
the body has its result, so executions and finished bodies are counted outside the
engine. The checks (``Chaos.check``):

* every acknowledged invocation ends SUCCESS with its result (``x + 1``), with one
  SUCCESS in its status history;
* no body that finished is reported FAILED;
* no invocation stays non-final;
* a body runs more than once only if a disrupted runner (killed, stopped) held it
  when the disruption came: at most one execution per tag outside disrupted groups.

Scale: ``PYNENC_CPP_CHAOS=full`` (``make chaos``) runs every scenario
``PYNENC_CPP_CHAOS_ROUNDS`` times (default 5); CI's slice runs each once.
``PYNENC_CPP_CHAOS_N`` sets the burst (default 1,000). With
``PYNENC_CPP_CHAOS_REPORT=<file>`` each run appends its figures as one JSON line
(``tests_py/chaos/report.py`` turns them into the table of docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pynenc import Pynenc, PynencBuilder
from pynenc.invocation import InvocationStatus

from tests_py import runner_tasks as rt
from tests_py.procs import orphan_guard
from tests_py.redis_server import RedisServer
from tests_py.test_cpp_runner import FAST, ROOT, runner_env

MODE = os.environ.get("PYNENC_CPP_CHAOS", "slice")
ROUNDS = int(os.environ.get("PYNENC_CPP_CHAOS_ROUNDS", "5")) if MODE == "full" else 1
N = int(os.environ.get("PYNENC_CPP_CHAOS_N", "1000"))
REPORT = os.environ.get("PYNENC_CPP_CHAOS_REPORT")

DEAD_AFTER_MINUTES = 0.05  # 3 s without a heartbeat: the runner is dead
WORKERS = 2  # per CppRunner process
# How long a live runner may take to write a SUCCESS row after the status (mixed
# mode, `Chaos.await_history_rows`): its outage retries back off to 2 s each.
ROW_LAG_SEC = 15.0
FINAL = {
    InvocationStatus.SUCCESS,
    InvocationStatus.FAILED,
    InvocationStatus.CONCURRENCY_CONTROLLED_FINAL,
}


@dataclass
class Runner:
    cls: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pgid(self) -> int:  # started in a session of its own: the group is its pid
        return self.proc.pid


@dataclass
class Disruption:
    what: str  # "SIGKILL", "SIGSTOP", "redis SIGKILL"
    pgid: int | None  # the runner's group, None for the server
    at: float  # wall clock (time.time()) when the signal was sent
    ledger_lines: int  # ledger lines written before it took effect
    settled: float = 0.0  # wall clock once it took effect (the group writes no more)


@dataclass
class Outcome:
    """What a run did: the figures each scenario prints and reports."""

    scenario: str
    backend: str
    mode: str
    invocations: int
    executions: int
    reruns: int
    recovery_sec: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def emit(self) -> None:
        line = (
            f"chaos {self.scenario} [{self.backend}-{self.mode}]: {self.invocations} invocations, "
            f"{self.executions} executions, {self.reruns} re-run(s)"
        )
        if self.recovery_sec:
            line += ", recovered in " + ", ".join(f"{s:.1f} s" for s in self.recovery_sec)
        for key, value in self.extra.items():
            line += f", {key}={value}"
        print(line)
        if REPORT:
            with open(REPORT, "a") as out:
                out.write(json.dumps(self.__dict__) + "\n")


def at_(row: Any) -> datetime:
    """When a history row's status change was made: its status record's time. The
    row's own time can be later: mixed mode (pynenc's code) writes the row after
    the change, and a runner frozen in between writes it when thawed."""
    return row.status_record.timestamp  # type: ignore[no-any-return]


def wait_stopped(pgid: int, timeout: float = 10) -> None:
    """Until every process of the group is stopped (a signal is delivered, not sent)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid:  # state ppid pgrp ...
                states.append(fields[0])
        if states and all(s in "Tt" for s in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process group {pgid} did not stop within {timeout} s")


def _group_of(pid: int) -> int | None:
    """The process group of a live process, None once it is gone."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def parse_ledger(path: Path) -> list[tuple[str, str, int]]:
    """The ledger's complete lines as (kind, tag, pgid)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        kind, tag, pgid = line.split()
        out.append((kind, tag, int(pgid)))
    return out


class Chaos:
    """One scenario's app, runner processes, burst and checks."""

    #: The module the runner processes serve (``pynenc --app <module> runner start``).
    app_module = "tests_py.runner_tasks"

    def __init__(
        self,
        scenario: str,
        backend: str,
        mode: str,
        tmp_path: Path,
        redis: RedisServer | None = None,
        redis_url: str | None = None,
    ) -> None:
        """``redis``: the server ``kill_redis`` kills (with Sentinel: the master);
        ``redis_url``: the app's URL when it is not ``redis.url`` (a Sentinel URL)."""
        self.scenario, self.backend, self.mode, self.tmp_path = scenario, backend, mode, tmp_path
        self.redis = redis
        builder = PynencBuilder().app_id(f"chaos-{uuid.uuid4().hex[:10]}")
        if backend == "sqlite":
            builder = builder.cpp_sqlite(path=tmp_path / "chaos.db", native=mode == "native")
        else:
            assert redis is not None
            builder = builder.cpp_redis(redis_url or redis.url, native=mode == "native")
        self.app: Pynenc = (
            builder.cpp_runner(workers=WORKERS)
            .custom_config(
                runner_considered_dead_after_minutes=DEAD_AFTER_MINUTES,
                cpp_outage_budget_sec=60.0,
                logging_level="warning",  # the client logs no line per submit
                **FAST,
            )
            .build()
        )
        rt.use(self.app)
        self.ledger = tmp_path / "ledger"
        self.runners: list[Runner] = []
        self.disruptions: list[Disruption] = []
        self.slots = 0  # worker slots of every runner started (bounds re-runs)
        # Filled by check(): what each disruption held, every history, pid lookup.
        self.held: dict[int, set[str]] = {}
        self.tag_of: dict[str, str] = {}  # invocation id -> ledger tag (set by `check`)
        self.stopped: set[int] = set()  # groups SIGSTOPped and not thawed since
        self.histories: dict[str, list[Any]] = {}
        self.pid_of: Callable[[str], int | None] = lambda _ctx: None

    # ------------------------------------------------------------ processes

    def env(self, runner_cls: str = "CppRunner") -> dict[str, str]:
        return runner_env(
            self.app,
            self.backend,
            {
                "PYNENC__RUNNER_CLS": runner_cls,
                "PYNENC__CPP_RUNNER_WORKERS": str(WORKERS),
                "PYNENC__RUNNER_CONSIDERED_DEAD_AFTER_MINUTES": str(DEAD_AFTER_MINUTES),
                "PYNENC__CPP_OUTAGE_BUDGET_SEC": "60",
                # pynenc's own runners: two worker processes / threads each.
                "PYNENC__CONFIGMULTITHREADRUNNER__MIN_PROCESSES": "1",
                "PYNENC__CONFIGMULTITHREADRUNNER__MAX_PROCESSES": "2",
                "PYNENC__CONFIGPERSISTENTPROCESSRUNNER__NUM_PROCESSES": "2",
            },
        )

    def start(self, runner_cls: str = "CppRunner") -> Runner:
        log = self.tmp_path / f"runner{len(self.runners)}-{runner_cls}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pynenc",
                    "--app",
                    self.app_module,
                    "runner",
                    "start",
                ],
                cwd=ROOT,
                env=self.env(runner_cls),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=orphan_guard(),
            )
        runner = Runner(runner_cls, proc, log)
        self.runners.append(runner)
        self.slots += WORKERS
        return runner

    def signal(self, runner: Runner, sig: signal.Signals) -> Disruption:
        at = time.time()
        os.killpg(runner.pgid, sig)
        if sig == signal.SIGKILL:
            runner.proc.wait(10)
        elif sig == signal.SIGSTOP:
            wait_stopped(runner.pgid)
        # Counted once the group can write no more: every line it wrote is in.
        event = Disruption(sig.name, runner.pgid, at, len(parse_ledger(self.ledger)), time.time())
        if sig != signal.SIGCONT:
            self.disruptions.append(event)
        if sig == signal.SIGSTOP:
            self.stopped.add(runner.pgid)
        else:
            self.stopped.discard(runner.pgid)
        return event

    def kill_redis(self) -> Disruption:
        assert self.redis is not None
        lines = len(parse_ledger(self.ledger))
        event = Disruption("redis SIGKILL", None, time.time(), lines)
        self.redis.stop(signal.SIGKILL)
        event.settled = time.time()
        self.disruptions.append(event)
        return event

    def close(self) -> None:
        """Kills every runner's whole process group (a stopped one is thawed first so
        it can die), whatever state the scenario left it in."""
        for runner in self.runners:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(runner.pgid, sig)
                except ProcessLookupError:
                    pass
            try:
                runner.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass  # reported by the scenario; the next runners are still killed

    def executions_by_kind(self) -> dict[str, int]:
        """Bodies started per runner class (from the ledger's process groups)."""
        kind_of = {r.pgid: r.cls for r in self.runners}
        out: Counter[str] = Counter()
        for kind, _, pgid in parse_ledger(self.ledger):
            if kind == "start":
                out[kind_of.get(pgid, "client")] += 1
        return dict(out)

    def not_recovered_by(self, k: int, deadline: float) -> list[str]:
        """Ids held by disruption `k` that no other runner had recovered (a
        ``*_RECOVERY`` record, or a SUCCESS of another process) by `deadline`
        (time.time()); call after ``check``."""
        limit = datetime.fromtimestamp(deadline, UTC)
        pgid = self.disruptions[k].pgid
        recovered = {InvocationStatus.RUNNING_RECOVERY, InvocationStatus.PENDING_RECOVERY}
        missing = []
        for iid in self.held[k]:
            if not any(
                at_(h) < limit
                and (
                    h.status_record.status in recovered
                    or (
                        h.status_record.status == InvocationStatus.SUCCESS
                        and self.pid_of(h.runner_context_id) != pgid
                    )
                )
                for h in self.histories[iid]
            ):
                missing.append(iid)
        return missing

    def sanitizer_reports(self) -> list[str]:
        """Lines of AddressSanitizer / UBSan reports in any process log of the run
        (``make chaos`` runs the suite with the engine built under both)."""
        found = []
        for log in [r.log for r in self.runners] + sorted(self.tmp_path.glob("*.out")):
            if log.exists():
                for line in log.read_text(errors="replace").splitlines():
                    if "ERROR: AddressSanitizer" in line or "runtime error:" in line:
                        found.append(f"{log.name}: {line}")
        return found

    def describe(self, ids: list[str]) -> str:
        """Each invocation's status history (status, owner's pid, time), its status
        record now, its ledger lines and the runner log lines that name it: what a
        failed check needs to be explained from CI's output alone."""
        state = self.app.state_backend
        record_of = self.app.orchestrator.get_invocation_status_record
        ledger = parse_ledger(self.ledger)
        logs = self.full_logs().splitlines()
        out = []
        for iid in ids:
            out.append(f"{iid}:")
            for h in state.get_history(iid):
                ctx = state.get_runner_context(h.runner_context_id)
                pid = ctx.pid if ctx is not None else "?"
                rec = h.status_record
                out.append(
                    f"  {at_(h).time()} (row {h.timestamp.time()}) {rec.status.value} "
                    f"pid={pid} owner={rec.runner_id}"
                )
            now = record_of(iid)
            out.append(f"  now: {now.status.value} at {now.timestamp.time()} owner={now.runner_id}")
            tag = self.tag_of.get(iid)
            out += [f"  ledger: {k} {t} pgid={g}" for k, t, g in ledger if t == tag]
            out += [f"  log: {line[:400]}" for line in logs if iid in line][:20]
        return "\n".join(out)

    def full_logs(self) -> str:
        """Every runner log, whole (for assertions; ``logs`` is for messages)."""
        return "".join(r.log.read_text(errors="replace") for r in self.runners if r.log.exists())

    def logs(self) -> str:
        return "".join(
            f"--- {r.log.name}\n{r.log.read_text(errors='replace')[-3000:]}" for r in self.runners
        )

    # ---------------------------------------------------------------- burst

    def submit(self, n: int = N, body_sec: float = 0.002, first: int = 0) -> dict[str, int]:
        """Submits `n` invocations; returns invocation id -> x (result x + 1)."""
        out: dict[str, int] = {}
        for x in range(first, first + n):
            inv = rt.ledger_add(str(self.ledger), f"t{x}", x, 1, body_sec)
            out[inv.invocation_id] = x
        return out

    def wait_started(self, bodies: int, timeout: float = 120) -> None:
        """Until `bodies` bodies have started (``start`` lines in the ledger)."""
        deadline = time.monotonic() + timeout
        while sum(1 for kind, _, _ in parse_ledger(self.ledger) if kind == "start") < bodies:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"fewer than {bodies} bodies started after {timeout} s\n{self.logs()}"
                )
            time.sleep(0.01)

    def wait_final(self, ids: list[str], timeout: float = 180) -> float:
        """Waits until every one of `ids` is final; returns when (time.time())."""
        orch = self.app.orchestrator
        pending = list(ids)
        deadline = time.monotonic() + timeout
        while pending:
            pending = [i for i in pending if orch.get_invocation_status(i) not in FINAL]
            if not pending:
                break
            if time.monotonic() > deadline:
                counts = Counter(orch.get_invocation_status(i) for i in pending)
                raise AssertionError(
                    f"{len(pending)} of {len(ids)} invocations not final after {timeout} s: "
                    f"{dict(counts)}\n{self.logs()}"
                )
            time.sleep(0.2)
        return time.time()

    # --------------------------------------------------------------- checks

    def await_history_rows(self, ids: list[str], timeout: float = ROW_LAG_SEC) -> None:
        """Mixed mode: until every SUCCESS among `ids` has its history row, or none of
        those without one is owned by a runner that could still write it (alive and
        not stopped), or `timeout` passes.

        pynenc writes a status change and its history row in two calls, so a runner
        riding out an outage between them (its retries back off to 2 s) may show
        SUCCESS a while before the row: the row lags, it is not lost. Checked
        before that runner's next retry, it would look lost (CI saw it once)."""
        state, orch = self.app.state_backend, self.app.orchestrator
        live = {r.pgid for r in self.runners if r.proc.poll() is None} - self.stopped
        deadline = time.monotonic() + timeout
        waiting = list(ids)
        while True:
            lagging = []
            for iid in waiting:
                record = orch.get_invocation_status_record(iid)
                if record.status != InvocationStatus.SUCCESS:
                    continue
                history = state.get_history(iid)
                if any(h.status_record.status == InvocationStatus.SUCCESS for h in history):
                    continue
                # The last row's actor (the runner that took it to RUNNING) writes it.
                ctx = state.get_runner_context(history[-1].runner_context_id) if history else None
                if ctx is not None and _group_of(ctx.pid) in live:
                    lagging.append(iid)
            if not lagging or time.monotonic() > deadline:
                return
            waiting = lagging
            time.sleep(0.1)

    def check(self, acknowledged: dict[str, int], *, outage_reruns: int = 0) -> Outcome:
        """The shared assertions (module docstring); `outage_reruns` is how many
        re-runs a storage outage may cause (a body whose RUNNING record was lost)."""
        assert not self.sanitizer_reports(), "\n".join(self.sanitizer_reports())
        orch, state = self.app.orchestrator, self.app.state_backend
        if self.mode == "mixed":
            self.await_history_rows(list(acknowledged))
        tag_of = self.tag_of = {iid: f"t{x}" for iid, x in acknowledged.items()}
        statuses = {iid: orch.get_invocation_status(iid) for iid in acknowledged}
        ledger = parse_ledger(self.ledger)
        starts: dict[str, list[int]] = defaultdict(list)
        ends: dict[str, list[int]] = defaultdict(list)
        for kind, tag, pgid in ledger:
            (starts if kind == "start" else ends)[tag].append(pgid)

        non_final = {iid: s for iid, s in statuses.items() if s not in FINAL}
        assert not non_final, f"{len(non_final)} non-final: {Counter(non_final.values())}"
        failed_after_success = [
            iid for iid, s in statuses.items() if s == InvocationStatus.FAILED and ends[tag_of[iid]]
        ]
        assert not failed_after_success, (
            f"{len(failed_after_success)} bodies that finished are reported FAILED, "
            f"e.g. {failed_after_success[:3]}\n{self.describe(failed_after_success[:3])}"
        )
        not_success = [iid for iid, s in statuses.items() if s != InvocationStatus.SUCCESS]
        assert not not_success, (
            f"{len(not_success)} acknowledged invocations did not end SUCCESS: "
            f"{Counter(statuses[i] for i in not_success)} (their bodies started "
            f"{sum(len(starts[tag_of[i]]) for i in not_success)} times)\n"
            f"{self.describe(not_success[:3])}"
        )

        success_at: dict[str, datetime] = {}
        histories = {}
        unrowed: list[str] = []  # SUCCESS without its history row (mixed mode)
        for iid, x in acknowledged.items():
            history = state.get_history(iid)
            histories[iid] = history
            successes = [h for h in history if h.status_record.status == InvocationStatus.SUCCESS]
            if not successes and self.mode == "mixed":
                # pynenc's own order (mixed mode): the status change, then its
                # history row in another call. A runner killed in between leaves
                # SUCCESS without its row; allowed only for work a disrupted runner
                # held (checked below), counted, and documented.
                unrowed.append(iid)
                success_at[iid] = orch.get_invocation_status_record(iid).timestamp
                continue
            assert len(successes) == 1, (iid, [h.status_record.status for h in history])
            success_at[iid] = at_(successes[0])
            assert state.get_result(iid) == x + 1, iid
            assert starts[tag_of[iid]], f"{iid} is SUCCESS but its body never started"

        # A CppRunner's status records name a runner context whose pid is its group.
        pids: dict[str, int | None] = {}

        def pid_of(ctx_id: str) -> int | None:
            if ctx_id not in pids:
                ctx = state.get_runner_context(ctx_id)
                pids[ctx_id] = ctx.pid if ctx is not None else None
            return pids[ctx_id]

        # What each disrupted runner held when the signal came: invocations not yet
        # SUCCESS then, whose body it had started (finished or not: the outcome may
        # not have been stored), or whose last status record before the signal took
        # effect was its own PENDING (claimed) or RUNNING (body not begun yet).
        holding = {InvocationStatus.PENDING, InvocationStatus.RUNNING}
        held: dict[int, set[str]] = {}  # disruption index -> invocation ids
        for k, d in enumerate(self.disruptions):
            if d.pgid is None:
                continue
            sent = datetime.fromtimestamp(d.at, UTC)
            settled = datetime.fromtimestamp(d.settled, UTC)
            started = {
                t for kind, t, p in ledger[: d.ledger_lines] if kind == "start" and p == d.pgid
            }
            ids = set()
            for iid, history in histories.items():
                if success_at[iid] <= settled and iid not in unrowed:  # finished by then
                    continue
                before = [h for h in history if at_(h) < settled]
                last = before[-1] if before else None
                if tag_of[iid] in started or (
                    last is not None
                    and last.status_record.status in holding
                    and pid_of(last.runner_context_id) == d.pgid
                ):
                    ids.add(iid)
            held[k] = ids

        # Re-runs only for work a disrupted runner held: each disruption explains at
        # most one more execution of what it held.
        reruns = 0
        unexplained = []
        for iid, tag in tag_of.items():
            groups = starts[tag]
            if len(groups) == 1:
                continue
            reruns += len(groups) - 1
            holders = sum(1 for ids in held.values() if iid in ids)
            if len(groups) > 1 + holders:
                unexplained.append((tag, groups))
        held_ids = set().union(*held.values()) if held else set()
        assert set(unrowed) <= held_ids, (
            "SUCCESS without its history row, not held by a disrupted runner:\n"
            + self.describe([i for i in unrowed if i not in held_ids][:3])
        )
        allowed = outage_reruns or 0
        assert len(unexplained) <= allowed, (
            f"re-runs of work no disrupted runner held: {unexplained[:10]}\n"
            + self.describe([iid for iid, t in tag_of.items() if t in dict(unexplained[:3])])
        )

        # Recovery time: from the signal until every invocation the runner held is
        # SUCCESS on another runner (a thawed runner finishing its own is not recovery).
        recovery = []
        for k, ids in held.items():
            d = self.disruptions[k]
            sent = datetime.fromtimestamp(d.at, UTC)
            elsewhere = [
                at_(h)
                for iid in ids
                for h in histories[iid]
                if h.status_record.status == InvocationStatus.SUCCESS
                and pid_of(h.runner_context_id) != d.pgid
            ]
            if elsewhere:
                recovery.append((max(elsewhere) - sent).total_seconds())
        self.held, self.histories, self.pid_of = held, histories, pid_of
        return Outcome(
            extra={
                **({"held": [len(ids) for ids in held.values()]} if held else {}),
                **({"success_without_history_row": len(unrowed)} if unrowed else {}),
            },
            scenario=self.scenario,
            backend=self.backend,
            mode=self.mode,
            invocations=len(acknowledged),
            executions=sum(len(g) for g in starts.values()),
            reruns=reruns,
            recovery_sec=recovery,
        )
