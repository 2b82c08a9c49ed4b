"""pynenc_cpp.cluster.actors in one process: casty's singleton example, local actors,
ask/tell, errors (unpicklable messages, timeouts, full buffers), singleton generations,
event-sourced singletons and their journal fencing. The failover guarantees with real
processes are in test_actor_failover.py."""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pynenc_cpp import _core
from pynenc_cpp.cluster import Generation
from pynenc_cpp.cluster.actors import (
    ActorContext,
    ActorRef,
    AskTimeout,
    Behavior,
    Behaviors,
    BufferFull,
    ClusteredActorSystem,
    InMemoryJournal,
    JsonSerializer,
    MessageTooLarge,
    SqliteJournal,
)

FAST = {"heartbeat_ms": 100, "suspect_timeout_ms": 300, "stabilize_ms": 100}
pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class ProcessJob:
    job_id: str


@dataclass(frozen=True)
class GetStatus:
    reply_to: ActorRef[str]


def job_coordinator() -> Behavior[Any]:
    def active(pending: tuple[str, ...] = ()) -> Behavior[Any]:
        async def receive(ctx: ActorContext[Any], msg: Any) -> Behavior[Any]:
            match msg:
                case ProcessJob(job_id):
                    return active((*pending, job_id))
                case GetStatus(reply_to):
                    reply_to.tell(f"{len(pending)} jobs pending")
            return Behaviors.same()

        return Behaviors.receive(receive)

    return active()


def free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def system(port: int, seeds: list[int], node_id: str, **kw: Any) -> ClusteredActorSystem:
    return ClusteredActorSystem(
        name="actors-test",
        host="127.0.0.1",
        port=port,
        node_id=node_id,
        seed_nodes=[("127.0.0.1", p) for p in seeds],
        **{**FAST, **kw},
    )


@pytest.mark.asyncio
async def test_casty_singleton_example_two_jobs_pending() -> None:
    p1, p2 = free_ports(2)
    async with system(p1, [p2], "node-1") as node1, system(p2, [p1], "node-2") as node2:
        ref1 = node1.spawn(Behaviors.singleton(job_coordinator), "coordinator")
        ref2 = node2.spawn(Behaviors.singleton(job_coordinator), "coordinator")
        assert ref1 == ref2  # the same singleton from either node
        await asyncio.sleep(0.5)
        ref1.tell(ProcessJob("job-1"))
        ref2.tell(ProcessJob("job-2"))
        # Each sender's messages (tell and ask alike) are handled in order, but the two
        # nodes' messages race: node-2's ask answers after job-2 (job-1 may or may not be
        # in yet); node-1's ask, sent after that answer, must see both.
        first = await node2.ask(ref2, lambda r: GetStatus(reply_to=r), timeout=5.0)
        assert first in ("1 jobs pending", "2 jobs pending")
        status = await node1.ask(ref1, lambda r: GetStatus(reply_to=r), timeout=5.0)
        assert status == "2 jobs pending"
        # Asked again from the other node: still one instance with both jobs.
        assert await node2.ask(ref2, lambda r: GetStatus(reply_to=r), timeout=5.0) == status
        hosts = [
            n
            for n in (node1, node2)
            if any(
                h.label == "coordinator" and h.phase == "active" for h in n.handle.status().hosted
            )
        ]
        assert len(hosts) == 1


@pytest.mark.asyncio
async def test_local_actors_setup_self_and_stopped() -> None:
    (port,) = free_ports(1)
    seen: list[Any] = []

    def echo() -> Behavior[Any]:
        async def setup(ctx: ActorContext[Any]) -> Behavior[Any]:
            seen.append(("setup", ctx.self, ctx.generation))

            def receive(ctx: ActorContext[Any], msg: Any) -> Behavior[Any]:  # sync is fine
                if msg == "stop":
                    return Behaviors.stopped()
                reply_to, text = msg
                reply_to.tell(f"echo {text}")
                return Behaviors.same()

            return Behaviors.receive(receive)

        return Behaviors.setup(setup)

    async with system(port, [], "solo", quorum=1) as s:
        ref = s.spawn(echo(), "echo")
        assert await s.ask(ref, lambda r: (r, "hi")) == "echo hi"
        assert seen == [("setup", ref, None)]
        with pytest.raises(ValueError, match="already runs"):
            s.spawn(echo(), "echo")
        ref.tell("stop")
        await asyncio.sleep(0.05)
        with pytest.raises(AskTimeout):
            await s.ask(ref, lambda r: (r, "after stop"), timeout=0.2)
        s.spawn(echo(), "echo")  # the name is free again


