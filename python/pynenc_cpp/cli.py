"""``pynenc-cpp``: what a deployment holds and whether its storage keeps acknowledged work.

    pynenc-cpp [--app MODULE] info [--json] [--watch SECONDS [--times N]]
    pynenc-cpp [--app MODULE] doctor [--json] [--strict]
    pynenc-cpp [--app MODULE] purge [--yes]

The app is found as ``pynenc`` finds it (``--app`` as for ``pynenc --app``; without
it, the one ``Pynenc()`` instance of the current directory), or else built from the
configuration alone (``PYNENC__*`` variables, ``[tool.pynenc]`` in pyproject.toml, the
file named by ``PYNENC__FILEPATH``), so the command reads the same settings as the
app's runners. Exit codes: 0 done (``doctor``: nothing that loses work, advice
printed as warnings), 1 ``doctor`` found settings that lose acknowledged work (or,
with ``--strict``, a warning), 2 an error (no app, an app without a pynenc-cpp
backend, bad configuration, unreachable storage, purge not confirmed). See docs/cli.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pynenc_cpp._redact import redact_url

if TYPE_CHECKING:
    from pynenc import Pynenc

_EXIT_OK, _EXIT_WARNINGS, _EXIT_ERROR = 0, 1, 2


class CliError(Exception):
    """An error reported as one line on stderr with exit code 2."""


# ---------------------------------------------------------------- the app


def load_app(spec: str | None) -> Pynenc:
    """The app ``spec`` names, the one app of the current directory, or one built
    from the configuration alone; CliError unless it has a pynenc-cpp backend."""
    from pynenc import Pynenc
    from pynenc.util.import_app import find_app_instance

    # As `python -m pynenc_cpp` does: the console script's sys.path lacks the working
    # directory, so `--app tasks` would not find the tasks.py beside the user.
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    if spec:
        try:
            app: Pynenc = find_app_instance(spec)
        except (ValueError, ImportError) as exc:
            raise CliError(f"--app {spec}: {_one_line(exc)}") from exc
        found = f"app {app.app_id} (--app {spec})"
    else:
        try:
            app = find_app_instance(None)
            found = f"app {app.app_id} (found in {Path.cwd()})"
        except ValueError as exc:
            if not str(exc).startswith("No Pynenc() instance found"):
                # several apps here: say which with --app
                raise CliError(_one_line(exc)) from exc
            app = Pynenc()  # configuration only: env, pyproject.toml, PYNENC__FILEPATH
            found = ""
    description, uri = storage_of(app)
    if uri is None:
        if not found:
            raise CliError(
                f"no app found: no Pynenc() instance in {Path.cwd()}, and the configuration "
                "(PYNENC__* variables, [tool.pynenc] in pyproject.toml, PYNENC__FILEPATH) names "
                "no pynenc-cpp backend; pass --app MODULE"
            )
        raise CliError(
            f"{found} has no pynenc-cpp backend: its orchestrator is {description}; build it "
            "with .cpp_sqlite(...) or .cpp_redis(...), or set orchestrator_cls and the other "
            "*_cls settings to the Cpp* classes (docs/configuration.md)"
        )
    return app


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def storage_of(app: Pynenc) -> tuple[str, str | None]:
    """(description, engine URI or None) of the app's storage, from its configuration
    alone (no component is opened: that would create a missing SQLite file);
    passwords redacted in the description."""
    from pynenc.util.subclasses import get_subclass

    from pynenc_cpp._component import MemBackend, RedisBackend, SqliteBackend, redis_uri, sqlite_uri
    from pynenc_cpp.config import ConfigCpp
    from pynenc_cpp.orchestrator import CppOrchestrator

    cls_name = str(app.conf.orchestrator_cls)
    try:
        cls = get_subclass(CppOrchestrator, cls_name)
    except ValueError:
        return f"{cls_name} (not a pynenc-cpp orchestrator)", None
    conf = ConfigCpp(config_values=app.config_values, config_filepath=app.config_filepath)
    if issubclass(cls, SqliteBackend):
        uri = sqlite_uri(conf)
    elif issubclass(cls, RedisBackend):
        uri = redis_uri(conf)
    elif issubclass(cls, MemBackend):
        return "memory (each process its own: nothing to see from here)", "memory://"
    else:
        return f"{cls_name} (a pynenc-cpp orchestrator on an unknown backend)", None
    return redact_url(uri), uri


def _require_storage(app: Pynenc) -> str:
    """The storage description; CliError for an SQLite file that is not there (opening
    the app's components would create an empty one)."""
    storage, uri = storage_of(app)
    if uri is not None and uri.startswith("sqlite://"):
        path = Path(uri.removeprefix("sqlite://").split("?", 1)[0])
        if not path.is_file():
            raise CliError(
                f"no SQLite database at {path} (check cpp_sqlite_path; the app creates the "
                "file when it first runs)"
            )
    return storage


# ---------------------------------------------------------------- info


def _age(ts: datetime, now: datetime) -> float:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return max((now - ts).total_seconds(), 0.0)


def recovery_wait_sec(app: Pynenc) -> tuple[float, float]:
    """(dead-after, the longest a live CppRunner's recovery tick adds) in seconds: a
    dead runner's RUNNING and claimed invocations are recovered within their sum
    after its last heartbeat (``CppRunner``; pynenc's own runners recover on their
    atomic-service cron)."""
    from pynenc_cpp.runner import ConfigCppRunner, runner_intervals

    dead_after = float(app.conf.runner_considered_dead_after_minutes) * 60.0
    conf = ConfigCppRunner(config_values=app.config_values, config_filepath=app.config_filepath)
    return dead_after, runner_intervals(app, conf)[0]


def _held(app: Pynenc) -> dict[str, dict[str, list[str]]]:
    """Runner id -> {"running": ids, "pending": ids} of the invocations it owns."""
    from pynenc.invocation.status import InvocationStatus

    orchestrator = app.orchestrator
    held: dict[str, dict[str, list[str]]] = {}
    for status, name in (
        (InvocationStatus.RUNNING, "running"),
        (InvocationStatus.PENDING, "pending"),
    ):
        for iid in orchestrator.get_invocation_ids_paginated(statuses=[status], limit=10_000):
            try:
                record = orchestrator.get_invocation_status_record(iid)
            except KeyError:
                continue  # finished and purged meanwhile
            if record.runner_id and record.status == status:
                held.setdefault(record.runner_id, {"running": [], "pending": []})[name].append(
                    str(iid)
                )
    return held


def _runners(app: Pynenc, now: datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(alive, presumed dead): every runner with a heartbeat row, split at dead-after,
    each with the invocations it holds; a dead one also with when the recovery of
    dead runners takes them (at the latest)."""
    from datetime import timedelta

    dead_after, tick = recovery_wait_sec(app)
    # Every stored runner: a graceful stop forgets its row (CppRunner), so what is
    # left past dead-after is a runner that died, or one pynenc's runners left.
    every = app.orchestrator._get_active_runners(10 * 365 * 86400.0)
    held = _held(app)
    alive, dead = [], []
    for r in every:
        age = _age(r.last_heartbeat, now)
        mine = held.get(r.runner_id, {"running": [], "pending": []})
        row: dict[str, Any] = {
            "runner_id": r.runner_id,
            "last_heartbeat": r.last_heartbeat.isoformat(),
            "heartbeat_age_sec": round(age, 3),
            "queues": list(r.consumed_queues),
            "running": mine["running"],
            "pending": mine["pending"],
        }
        if age <= dead_after:
            alive.append(row)
            continue
        beat = r.last_heartbeat if r.last_heartbeat.tzinfo else r.last_heartbeat.replace(tzinfo=UTC)
        row["recovered_by"] = (beat + timedelta(seconds=dead_after + tick)).isoformat()
        dead.append(row)
    return alive, dead


def collect_info(app: Pynenc) -> dict[str, Any]:
    """Queues and their depths, invocations by status, runners alive, the oldest
    invocation waiting for a runner."""
    from pynenc.invocation.status import InvocationStatus

    now = datetime.now(UTC)
    storage = _require_storage(app)
    orchestrator, broker = app.orchestrator, app.broker
    queues = list(dict.fromkeys(broker.conf.queues))
    depths = {q: int(broker.count_invocations([q])) for q in queues}
    by_status = {}
    for status in InvocationStatus:
        n = int(orchestrator.count_invocations(statuses=[status]))
        if n:
            by_status[status.value] = n
    runners, dead = _runners(app, now)
    waiting = [s for s in InvocationStatus if s.is_available_for_run()]
    oldest: dict[str, Any] | None = None
    n_waiting = int(orchestrator.count_invocations(statuses=waiting))
    if n_waiting:
        # Newest first (pynenc's order): the last one is the oldest.
        ids = orchestrator.get_invocation_ids_paginated(
            statuses=waiting, limit=1, offset=n_waiting - 1
        )
        if ids:
            record = orchestrator.get_invocation_status_record(ids[0])
            oldest = {
                "invocation_id": str(ids[0]),
                "status": record.status.value,
                "since": record.timestamp.isoformat(),
                "age_sec": round(_age(record.timestamp, now), 3),
            }
    return {
        "app_id": app.app_id,
        "storage": storage,
        "queues": depths,
        "invocations_by_status": by_status,
        "invocations_total": sum(by_status.values()),
        "waiting_for_a_runner": n_waiting,
        "runners_alive": runners,
        "runners_dead": dead,
        "oldest_waiting": oldest,
        "at": now.isoformat(),
    }


def format_info(info: dict[str, Any]) -> str:
    lines = [f"app {info['app_id']}  storage {info['storage']}  at {info['at']}", "queues"]
    width = max([len(q) for q in info["queues"]] + [8])
    lines += [f"  {q:<{width}} {n:>8}" for q, n in info["queues"].items()]
    lines.append(f"invocations by status ({info['invocations_total']} in all)")
    lines += [f"  {s:<{width}} {n:>8}" for s, n in info["invocations_by_status"].items()]
    if not info["invocations_by_status"]:
        lines.append("  (none)")
    lines.append(f"runners alive: {len(info['runners_alive'])}")
    for r in info["runners_alive"]:
        queues = ", ".join(r["queues"]) or "all"
        lines.append(
            f"  {r['runner_id']}  last heartbeat {r['heartbeat_age_sec']:.1f} s ago  "
            f"queues: {queues}  running {len(r['running'])}, claimed {len(r['pending'])}"
        )
    dead = info.get("runners_dead", [])
    if dead:
        lines.append(f"runners presumed dead (no heartbeat for dead-after): {len(dead)}")
    for r in dead:
        held = r["running"] + r["pending"]
        lines.append(
            f"  {r['runner_id']}  last heartbeat {r['heartbeat_age_sec']:.1f} s ago  "
            f"holds running {len(r['running'])}, claimed {len(r['pending'])}"
            + (f"  recovered by {r['recovered_by']} at the latest" if held else "")
        )
        lines += [f"    {iid}" for iid in held[:10]]
        if len(held) > 10:
            lines.append(f"    ... {len(held) - 10} more")
    oldest = info["oldest_waiting"]
    if oldest is None:
        lines.append("oldest waiting invocation: none")
    else:
        lines.append(
            f"oldest waiting invocation: {oldest['invocation_id']} {oldest['status']} "
            f"for {oldest['age_sec']:.1f} s (since {oldest['since']}); "
            f"{info['waiting_for_a_runner']} waiting in all"
        )
    return "\n".join(lines)


def cmd_info(app: Pynenc, args: argparse.Namespace) -> int:
    shown = 0
    while True:
        info = collect_info(app)
        text = json.dumps(info) if args.json else format_info(info)
        if args.watch and sys.stdout.isatty() and not args.json:
            sys.stdout.write("\x1b[H\x1b[2J")  # clear the screen between refreshes
        print(text, flush=True)
        shown += 1
        if not args.watch or (args.times and shown >= args.times):
            return _EXIT_OK
        time.sleep(args.watch)


# ---------------------------------------------------------------- doctor


def shortcut_rows(app: Pynenc) -> list[dict[str, str]]:
    """Each shortcut's state for ``app`` (active / off (pynenc changed) / off (disabled
    by setting)) and the tracked copies, as ``doctor`` reports them."""
    from pynenc_cpp import _shortcuts
    from pynenc_cpp.config import ConfigCpp

    setting = ConfigCpp(config_values=app.config_values, config_filepath=app.config_filepath)
    return [
        {"name": name, "state": state, "replaces": replaces}
        for name, state, replaces in _shortcuts.report(setting.cpp_shortcuts)
    ]


def cmd_doctor(app: Pynenc, args: argparse.Namespace) -> int:
    from pynenc_cpp import _core

    storage, uri = storage_of(app)
    if uri is None:
        raise CliError(f"app {app.app_id}: the orchestrator is {storage}; nothing to check")
    report = _core.describe_backend(uri, app.app_id)
    report = {"app_id": app.app_id, "storage": storage, **report}
    report["facts"] = [list(f) for f in report["facts"]]
    dead_after, tick = recovery_wait_sec(app)
    report["facts"].append(
        [
            "dead runner's work waits",
            f"up to {dead_after + tick:g} s after its last heartbeat (dead-after "
            f"{dead_after:g} s + a CppRunner recovery tick of up to {tick:g} s)",
        ]
    )
    report["shortcuts"] = shortcut_rows(app)
    if args.json:
        print(json.dumps(report))
    else:
        lines = [f"app {app.app_id}  backend {report['backend']}  storage {storage}"]
        width = max([len(name) for name, _ in report["facts"]] + [8])
        lines += [f"  {name:<{width}}  {value}" for name, value in report["facts"]]
        lines.append("shortcuts (docs/shortcuts.md):")
        lines += [f"  {row['name']:<11}  {row['state']}" for row in report["shortcuts"]]
        if report["errors"]:
            lines.append(f"{len(report['errors'])} error(s): settings that lose acknowledged work")
            lines += [f"  x {e}" for e in report["errors"]]
        if report["warnings"]:
            lines.append(f"{len(report['warnings'])} warning(s):")
            lines += [f"  ! {w}" for w in report["warnings"]]
        if not report["errors"]:
            lines.append(
                "no error: no setting found that loses acknowledged work when a process "
                "or the server restarts"
            )
        print("\n".join(lines))
    if report["errors"] or (args.strict and report["warnings"]):
        return _EXIT_WARNINGS
    return _EXIT_OK


# ---------------------------------------------------------------- purge


def cmd_purge(app: Pynenc, args: argparse.Namespace) -> int:
    storage = _require_storage(app)
    if not args.yes:
        print(
            f"This deletes every invocation, result, queue entry and trigger of app "
            f"{app.app_id!r} in {storage}.\nType the app id to confirm: ",
            end="",
            flush=True,
        )
        try:
            answer = sys.stdin.readline().strip()
        except KeyboardInterrupt:
            answer = ""
        if answer != app.app_id:
            raise CliError("not confirmed: nothing was purged")
    app.purge()
    print(f"purged app {app.app_id} in {storage}")
    return _EXIT_OK


# ---------------------------------------------------------------- entry point


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pynenc-cpp",
        description="Inspect and check a pynenc app that runs on pynenc-cpp.",
    )
    parser.add_argument("--app", help="the module holding the Pynenc() app, as for pynenc --app")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="queues, invocations by status, runners, oldest waiting")
    info.add_argument("--json", action="store_true", help="one JSON object per refresh")
    info.add_argument(
        "--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until Ctrl-C"
    )
    info.add_argument("--times", type=int, default=0, help="with --watch: stop after N refreshes")
    doctor = sub.add_parser(
        "doctor", help="backend version, schema, settings that can lose acknowledged work"
    )
    doctor.add_argument("--json", action="store_true", help="the report as one JSON object")
    doctor.add_argument(
        "--strict", action="store_true", help="exit 1 on warnings (advice) too, not only errors"
    )
    purge = sub.add_parser("purge", help="delete all of the app's data (asks first)")
    purge.add_argument("--yes", action="store_true", help="do not ask")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "watch", None) is not None and args.watch <= 0:
        _parser().error("--watch: expected seconds > 0")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s: %(message)s",
    )
    from pynenc_cpp.errors import BackendError, BadConfig

    try:
        app = load_app(args.app)
        if not args.verbose:
            app.logger.setLevel(logging.WARNING)
        command = {"info": cmd_info, "doctor": cmd_doctor, "purge": cmd_purge}[args.command]
        return command(app, args)
    except KeyboardInterrupt:
        return _EXIT_OK
    except (CliError, BadConfig, BackendError, ValueError) as exc:
        print(f"pynenc-cpp {args.command}: {_one_line(exc)}", file=sys.stderr)
        return _EXIT_ERROR


def run() -> None:
    """The console script."""
    sys.exit(main())
