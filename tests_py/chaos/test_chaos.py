"""The chaos suite (issue 15): bursts of at least 1,000 invocations on real runner
processes while runners are SIGKILLed, SIGSTOPped past their dead-after time,
redis-server is SIGKILLed and restarted on its append-only file, six runners of
three kinds share one SQLite file, and a client is killed in the middle of its
submits. ``tests_py/chaos/harness.py`` holds the checks every scenario makes.

``cpp_mem`` is not here: its storage lives in one process, so no other process can
take over its work, and killing that process kills the storage with it.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from pynenc.invocation import InvocationStatus

from tests_py import runner_tasks as rt
from tests_py.chaos.harness import (
    DEAD_AFTER_MINUTES,
    FINAL,
    ROUNDS,
    Chaos,
    N,
    Outcome,
    parse_ledger,
)
from tests_py.chaos.harness import MODE as CHAOS_MODE
from tests_py.procs import orphan_guard
from tests_py.redis_server import RedisServer, await_state, raw_reply
from tests_py.sqlite_locks import sqlite_write_locked
from tests_py.test_cpp_runner import ROOT

pytestmark = pytest.mark.timeout(600)

BACKENDS = ["sqlite", "redis"]
ROUND = pytest.mark.parametrize("round_", range(ROUNDS))
#: native: one engine call per orchestration step; mixed: pynenc's orchestration
#: code over the native storage calls (several calls per step, so more places to die).
MODES = pytest.mark.parametrize("mode", ["native", "mixed"])
DEAD_AFTER_SEC = DEAD_AFTER_MINUTES * 60
STOP_SEC = max(DEAD_AFTER_SEC, 5.0) + 3.0


@pytest.fixture
def aof_server(tmp_path: Path) -> Iterator[RedisServer]:
    """redis-server with an append-only file fsynced on every write."""
    server = RedisServer(tmp_path / "redis", appendonly=True, appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture
def chaos(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chaos]:
    params = request.node.callspec.params
    backend, mode = params["backend"], params["mode"]
    url = None
    if "sentinels" in request.fixturenames:
        deployment: SentinelDeployment = request.getfixturevalue("sentinels")
        redis: RedisServer | None = deployment.master
        # connect_timeout_ms: a call waits through the failover (down-after 1 s +
        # the promotion) and a replica's resync (WAIT again) before it gives up.
        url = deployment.url(f"?connect_timeout_ms=15000&min_replicas={params['min_replicas']}")
    else:
        redis = request.getfixturevalue("aof_server") if backend == "redis" else None
    run = Chaos(
        request.node.originalname.removeprefix("test_"), backend, mode, tmp_path, redis, url
    )
    yield run
    run.close()


@dataclass
class SentinelDeployment:
    master: RedisServer
    replicas: list[RedisServer]
    sentinels: list[RedisServer]

    def url(self, query: str) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/chaos/0{query}"


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelDeployment]:
    """A master (AOF, fsync always), two replicas and three sentinels (quorum 2,
    down after 1 s) on loopback; every server stopped afterwards, also on failure."""
    started: list[RedisServer] = []
    try:
        master = RedisServer(
            tmp_path / "master",
            appendonly=True,
            appendfsync="always",
            # No 5 s wait for more replicas before a diskless sync (Redis 7's default).
            extra_args=("--repl-diskless-sync-delay", "0"),
        ).start()
        started.append(master)
        replicas = []
        for i in range(2):
            replica = RedisServer(
                tmp_path / f"replica{i}",
                appendonly=True,
                appendfsync="always",
                extra_args=("--replicaof", "127.0.0.1", str(master.port)),
            ).start()
            started.append(replica)
            replicas.append(replica)
        await_state(
            "both replicas online",
            lambda: raw_reply(master.port, "INFO", "replication").count("state=online") == 2,
        )
        conf = (
            f"sentinel monitor chaos 127.0.0.1 {master.port} 2\n"
            "sentinel down-after-milliseconds chaos 1000\n"
            "sentinel failover-timeout chaos 10000\n"
        )
        watchers = []
        for i in range(3):
            sentinel = RedisServer(tmp_path / f"sentinel{i}", sentinel_conf=conf).start()
            started.append(sentinel)
            watchers.append(sentinel)
        for sentinel in watchers:  # each knows both replicas and the other sentinels
            await_state(
                "the sentinels to know the deployment",
                lambda s=sentinel: (
                    raw_reply(s.port, "SENTINEL", "master", "chaos").count(
                        "num-other-sentinels\r\n$1\r\n2\r\n"
                    )
                    == 1
                    and all(
                        str(r.port) in raw_reply(s.port, "SENTINEL", "replicas", "chaos")
                        for r in replicas
                    )
                ),
            )
        yield SentinelDeployment(master, replicas, watchers)
    finally:
        for server in reversed(started):
            server.stop(signal.SIGKILL)


def collect_results(chaos: Chaos, acknowledged: dict[str, int]) -> threading.Thread:
    """A client thread waiting on every result (through the faults); the test checks
    what it got once it ends."""
    chaos.results: dict[str, object] = {}  # type: ignore[misc]
    chaos.client_errors: list[BaseException] = []  # type: ignore[misc]

    def wait() -> None:
        try:
            for iid in acknowledged:
                inv = chaos.app.state_backend.get_invocation(iid)
                chaos.results[iid] = inv.result  # type: ignore[attr-defined]
        except BaseException as exc:  # reported by the test
            chaos.client_errors.append(exc)  # type: ignore[attr-defined]

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def check_client(chaos: Chaos, client: threading.Thread, acknowledged: dict[str, int]) -> None:
    client.join(120)
    assert not client.is_alive(), "the waiting client still waits two minutes after all are final"
    assert chaos.client_errors == []  # type: ignore[attr-defined]
    assert chaos.results == {iid: x + 1 for iid, x in acknowledged.items()}  # type: ignore[attr-defined]


@ROUND
@MODES
@pytest.mark.parametrize("backend", BACKENDS)
def test_runners_sigkilled_mid_burst(chaos: Chaos, backend: str, mode: str, round_: int) -> None:
    """Two CppRunners; one is SIGKILLed a quarter into the burst and a new one
    started, then another is SIGKILLed at 60% and replaced. The live runners recover
    the dead ones' PENDING and RUNNING invocations by themselves."""
    first, second = chaos.start(), chaos.start()
    acknowledged = chaos.submit(N)
    client = collect_results(chaos, acknowledged)
    chaos.wait_started(N // 4)
    chaos.signal(first, signal.SIGKILL)
    chaos.start()
    chaos.wait_started(int(N * 0.6))
    chaos.signal(second, signal.SIGKILL)
    chaos.start()
    chaos.wait_final(list(acknowledged))
    outcome = chaos.check(acknowledged)
    check_client(chaos, client, acknowledged)
    outcome.emit()


@ROUND
@MODES
@pytest.mark.parametrize("backend", BACKENDS)
def test_runner_sigstopped_past_dead_after(
    chaos: Chaos, backend: str, mode: str, round_: int
) -> None:
    """A runner is frozen (SIGSTOP) with bodies in flight for longer than its
    dead-after time: the other runner recovers its work. Then it is thawed
    (SIGCONT): its bodies finish, and their outcomes must not overwrite the
    recovered runs' (one SUCCESS each, none FAILED)."""
    frozen, _ = chaos.start(), chaos.start()
    acknowledged = chaos.submit(N, body_sec=0.005)
    client = collect_results(chaos, acknowledged)
    chaos.wait_started(N // 3)
    chaos.signal(frozen, signal.SIGSTOP)
    # On SQLite a process frozen inside a write transaction keeps the file's lock:
    # nobody can write (nor recover) until it thaws, and everyone rides it out.
    holds_lock = backend == "sqlite" and sqlite_write_locked(
        chaos.tmp_path / "chaos.db", wait_sec=2.0
    )
    # Past dead-after (3 s) and the PENDING timeout (max_pending_seconds, 5 s), plus
    # a heartbeat tick: everything it held is recovered before it thaws.
    time.sleep(STOP_SEC)
    thawed = chaos.signal(frozen, signal.SIGCONT)
    chaos.wait_final(list(acknowledged))
    outcome = chaos.check(acknowledged)
    check_client(chaos, client, acknowledged)
    missing = chaos.not_recovered_by(0, thawed.at)
    if holds_lock:
        outcome.extra["froze_holding_the_lock"] = 1
    else:
        assert not missing, "held but not recovered while frozen:\n" + chaos.describe(missing)
    assert frozen.proc.poll() is None, "the thawed runner died\n" + chaos.logs()
    outcome.emit()


@ROUND
@MODES
@pytest.mark.parametrize("backend", ["redis"])
def test_redis_sigkilled_and_restarted_on_its_aof(
    chaos: Chaos, backend: str, mode: str, round_: int
) -> None:
    """redis-server (AOF, fsync always) is SIGKILLed mid-burst and restarted on the
    same file a second later: nothing acknowledged is lost, no finished body is
    reported FAILED, and waiting clients get their results."""
    assert chaos.redis is not None
    chaos.start()
    chaos.start()
    acknowledged = chaos.submit(N)
    client = collect_results(chaos, acknowledged)
    chaos.wait_started(N // 4)
    chaos.kill_redis()
    time.sleep(1.0)
    chaos.redis.start()  # same port, same append-only file
    restarted = time.time()
    done = chaos.wait_final(list(acknowledged))
    # A body runs again only if the outage cut its RUNNING record's reply: at most
    # one per worker slot.
    outcome = chaos.check(acknowledged, outage_reruns=chaos.slots)
    check_client(chaos, client, acknowledged)
    assert "TaskAbortedError" not in chaos.full_logs()
    outcome.recovery_sec = [done - restarted]
    outcome.emit()


_LOGGED_SUCCESS = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d) .*status:success"
)


def first_success_logged_after(chaos: Chaos, after: float) -> float | None:
    """The wall-clock time of the first ``status:success`` line a runner logged
    after `after` (each is written once the SUCCESS is stored), or None. Once the
    master is killed no write succeeds until Sentinel promotes a replica, so the
    first one after the kill is the first invocation finished on the new master."""
    found: list[float] = []
    for runner in chaos.runners:
        for line in runner.log.read_text(errors="replace").splitlines():
            match = _LOGGED_SUCCESS.match(line)
            if match:
                at = datetime.fromisoformat(match.group(1).replace(" ", "T")).timestamp()
                if at > after:
                    found.append(at)
                    break
    return min(found, default=None)


#: A burst of the failover scenario (the issue's figure; more than N).
FAILOVER_N = max(N, 2000)


#: (mode, min_replicas) of the failover scenario: CI's slice runs the issue's case
#: once; ``make chaos`` adds pynenc's own orchestration (mixed) and writes that wait
#: for no replica, whose loss is reported, not refused.
FAILOVER_CASES = [("native", 1)] + ([("mixed", 1), ("native", 0)] if CHAOS_MODE == "full" else [])


def settle_after_failover(
    chaos: Chaos, ids: list[str], quiet: float = 10.0, timeout: float = 180.0
) -> dict[str, InvocationStatus | None]:
    """Each of `ids`'s status on the new master (None: it has no such invocation)
    once every one is final or unknown, or none has changed for `quiet` seconds:
    without ``min_replicas`` the new master may lack writes the old one
    acknowledged, and an invocation it never had stays unknown for good."""
    orch = chaos.app.orchestrator

    def status(iid: str) -> InvocationStatus | None:
        try:
            return orch.get_invocation_status(iid)
        except KeyError:  # InvocationNotFound: lost with the old master
            return None

    deadline = time.monotonic() + timeout
    last: dict[str, InvocationStatus | None] = {}
    changed = time.monotonic()
    while True:
        now = {iid: status(iid) for iid in ids}
        if now != last:
            last, changed = now, time.monotonic()
        unsettled = [i for i, s in now.items() if s is not None and s not in FINAL]
        if not unsettled or time.monotonic() - changed > quiet:
            return now
        if time.monotonic() > deadline:
            return now
        time.sleep(0.5)


@ROUND
@pytest.mark.parametrize(("mode", "min_replicas"), FAILOVER_CASES)
@pytest.mark.parametrize("backend", ["redis"])
def test_redis_master_sigkilled_under_sentinel(
    chaos: Chaos,
    sentinels: SentinelDeployment,
    backend: str,
    mode: str,
    min_replicas: int,
    round_: int,
) -> None:
    """The app reaches Redis through three sentinels; its master is SIGKILLed a
    quarter into the burst and a replica is promoted. With ``min_replicas=1`` every
    write waits for one replica, so nothing acknowledged is lost: every invocation
    ends SUCCESS with its result, and a waiting client gets them. Submits sent
    during the failover either return (and then run) or raise. With
    ``min_replicas=0`` (``make chaos`` only) what the new master lacks is counted
    and reported (docs/reliability.md). Reported: the time from the kill to the
    first invocation finished on the new master."""
    chaos.start()
    chaos.start()
    acknowledged = chaos.submit(FAILOVER_N)
    client = collect_results(chaos, acknowledged) if min_replicas else None
    chaos.wait_started(FAILOVER_N // 4)
    killed = chaos.kill_redis()
    # Submits during the failover: each returns acknowledged or raises.
    during: dict[str, int] = {}
    refused = 0
    for x in range(FAILOVER_N, FAILOVER_N + 20):
        try:
            during.update(chaos.submit(1, first=x))
        except Exception:  # noqa: BLE001 - counted: a clear error, not a silent loss
            refused += 1
    if not min_replicas:
        report_failover_loss(chaos, sentinels, acknowledged, during, killed.at, refused)
        return
    assert client is not None
    chaos.wait_final(list(acknowledged | during), timeout=300)
    first_finished = first_success_logged_after(chaos, killed.at + 0.1)
    assert first_finished is not None, "no invocation finished after the kill\n" + chaos.logs()
    promoted = [r for r in sentinels.replicas if "master" in raw_reply(r.port, "ROLE")[:20]]
    assert len(promoted) == 1, "Sentinel promoted no replica"
    outcome = chaos.check(acknowledged | during, outage_reruns=chaos.slots)
    check_client(chaos, client, acknowledged)
    outcome.recovery_sec = [first_finished - killed.at]
    outcome.extra["submits_refused_in_failover"] = refused
    outcome.emit()


def report_failover_loss(
    chaos: Chaos,
    sentinels: SentinelDeployment,
    acknowledged: dict[str, int],
    during: dict[str, int],
    killed_at: float,
    refused: int,
) -> None:
    """The ``min_replicas=0`` case: writes are acknowledged by the master alone, and
    a replica promoted before it received the last of them lacks them. Asserted:
    Sentinel promoted a replica, work finished on it, and every invocation it ended
    SUCCESS holds its own result. Counted and reported, not asserted: invocations
    the new master does not know (lost whole), invocations left non-final (a lost
    status change or queue entry), and bodies that ran more than once."""
    ids = acknowledged | during
    statuses = settle_after_failover(chaos, list(ids))
    assert not chaos.sanitizer_reports(), "\n".join(chaos.sanitizer_reports())
    promoted = [r for r in sentinels.replicas if "master" in raw_reply(r.port, "ROLE")[:20]]
    assert len(promoted) == 1, "Sentinel promoted no replica"
    first_finished = first_success_logged_after(chaos, killed_at + 0.1)
    assert first_finished is not None, "no invocation finished after the kill\n" + chaos.logs()
    state = chaos.app.state_backend
    succeeded = [iid for iid, st in statuses.items() if st == InvocationStatus.SUCCESS]
    wrong = [iid for iid in succeeded if state.get_result(iid) != ids[iid] + 1]
    assert not wrong, f"{len(wrong)} SUCCESS with another result, e.g. {wrong[:3]}"
    starts: dict[str, int] = {}
    for kind, tag, _ in parse_ledger(chaos.ledger):
        if kind == "start":
            starts[tag] = starts.get(tag, 0) + 1
    executions = sum(starts.values())
    outcome = Outcome(
        chaos.scenario,
        chaos.backend,
        chaos.mode,
        len(ids),
        executions,
        sum(n - 1 for n in starts.values() if n > 1),
        [first_finished - killed_at],
        {
            "min_replicas": 0,
            "lost_unknown_to_new_master": sum(1 for st in statuses.values() if st is None),
            "left_non_final": sum(
                1 for st in statuses.values() if st is not None and st not in FINAL
            ),
            "success": len(succeeded),
            "submits_refused_in_failover": refused,
        },
    )
    outcome.emit()


@ROUND
@MODES
@pytest.mark.parametrize("backend", BACKENDS)
def test_six_mixed_runners_on_one_store(chaos: Chaos, backend: str, mode: str, round_: int) -> None:
    """Two CppRunners, two MultiThreadRunners and two PersistentProcessRunners (both
    fork worker processes) share one SQLite file (or one Redis); one CppRunner is
    SIGKILLed mid-burst. No lock is held for seconds, nothing is lost."""
    kinds = ["CppRunner", "MultiThreadRunner", "PersistentProcessRunner"] * 2
    runners = [chaos.start(kind) for kind in kinds]
    acknowledged = chaos.submit(N)
    client = collect_results(chaos, acknowledged)
    chaos.wait_started(N // 3)
    chaos.signal(runners[0], signal.SIGKILL)
    chaos.wait_final(list(acknowledged), timeout=300)
    outcome = chaos.check(acknowledged)
    check_client(chaos, client, acknowledged)
    logs = chaos.logs()
    assert "stayed locked" not in chaos.full_logs()
    ran_in = {pgid for kind, _, pgid in parse_ledger(chaos.ledger) if kind == "end"}
    by_kind = {r.cls for r in chaos.runners if r.pgid in ran_in}
    outcome.extra["executions_by_kind"] = chaos.executions_by_kind()
    # pynenc's process runners take seconds to start (longer under ASan) and may
    # find the burst gone: the store is shared when CppRunner and at least one of
    # them ran work; which kinds did is reported.
    assert "CppRunner" in by_kind and len(by_kind) >= 2, f"only {by_kind} ran work\n{logs}"
    outcome.emit()


@ROUND
@MODES
@pytest.mark.parametrize("backend", BACKENDS)
def test_client_sigkilled_mid_submit(chaos: Chaos, backend: str, mode: str, round_: int) -> None:
    """A client process is SIGKILLed in the middle of a burst of submits: every
    invocation it was told about runs to SUCCESS. In native mode a submit lands whole
    or not at all, so no invocation it registered is left behind non-final; in mixed
    mode (pynenc's own two-call submit) the one submit the kill cut may stay
    REGISTERED, unacknowledged (docs/reliability.md)."""
    chaos.start()
    chaos.start()
    acks = chaos.tmp_path / "acks"
    with open(chaos.tmp_path / "client.out", "ab") as out:
        client = subprocess.Popen(
            [sys.executable, "-m", "tests_py.chaos.submit_client"]
            + [str(chaos.ledger), str(acks), str(3 * N)],
            cwd=ROOT,
            env={**chaos.env(), "PYNENC__LOGGING_LEVEL": "warning"},
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=orphan_guard(),
        )
    try:
        deadline = time.monotonic() + 120
        while not acks.exists() or len(acks.read_text().splitlines()) < N:
            assert client.poll() is None, "the client ended before it was killed"
            assert time.monotonic() < deadline, "the client acknowledged too few submits"
            time.sleep(0.005)
        client.send_signal(signal.SIGKILL)
        client.wait(10)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(10)
    acknowledged = {}
    for line in acks.read_text().splitlines():
        iid, x = line.split()
        acknowledged[iid] = int(x)
    assert N <= len(acknowledged) < 3 * N
    chaos.wait_final(list(acknowledged))
    outcome = chaos.check(acknowledged)
    # Registered beyond the last acknowledgement (at most the submit in flight, whose
    # reply the kill cut): final too, never stranded.
    orch = chaos.app.orchestrator
    ids = list(orch.get_existing_invocations(task=rt.ledger_add))
    extra = [iid for iid in ids if iid not in acknowledged]
    assert len(extra) <= 1, extra
    stranded = []
    if mode == "mixed":
        # pynenc's own submit (mixed mode runs it verbatim) registers, then routes in
        # a later call: a kill between the two leaves that one unacknowledged
        # invocation REGISTERED with no queue entry, as on pynenc's own backends
        # (docs/reliability.md). Native mode submits in one transaction / script.
        time.sleep(2.0)  # long enough for a routed one to be claimed
        stranded = [
            i for i in extra if orch.get_invocation_status(i) == InvocationStatus.REGISTERED
        ]
    chaos.wait_final([i for i in ids if i not in stranded])
    outcome.extra["registered_unacknowledged"] = len(extra)
    outcome.extra["stranded_registered"] = len(stranded)
    outcome.emit()