@pytest.mark.asyncio
async def test_ask_times_out_and_unpicklable_messages_raise_at_tell() -> None:
    (port,) = free_ports(1)
    async with system(port, [], "solo", quorum=1) as s:
        silent = s.spawn(Behaviors.receive(lambda ctx, msg: Behaviors.same()), "silent")
        with pytest.raises(AskTimeout):
            await s.ask(silent, lambda r: r, timeout=0.2)
        for bad in (float("inf"), float("nan"), 1e12, 0):  # a clear error, nothing sent
            with pytest.raises(ValueError, match="timeout"):
                await s.ask(silent, lambda r: r, timeout=bad)
        # Too large for one frame: a clear error at tell and ask, naming the limit.
        big = b"x" * s.config.max_frame_bytes
        with pytest.raises(MessageTooLarge, match="max_frame_bytes"):
            s.spawn(Behaviors.singleton(job_coordinator), "big").tell(big)
        remote = ActorRef(s, "127.0.0.1:1", "/user/x", None)
        with pytest.raises(MessageTooLarge, match="max_frame_bytes"):
            remote.tell(big)
        with pytest.raises(MessageTooLarge):
            await s.ask(remote, lambda r: big, timeout=1)
        single = s.spawn(Behaviors.singleton(job_coordinator), "jobs")
        with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
            single.tell(ProcessJob(lambda: None))  # type: ignore[arg-type]
        # A singleton nobody runs yet: the ask times out rather than hang.
        nobody = ActorRef(s, "", "", "no-such-singleton")
        with pytest.raises(AskTimeout):
            await s.ask(nobody, lambda r: GetStatus(r), timeout=0.3)
        s.config = replace(s.config, leave_timeout_ms=300)  # nobody will acknowledge it


@pytest.mark.asyncio
async def test_buffer_overflow_raises_or_is_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p1, p2 = free_ports(2)
    # quorum 2 with one node up: no leader, no owner; messages wait in the buffer.
    with caplog.at_level(logging.WARNING, logger="pynenc_cpp.cluster.actors"):
        async with system(p1, [p2], "a", buffer_size=5, quorum=2, leave_timeout_ms=300) as s:
            ref = s.spawn(Behaviors.singleton(job_coordinator), "jobs")
            for i in range(5):
                ref.tell(ProcessJob(str(i)))
            with pytest.raises(BufferFull, match="buffer for 'jobs' is full"):
                ref.tell(ProcessJob("6"))
            assert s.stats()["buffered"] == {"jobs": 5}
            assert s.stats()["label_overflowed"] == 1
    # The shutdown waited leave_timeout_ms for an owner, then said what it discarded.
    assert any(
        "5 message(s) to singleton(s) jobs not acknowledged" in r.message for r in caplog.records
    )
    caplog.clear()
    async with system(
        p1, [p2], "a", buffer_size=2, quorum=2, overflow="drop", leave_timeout_ms=300
    ) as s:
        ref = s.spawn(Behaviors.singleton(job_coordinator), "jobs")
        with caplog.at_level(logging.WARNING, logger="pynenc_cpp.cluster.actors"):
            for i in range(4):
                ref.tell(ProcessJob(str(i)))
        assert s.stats()["dropped"] == 2
        assert sum("buffer is full" in r.message for r in caplog.records) == 2


@dataclass(frozen=True)
class Increment:
    reply_to: ActorRef[int] | None = None


@dataclass(frozen=True)
class GetCount:
    reply_to: ActorRef[int]


@dataclass(frozen=True)
class Incremented:
    pass


