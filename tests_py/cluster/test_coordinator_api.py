"""The coordinator layer from Python: specs and their validation, the handle's
methods, errors, actors' callbacks, fenced storage, in one process (three nodes on
loopback). The real-process guarantees are in test_singletons.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pynenc_cpp import BackendError, InvalidArgument, InvocationNotFound, _core
from pynenc_cpp.cluster import (
    ActorSpec,
    AgentFamily,
    ClusterConfig,
    ClusterHandle,
    Conflict,
    CrashStrategy,
    FencedStore,
    Generation,
    GenerationSource,
    InstanceContext,
    LeastLoaded,
    Pinned,
    PlacementConstraints,
    RandomPlacement,
    SingletonAnchor,
    SingletonSpec,
    StaleGeneration,
    Unavailable,
    run_cluster,
)
from pynenc_cpp.cluster.actors.journal import Journal
from tests_py.cluster.harness import wait_for

FAST = {"heartbeat_ms": 100, "suspect_timeout_ms": 300, "stabilize_ms": 100}
WAIT = 30.0


# -- specs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ActorSpec("", "t"), "label"),
        (lambda: ActorSpec("x" * 1025, "t"), "label"),
        (lambda: ActorSpec("a", ""), "actor_type"),
        (lambda: ActorSpec("a", "t", initial_state="str"), "initial_state"),  # type: ignore[arg-type]
        (lambda: ActorSpec("a", "t", initial_state=b"x" * (128 * 1024 + 1)), "initial_state"),
        (lambda: CrashStrategy.wait_for_return(0), "wait_s"),
        (lambda: CrashStrategy("sometimes"), "kind"),  # type: ignore[arg-type]
        (lambda: PlacementConstraints(required_classes="worker"), "required_classes"),  # type: ignore[arg-type]
        (lambda: PlacementConstraints(required_metadata={"k": 1}), "required_metadata"),  # type: ignore[dict-item]
        (lambda: PlacementConstraints(colocate_with=""), "colocate_with"),
        (
            lambda: ActorSpec("a", "t", constraints=PlacementConstraints(colocate_with="a")),
            "own label",
        ),
        (lambda: ActorSpec("a", "t", strategy="random"), "strategy"),  # type: ignore[arg-type]
        (lambda: SingletonAnchor("class"), "anchor"),
        (lambda: SingletonSpec("s", "t", drain_timeout_s=0), "drain_timeout_s"),
        (lambda: SingletonSpec("s", "t", drain_timeout_s=86_401), "drain_timeout_s"),
        (lambda: AgentFamily("proj", ("proj://a",), distribution="round_robin"), "distribution"),  # type: ignore[arg-type]
    ],
)
def test_invalid_specs_name_the_field(make, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        make()


def test_specs_convert_to_the_engine_with_every_field() -> None:
    spec = ActorSpec(
        "storage/photos",
        "storage",
        initial_state=b"\x00root",
        crash_strategy=CrashStrategy.wait_for_return(2.5),
        constraints=PlacementConstraints(
            required_classes=("worker",),
            required_metadata={"volume": "photos"},
            anti_affinity_labels=("db",),
            colocate_with="writer",
            required_node_id="n1",
        ),
        strategy=RandomPlacement(7),
    )
    o = spec._to_core()
    assert (o.label, o.actor_type, o.initial_state) == ("storage/photos", "storage", b"\x00root")
    assert (o.crash_strategy, o.wait_ms) == ("wait_for_return", 2500)
    assert o.required_classes == ["worker"] and o.required_metadata == {"volume": "photos"}
    assert o.anti_affinity_labels == ["db"] and o.colocate_with == "writer"
    assert o.required_node_id == "n1"
    assert (o.strategy, o.strategy_seed) == ("random", 7)
    assert ActorSpec("a", "t", strategy=Pinned("n2"))._to_core().strategy_node == "n2"
    assert ActorSpec("a", "t", strategy=LeastLoaded())._to_core().strategy == "least_loaded"
    assert ActorSpec("a", "t")._to_core().strategy == "default"
    s = SingletonSpec("s", "t", b"st", SingletonAnchor.of_class("edge"), 1.5)._to_core()
    assert (s.anchor, s.anchor_value, s.drain_timeout_ms, s.state) == ("class", "edge", 1500, b"st")


def test_generation_orders_term_major_and_packs() -> None:
    assert Generation(2, 0) > Generation(1, 99) and Generation(1, 1) > Generation(1, 0)
    assert Generation(3, 4).packed == (3 << 32) | 4
    assert Generation.from_packed(Generation(3, 4).packed) == Generation(3, 4)
    assert str(Generation(3, 4)) == "3.4" and len({Generation(1, 0), Generation(1, 0)}) == 1


def test_fenced_store_and_generation_source_from_python(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/s.db"
    store = FencedStore(uri, "ns")
    store.write("k", b"v1", Generation(2, 0))
    store.write("k", b"v2", Generation(2, 0).packed)  # equal generation: accepted
    with pytest.raises(StaleGeneration, match="stale generation 1.9 for key 'k': stored 2.0"):
        store.write("k", b"old", Generation(1, 9))
    got = store.read("k")
    assert got is not None and got.value == b"v2" and got.generation == Generation(2, 0)
    store.delete("k", Generation(3, 0))
    assert store.read("k") is None
    with pytest.raises(StaleGeneration):
        store.write("k", b"resurrected", Generation(2, 5))  # the tombstone fences it
    assert isinstance(StaleGeneration("x"), Conflict)

    src = GenerationSource(uri, "ns")
    assert src.shared
    assert src.claim_term("s", "a") == Generation(1, 0)
    assert src.claim_seq("s", "a", Generation(1, 0)) == Generation(1, 1)
    with pytest.raises(Conflict):
        src.claim_seq("s", "b", Generation(1, 1))
    assert src.current("s") == ("a", Generation(1, 1))
    assert src.claim_term("s", "b") == Generation(2, 0)


def test_the_cluster_ports_of_one_uri_and_namespace_share_one_storage(tmp_path: Path) -> None:
    uri = f"sqlite://{tmp_path}/shared.db"
    store, journal = FencedStore(uri, "ns"), Journal(uri, "ns")
    assert store._storage is journal._storage  # one SQLite database, not one each
    assert store._storage.app_id == "ns"
    other = FencedStore(uri, "other")
    assert other._storage is not store._storage
    store.write("k", b"mine", Generation(1, 0))
    assert other.read("k") is None  # namespaces separate the data of one file
    assert FencedStore(uri, "ns").read("k") is not None
    # Over a storage directly, as the engine's constructors take it.
    over = _core.FencedStore(_core.Storage(uri, "ns"))
    got = over.read("k")
    assert got is not None and got[0] == b"mine"
    assert GenerationSource(_core.Storage(uri, "ns")).claim_term("s", "a") == Generation(1, 0)


def test_a_node_takes_its_generations_from_the_shared_storage(tmp_path: Path) -> None:
    from pynenc_cpp import _storage

    uri = f"sqlite://{tmp_path}/gen.db"
    key = (uri, "shared-node")
    handle = run_cluster(
        config=ClusterConfig(
            host="127.0.0.1", cluster_name="shared-node", generation_source=uri, **FAST
        )
    )
    try:
        # Nothing else holds it: the node keeps the process's storage of its cluster alive,
        # and the fenced stores and journals made now share it.
        assert _storage._cluster_storages.get(key) is not None
        assert FencedStore(uri, "shared-node")._storage is _storage._cluster_storages[key]
    finally:
        handle.stop()


def test_memory_ports_stay_worlds_of_their_own() -> None:
    first, second = FencedStore("memory://", "ns"), FencedStore("memory://", "ns")
    first.write("k", b"v", Generation(1, 0))
    assert first.read("k") is not None
    assert second.read("k") is None


# -- three nodes ------------------------------------------------------------------------------


class Recorder:
    """The instances of this process's nodes: who runs what, and every call they got."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, set[str]] = {}
        self.calls: list[tuple[str, str, str]] = []  # (what, node name, label)
        self.fail_factory = 0

    def factory(self, name: str):
        def build(ctx: InstanceContext) -> object:
            with self.lock:
                if self.fail_factory > 0:
                    self.fail_factory -= 1
                    raise RuntimeError("factory exploded")
            return Instance(self, name, ctx)

        return build

    def where(self, label: str) -> set[str]:
        with self.lock:
            return set(self.running.get(label, set()))


