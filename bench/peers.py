"""pynenc-cpp beside the task systems a user would pick instead, in one run.

Not a test. Run it with ``make bench-peers`` (which runs scripts/setup.sh and
scripts/bench_setup.sh first), or ``.venv/bin/python bench/peers.py [--quick]``.

Scenarios (each system through its own public API; 2 worker slots):
  S1 burst   submit N no-op tasks, then read every result: submit rate and
             completion rate (N / time from the first submit to the last result).
  S2 serial  submit one task, wait for its result, repeat M times: p50, p99.
  S3 idle    CPU seconds used by the idle worker process tree over --idle-s
             seconds (psutil; reported per 10 s).

Every system runs in a fresh driver process, per round, against ONE
redis-server this script starts on a free loopback port (a temp dir, FLUSHALL
between systems). Workers are separate OS processes started by the driver,
except on in-memory backends (pynenc's memory(), cpp_mem()) whose state lives
in one process: there the runner runs in a thread of the driver process and S3
measures that whole process. The pynenc-based systems all get the same tuning:
``runner_tuning`` poll interval ``--pynenc-sleep`` (default 0.01 s, the
builder's default) for runners and result waits, and ``cached_status_time``
``--pynenc-status-cache`` (default 0; pynenc's own 0.1 s default puts a
100 ms floor under the S2 figure of every pynenc-based system whose result wait
does not update the invocation's status cache; the ``-defaultcache`` rows run
pynenc-cpp with that default). A system whose feature is not
available (for instance CppRunner before it lands) is skipped with its reason.

Rounds alternate the systems (round 1: every system, round 2: every system...);
the table shows medians over rounds. JSON goes to bench/results/peers-<ts>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_PY = ROOT / ".venv" / "bin" / "python"
#: Virtualenvs by role (scripts/bench_setup.sh makes all but "main").
VENVS = {
    "main": ROOT / ".venv",  # pynenc-cpp on the pinned pynenc 0.4.0
    "bench": ROOT / ".venv-bench",  # peers that run on pynenc 0.4.0: pure pynenc, Celery, RQ
    "bench03": ROOT / ".venv-bench-pynenc03",  # plugins that need pynenc 0.3.1
    # One venv per peer that needs nothing of pynenc's (bench/requirements-<name>.txt).
    "ardiq": ROOT / ".venv-bench-ardiq",
    "streaq": ROOT / ".venv-bench-streaq",
    "rustvello": ROOT / ".venv-bench-rustvello",  # rustvello standalone, no pynenc
}
#: Where scripts/bench_setup.sh leaves pip's error when a peer's venv cannot be made.
INSTALL_ERROR = ".peers-install-error"


# --------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class System:
    """One peer: how to build it (``cfg``) and in which virtualenv it runs."""

    name: str
    kind: str  # a key of ADAPTERS: "pynenc" | "celery" | "rq" | "huey" | "taskiq" | "ardiq" ...
    venv: str  # a key of VENVS
    cfg: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def in_process(self) -> bool:
        """Memory backends: the runner shares the client's process (a thread)."""
        return self.kind == "pynenc" and self.cfg["stack"] in ("pynenc-mem", "cpp-mem")


def _p(name: str, venv: str, stack: str, runner: str, mode: str = "", note: str = "") -> System:
    return System(name, "pynenc", venv, {"stack": stack, "runner": runner, "mode": mode}, note)