def counter(journal: Any, entity: str = "counter", snapshot_every: int = 0) -> Behavior[Any]:
    def on_event(state: int, _e: Incremented) -> int:
        return state + 1

    async def on_command(ctx: ActorContext[Any], state: int, msg: Any) -> Behavior[Any]:
        match msg:
            case Increment(reply_to):
                if reply_to is not None:
                    reply_to.tell(state + 1)  # leaves only once the event is in the journal
                return Behaviors.persisted([Incremented()])
            case GetCount(reply_to):
                reply_to.tell(state)
        return Behaviors.same()

    return Behaviors.event_sourced(
        entity_id=entity,
        journal=journal,
        initial_state=0,
        on_event=on_event,
        on_command=on_command,
        snapshot_every=snapshot_every,
    )


def recording_counter(
    journal: Any, gens: list[Generation], snapshot_every: int = 0
) -> Behavior[Any]:
    """``counter`` that appends each instance's generation to ``gens`` when it starts."""

    async def setup(ctx: ActorContext[Any]) -> Behavior[Any]:
        assert ctx.generation is not None
        gens.append(ctx.generation)
        return counter(journal, snapshot_every=snapshot_every)

    return Behaviors.setup(setup)


@pytest.mark.asyncio
async def test_event_sourced_singleton_replays_its_journal(tmp_path: Path) -> None:
    p1, p2, p3 = free_ports(3)
    journal = SqliteJournal(str(tmp_path / "j.db"))
    gens: list[Generation] = []

    def make() -> Behavior[Any]:
        return recording_counter(journal, gens, snapshot_every=3)

    cfg = {"generation_source": f"sqlite://{tmp_path}/gen.db"}
    a = system(p1, [p2, p3], "a", **cfg)
    b = system(p2, [p1, p3], "b", **cfg)
    c = system(p3, [p1, p2], "c", **cfg)
    async with b, c:
        await a.start()
        refs = [x.spawn(Behaviors.singleton(make), "counter") for x in (a, b, c)]
        for i in range(10):
            assert await b.ask(refs[1], lambda r: Increment(r), timeout=10) == i + 1
        owner = next(
            x
            for x in (a, b, c)
            if any(h.label == "counter" and h.phase == "active" for h in x.handle.status().hosted)
        )
        await owner.shutdown()  # graceful: handed over, the successor replays the journal
        asker = c if owner is not c else b
        ref = refs[[a, b, c].index(asker)]
        assert await asker.ask(ref, lambda r: GetCount(r), timeout=10) == 10
        assert await asker.ask(ref, lambda r: Increment(r), timeout=10) == 11
        # Two instances so far: the first and its successor (stopping a next may hand
        # the counter over once more, when the successor runs there).
        started = list(gens)
        await a.shutdown()
    assert len(started) == 2 and started[1].term > started[0].term
    assert all(later.term > earlier.term for earlier, later in zip(gens, gens[1:], strict=False))
    assert journal.last_seq("counter") == 11
    snap = journal.load_snapshot("counter")
    assert snap is not None and snap.seq >= 9  # snapshots every 3 appends


def test_journal_refuses_stale_generations_and_positions() -> None:
    j = InMemoryJournal()
    g1, g2 = Generation(1, 0).packed, Generation(2, 0).packed
    assert j.append("e", 0, g1, [b"a"]) == 1
    assert j.fence("e", g2) == 1  # the successor fences before replaying
    with pytest.raises(_core.StaleGeneration):
        j.append("e", 1, g1, [b"stale"])  # the predecessor can no longer write
    with pytest.raises(_core.Conflict):
        j.append("e", 0, g2, [b"wrong position"])
    assert j.append("e", 1, g2, [b"b", b"c"]) == 3
    assert [e.payload for e in j.read("e")] == [b"a", b"b", b"c"]


@pytest.mark.asyncio
async def test_refs_pickle_and_bind_to_the_receiving_system() -> None:
    (port,) = free_ports(1)
    async with system(port, [], "solo", quorum=1) as s:
        ref = s.spawn(Behaviors.receive(lambda ctx, msg: Behaviors.same()), "x")
        data = pickle.dumps(ref)
        with pytest.raises(RuntimeError, match="not bound"):
            pickle.loads(data).tell("hello")  # unpickled outside a system
        assert pickle.loads(data) == ref