class Instance:
    def __init__(self, rec: Recorder, name: str, ctx: InstanceContext) -> None:
        self.rec, self.name, self.ctx = rec, name, ctx
        with rec.lock:
            rec.running.setdefault(ctx.label, set()).add(name)
            rec.calls.append(("start", name, ctx.label))

    def stop(self, reason: str) -> None:
        with self.rec.lock:
            self.rec.running[self.ctx.label].discard(self.name)
            self.rec.calls.append(("stop", name_reason(self.name, reason), self.ctx.label))

    def on_message(self, payload: bytes) -> bytes | None:
        if payload == b"boom":
            raise ValueError("bad request")
        if payload == b"text":
            return "not bytes"  # type: ignore[return-value]
        if payload == b"none":
            return None
        return b"%s/%s/%s:%s" % (
            self.name.encode(),
            self.ctx.label.encode(),
            str(self.ctx.generation).encode(),
            payload,
        )


def name_reason(name: str, reason: str) -> str:
    return f"{name}:{reason}"


@pytest.fixture
def trio(tmp_path: Path) -> Iterator[tuple[list[ClusterHandle], Recorder]]:
    rec = Recorder()
    handles: list[ClusterHandle] = []
    seeds: list[str] = []
    try:
        for name, cls in (("gw", "edge"), ("w1", "worker"), ("w2", "worker")):
            cfg = ClusterConfig(
                host="127.0.0.1",
                seeds=tuple(seeds),
                quorum=2,
                node_class=cls,
                metadata={"name": name},
                generation_source=f"sqlite://{tmp_path}/gen.db",
                **FAST,
            )
            h = run_cluster(config=cfg)
            handles.append(h)
            seeds.append(h.address)
            if cls == "worker":
                h.register_actor_type("svc", rec.factory(name))
        yield handles, rec
    finally:
        for h in reversed(handles):
            h.stop()