SYSTEMS: list[System] = [
    # pynenc-cpp with its C++ runner, native and mixed orchestrators.
    *[
        _p(f"cpp-{b}-{m}-cpprunner", "main", f"cpp-{b}", "cpp", m)
        for b in ("mem", "sqlite", "redis")
        for m in ("native", "mixed")
    ],
    # The same with the engine's metric counting off (docs/metrics.md: its cost).
    *[
        System(
            f"cpp-{b}-native-cpprunner-nometrics",
            "pynenc",
            "main",
            {"stack": f"cpp-{b}", "runner": "cpp", "mode": "native", "metrics": False},
            "engine metrics off",
        )
        for b in ("sqlite", "redis")
    ],
    # The same with pynenc's default status cache (the other rows set it to 0).
    *[
        System(
            f"cpp-{b}-native-cpprunner-defaultcache",
            "pynenc",
            "main",
            {"stack": f"cpp-{b}", "runner": "cpp", "mode": "native", "status_cache": 0.1},
            "pynenc's default cached_status_time (0.1 s)",
        )
        for b in ("sqlite", "redis")
    ],
    # The same with a prefetch of 4 a worker (cpp_runner_prefetch; the default is 1).
    *[
        System(
            f"cpp-{b}-native-cpprunner-prefetch4",
            "pynenc",
            "main",
            {"stack": f"cpp-{b}", "runner": "cpp", "mode": "native", "prefetch": 4},
            "cpp_runner_prefetch = 4",
        )
        for b in ("sqlite", "redis")
    ],
    # The same with running concurrency control by key on the task (each call its
    # own key, nothing deferred): the cost of the atomic checks (issue 48).
    *[
        System(
            f"cpp-{b}-native-cpprunner-controlled",
            "pynenc",
            "main",
            {"stack": f"cpp-{b}", "runner": "cpp", "mode": "native", "task": "keyed"},
            "running_concurrency=KEYS on the task",
        )
        for b in ("sqlite", "redis")
    ],
    # pynenc-cpp (mixed, the mode that exists on main) on pynenc's own runners.
    _p("cpp-mem-mixed-thread", "main", "cpp-mem", "thread", "mixed"),
    _p("cpp-sqlite-mixed-thread", "main", "cpp-sqlite", "thread", "mixed"),
    _p("cpp-redis-mixed-thread", "main", "cpp-redis", "thread", "mixed"),
    _p("cpp-redis-mixed-multithread", "main", "cpp-redis", "multithread", "mixed"),
    # Pure pynenc: its own backends, and pynenc-redis, on its own runners.
    _p("pynenc-mem-thread", "bench", "pynenc-mem", "thread"),
    _p("pynenc-sqlite-thread", "bench", "pynenc-sqlite", "thread"),
    _p("pynenc-redis-thread", "bench03", "pynenc-redis", "thread"),
    _p("pynenc-redis-multithread", "bench03", "pynenc-redis", "multithread"),
    # pynenc-rustvello (Rust engine plugin for pynenc).
    _p("rustvello-redis-native-thread", "bench", "rustvello-redis", "thread", "native"),
    _p("rustvello-sqlite-native-thread", "bench", "rustvello-sqlite", "thread", "native"),
    # Celery and RQ on the same Redis.
    System("celery-prefork", "celery", "bench", {"pool": "prefork"}),
    System("celery-threads", "celery", "bench", {"pool": "threads"}),
    System("rq-simpleworker", "rq", "bench", {}, "2 SimpleWorker processes"),
    # The fast pure-Python queues on the same Redis (each as its docs recommend).
    System(
        "huey-redis-notify",
        "huey",
        "bench",
        {"notify": True},
        "RedisHuey, 2 threads, notify_result",
    ),
    System("huey-redis", "huey", "bench", {"notify": False}, "RedisHuey, 2 threads, result polled"),
    System(
        "huey-sqlite",
        "huey",
        "bench",
        {"storage": "sqlite"},
        "SqliteHuey (one file), 2 threads, consumer polls every 10 ms",
    ),
    System("dramatiq-redis", "dramatiq", "bench", {}, "1 process x 2 threads, Redis results"),
    System(
        "taskiq-redis-stream", "taskiq", "bench", {"poll": 0.01}, "2 workers, result poll 10 ms"
    ),
    # The Rust-cored and streams-based queues (issue 51), each in a venv of its own.
    System(
        "ardiq-redis",
        "ardiq",
        "ardiq",
        {},
        "1 worker, concurrency 2; result: SUBSCRIBE + GET",
    ),
    System(
        "streaq-redis",
        "streaq",
        "streaq",
        {},
        "1 worker, concurrency 2; result: pub/sub, coredis waits 0.1 s to unsubscribe",
    ),
    # rustvello standalone polls on both sides (50 ms by default): set to 10 ms, as the
    # pynenc-based rows (--pynenc-sleep) and taskiq; SQLite at cpp_sqlite's durability.
    System(
        "rustvello-redis",
        "rustvello",
        "rustvello",
        {"backend": "redis", "idle_ms": 10, "poll": 0.01},
        "1 worker, 2 slots; runner idle sleep and result poll 10 ms",
    ),
    System(
        "rustvello-sqlite",
        "rustvello",
        "rustvello",
        {"backend": "sqlite", "idle_ms": 10, "poll": 0.01, "synchronous": "NORMAL"},
        "1 worker, 2 slots; idle sleep and result poll 10 ms; synchronous=NORMAL",
    ),
]
BY_NAME = {s.name: s for s in SYSTEMS}
#: Default ratio references: the issue's targets compare against these two.
BASELINES = ("celery-prefork", "pynenc-redis-thread")


# --------------------------------------------------------------------------- redis


def start_redis(data_dir: Path) -> Any:
    """A private redis-server on a free loopback port (tests_py/redis_server.py)."""
    sys.path.insert(0, str(ROOT))
    from tests_py.redis_server import RedisServer

    return RedisServer(data_dir).start()


def redis_command(port: int, *args: str) -> bytes:
    """Send one command over a raw socket (the main venv has no redis client)."""
    payload = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload.encode())
        return s.recv(256)


# --------------------------------------------------------------------------- driver side
# Everything below until "parent side" runs inside the driver process, in the
# system's own virtualenv.


def _tree_cpu(pids: list[int]) -> dict[int, float]:
    import psutil

    out: dict[int, float] = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
    return out