@pytest.mark.asyncio
async def test_a_singleton_behaviour_that_fails_or_stops_is_built_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    (port,) = free_ports(1)
    builds: list[int] = []

    def make() -> Behavior[Any]:
        builds.append(len(builds) + 1)
        if len(builds) == 1:
            raise RuntimeError("the first build fails")

        def receive(ctx: ActorContext[Any], msg: Any) -> Behavior[Any] | None:
            if msg == "stop":
                return Behaviors.stopped()
            msg.reply_to.tell(f"build {builds[-1]}")
            return None

        return Behaviors.receive(receive)

    with caplog.at_level(logging.WARNING, logger="pynenc_cpp.cluster.actors"):
        async with system(port, [], "solo", quorum=1) as s:
            ref = s.spawn(Behaviors.singleton(make), "phoenix")
            # Not a black hole: the failed build is retried, the message waits for it.
            assert await s.ask(ref, lambda r: GetStatus(r), timeout=10) == "build 2"
            ref.tell("stop")
            assert await s.ask(ref, lambda r: GetStatus(r), timeout=10) == "build 3"
    again = [r.message for r in caplog.records if "its factory builds it again" in r.message]
    assert len(again) == 2
    assert "failed to start" in again[0] and "stopped" in again[1]


@pytest.mark.asyncio
async def test_an_event_sourced_command_can_ask_and_its_tasks_send_at_once() -> None:
    (port,) = free_ports(1)
    received: list[str] = []
    tasks: set[asyncio.Task[None]] = set()

    async with system(port, [], "solo", quorum=1) as s:
        oracle = s.spawn(Behaviors.receive(lambda ctx, reply_to: reply_to.tell(41)), "oracle")
        sink = s.spawn(Behaviors.receive(lambda ctx, msg: received.append(msg)), "sink")

        async def later() -> None:
            await asyncio.sleep(0.01)
            sink.tell("from a task the command started")

        async def on_command(ctx: ActorContext[Any], state: int, msg: Any) -> Behavior[Any]:
            got = await ctx.system.ask(oracle, lambda r: r, timeout=2.0)  # not held: answered
            tasks.add(asyncio.get_running_loop().create_task(later()))
            msg.reply_to.tell(got + state + 1)  # held until the event is in the journal
            return Behaviors.persisted([Incremented()])

        def make() -> Behavior[Any]:
            return Behaviors.event_sourced(
                "e", InMemoryJournal(), 0, lambda st, _e: st + 1, on_command
            )

        ref = s.spawn(Behaviors.singleton(make), "es")
        assert await s.ask(ref, lambda r: Increment(r), timeout=10) == 42
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.02)
    assert received == ["from a task the command started"]


@pytest.mark.asyncio
async def test_a_resent_command_is_recognised_as_a_duplicate() -> None:
    (port,) = free_ports(1)
    journal = InMemoryJournal()
    flags: list[bool] = []

    async def on_command(ctx: ActorContext[Any], state: int, msg: Any) -> Behavior[Any]:
        flags.append(ctx.duplicate)
        msg.reply_to.tell(state if ctx.duplicate else state + 1)
        return Behaviors.persisted([Incremented()])

    def make() -> Behavior[Any]:
        return Behaviors.event_sourced("dup", journal, 0, lambda st, _e: st + 1, on_command)

    async with system(port, [], "solo", quorum=1) as s:
        ref = s.spawn(Behaviors.singleton(make), "dup")
        # Every message gets the same id: the second Increment is a re-send of the first.
        s._counter = itertools.repeat(7)
        assert await s.ask(ref, lambda r: Increment(r), timeout=10) == 1
        assert await s.ask(ref, lambda r: Increment(r), timeout=10) == 1  # not appended again
    assert flags == [False, True]
    assert journal.last_seq("dup") == 1


@pytest.mark.asyncio
async def test_a_stop_lets_the_message_being_handled_finish() -> None:
    (port,) = free_ports(1)
    done: list[str] = []
    started = asyncio.Event()

    async def slow(ctx: ActorContext[Any], msg: str) -> None:
        started.set()
        await asyncio.sleep(0.3)
        done.append(msg)

    async with system(port, [], "solo", quorum=1) as s:
        ref = s.spawn(Behaviors.receive(slow), "slow")
        ref.tell("one")
        ref.tell("two")
        await started.wait()
    assert done == ["one"]  # finished; the queued one was not started