def test_submit_ask_query_and_remove(trio: tuple[list[ClusterHandle], Recorder]) -> None:
    (gw, w1, w2), rec = trio
    spec = ActorSpec("svc/a", "svc", constraints=PlacementConstraints(required_classes=("worker",)))
    wait_for(lambda: _try(lambda: gw.submit(spec, timeout=2)), WAIT, what="a leader takes the spec")
    gw.submit(spec)  # the same spec again: a no-op
    with pytest.raises(Conflict, match="already used"):
        gw.submit(ActorSpec("svc/a", "svc"))
    status = w2.wait_running("svc/a")
    assert status.kind == "actor" and status.generation == Generation(1, 0)
    assert len(rec.where("svc/a")) == 1
    owner = next(iter(rec.where("svc/a")))

    # Any node asks; the one instance answers, with its generation.
    for h in (gw, w1, w2):
        reply = wait_for(
            lambda h=h: _try(lambda: h.ask("svc/a", b"ping", timeout=2)), WAIT, what="ask"
        )
        assert reply == f"{owner}/svc/a/1.0:ping".encode()
    assert gw.ask("svc/a", b"none") == b""
    with pytest.raises(BackendError, match="ValueError: bad request"):
        gw.ask("svc/a", b"boom")
    with pytest.raises(InvalidArgument, match="on_message must return bytes"):
        gw.ask("svc/a", b"text")
    with pytest.raises(Unavailable, match="not running"):
        gw.ask("svc/missing", b"x")
    gw.tell("svc/a", b"fire and forget")
    # Over one frame: refused at the call with the limit named, not dropped.
    too_big = b"x" * gw.config.max_frame_bytes
    with pytest.raises(InvalidArgument, match="max_frame_bytes"):
        gw.ask("svc/a", too_big)
    with pytest.raises(InvalidArgument, match="max_frame_bytes"):
        gw.tell("svc/a", too_big)

    view = w1.cluster_view()
    assert view.alive_count == 3 and view.total_count == 3
    by_name = {n.metadata["name"]: n for n in view.nodes}
    assert by_name[owner].running == ("svc/a",) and "svc" in by_name[owner].actor_types
    assert by_name["gw"].node_class == "edge" and by_name["gw"].actor_types == ()
    placement = wait_for(lambda: gw.lookup("svc/a"), WAIT, what="the directory reaches gw")
    assert placement.state == "running" and placement.node == by_name[owner].id

    gw.remove("svc/a")
    wait_for(lambda: rec.where("svc/a") == set(), WAIT, what="the instance stops")
    with pytest.raises(InvocationNotFound):
        gw.remove("svc/a")
    with pytest.raises(KeyError):
        gw.spec_status("svc/a")