def _kill_tree(pid: int, grace: float = 10.0) -> None:
    """SIGTERM a worker (its own graceful stop), then SIGKILL what is left of its tree."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    try:
        root.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        pass
    _gone, alive = psutil.wait_procs([root], timeout=grace)
    procs = [p for p in procs if p.is_running()]
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


class Adapter:
    """A system inside the driver: start workers, submit, wait, stop."""

    worker_pids: list[int]

    def setup(self) -> None: ...
    def submit(self, i: int) -> Any: ...
    def wait(self, handle: Any) -> Any: ...
    def teardown(self) -> None: ...


class _QueueWorkers(Adapter):
    """Shared plumbing of the non-pynenc peers: env for their app module, a queue
    name of this round, worker processes started from a command, killed at teardown."""

    module = ""  # importable name of the peer's app module (bench/peer_systems)

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        os.environ["PEERS_REDIS_URL"] = spec["redis_url"]
        os.environ["PEERS_QUEUE"] = f"q-{spec['app_id']}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker_pids = []

    def unavailable(self) -> str | None:
        try:
            __import__(self.module)
        except Exception as exc:  # not installed, or a native module that does not load
            return f"{self.module.split('.')[0]} does not import: {type(exc).__name__}: {exc}"
        return None

    def start_workers(self, *cmds: list[str]) -> None:
        for k, cmd in enumerate(cmds):
            log = open(Path(self.spec["workdir"]) / f"{self.spec['app_id']}-worker{k}.log", "wb")
            self.procs.append(
                subprocess.Popen(cmd, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT)
            )
        self.worker_pids = [p.pid for p in self.procs]

    def teardown(self) -> None:
        for p in self.procs:
            _kill_tree(p.pid)


class HueyAdapter(_QueueWorkers):
    module = "huey"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        os.environ["PEERS_HUEY_NOTIFY"] = "1" if spec["cfg"].get("notify") else "0"
        self.sqlite = spec["cfg"].get("storage") == "sqlite"
        os.environ["PEERS_HUEY_SQLITE"] = (
            str(Path(spec["workdir"]) / f"{spec['app_id']}-huey.db") if self.sqlite else ""
        )

    def setup(self) -> None:
        from peer_systems.huey_app import noop

        self.noop = noop
        # SQLite has no blocking pop: the consumer polls, here every 10 ms (-d),
        # its backoff capped there too (-m), Huey's fastest documented setting.
        polling = ["-d", "0.01", "-m", "0.01", "-b", "1.0"] if self.sqlite else []
        self.start_workers(
            [sys.executable, "-m", "huey.bin.huey_consumer", "peer_systems.huey_app.huey",
             "-w", "2", "-k", "thread", *polling]
        )  # fmt: skip

    def submit(self, i: int) -> Any:
        return self.noop(i)

    def wait(self, handle: Any) -> Any:
        return handle.get(blocking=True, timeout=300)


class DramatiqAdapter(_QueueWorkers):
    module = "dramatiq"

    def setup(self) -> None:
        from peer_systems.dramatiq_app import backend, noop

        self.noop, self.backend = noop, backend
        self.start_workers(
            [sys.executable, "-m", "dramatiq", "peer_systems.dramatiq_app",
             "--processes", "1", "--threads", "2"]
        )  # fmt: skip

    def submit(self, i: int) -> Any:
        return self.noop.send(i)

    def wait(self, handle: Any) -> Any:
        return handle.get_result(backend=self.backend, block=True, timeout=300_000)


class TaskiqAdapter(_QueueWorkers):
    module = "taskiq_redis"

    def setup(self) -> None:
        import asyncio

        from peer_systems.taskiq_app import broker, noop

        self.noop, self.broker = noop, broker
        self.loop = asyncio.new_event_loop()  # the driver's calls run on it, no thread hop
        self.loop.run_until_complete(broker.startup())
        self.start_workers(
            [sys.executable, "-m", "taskiq", "worker", "peer_systems.taskiq_app:broker",
             "--workers", "2", "--max-async-tasks", "1"]
        )  # fmt: skip

    def submit(self, i: int) -> Any:
        return self.loop.run_until_complete(self.noop.kiq(i))

    def wait(self, handle: Any) -> Any:
        poll = float(self.spec["cfg"].get("poll", 0.01))
        result = self.loop.run_until_complete(handle.wait_result(check_interval=poll, timeout=300))
        if result.is_err:
            raise RuntimeError(f"taskiq task failed: {result.error}")
        return result.return_value

    def teardown(self) -> None:
        super().teardown()
        self.loop.run_until_complete(self.broker.shutdown())


class ArdiqAdapter(_QueueWorkers):
    """ArdiQ: its Rust core's awaitables run on one event loop of the driver (as taskiq)."""

    module = "ardiq"

    def setup(self) -> None:
        import asyncio

        from peer_systems.ardiq_app import noop

        self.noop = noop
        self.loop = asyncio.new_event_loop()  # the driver's calls run on it, no thread hop
        self.start_workers(
            [sys.executable, "-m", "ardiq", "run", "peer_systems.ardiq_app:app", "--quiet"]
        )

    def submit(self, i: int) -> Any:
        return self.loop.run_until_complete(self.noop.enqueue(i))

    def wait(self, handle: Any) -> Any:
        result = self.loop.run_until_complete(handle.result(timeout=300))
        if not result.success:
            raise RuntimeError(f"ardiq task {handle.id} failed: {result.value}")
        return result.value