@pytest.mark.asyncio
async def test_a_leaving_sender_waits_until_its_messages_are_acknowledged() -> None:
    p1, p2 = free_ports(2)
    count = [0]

    def make() -> Behavior[Any]:
        def receive(ctx: ActorContext[Any], msg: Any) -> None:
            if isinstance(msg, GetStatus):
                msg.reply_to.tell(str(count[0]))
            else:
                count[0] += 1

        return Behaviors.receive(receive)

    async with system(p1, [p2], "a", quorum=1) as a:
        ref_a = a.spawn(Behaviors.singleton(make, anchor="node:a"), "tally")
        b = system(p2, [p1], "b", quorum=1)
        await b.start()
        ref_b = b.singleton_ref("tally")
        for _ in range(300):
            ref_b.tell("tick")
        await b.shutdown()  # returns once the owner acknowledged all 300
        assert count[0] == 300
        assert await a.ask(ref_a, lambda r: GetStatus(r), timeout=10) == "300"


def json_counter() -> Behavior[Any]:
    def active(total: int) -> Behavior[Any]:
        def receive(ctx: ActorContext[Any], msg: Any) -> Behavior[Any]:
            if msg["op"] == "add":
                return active(total + msg["n"])
            msg["reply_to"].tell({"total": total, "seen": msg["seen"]})
            return Behaviors.same()

        return Behaviors.receive(receive)

    return active(0)


@pytest.mark.asyncio
async def test_json_serializer_carries_plain_data_and_refs_across_nodes() -> None:
    p1, p2 = free_ports(2)
    json_ = JsonSerializer()
    async with (
        system(p1, [p2], "node-1", serializer=json_) as node1,
        system(p2, [p1], "node-2", serializer=json_) as node2,
    ):
        ref1 = node1.spawn(Behaviors.singleton(json_counter), "counter")
        ref2 = node2.spawn(Behaviors.singleton(json_counter), "counter")
        await asyncio.sleep(0.5)
        for n in (1, 2, 3):
            ref1.tell({"op": "add", "n": n})
        # Asked from both nodes, so one of the asks crosses to the other node.
        for node, ref in ((node1, ref1), (node2, ref2), (node1, ref1)):
            got = await node.ask(
                ref, lambda r: {"op": "get", "reply_to": r, "seen": ("é", [1.5, None])}, 5.0
            )
            assert got == {"total": 6, "seen": ["é", [1.5, None]]}  # tuples arrive as lists
        # What JSON cannot carry raises at tell, on the sending node.
        with pytest.raises(TypeError, match="plain data and ActorRef only"):
            ref1.tell({"op": "add", "n": ProcessJob("x")})
        with pytest.raises(ValueError, match="__actor_ref__"):
            ref1.tell({"op": "add", "n": 1, "x": {"__actor_ref__": ["a", "b", None]}})
        assert await node2.ask(ref2, lambda r: {"op": "get", "reply_to": r, "seen": 0}, 5.0) == {
            "total": 6,
            "seen": 0,
        }


def test_json_serializer_decodes_no_code_and_refuses_malformed_refs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class RunsWhenUnpickled:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (str(marker), "w"))

    s = JsonSerializer()
    with pytest.raises(ValueError):
        s.loads(pickle.dumps(RunsWhenUnpickled()))
    assert not marker.exists()
    for bad in (
        b'{"__actor_ref__": ["a", "b"]}',
        b'{"__actor_ref__": ["a", "b", 3]}',
        b'{"__actor_ref__": ["a", "b", null], "x": 1}',
        b'{"__actor_ref__": "a"}',
    ):
        with pytest.raises(ValueError, match="malformed"):
            s.loads(bad)
    with pytest.raises(ValueError):
        s.dumps({"x": float("nan")})
    for not_finite in (b'{"x": NaN}', b'{"x": -Infinity}', b'{"x": 1e999}'):
        with pytest.raises(ValueError, match="finite"):
            s.loads(not_finite)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError):  # refused at once, not walked forever
        s.dumps({"a": loop})
    # What JSON would silently change is refused: it would not arrive as sent.
    import enum

    class Color(enum.IntEnum):
        RED = 1

    for changed in ({1: "int key"}, {"c": Color.RED}, [Color.RED], {"d": {(1, 2): 3}}):
        with pytest.raises(TypeError):
            s.dumps(changed)
    assert s.loads(s.dumps({"a": [1, "two", None, True]})) == {"a": [1, "two", None, True]}