def test_unplaceable_spec_reports_why_and_failing_factory_is_retried(
    trio: tuple[list[ClusterHandle], Recorder],
) -> None:
    (gw, w1, _), rec = trio
    wait_for(lambda: _try(lambda: gw.spec_statuses(timeout=2)) is not None, WAIT, what="a leader")
    gw.submit(
        ActorSpec(
            "svc/gpu", "svc", constraints=PlacementConstraints(required_metadata={"gpu": "yes"})
        )
    )
    st = wait_for(
        lambda: (s := gw.spec_status("svc/gpu")).state == "unplaced" and s, WAIT, what="unplaced"
    )
    assert "required_metadata {gpu=yes} ruled out 2" in st.reason, st.reason

    rec.fail_factory = 2
    gw.submit(ActorSpec("svc/flaky", "svc", strategy=Pinned(w1.node_id)))
    status = gw.wait_running("svc/flaky")
    assert status.generation == Generation(1, 2)  # two failed attempts, each its own seq
    assert [c for c in rec.calls if c[2] == "svc/flaky" and c[0] == "start"] == [
        ("start", "w1", "svc/flaky")
    ]


def test_singleton_moves_when_its_node_leaves(trio: tuple[list[ClusterHandle], Recorder]) -> None:
    (gw, w1, w2), rec = trio
    spec = SingletonSpec("catalog", "svc", anchor=SingletonAnchor.of_class("worker"))
    wait_for(lambda: _try(lambda: gw.start_singleton(spec, timeout=2)), WAIT, what="submitted")
    first = gw.wait_running("catalog")
    owner = next(iter(rec.where("catalog")))
    leaving = w1 if owner == "w1" else w2
    leaving.stop()

    def moved() -> bool:
        s = _try(lambda: gw.spec_status("catalog", timeout=2))
        return bool(s) and s.state == "running" and s.generation.term > first.generation.term

    wait_for(moved, WAIT, what="the singleton runs elsewhere under a higher term")
    assert rec.where("catalog") == {"w2" if owner == "w1" else "w1"}
    # Handed over before the node left: stopped by a drained move, not by the shutdown.
    stops = [c for c in rec.calls if c[0] == "stop" and c[2] == "catalog"]
    assert len(stops) == 1 and stops[0][1].startswith(f"{owner}:moving to "), stops


def test_agent_family_from_python(trio: tuple[list[ClusterHandle], Recorder]) -> None:
    (_, w1, w2), rec = trio
    family = AgentFamily("proj", tuple(f"proj://p{i}" for i in range(4)))
    for h, name in ((w1, "w1"), (w2, "w2")):
        h.register_agent_family(family, rec.factory(name))
    wait_for(
        lambda: all(len(rec.where(a)) == 1 for a in family.agents),
        WAIT,
        what="every agent runs once",
    )
    loads = {"w1": 0, "w2": 0}
    for a in family.agents:
        loads[next(iter(rec.where(a)))] += 1
    assert loads == {"w1": 2, "w2": 2}
    statuses = {s.label: s for s in w1.spec_statuses() if s.kind == "agent"}
    assert set(statuses) == set(family.agents)


def test_standalone_and_registry_errors() -> None:
    with run_cluster(config=ClusterConfig()) as h:
        with pytest.raises(Unavailable, match="standalone"):
            h.register_actor_type("svc", lambda ctx: object())
        with pytest.raises(Unavailable):
            h.submit(ActorSpec("a", "svc"))
    with run_cluster(config=ClusterConfig(host="127.0.0.1", **FAST)) as h:
        with pytest.raises(TypeError, match="callable"):
            h.register_actor_type("svc", 42)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="actor_type"):
            h.register_actor_type("", lambda ctx: object())
        with pytest.raises(InvocationNotFound):
            h.unregister_actor_type("never")
        with pytest.raises(InvalidArgument, match="does not start with"):
            h.register_agent_family(AgentFamily("proj", ("other://a",)), lambda ctx: object())


def test_bad_generation_source_fails_the_start() -> None:
    with pytest.raises(ValueError, match="generation_source"):
        run_cluster(
            config=ClusterConfig(
                host="127.0.0.1", generation_source="sqlite:///nonexistent/dir/x.db"
            )
        )
    assert issubclass(_core.BadConfig, ValueError)


def _try(fn):
    """fn()'s value (True for None), or None if it raised a cluster availability error."""
    try:
        value = fn()
        return True if value is None else value
    except (Unavailable, _core.Timeout):
        return None