class StreaqAdapter(_QueueWorkers):
    """streaq: the client is the worker object, opened with ``async with worker:``.

    That context (coredis's connection, anyio task groups) must be left by the task
    that entered it, so one task of the driver's event loop holds it open from setup
    to teardown, while submit and wait run their own coroutines on the same loop."""

    module = "streaq"

    def setup(self) -> None:
        import asyncio

        from peer_systems.streaq_app import noop, worker

        self.noop = noop
        self.loop = asyncio.new_event_loop()
        self.closing = asyncio.Event()
        opened = asyncio.Event()

        async def hold() -> None:
            async with worker:
                opened.set()
                await self.closing.wait()

        async def open_client() -> None:
            waiter = asyncio.ensure_future(opened.wait())
            await asyncio.wait({self.client, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if self.client.done():  # it could not connect: its error, at once
                waiter.cancel()
                self.client.result()

        self.client = self.loop.create_task(hold())
        self.loop.run_until_complete(open_client())
        self.start_workers(
            [sys.executable, "-m", "streaq", "run", "peer_systems.streaq_app:worker"]
        )

    async def _enqueue(self, i: int) -> Any:
        return await self.noop.enqueue(i)

    def submit(self, i: int) -> Any:
        return self.loop.run_until_complete(self._enqueue(i))

    def wait(self, handle: Any) -> Any:
        result = self.loop.run_until_complete(handle.result(timeout=300))
        if not result.success:
            raise RuntimeError(f"streaq task {handle.id} failed: {result.exception!r}")
        return result.result

    def teardown(self) -> None:
        super().teardown()
        if hasattr(self, "client"):
            self.closing.set()
            self.loop.run_until_complete(self.client)


class RustvelloAdapter(_QueueWorkers):
    """rustvello standalone: its own ``App`` and worker (no pynenc), Redis or SQLite."""

    module = "rustvello.rustvello"  # the native engine, not only the package

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        cfg = spec["cfg"]
        sqlite = cfg.get("backend") == "sqlite"
        os.environ["PEERS_RUSTVELLO_SQLITE"] = (
            str(Path(spec["workdir"]) / f"{spec['app_id']}-rustvello.db") if sqlite else ""
        )
        os.environ["PEERS_RUSTVELLO_SYNCHRONOUS"] = str(cfg.get("synchronous", "FULL"))
        self.idle_ms = int(cfg.get("idle_ms", 50))  # rustvello's defaults: 50 ms, 0.05 s
        self.poll = float(cfg.get("poll", 0.05))

    def setup(self) -> None:
        from peer_systems.rustvello_app import noop

        self.noop = noop
        # --loglevel warning: the runner logs every invocation at its default level
        # (as Celery's --loglevel WARNING; the pynenc-based rows log errors only).
        self.start_workers(
            [sys.executable, "-m", "rustvello.worker", "peer_systems.rustvello_app:app",
             "--workers", "2", "--idle-sleep-ms", str(self.idle_ms), "--loglevel", "warning"]
        )  # fmt: skip

    def submit(self, i: int) -> Any:
        return self.noop(i)

    def wait(self, handle: Any) -> Any:
        return handle.result(timeout=300, poll_interval=self.poll)


class PynencAdapter(Adapter):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.cfg = dict(spec["cfg"])
        self.cfg.update(
            app_id=spec["app_id"],
            url=spec["redis_url"],
            path=str(Path(spec["workdir"]) / f"{spec['app_id']}.db"),
            sleep=spec["pynenc_sleep"],
            status_cache=self.cfg.get("status_cache", spec["pynenc_status_cache"]),
            slots=2,
        )
        os.environ["PEERS_PYNENC"] = json.dumps(self.cfg)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.thread: threading.Thread | None = None
        self.worker_pids = []

    def unavailable(self) -> str | None:
        from peer_systems.pynenc_app import REASON

        return REASON

    def setup(self) -> None:
        from peer_systems import pynenc_app

        self.app = pynenc_app.app
        self.noop = pynenc_app.keyed_noop if self.cfg.get("task") == "keyed" else pynenc_app.noop
        if self.spec["in_process"]:
            self.thread = threading.Thread(target=self.app.runner.run, daemon=True)
            self.thread.start()
            self.worker_pids = [os.getpid()]
        else:
            log = open(Path(self.spec["workdir"]) / f"{self.spec['app_id']}-worker.log", "wb")
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, str(HERE / "peers.py"), "_worker"],
                    env=os.environ.copy(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            self.worker_pids = [p.pid for p in self.procs]

    def submit(self, i: int) -> Any:
        return self.noop(i)

    def wait(self, handle: Any) -> Any:
        return handle.result

    def teardown(self) -> None:
        if self.thread is not None:
            self.app.runner.stop_runner_loop()
            self.thread.join(timeout=15)
        for p in self.procs:
            _kill_tree(p.pid)


class CeleryAdapter(Adapter):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        os.environ["PEERS_REDIS_URL"] = spec["redis_url"]
        os.environ["PEERS_QUEUE"] = f"q-{spec['app_id']}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker_pids = []

    def unavailable(self) -> str | None:
        try:
            import celery  # noqa: F401
        except ImportError as exc:
            return f"celery not installed: {exc}"
        return None

    def setup(self) -> None:
        from peer_systems.celery_app import noop

        self.noop = noop
        log = open(Path(self.spec["workdir"]) / f"{self.spec['app_id']}-worker.log", "wb")
        cmd = [
            sys.executable, "-m", "celery", "-A", "peer_systems.celery_app", "worker",
            "--pool", self.spec["cfg"]["pool"], "--concurrency", "2",
            "-Q", os.environ["PEERS_QUEUE"], "--loglevel", "WARNING",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-n", f"{self.spec['app_id']}@%h",
        ]  # fmt: skip
        self.procs.append(
            subprocess.Popen(cmd, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT)
        )
        self.worker_pids = [p.pid for p in self.procs]

    def submit(self, i: int) -> Any:
        return self.noop.delay(i)

    def wait(self, handle: Any) -> Any:
        return handle.get(timeout=300)

    def teardown(self) -> None:
        for p in self.procs:
            _kill_tree(p.pid)


class RqAdapter(Adapter):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker_pids = []

    def unavailable(self) -> str | None:
        try:
            import rq  # noqa: F401
        except ImportError as exc:
            return f"rq not installed: {exc}"
        return None

    def setup(self) -> None:
        from peer_systems.rq_tasks import noop
        from redis import Redis
        from rq import Queue

        self.noop = noop
        name = f"q-{self.spec['app_id']}"
        self.queue = Queue(name, connection=Redis.from_url(self.spec["redis_url"]))
        for k in range(2):
            log = open(Path(self.spec["workdir"]) / f"{self.spec['app_id']}-worker{k}.log", "wb")
            cmd = [
                sys.executable, "-m", "rq.cli", "worker", "--url", self.spec["redis_url"],
                "--worker-class", "rq.worker.SimpleWorker", "--quiet",
                "--name", f"{self.spec['app_id']}-{k}", name,
            ]  # fmt: skip
            self.procs.append(
                subprocess.Popen(cmd, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT)
            )
        self.worker_pids = [p.pid for p in self.procs]

    def submit(self, i: int) -> Any:
        return self.queue.enqueue(self.noop, i)

    def wait(self, handle: Any) -> Any:
        result = handle.latest_result(timeout=300)
        if result is None:
            raise TimeoutError(f"rq job {handle.id}: no result")
        if result.type != result.Type.SUCCESSFUL:
            raise RuntimeError(f"rq job {handle.id}: {result.type}: {result.exc_string}")
        return result.return_value

    def teardown(self) -> None:
        for p in self.procs:
            _kill_tree(p.pid)


ADAPTERS: dict[str, type[Adapter]] = {
    "pynenc": PynencAdapter,
    "celery": CeleryAdapter,
    "rq": RqAdapter,
    "huey": HueyAdapter,
    "dramatiq": DramatiqAdapter,
    "taskiq": TaskiqAdapter,
    "ardiq": ArdiqAdapter,
    "streaq": StreaqAdapter,
    "rustvello": RustvelloAdapter,
}


def run_driver(spec: dict[str, Any]) -> dict[str, Any]:
    """One round of one system: warm up, S1, S2, and S3 if asked. Returns figures."""
    sys.path.insert(0, str(HERE))
    adapter = ADAPTERS[spec["kind"]](spec)
    reason = adapter.unavailable()
    if reason:
        return {"status": "skipped", "reason": reason}
    out: dict[str, Any] = {"status": "ok"}
    t_setup = time.perf_counter()
    adapter.setup()
    stopping = threading.Event()
    threading.Thread(target=_watch_workers, args=(adapter, spec, stopping), daemon=True).start()
    try:
        # Warm-up: proves the workers are up (and lets pools scale up) before timing.
        warm = [adapter.submit(-1 - k) for k in range(spec["warmup"])]
        for h in warm:
            adapter.wait(h)
        out["ready_s"] = time.perf_counter() - t_setup

        n = spec["n"]
        t0 = time.perf_counter()
        handles = [adapter.submit(i) for i in range(n)]
        t1 = time.perf_counter()
        results = [adapter.wait(h) for h in handles]
        t2 = time.perf_counter()
        completed = sum(1 for i, r in enumerate(results) if r == i)
        out["s1"] = {
            "n": n,
            "completed": completed,
            "submit_s": t1 - t0,
            "total_s": t2 - t0,
            "submit_rate": n / (t1 - t0),
            "completion_rate": n / (t2 - t0),
        }

        m = spec["m"]
        lat: list[float] = []
        ok = 0
        for i in range(m):
            t = time.perf_counter()
            r = adapter.wait(adapter.submit(i))
            lat.append(time.perf_counter() - t)
            ok += r == i
        lat.sort()
        out["s2"] = {
            "m": m,
            "completed": ok,
            "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "mean_ms": 1000 * statistics.fmean(lat),
        }

        if spec["idle_s"] > 0:
            time.sleep(1.0)  # let post-burst housekeeping settle
            before = _tree_cpu(adapter.worker_pids)
            time.sleep(spec["idle_s"])
            after = _tree_cpu(adapter.worker_pids)
            used = sum(v - before.get(pid, 0.0) for pid, v in after.items())
            out["s3"] = {
                "idle_s": spec["idle_s"],
                "cpu_s": used,
                "cpu_s_per_10s": used * 10.0 / spec["idle_s"],
                "processes": len(after),
            }
    finally:
        stopping.set()
        adapter.teardown()
    return out


def _watch_workers(adapter: Adapter, spec: dict[str, Any], stopping: threading.Event) -> None:
    """A worker that exits before teardown fails the round at once, with its log's tail
    (instead of the driver waiting for results until the parent's timeout)."""
    procs: list[subprocess.Popen[bytes]] = getattr(adapter, "procs", [])
    while not stopping.wait(0.5):
        for p in procs:
            if p.poll() is not None and not stopping.is_set():
                logs = sorted(Path(spec["workdir"]).glob(f"{spec['app_id']}-worker*.log"))
                tail = " | ".join(
                    " | ".join(log.read_text(errors="replace").strip().splitlines()[-4:])
                    for log in logs
                )
                _emit({"status": "error", "error": f"worker exited {p.returncode}: {tail}"})


def driver_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    try:
        out = run_driver(spec)
    except BaseException as exc:  # reported to the parent, which prints it in the table
        out = {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
        }
    _emit(out)
    return 0


def _emit(out: dict[str, Any]) -> None:
    """Report to the parent and exit now (daemon threads of in-process runners must
    not delay exit; the parent kills what is left of this process group)."""
    sys.stdout.write("PEERS-RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)


def worker_main() -> int:
    """A pynenc runner process for the app described by PEERS_PYNENC."""
    sys.path.insert(0, str(HERE))
    from peer_systems.pynenc_app import app

    app.runner.run()
    return 0


# --------------------------------------------------------------------------- parent side


def python_for(system: System) -> Path:
    return VENVS[system.venv] / "bin" / "python"


def run_one(
    system: System, rnd: int, args: argparse.Namespace, redis: Any, workdir: Path
) -> dict[str, Any]:
    py = python_for(system)
    failed = VENVS[system.venv] / INSTALL_ERROR
    if failed.exists():  # scripts/bench_setup.sh could not install this peer here
        reason = failed.read_text(errors="replace").strip()
        return {"status": "skipped", "reason": f"{failed.relative_to(ROOT)}: {reason}"}
    if not py.exists():
        return {
            "status": "skipped",
            "reason": f"{py.relative_to(ROOT)} missing: run scripts/bench_setup.sh",
        }
    redis_command(redis.port, "FLUSHALL")
    spec = {
        "kind": system.kind,
        "cfg": system.cfg,
        "name": system.name,
        "app_id": f"peers-{system.name}-{rnd}-{uuid.uuid4().hex[:6]}",
        "redis_url": redis.url,
        "workdir": str(workdir),
        "in_process": system.in_process,
        "pynenc_sleep": args.pynenc_sleep,
        "pynenc_status_cache": args.pynenc_status_cache,
        "n": args.n,
        "m": args.m,
        "warmup": 4,
        "idle_s": args.idle_s if rnd < args.idle_rounds else 0,
    }
    env = os.environ.copy()
    env["PYTHONPATH"] = str(HERE)
    env.pop("PEERS_PYNENC", None)
    proc = subprocess.Popen(
        [str(py), str(HERE / "peers.py"), "_driver", json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(workdir),
        start_new_session=True,  # one process group: the driver and its workers
    )
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"status": "error", "error": f"timed out after {args.timeout} s"}
    finally:
        try:  # whatever the driver left behind (it kills its workers itself)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for line in stdout.decode(errors="replace").splitlines():
        if line.startswith("PEERS-RESULT "):
            return json.loads(line[len("PEERS-RESULT ") :])
    tail = stderr.decode(errors="replace").strip().splitlines()[-5:]
    return {"status": "error", "error": f"driver exited {proc.returncode}: {' | '.join(tail)}"}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r.get("status") == "ok"]
    if not ok:
        first = runs[0] if runs else {"status": "skipped", "reason": "not run"}
        return {"status": first["status"], "reason": first.get("reason") or first.get("error")}
    s3 = [r["s3"]["cpu_s_per_10s"] for r in ok if "s3" in r]
    errors = [r.get("error") for r in runs if r.get("status") == "error"]
    return {
        "status": "ok",
        "rounds": len(ok),
        "errors": errors,
        "s1_submit_rate": _median([r["s1"]["submit_rate"] for r in ok]),
        "s1_completion_rate": _median([r["s1"]["completion_rate"] for r in ok]),
        "s1_completed": [r["s1"]["completed"] for r in ok],
        "s2_p50_ms": _median([r["s2"]["p50_ms"] for r in ok]),
        "s2_p99_ms": _median([r["s2"]["p99_ms"] for r in ok]),
        "s2_completed": [r["s2"]["completed"] for r in ok],
        "s3_cpu_s_per_10s": _median(s3),
    }


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def fastest_peer(summary: dict[str, dict[str, Any]]) -> str | None:
    """The peer (any system but pynenc-cpp's own) with the highest S1 done/s."""
    peers = [
        (s["s1_completion_rate"], name)
        for name, s in summary.items()
        if not name.startswith("cpp-") and s.get("status") == "ok" and s["s1_completion_rate"]
    ]
    return max(peers)[1] if peers else None


def render_table(summary: dict[str, dict[str, Any]], baselines: list[str]) -> str:
    fastest = fastest_peer(summary)
    cols = ["system", "S1 submit/s", "S1 done/s", "x fastest peer"]
    cols += [f"x {b}" for b in baselines]
    cols += ["S2 p50 ms", "S2 p99 ms", "S3 CPU-s/10s"]
    rows: list[list[str]] = []
    notes: list[str] = []
    for name, s in summary.items():
        if s["status"] != "ok":
            rows.append([name, s["status"].upper()] + [""] * (len(cols) - 2))
            notes.append(f"  {name}: {s['status']}: {s['reason']}")
            continue
        row = [name, _fmt(s["s1_submit_rate"], ",.0f"), _fmt(s["s1_completion_rate"], ",.0f")]
        if fastest and s["s1_completion_rate"]:
            ratio = s["s1_completion_rate"] / summary[fastest]["s1_completion_rate"]
            row.append(f"{ratio:.2f}")
        else:
            row.append("-")
        for b in baselines:
            base = summary.get(b, {})
            if base.get("status") == "ok" and base["s1_completion_rate"]:
                row.append(f"{s['s1_completion_rate'] / base['s1_completion_rate']:.2f}")
            else:
                row.append("-")
        row += [
            _fmt(s["s2_p50_ms"], ".2f"),
            _fmt(s["s2_p99_ms"], ".2f"),
            _fmt(s["s3_cpu_s_per_10s"], ".3f"),
        ]
        rows.append(row)
        for e in s["errors"]:
            notes.append(f"  {name}: a round failed: {e}")
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = "  ".join(
        c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cols)
    )
    out = [line, "-" * len(line)]
    for r in rows:
        out.append(
            "  ".join(v.ljust(widths[0]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(r))
        )
    if fastest:
        out += ["", f"fastest peer in this run: {fastest} (the 'x fastest peer' column's 1.00)"]
    if notes:
        out += ["", "not measured / failures:", *notes]
    return "\n".join(out)


def render_targets(summary: dict[str, dict[str, Any]]) -> str:
    """Issue 14's targets against this run's figures (MET / NOT MET, never asserted)."""

    def get(name: str, key: str) -> float | None:
        s = summary.get(name, {})
        return s.get(key) if s.get("status") == "ok" else None

    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    lines = ["targets (issue 14):"]
    fastest = fastest_peer(summary)
    peer_rate = get(fastest, "s1_completion_rate") if fastest else None
    for name in ("cpp-redis-native-cpprunner", "cpp-sqlite-native-cpprunner"):
        rate = get(name, "s1_completion_rate")
        if rate is not None and peer_rate:
            r = rate / peer_rate
            lines.append(
                f"  S1 done/s {name}: {rate:,.0f} = {r:.2f}x {fastest} (target >= 2x) "
                f"{verdict(r >= 2.0)}"
            )
    mem_rate = get("cpp-mem-native-cpprunner", "s1_completion_rate")
    redis_rate = get("cpp-redis-native-cpprunner", "s1_completion_rate")
    if mem_rate and redis_rate:
        lines.append(
            f"  S1 done/s cpp-redis-native-cpprunner vs cpp-mem-native-cpprunner: "
            f"{redis_rate / mem_rate:.2f}x (stretch >= 1x) {verdict(redis_rate >= mem_rate)}"
        )
    submit = get("cpp-redis-native-cpprunner", "s1_submit_rate")
    if submit is not None:
        lines.append(
            f"  S1 submit/s cpp-redis-native-cpprunner: {submit:,.0f} (target >= 5,000) "
            f"{verdict(submit >= 5000)}"
        )
    for name, want in (
        ("cpp-redis-native-cpprunner", 0.4),
        ("cpp-sqlite-native-cpprunner", 0.4),
        ("cpp-mem-native-cpprunner", 0.15),
    ):
        p50, p99 = get(name, "s2_p50_ms"), get(name, "s2_p99_ms")
        if p50 is None or p99 is None:
            continue
        lines.append(f"  S2 p50 {name}: {p50:.2f} ms (target <= {want} ms) {verdict(p50 <= want)}")
        lines.append(
            f"  S2 p99 {name}: {p99:.2f} ms = {p99 / p50:.1f}x p50 (target <= 3x) "
            f"{verdict(p99 <= 3 * p50)}"
        )
    for name, s in summary.items():
        if (
            name.startswith("cpp-")
            and s.get("status") == "ok"
            and s.get("s3_cpu_s_per_10s") is not None
        ):
            v = s["s3_cpu_s_per_10s"]
            lines.append(
                f"  S3 {name}: {v:.3f} CPU-s/10 s (target <= 0.05) {verdict(round(v, 3) <= 0.05)}"
            )
    if len(lines) == 1:
        lines.append("  (no pynenc-cpp system measured)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- raw redis floor


class _Resp:
    """A minimal RESP client over a raw socket (the main venv has no redis client)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    @staticmethod
    def encode(*args: str) -> bytes:
        return (
            f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        ).encode()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2 :]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError(f"unexpected RESP reply {line!r}")

    def call(self, *args: str) -> Any:
        self.sock.sendall(self.encode(*args))
        return self.reply()


_ECHO_PEER = """
import socket, sys
sys.path.insert(0, sys.argv[2])
from peers import _Resp
r = _Resp(int(sys.argv[1]))
while True:
    got = r.call("BLPOP", "floor:req", "30")
    if got is None or got[1] == b"stop":
        break
    r.call("RPUSH", "floor:resp", got[1].decode())
"""


def raw_redis_floor(port: int, m: int = 2000, burst: int = 20000) -> dict[str, float]:
    """The physical limit beside the figures: a serial round trip between two
    processes through Redis (RPUSH here, BLPOP + RPUSH in the other process, BLPOP
    here), and a pipelined burst of RPUSHes on one connection."""
    peer = subprocess.Popen([sys.executable, "-c", _ECHO_PEER, str(port), str(HERE)])
    try:
        r = _Resp(port)
        lat: list[float] = []
        for i in range(m):
            t = time.perf_counter()
            r.call("RPUSH", "floor:req", str(i))
            r.call("BLPOP", "floor:resp", "30")
            lat.append(time.perf_counter() - t)
        r.call("RPUSH", "floor:req", "stop")
        peer.wait(timeout=30)
        lat.sort()
        payload = _Resp.encode("RPUSH", "floor:burst", "x") * burst
        t = time.perf_counter()
        r.sock.sendall(payload)
        for _ in range(burst):
            r.reply()
        burst_s = time.perf_counter() - t
        r.call("DEL", "floor:burst", "floor:req", "floor:resp")
        return {
            "serial_p50_ms": 1000 * statistics.median(lat),
            "serial_p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "pipelined_ops_per_s": burst / burst_s,
        }
    finally:
        if peer.poll() is None:
            peer.kill()


def render_floor(floor: dict[str, float] | None) -> str:
    if not floor:
        return "raw redis floor: not measured"
    return (
        "raw redis floor (same redis-server): serial round trip between two processes "
        f"p50 {floor['serial_p50_ms']:.3f} ms, p99 {floor['serial_p99_ms']:.3f} ms; "
        f"pipelined burst {floor['pipelined_ops_per_s']:,.0f} ops/s"
    )


def progress(done: int, total: int, label: str) -> None:
    bar = "#" * (30 * done // max(total, 1))
    print(f"\r[{bar:<30}] {done}/{total} {label:<40}", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_driver"]:
        return driver_main(argv[1])
    if argv[:1] == ["_worker"]:
        return worker_main()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "-n", type=int, default=None, help="S1 tasks per round (default 300, quick 100)"
    )
    parser.add_argument(
        "-m", type=int, default=None, help="S2 round trips per round (default 300, quick 30)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="rounds per system (default 3, quick 1)"
    )
    parser.add_argument(
        "--idle-s", type=float, default=None, help="S3 window in seconds (default 10, quick 2)"
    )
    parser.add_argument("--idle-rounds", type=int, default=1, help="rounds that also measure S3")
    parser.add_argument("--quick", action="store_true", help="a 1-2 minute smoke run")
    parser.add_argument("--systems", help="comma-separated subset (see --list)")
    parser.add_argument("--list", action="store_true", help="list the systems and exit")
    parser.add_argument(
        "--baseline", action="append", help=f"ratio references (default {', '.join(BASELINES)})"
    )
    parser.add_argument(
        "--pynenc-sleep", type=float, default=0.01, help="pynenc runner_tuning poll interval"
    )
    parser.add_argument(
        "--pynenc-status-cache",
        type=float,
        default=0.0,
        help="pynenc cached_status_time (pynenc's default 0.1 s is a 100 ms floor on S2)",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per system and round")
    parser.add_argument("--json", help="output path (default bench/results/peers-<timestamp>.json)")
    args = parser.parse_args(argv)
    if args.list:
        for s in SYSTEMS:
            print(f"{s.name:<42} {s.venv:<9} {s.note}")
        return 0
    quick = args.quick
    args.n = args.n or (100 if quick else 300)
    # 300, not fewer: the p99 of M samples is their maximum when M < 100 (stop 44's
    # M=80), one scheduling hiccup; of 300 it is the third largest.
    args.m = args.m or (30 if quick else 300)
    args.rounds = args.rounds or (1 if quick else 3)
    args.idle_s = args.idle_s if args.idle_s is not None else (2.0 if quick else 10.0)
    if args.systems:
        names = [n.strip() for n in args.systems.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            parser.error(f"unknown systems {unknown}; see --list")
        systems = [BY_NAME[n] for n in names]
    else:
        systems = SYSTEMS
    baselines = args.baseline or [b for b in BASELINES if b in {s.name for s in systems}]

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out_path = Path(args.json) if args.json else HERE / "results" / f"peers-{stamp}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)

    raw: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    skipped: set[str] = set()
    total = len(systems) * args.rounds
    done = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pynenc-peers-") as tmp:
        workdir = Path(tmp)
        redis = start_redis(workdir / "redis")
        floor: dict[str, float] | None = None
        try:
            try:
                floor = raw_redis_floor(redis.port, m=500 if quick else 2000)
            except Exception as exc:  # the floor is context, not a result: report and go on
                print(f"raw redis floor failed: {exc}", file=sys.stderr)
            for rnd in range(args.rounds):
                for system in systems:
                    label = f"{system.name} r{rnd + 1}"
                    progress(done, total, label)
                    if system.name in skipped:
                        done += 1
                        continue
                    result = run_one(system, rnd, args, redis, workdir)
                    result["round"] = rnd
                    raw[system.name].append(result)
                    if result["status"] == "skipped":
                        skipped.add(system.name)
                    done += 1
                    progress(done, total, label)
        finally:
            redis.stop()
    print(file=sys.stderr)
    elapsed = time.monotonic() - started

    summary = {name: summarise(runs) for name, runs in raw.items()}
    header = (
        f"bench/peers.py: N={args.n} (S1), M={args.m} (S2), {args.rounds} round(s), "
        f"S3 window {args.idle_s:g} s, pynenc poll {args.pynenc_sleep:g} s, "
        f"status cache {args.pynenc_status_cache:g} s, "
        f"{os.cpu_count()} CPUs, {elapsed:.0f} s"
    )
    print(header)
    print(render_table(summary, baselines))
    print(render_floor(floor))
    print()
    print(render_targets(summary))
    overhead = None
    if not args.quick:
        overhead = measure_runner_overhead()
        if overhead:
            print()
            print(overhead.get("text", ""))
    doc = {
        "timestamp": stamp,
        "params": {
            k: getattr(args, k)
            for k in (
                "n",
                "m",
                "rounds",
                "idle_s",
                "idle_rounds",
                "pynenc_sleep",
                "pynenc_status_cache",
                "quick",
            )
        },
        "elapsed_s": elapsed,
        "systems": {s.name: asdict(s) for s in systems},
        "summary": summary,
        "raw": raw,
        "runner_overhead": overhead,
        "raw_redis_floor": floor,
    }
    out_path.write_text(json.dumps(doc, indent=2))
    print(f"\nJSON: {out_path}")
    return 0


def measure_runner_overhead() -> dict[str, Any] | None:
    """Runs bench/runner_overhead.py in the main venv; its JSON, with a text summary."""
    try:
        proc = subprocess.run(
            [str(VENV_PY), str(HERE / "runner_overhead.py"), "--json-stdout"],
            capture_output=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(HERE)},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc), "text": f"runner overhead: not measured ({exc})"}
    for line in proc.stdout.decode(errors="replace").splitlines():
        if line.startswith("OVERHEAD-RESULT "):
            return json.loads(line[len("OVERHEAD-RESULT ") :])
    err = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
    return {"error": " | ".join(err), "text": f"runner overhead: failed: {' | '.join(err)}"}


if __name__ == "__main__":
    sys.exit(main())