@pytest.mark.asyncio
async def test_a_full_cluster_restart_continues_an_event_sourced_singleton_above_its_journal(
    tmp_path: Path,
) -> None:
    """The default memory:// generation source forgets every term when the whole cluster
    stops; the journal does not. The restarted cluster must claim a term above the
    journal's fence (docs/cluster/singletons.md, "Generations never go backwards")."""
    journal = SqliteJournal(str(tmp_path / "j.db"))
    gens: list[Generation] = []

    def make() -> Behavior[Any]:
        return recording_counter(journal, gens)

    def owner_of(nodes: list[ClusteredActorSystem]) -> ClusteredActorSystem:
        return next(
            x
            for x in nodes
            if any(h.label == "counter" and h.phase == "active" for h in x.handle.status().hosted)
        )

    # First life: 5 increments, a graceful handover (a new term), 2 more.
    p1, p2, p3 = free_ports(3)
    nodes = [system(p1, [p2, p3], "a"), system(p2, [p1, p3], "b"), system(p3, [p1, p2], "c")]
    for n in nodes:
        await n.start()
    refs = [n.spawn(Behaviors.singleton(make), "counter") for n in nodes]
    for i in range(5):
        assert await nodes[0].ask(refs[0], lambda r: Increment(r), timeout=10) == i + 1
    first_owner = owner_of(nodes)
    await first_owner.shutdown()
    rest = [n for n in nodes if n is not first_owner]
    for i in range(5, 7):
        assert await rest[0].ask(refs[nodes.index(rest[0])], lambda r: Increment(r), 10) == i + 1
    for n in rest:
        await n.shutdown()
    fenced = Generation.from_packed(journal.fence_of("counter"))
    assert fenced.term >= 2, f"the handover took a new term ({gens})"

    # Second life: every node new, every memory:// source empty (terms would restart at 1).
    q1, q2, q3 = free_ports(3)
    nodes = [system(q1, [q2, q3], "a"), system(q2, [q1, q3], "b"), system(q3, [q1, q2], "c")]
    try:
        for n in nodes:
            await n.start()
        refs = [n.spawn(Behaviors.singleton(make), "counter") for n in nodes]
        assert await nodes[1].ask(refs[1], lambda r: GetCount(r), timeout=20) == 7
        assert await nodes[2].ask(refs[2], lambda r: Increment(r), timeout=10) == 8
        running = gens[-1]
        assert running > fenced, f"runs under {running}, above the journal's {fenced}"
        assert journal.last_seq("counter") == 8
        assert Generation.from_packed(journal.fence_of("counter")) == running
    finally:
        for n in nodes:
            await n.shutdown()


@pytest.mark.asyncio
async def test_a_state_the_serializer_refuses_skips_the_snapshot_not_the_replies() -> None:
    """JsonSerializer refuses int dict keys: the snapshot is skipped (logged), while every
    command's events are journaled and its reply is sent."""
    journal = InMemoryJournal()

    def tally() -> Behavior[Any]:
        def on_event(state: dict[int, int], _e: str) -> dict[int, int]:
            return {1: state.get(1, 0) + 1}

        async def on_command(
            ctx: ActorContext[Any], state: dict[int, int], msg: Any
        ) -> Behavior[Any]:
            msg["reply_to"].tell(state.get(1, 0) + 1)
            return Behaviors.persisted(["inc"])

        return Behaviors.event_sourced(
            entity_id="tally",
            journal=journal,
            initial_state={},
            on_event=on_event,
            on_command=on_command,
            snapshot_every=2,
        )

    (port,) = free_ports(1)
    async with system(port, [], "solo", quorum=1, serializer=JsonSerializer()) as s:
        ref = s.spawn(Behaviors.singleton(tally), "tally")
        for i in range(5):
            assert await s.ask(ref, lambda r: {"reply_to": r}, timeout=10) == i + 1
    assert journal.last_seq("tally") == 5
    assert journal.load_snapshot("tally") is None
